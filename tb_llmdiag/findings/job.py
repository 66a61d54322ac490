"""The job rule table: ``JOB_RULES`` (``straggler``, ``exposed_communication``), rules of the findings engine
(``findings/engine.py``, ``level="job"``) over the job's flat metrics (``jobs.report.job_metrics``; definitions:
docs/jobs.md), with their summaries, fixes by cause or collective kind, and ``held_back``: the job notes for a
finding a floor held back.

The straggler's floors (the statistics: ``jobs.cross_rank``): ``straggler_last_step_share`` = the common steps in
which it caused more waiting than any other rank / the common steps; ``straggler_others_wait_low_share`` = the
lower one-sided 95 % confidence bound of its per-step caused waiting (mean - t x sd / sqrt(steps)) / the job step:
the wait share the capture supports given its step-to-step spread (null with one common step);
``straggler_others_wait_beyond_profiler_share`` = that lower bound less the profiler's extra cost on the straggler
(its profiler cost minus the median other rank's, ``jobs.report``) / the job step: the profiler records every rank's
host work and costs some ranks more than others, so a rank can arrive last only because the profiler costs it more
(``ddp_intermittent_noise``: nothing planted, rank 0 last in 19 of 19 collectives). The engine's
``verdict`` says which check decided (``straggler_significance``): ``significant`` (fires; when the profiler costs
the straggler more than the others the finding says how much, and the wait beyond it: its wait and saving stay the
measured ones, upper bounds on the profiled run), ``noise_unknown``
(fires on its threshold alone: fewer than two common steps, no spread to measure; the finding says so),
``below_threshold``, ``not_most_steps``, ``within_noise``, ``within_profiler_cost`` (held back; ``held_back`` words
it as a job note), or
``intermittent``: a floor failed, but the rank keeps the others waiting a lot in a few steps
(``straggler_intermittent``, ``jobs/intermittent.py``): it fires, named as intermittent with its steps (#25; a
per-rank profiler cost is paid in every step alike, so it cannot make the few steps spike).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tb_llmdiag.findings.engine import Fix, Floor, Metrics, Rule, fires, verdict
from tb_llmdiag.metrics.labels import words_of
from tb_llmdiag.units import fmt

STRAGGLER_FIXES: dict[str, str] = {
    "more_tokens": "Balance tokens per rank: group samples by length (HF Trainer group_by_length=True), pack "
    "sequences to a fixed token budget per rank, or shard batches by tokens instead of by samples.",
    "longer_gpu_compute": "This rank's GPU does more work or runs slower: check uneven data per rank, a throttled "
    "or slower GPU (nvidia-smi -q -d CLOCK,PERFORMANCE) and work only this rank does.",
    "data_loader_stall": "Feed this rank faster: more DataLoader workers (num_workers), pin_memory=True, "
    "persistent_workers=True, a larger prefetch_factor; check its node's storage.",
    "host_sync": "Remove host syncs on this rank (.item(), printing or logging tensor values, often only on "
    "rank 0): log every N steps and keep running metrics on the device.",
    "host_bound_launching": "This rank's host launches work too slowly (CPU contention or other processes on its "
    "node): pin CPU cores per rank, cut launches with torch.compile or CUDA graphs.",
    "late_step_start": "This rank starts its steps late: work between steps on this rank only (logging, "
    "checkpointing, evaluation, garbage collection): make it asynchronous or spread it.",
    "unexplained": "The delay is in none of the measured parts (compute, loader, syncs, launches): check the "
    "GPU's clocks and its node (thermal throttling, a slower link or PCIe slot).",
}

EXPOSED_FIXES: dict[str, str] = {
    "all_reduce": "DDP: use model.no_sync() on gradient-accumulation micro-steps so only the last one "
    "all-reduces; tune bucket_cap_mb (default 25) so buckets start while backward still runs; "
    "gradient_as_bucket_view=True; compress with a comm hook (bf16_compress_hook, PowerSGD).",
    "all_gather": "FSDP: prefetch (forward_prefetch=True, backward_prefetch=BACKWARD_PRE; FSDP2: "
    "set_modules_to_forward_prefetch), reshard_after_forward=False for the last blocks, or "
    "SHARD_GRAD_OP / HYBRID_SHARD to keep all-gathers inside a node; fewer, larger wrap units.",
    "reduce_scatter": "FSDP: backward_prefetch=BACKWARD_PRE and larger wrap units so reduce-scatters overlap "
    "backward; under gradient accumulation, no_sync() on the micro-steps (more memory).",
    "all_to_all": "Expert parallel: overlap dispatch/combine with compute (DeepEP async mode, two micro-batches "
    "in flight), keep experts within a node, lower the capacity factor.",
    "send_recv": "Pipeline parallel: an interleaved 1F1B schedule and more micro-batches hide the p2p transfers.",
    "broadcast": "DDP: broadcast_buffers=False when no buffers change during training (no BatchNorm).",
}

#: The straggler's floors: a rank the others wait for in most steps, by more than the steps' own spread allows.
STRAGGLER_FLOORS: tuple[Floor, ...] = (
    Floor(
        "straggler_last_step_share",
        0.5,
        "not_most_steps",
        "it is the rank the others wait for most in more than half of the common steps (else the ranks take turns)",
        unknown_as="noise_unknown",
        passes_when="straggler_intermittent",
        passes_as="intermittent",
    ),
    Floor(
        "straggler_others_wait_low_share",
        None,
        "within_noise",
        "the wait it causes stays above the threshold at its lower 95 % confidence bound over the steps (mean - "
        "t x sd / sqrt(steps)): beyond the step-to-step spread measured in the same capture",
        unknown_as="noise_unknown",
        passes_when="straggler_intermittent",
        passes_as="intermittent",
    ),
    Floor(
        "straggler_others_wait_beyond_profiler_share",
        None,
        "within_profiler_cost",
        "the wait's 95 % lower bound (its mean with one common step) stays above the threshold once the profiler's "
        "extra cost on the straggler (its profiler cost less the median other rank's) is taken off: a straggler of the unprofiled run, not of the "
        "profiler",
        unknown_as="noise_unknown",
        passes_when="straggler_intermittent",
        passes_as="intermittent",
    ),
)

#: How each rank's profiler cost was estimated, in words (``straggler_profiler_basis``).
PROFILER_BASIS_PHRASES: Mapping[str, str] = {
    "unprofiled_steps": "measured: each rank's profiled step less the unprofiled steps its capture helper timed",
    "model": "modelled from what each rank's capture recorded",
    "mixed": "measured on some ranks, modelled on others",
}


#: How each straggler cause reads in a finding's summary (``{s}``/``{m}``: the straggler's and the median
#: rank's value of the cause's quantity, per step).
CAUSE_PHRASES: Mapping[str, str] = {
    "more_tokens": "it processes more tokens per step ({ts:.0f} against {tm:.0f} for the median rank), so its "
    "GPU computes longer ({s} against {m})",
    "longer_gpu_compute": "its GPU computes longer per step ({s} against {m} for the median rank)",
    "data_loader_stall": "its data loader stalls longer per step ({s} against {m} for the median rank)",
    "host_sync": "its host blocks longer in syncs per step ({s} against {m} for the median rank)",
    "host_bound_launching": "its GPU waits longer for host launches per step ({s} against {m} for the median rank)",
    "late_step_start": "it starts each step {d} later than the median rank",
    "unexplained": "no per-rank quantity the trace records explains it",
}


def _steps_text(steps: list[Any], waits: list[Any]) -> str:
    """ "#5 (396 ms) and #8 (396 ms)"."""
    parts = [f"#{s} ({fmt('ns', w)})" for s, w in zip(steps, waits)]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def intermittent_summary(m: Metrics, phrase: str) -> str:
    """The straggler that keeps the others waiting a lot in a few steps only (``jobs/intermittent.py``)."""
    steps = m.get("straggler_spike_steps") or []
    return (
        f"Rank {m.get('straggler_rank')} is an intermittent straggler: the other ranks wait for it in "
        f"{len(steps)} of {m.get('common_step_count')} steps, {_steps_text(steps, m.get('straggler_spike_wait_ns') or [])}"
        f" against a typical step of {fmt('ns', m.get('straggler_typical_step_ns'))}; that is "
        f"{fmt('ns', m.get('straggler_others_wait_ns_per_step'))} per step on average "
        f"({fmt('share', m.get('straggler_others_wait_share'))} of the {fmt('ns', m.get('job_step_ns'))} job step). "
        f"In its other steps its wait is within the noise ({fmt('ns', m.get('straggler_others_wait_noise_ns'))}): "
        f"look at what it does in those steps only. Cause: {phrase}."
    )


def straggler_summary(m: Metrics) -> str:
    """One sentence saying what the straggler finding claims, with its numbers (units from the registry)."""
    ev = m.get("straggler_cause_evidence") or {}
    tok = m.get("straggler_tokens") or {}
    cause = m.get("straggler_cause") or "unexplained"
    phrase = CAUSE_PHRASES.get(cause, CAUSE_PHRASES["unexplained"]).format(
        s=fmt("ns", ev.get("straggler_ns_per_step")),
        m=fmt("ns", ev.get("median_rank_ns_per_step")),
        d=fmt("ns", ev.get("difference_ns_per_step")),
        ts=tok.get("straggler_tokens_per_step") or 0.0,
        tm=tok.get("median_rank_tokens_per_step") or 0.0,
    )
    if m.get("straggler_significance") == "intermittent":
        return intermittent_summary(m, phrase)
    noise = (
        f" At least {fmt('ns', m.get('straggler_others_wait_low_ns_per_step'))} per step "
        f"({fmt('share', m.get('straggler_others_wait_low_share'))}) at 95 % confidence over the "
        f"{m.get('common_step_count')} steps."
        if m.get("straggler_significance") == "significant"
        else " With fewer than two common steps the wait's step-to-step spread is unknown: it is not tested against it."
    )
    return (
        f"Rank {m.get('straggler_rank')} is the straggler: the other ranks wait for it "
        f"{fmt('ns', m.get('straggler_others_wait_ns_per_step'))} per step in their collectives "
        f"({fmt('share', m.get('straggler_others_wait_share'))} of the {fmt('ns', m.get('job_step_ns'))} step); "
        f"it arrives last in {m.get('straggler_last_arrivals')} of {m.get('matched_collective_count')} "
        f"matched collectives and is the rank waited for most in {m.get('straggler_last_steps')} of "
        f"{m.get('common_step_count')} steps.{noise}{profiler_part(m)} Cause: {phrase}.{straggler_activity(ev)}"
    )


def profiler_part(m: Metrics) -> str:
    """What the profiler's extra cost on the straggler leaves of its wait, when the profiler costs it more than the
    median other rank (the finding's wait and saving stay the measured ones: upper bounds on the profiled run)."""
    excess = m.get("straggler_profiler_excess_ns_per_step")
    beyond = m.get("straggler_others_wait_beyond_profiler_ns_per_step")
    if not isinstance(excess, (int, float)) or excess <= 0 or beyond is None:
        return ""
    confidence = "at 95 % confidence " if m.get("straggler_others_wait_low_ns_per_step") is not None else ""
    return (
        f" The profiler costs it {fmt('ns', excess)} per step more than the median rank "
        f"({PROFILER_BASIS_PHRASES.get(m.get('straggler_profiler_basis') or '', 'estimated')}): {confidence}"
        f"{fmt('ns', beyond)} per step ({fmt('share', m.get('straggler_others_wait_beyond_profiler_share'))}) of the "
        f"wait is beyond it."
    )


def straggler_activity(ev: Mapping[str, Any]) -> str:
    """What the straggler does that the others do not, from the ranks' attributions (``jobs.straggler``)."""
    chain = ev.get("activity")
    if not isinstance(chain, str):
        return ""
    if ev.get("activity_kind") == "annotation":  # a record_function range only this rank runs (or runs longer)
        return (
            f" What it does that the others do not: it runs {chain} for {fmt('ns', ev.get('activity_ns_per_step'))} "
            f"per step, {fmt('ns', ev.get('activity_difference_ns_per_step'))} more than the median rank."
        )
    what = "the GPU waits in" if ev.get("activity_kind") == "idle" else "its GPU work comes from"
    return (
        f" What it does that the others do not: {what} {chain} "
        f"{fmt('ns', ev.get('activity_difference_ns_per_step'))} per step longer than the median rank."
    )


def exposed_summary(m: Metrics) -> str:
    """One sentence saying what the exposed-communication finding claims, with its numbers."""
    return (
        f"Collective transfers no compute hides take {fmt('ns', m.get('exposed_transfer_ns_per_step'))} per step "
        f"({fmt('share', m.get('exposed_transfer_share'))} of the {fmt('ns', m.get('job_step_ns'))} step; "
        f"{words_of(m.get('top_collective_kind'))} leads; {fmt('share', m.get('overlap_share'))} of collective time is "
        f"hidden under compute)."
    )


def exposed_purpose_summary(m: Metrics) -> str:
    """The exposed-communication sentence with the purpose that leads it (``jobs.purposes``)."""
    purpose = m.get("top_purpose")
    base = exposed_summary(m)
    if not purpose:
        return base
    return (
        f"{base[:-2]}; by purpose, {words_of(purpose)} communication leads with "
        f"{fmt('share', m.get('top_purpose_exposed_share'))} of the step exposed on the median rank)."
    )


def not_pipeline_led(m: Metrics) -> bool:
    """The exposed communication is not led by pipeline send/recv: those waits are the bubble's and the stage
    straggler's (``PIPELINE_RULES``), not a transfer to hide."""
    return m.get("top_purpose") != "pipeline"


def bubble_summary(m: Metrics) -> str:
    """The pipeline bubble: each stage's wait for the others against the schedule's expectation."""
    host = m.get("pipeline_host_bound_stages") or []
    caveat = (
        f" Stage rank(s) {', '.join(map(str, host))} are host-bound (the GPU waits for launches): there, more and "
        "smaller micro-batches add launches per step, so cut launches first (CUDA graphs, torch.compile) or prefer "
        "an interleaved schedule."
        if host
        else ""
    )
    shares = ", ".join(fmt("share", x) for x in m.get("pipeline_stage_wait_shares") or [])
    return (
        f"Pipeline of {m.get('pipeline_stage_count')} stages with {m.get('pipeline_micro_batches')} micro-batches per "
        f"step: the stages wait for each other's activations and gradients (send/recv) {shares} of their steps "
        f"({fmt('share', m.get('pipeline_bubble_share'))} on average): the pipeline bubble, the schedule's own "
        f"dependency, not a straggler. GPipe / 1F1B leave (p-1)/(m+p-1) = "
        f"{fmt('share', m.get('pipeline_bubble_expected_share'))} idle; with 4x the micro-batches "
        f"{fmt('share', m.get('pipeline_bubble_at_4m_share'))}.{caveat}"
    )


def stage_straggler_summary(m: Metrics) -> str:
    """The pipeline stage that takes longer than the others, with its cause."""
    ev = m.get("pipeline_straggler_cause_evidence") or {}
    return (
        f"Pipeline stage on rank {m.get('pipeline_straggler_stage_rank')} takes "
        f"{fmt('ns', m.get('pipeline_straggler_own_ns'))} of its own per step against "
        f"{fmt('ns', m.get('pipeline_others_own_ns'))} for the other stages "
        f"({fmt('ratio', m.get('pipeline_straggler_own_ratio'))}x; its own time = its step less its send/recv "
        f"wait): the others wait for it on top of the bubble. Its largest difference: "
        f"{CAUSE_PHRASES.get(str(m.get('pipeline_straggler_cause')), CAUSE_PHRASES['unexplained']).format(s=fmt('ns', ev.get('straggler_ns_per_step')), m=fmt('ns', ev.get('median_rank_ns_per_step')), ts=0.0, tm=0.0)}."
        f"{straggler_activity(ev)} Balancing the stages (layers, tokens, the head and loss on the last stage) "
        "takes at most its excess over the stages' mean off the step."
    )


def _same(*keys: str) -> tuple[tuple[str, Any], ...]:
    """Evidence labelled by the job metric's own key (read by the named function ``SHOWN`` gives it, if any)."""
    return tuple((k, SHOWN.get(k, k)) for k in keys)


def profiler_extra_ns(m: Metrics) -> float | None:
    """The profiler's extra cost on the straggler as evidence: none when it costs the straggler less than the
    median rank (the metric is then negative: no extra cost)."""
    v = m.get("straggler_profiler_excess_ns_per_step")
    return max(0.0, float(v)) if isinstance(v, (int, float)) else None


def cause_evidence(m: Metrics) -> Any:
    """The straggler's cause evidence; step start times measured from the median rank's (offsets from the job's
    mean start would read as negative times)."""
    ev = m.get("straggler_cause_evidence")
    if isinstance(ev, Mapping) and ev.get("quantity") == "start_offset_ns":
        return {**ev, "straggler_ns_per_step": ev.get("difference_ns_per_step"), "median_rank_ns_per_step": 0}
    return ev


#: job evidence shown through a named function rather than as the metric holds it
SHOWN: Mapping[str, Any] = {
    "straggler_profiler_excess_ns_per_step": profiler_extra_ns,
    "straggler_cause_evidence": cause_evidence,
}


JOB_RULES: tuple[Rule, ...] = (
    Rule(
        id="straggler",
        level="job",
        title="The other ranks wait in their collectives for one rank",
        metric="straggler_others_wait_share",
        above=0.05,
        evidence=_same(
            "straggler_rank",
            "straggler_cause",
            "straggler_others_wait_ns_per_step",
            "straggler_consistency_share",
            "straggler_last_arrivals",
            "straggler_cause_evidence",
            "straggler_tokens",
            "job_step_ns",
            "straggler_significance",
            "straggler_last_steps",
            "common_step_count",
            "straggler_others_wait_step_sd_ns",
            "straggler_others_wait_low_ns_per_step",
            "straggler_others_wait_low_share",
            "straggler_spike_steps",
            "straggler_spike_wait_ns",
            "straggler_profiler_excess_ns_per_step",
            "straggler_others_wait_beyond_profiler_share",
        ),
        summary=straggler_summary,
        fix=Fix(text="", pytorch="", hf_trainer=""),
        fix_by="straggler_cause",
        fixes=tuple(STRAGGLER_FIXES.items()),
        what_if="straggler_what_if",
        floors=STRAGGLER_FLOORS,
    ),
    Rule(
        id="exposed_communication",
        level="job",
        title="Collective transfers no compute hides",
        metric="exposed_transfer_share",
        above=0.10,
        evidence=_same(
            "exposed_transfer_ns_per_step",
            "exposed_share",
            "overlap_share",
            "top_collective_kind",
            "collective_by_kind",
            "waiting_known",
            "job_step_ns",
        ),
        summary=exposed_purpose_summary,
        when=not_pipeline_led,
        fix=Fix(
            text="Overlap communication with compute or shrink it (compression); check the transport: NCCL_P2P_DISABLE "
            "or NCCL_SHM_DISABLE set, or NCCL on sockets instead of NVLink/InfiniBand, cuts bus bandwidth.",
            pytorch="",
            hf_trainer="",
        ),
        fix_by="top_collective_kind",
        fixes=tuple(EXPOSED_FIXES.items()),
        what_if="exposed_what_if",
    ),
)

#: the job's slow-link bar: the transfer's bus bandwidth (no waiting in it) below 10 % of the GPU's link and below
#: 25 % of a 400 Gb/s NIC's, its purpose leaving at least 5 % of the job step exposed (``findings/comm.py`` has the
#: run's, stricter: one rank cannot tell waiting from transfer)
JOB_SLOW_LINK_SHARE = 0.1
JOB_SLOW_LINK_NETWORK_SHARE = 0.25
JOB_SLOW_LINK_EXPOSED_SHARE = 0.05


def job_slow_link(m: Metrics) -> bool:
    """The transfer's bandwidth far below the link and below a network card's share (the constants above); the
    rule's metric, the purpose's exposed share of the job step, is its value."""
    ratio, net = m.get("link_busbw_ratio"), m.get("link_network_ratio")
    return (
        isinstance(ratio, (int, float))
        and ratio < JOB_SLOW_LINK_SHARE
        and isinstance(net, (int, float))
        and net < JOB_SLOW_LINK_NETWORK_SHARE
    )


def slow_link_summary(m: Metrics) -> str:
    """The slow-link sentence: the purpose, its transfer bandwidth against the link and a NIC, and what the traces
    cannot say."""
    return (
        f"The {words_of(m.get('link_purpose'))} collectives (median message {fmt('bytes', m.get('link_median_bytes'))}) "
        f"move their data at {fmt('bytes_per_s', m.get('link_busbw_bytes_per_s'))} of bus bandwidth, measured on "
        "the transfer alone (the last rank's arrival to the end, no waiting): "
        f"{fmt('ratio', m.get('link_busbw_ratio'))} of the {m.get('link')} these GPUs have "
        f"({fmt('bytes_per_s', m.get('link_bytes_per_s'))} per GPU) and {fmt('ratio', m.get('link_network_ratio'))} "
        "of a 400 Gb/s network card's; they leave "
        f"{fmt('share', m.get('link_exposed_share'))} of the step exposed on the median rank. The traces do not "
        "say which link carried them: ranks on one host should come near the GPUs' link, so NCCL is not using "
        "it (peer-to-peer or shared memory turned off, a PCIe-only topology, a container without IPC); across "
        "hosts the network is the limit (TCP sockets instead of InfiniBand or RoCE, one NIC shared by many GPUs)."
    )


LINK_RULES: tuple[Rule, ...] = (
    Rule(
        id="slow_link_collectives",
        level="job",
        title="Collective transfers run far below the bandwidth of the GPUs' link",
        metric="link_exposed_share",
        above=JOB_SLOW_LINK_EXPOSED_SHARE,
        when=job_slow_link,
        evidence=_same(
            "link_purpose",
            "link_busbw_bytes_per_s",
            "link_median_bytes",
            "link",
            "link_bytes_per_s",
            "link_busbw_ratio",
            "link_network_ratio",
            "link_exposed_share",
            "job_step_ns",
        ),
        summary=slow_link_summary,
        fix=Fix(
            text="Run once with NCCL_DEBUG=INFO and read the transport of each channel: 'via P2P/IPC', 'P2P/CUMEM' "
            "or NVLS within a host, 'NET/IB' across hosts; 'NET/Socket' is TCP. Unset NCCL_P2P_DISABLE, "
            "NCCL_SHM_DISABLE and NCCL_IB_DISABLE; give containers --ipc=host and the InfiniBand devices; keep the "
            "bandwidth-heavy groups (tensor parallel, FSDP) within one host and data parallel across hosts.",
            pytorch="",
            hf_trainer="",
        ),
    ),
)

PIPELINE_RULES: tuple[Rule, ...] = (
    Rule(
        id="pipeline_stage_straggler",
        level="job",
        title="One pipeline stage takes longer than the others",
        metric="pipeline_balance_saving_share",
        above=0.05,
        evidence=_same(
            "pipeline_straggler_stage_rank",
            "pipeline_straggler_own_ns",
            "pipeline_others_own_ns",
            "pipeline_straggler_own_ratio",
            "pipeline_stage_own_ns",
            "pipeline_straggler_cause",
            "pipeline_straggler_cause_evidence",
            "pipeline_balance_saving_share",
            "job_step_ns",
        ),
        summary=stage_straggler_summary,
        fix=Fix(
            text="Balance the stages: move layers from the slow stage to the others (count the embedding, the "
            "final norm, the head and the loss as layers: the last stage carries them), or split by measured time "
            "per layer rather than by layer count.",
            pytorch="",
            hf_trainer="",
        ),
    ),
    Rule(
        id="pipeline_bubble",
        level="job",
        title="Pipeline stages wait for each other (the bubble)",
        metric="pipeline_bubble_share",
        above=0.05,
        evidence=_same(
            "pipeline_stage_count",
            "pipeline_micro_batches",
            "pipeline_bubble_share",
            "pipeline_bubble_expected_share",
            "pipeline_bubble_at_4m_share",
            "pipeline_stage_wait_shares",
            "pipeline_host_bound_stages",
            "pipeline_bubble_saving_share",
            "job_step_ns",
        ),
        summary=bubble_summary,
        fix=Fix(
            text="More micro-batches per step (the bubble is (p-1)/(m+p-1)), an interleaved schedule (virtual "
            "stages: the bubble divided by their number) or a zero-bubble schedule (torch.distributed.pipelining "
            "ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble).",
            pytorch="schedule = ScheduleInterleaved1F1B(stages, n_microbatches=4 * pp_degree, loss_fn=loss_fn)",
            hf_trainer="",
        ),
    ),
)
JOB_RULES = JOB_RULES + PIPELINE_RULES + LINK_RULES

STRAGGLER_RULE: Rule = next(r for r in JOB_RULES if r.id == "straggler")

#: How a job note words a finding its floor held back (``{...}``: formatted job_metrics values).
HELD_BACK_PHRASES: Mapping[str, str] = {
    "not_most_steps": "rank {rank} makes the others wait {wait} per step ({share} of the job step) but is the rank "
    "waited for most in only {last} of {steps} steps: the ranks take turns, so no straggler finding",
    "within_noise": "rank {rank} makes the others wait {wait} per step ({share} of the job step), but at 95 % "
    "confidence over the {steps} steps only {low} ({low_share}), not above {threshold}: within the step-to-step "
    "noise of this capture, so no straggler finding",
    "within_profiler_cost": "rank {rank} arrives last in {arrivals} of {matched} matched collectives (the others wait "
    "{wait} per step, {share} of the job step), but the difference is within the profiler's own extra cost on that "
    "rank: the profiler costs it {excess} per step more than the median rank ({mine} against {theirs}; {basis}), "
    "and {low_words}, no more than that: not a straggler of the unprofiled run, so no straggler finding",
}


def held_back(metrics: Mapping[str, Any], rules: tuple[Rule, ...] = JOB_RULES) -> list[str]:
    """One job note per rule above its threshold that a floor held back, saying which check and its numbers."""
    notes = []
    for rule in rules:
        v = verdict(rule, metrics)
        phrase = HELD_BACK_PHRASES.get(v or "")
        if phrase is None or fires(rule, metrics):
            continue
        notes.append(
            phrase.format(
                rank=metrics.get("straggler_rank"),
                wait=fmt("ns", metrics.get("straggler_others_wait_ns_per_step")),
                share=fmt("share", metrics.get("straggler_others_wait_share")),
                last=metrics.get("straggler_last_steps"),
                steps=metrics.get("common_step_count"),
                low=fmt("ns", metrics.get("straggler_others_wait_low_ns_per_step")),
                low_share=fmt("share", metrics.get("straggler_others_wait_low_share")),
                threshold=fmt("share", rule.above),
                **_profiler_words(metrics),
            )
        )
    return notes


def _profiler_words(m: Mapping[str, Any]) -> dict[str, Any]:
    """The profiler's per-rank cost as the ``within_profiler_cost`` note words it."""
    ranks, by_rank = m.get("ranks") or [], m.get("profiler_overhead_ns_by_rank") or []
    mine = by_rank[ranks.index(m["straggler_rank"])] if m.get("straggler_rank") in ranks and by_rank else None
    excess = m.get("straggler_profiler_excess_ns_per_step")
    low = m.get("straggler_others_wait_low_ns_per_step")
    return {
        "low_words": f"at 95 % confidence over the {m.get('common_step_count')} steps the wait is at least "
        f"{fmt('ns', low)}"
        if low is not None
        else f"in its one common step the wait is {fmt('ns', m.get('straggler_others_wait_ns_per_step'))}",
        "arrivals": m.get("straggler_last_arrivals"),
        "matched": m.get("matched_collective_count"),
        "excess": fmt("ns", excess),
        "mine": fmt("ns", mine),
        "theirs": fmt("ns", mine - excess if mine is not None and excess is not None else None),
        "basis": PROFILER_BASIS_PHRASES.get(m.get("straggler_profiler_basis") or "", "estimated"),
    }
