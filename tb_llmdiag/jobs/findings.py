"""Job findings as declared rules over the job metrics.

Contract:
- ``job_metrics(analysis)`` -> a flat JSON-safe dict (units in key names, null for unknowns, no NaN).
- ``JOB_RULES`` is data: each rule names the metric it compares, its threshold, the evidence keys it repeats,
  and its fixes keyed by a metric (the straggler's cause, the dominant collective kind). ``evaluate`` is one
  generic loop; findings are ranked by their value (a share of the job's step time).
- Definitions:
  - ``straggler_others_wait_share`` = the mean exposed waiting (waiting no compute hides) the straggler causes
    the other ranks per step / the median rank's step time (``jobs.analysis``). ``straggler_*`` keys are null when no rank is consistently the last to arrive.
  - ``exposed_transfer_share`` = the median across ranks of exposed transfer per step (collective time no
    compute hides, less its waiting part: ``JobTables.exposed_transfer_ns``) / the median rank's step time.
    ``waiting_known`` is false when no collective could be matched across ranks (one rank alone): then the
    waiting part is unknown and counted as transfer.
  - ``exposed_share`` likewise with waiting left in; ``overlap_share`` = 1 - exposed / collective (median rank).
  - What-ifs are upper bounds: removing the straggler's delay (``jobs.attribution.what_if``), or hiding all
    exposed transfer behind compute (step - exposed transfer).
  - The straggler's floors (``JobRule.floors``; the statistics: ``jobs.analysis``): ``straggler_last_step_share``
    = the common steps in which it caused more waiting than any other rank / the common steps;
    ``straggler_others_wait_low_share`` = the lower one-sided 95 % confidence bound of its per-step caused waiting
    (mean - t x sd / sqrt(steps)) / the job step: the wait share the capture supports given its step-to-step
    spread (null with one common step). ``straggler_significance`` says which check decided: ``significant``
    (fires), ``noise_unknown`` (fires on its threshold alone: fewer than two common steps, no spread to measure;
    the finding says so), ``below_threshold``, ``not_most_steps``, ``within_noise`` (held back; ``held_back``
    words it as a job note).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tb_llmdiag.jobs.analysis import JobAnalysis
from tb_llmdiag.jobs.attribution import per_rank_mean
from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics.collectives import KINDS
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
    "default": "Overlap communication with compute or shrink it (compression); check the transport: NCCL_P2P_DISABLE "
    "or NCCL_SHM_DISABLE set, or NCCL on sockets instead of NVLink/InfiniBand, cuts bus bandwidth.",
}


@dataclass(frozen=True)
class Floor:
    """A check a rule needs besides its threshold: the job_metrics key ``metric`` must be above ``above`` (None:
    the rule's own threshold). A failed check holds the finding back and is the verdict ``fails_as``; a null value
    fails too, unless ``unknown_as`` names the verdict under which the rule then fires on its threshold alone."""

    metric: str
    above: float | None
    fails_as: str
    meaning: str
    unknown_as: str = ""


@dataclass(frozen=True)
class JobRule:
    id: str
    title: str
    metric: str  # the job_metrics key compared with ``above``
    above: float
    evidence: tuple[str, ...]
    fix_by: str  # the job_metrics key whose value picks the fix
    fixes: Mapping[str, str] = field(default_factory=dict)
    what_if: str = ""  # the job_metrics key holding the what-if
    floors: tuple[Floor, ...] = ()  # checked in order after the threshold; the first that fails decides


#: The straggler's floors: a rank the others wait for in most steps, by more than the steps' own spread allows.
STRAGGLER_FLOORS: tuple[Floor, ...] = (
    Floor(
        "straggler_last_step_share",
        0.5,
        "not_most_steps",
        "it is the rank the others wait for most in more than half of the common steps (else the ranks take turns)",
        unknown_as="noise_unknown",
    ),
    Floor(
        "straggler_others_wait_low_share",
        None,
        "within_noise",
        "the wait it causes stays above the threshold at its lower 95 % confidence bound over the steps (mean - "
        "t x sd / sqrt(steps)): beyond the step-to-step spread measured in the same capture",
        unknown_as="noise_unknown",
    ),
)


JOB_RULES: tuple[JobRule, ...] = (
    JobRule(
        id="straggler",
        title="The other ranks wait in their collectives for one rank",
        metric="straggler_others_wait_share",
        above=0.05,
        evidence=(
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
        ),
        fix_by="straggler_cause",
        fixes=STRAGGLER_FIXES,
        what_if="straggler_what_if",
        floors=STRAGGLER_FLOORS,
    ),
    JobRule(
        id="exposed_communication",
        title="Collective transfers no compute hides",
        metric="exposed_transfer_share",
        above=0.10,
        evidence=(
            "exposed_transfer_ns_per_step",
            "exposed_share",
            "overlap_share",
            "top_collective_kind",
            "collective_by_kind",
            "waiting_known",
            "job_step_ns",
        ),
        fix_by="top_collective_kind",
        fixes=EXPOSED_FIXES,
        what_if="exposed_what_if",
    ),
)

STRAGGLER_RULE: JobRule = next(r for r in JOB_RULES if r.id == "straggler")

#: How each straggler cause reads in a finding's summary (``{s}``/``{m}``: the straggler's and the median
#: rank's value of the cause's quantity, per step).
CAUSE_PHRASES: Mapping[str, str] = {
    "more_tokens": "it processes more tokens per step ({ts:.0f} against {tm:.0f} for the median rank), so its "
    "GPU computes longer ({s} against {m})",
    "longer_gpu_compute": "its GPU computes longer per step ({s} against {m} for the median rank)",
    "data_loader_stall": "its data loader stalls longer per step ({s} against {m} for the median rank)",
    "host_sync": "its host blocks longer in syncs per step ({s} against {m} for the median rank)",
    "host_bound_launching": "its GPU waits longer for host launches per step ({s} against {m} for the median rank)",
    "late_step_start": "it starts each step later ({s} against {m} for the median rank)",
    "unexplained": "no per-rank quantity the trace records explains it",
}


def summary(finding_id: str, m: Mapping[str, Any]) -> str:
    """One sentence saying what the finding claims, with its numbers (units from the registry)."""
    if finding_id == "straggler":
        ev = m.get("straggler_cause_evidence") or {}
        tok = m.get("straggler_tokens") or {}
        cause = m.get("straggler_cause") or "unexplained"
        phrase = CAUSE_PHRASES.get(cause, CAUSE_PHRASES["unexplained"]).format(
            s=fmt("ns", ev.get("straggler_ns_per_step")),
            m=fmt("ns", ev.get("median_rank_ns_per_step")),
            ts=tok.get("straggler_tokens_per_step") or 0.0,
            tm=tok.get("median_rank_tokens_per_step") or 0.0,
        )
        noise = (
            f" At least {fmt('ns', m.get('straggler_others_wait_low_ns_per_step'))} per step "
            f"({fmt('share', m.get('straggler_others_wait_low_share'))}) at 95 % confidence over the "
            f"{m.get('common_step_count')} steps."
            if m.get("straggler_significance") == "significant"
            else " With fewer than two common steps the wait's step-to-step spread is unknown: it is not tested "
            "against it."
        )
        return (
            f"Rank {m.get('straggler_rank')} is the straggler: the other ranks wait for it "
            f"{fmt('ns', m.get('straggler_others_wait_ns_per_step'))} per step in their collectives "
            f"({fmt('share', m.get('straggler_others_wait_share'))} of the {fmt('ns', m.get('job_step_ns'))} step); "
            f"it arrives last in {m.get('straggler_last_arrivals')} of {m.get('matched_collective_count')} "
            f"matched collectives and is the rank waited for most in {m.get('straggler_last_steps')} of "
            f"{m.get('common_step_count')} steps.{noise} Cause: {phrase}."
        )
    return (
        f"Collective transfers no compute hides take {fmt('ns', m.get('exposed_transfer_ns_per_step'))} per step "
        f"({fmt('share', m.get('exposed_transfer_share'))} of the {fmt('ns', m.get('job_step_ns'))} step; "
        f"{m.get('top_collective_kind')} leads; {fmt('share', m.get('overlap_share'))} of collective time is "
        f"hidden under compute)."
    )


def _f(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def job_metrics(a: JobAnalysis) -> dict[str, Any]:
    """The job's metrics (definitions in the module docstring)."""
    t = a.tables
    step = a.job_step_ns
    exposed_t = float(np.nanmedian(per_rank_mean(t.exposed_transfer_ns))) if len(a.ranks) and t.step_ns.size else np.nan
    exposed = float(np.nanmedian(per_rank_mean(t.exposed_ns))) if len(a.ranks) and t.step_ns.size else np.nan
    coll = float(np.nanmedian(per_rank_mean(t.collective_ns))) if len(a.ranks) and t.step_ns.size else np.nan
    kind_ns = (
        {r["kind"]: r["transfer_ns"] for r in a.by_kind}
        if a.by_kind
        else {KINDS[i]: int(v) for i, v in enumerate(a.kernel_ns_by_kind) if v > 0}
    )
    top_kind = max(kind_ns, key=lambda k: kind_ns[k]) if kind_ns else None
    out: dict[str, Any] = {
        "rank_count": len(a.ranks),
        "ranks": list(a.ranks),
        "common_step_count": int(a.steps.size),
        "job_step_ns": step if step > 0 else None,
        "matched_collective_count": int(a.matched.kind.size),
        "clock_aligned": a.clock_aligned,
        "waiting_known": bool(a.matched.kind.size),
        "exposed_transfer_ns_per_step": _f(exposed_t),
        "exposed_share": _f(exposed / step) if step > 0 else None,
        "exposed_transfer_share": _f(exposed_t / step) if step > 0 else None,
        "overlap_share": _f(1.0 - exposed / coll) if coll > 0 else None,
        "top_collective_kind": top_kind,
        "collective_by_kind": a.by_kind,
        "exposed_what_if": {
            "step_ns": step,
            "step_after_ns": max(step - exposed_t, 0.0),
            "bound": "upper",
            "assumes": "all exposed transfer hidden behind compute",
        }
        if step > 0 and np.isfinite(exposed_t)
        else None,
    }
    s = a.straggler_pos
    attr = a.attribution or {}
    out.update(
        {
            "straggler_rank": a.ranks[s] if s is not None else None,
            "straggler_others_wait_ns_per_step": float(a.caused_wait_ns[s]) if s is not None else None,
            "straggler_others_wait_share": float(a.caused_wait_ns[s]) / step if s is not None and step > 0 else None,
            "straggler_consistency_share": a.straggler_consistency_share if s is not None else None,
            "straggler_last_arrivals": int(a.last_count[s]) if s is not None else None,
            "straggler_cause": attr.get("cause"),
            "straggler_cause_evidence": attr.get("evidence"),
            "straggler_tokens": attr.get("tokens"),
            "straggler_what_if": attr.get("what_if"),
        }
    )
    out.update(_floor_metrics(a))
    out["straggler_significance"] = verdict(STRAGGLER_RULE, out) if s is not None else None
    return jsonable(out)


def _floor_metrics(a: JobAnalysis) -> dict[str, Any]:
    """What the straggler's floors read (definitions in the module docstring); null without a straggler."""
    step, n, last = a.job_step_ns, int(a.steps.size), a.straggler_last_steps
    low = max(a.straggler_wait_low_ns, 0.0) if a.straggler_wait_low_ns is not None else None  # a wait is >= 0
    return {
        "straggler_last_steps": last,
        "straggler_last_step_share": last / n if last is not None and n else None,
        "straggler_others_wait_step_sd_ns": a.straggler_wait_sd_ns,
        "straggler_others_wait_low_ns_per_step": low,
        "straggler_others_wait_low_share": low / step if low is not None and step > 0 else None,
    }


def verdict(rule: JobRule, metrics: Mapping[str, Any]) -> str | None:
    """Which check decides the rule: None when its metric is unknown; ``below_threshold``; else the first failing
    floor's ``fails_as``; else ``significant``, or the ``unknown_as`` of a floor whose metric is null."""
    value = metrics.get(rule.metric)
    if value is None:
        return None
    if value <= rule.above:
        return "below_threshold"
    unknown = ""
    for f in rule.floors:
        v = metrics.get(f.metric)
        if v is None and f.unknown_as:
            unknown = unknown or f.unknown_as
        elif v is None or v <= (rule.above if f.above is None else f.above):
            return f.fails_as
    return unknown or "significant"


def fires(rule: JobRule, metrics: Mapping[str, Any]) -> bool:
    """Whether the rule's finding is reported: above its threshold and no floor failed."""
    v = verdict(rule, metrics)
    return v == "significant" or (v is not None and v in {f.unknown_as for f in rule.floors if f.unknown_as})


#: How a job note words a finding its floor held back (``{...}``: formatted job_metrics values).
HELD_BACK_PHRASES: Mapping[str, str] = {
    "not_most_steps": "rank {rank} makes the others wait {wait} per step ({share} of the job step) but is the rank "
    "waited for most in only {last} of {steps} steps: the ranks take turns, so no straggler finding",
    "within_noise": "rank {rank} makes the others wait {wait} per step ({share} of the job step), but at 95 % "
    "confidence over the {steps} steps only {low} ({low_share}), not above {threshold}: within the step-to-step "
    "noise of this capture, so no straggler finding",
}


def held_back(metrics: Mapping[str, Any], rules: tuple[JobRule, ...] = JOB_RULES) -> list[str]:
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
            )
        )
    return notes


def evaluate(metrics: Mapping[str, Any], rules: tuple[JobRule, ...] = JOB_RULES) -> list[dict[str, Any]]:
    """The rules that fire, as finding dicts, largest share of step first."""
    found = []
    for rule in rules:
        value = metrics.get(rule.metric)
        if value is None or not fires(rule, metrics):
            continue
        key = metrics.get(rule.fix_by)
        found.append(
            {
                "id": rule.id,
                "title": rule.title,
                "summary": summary(rule.id, metrics),
                "metric": rule.metric,
                "value": value,
                "threshold": rule.above,
                "evidence": {k: metrics.get(k) for k in rule.evidence},
                "fix": rule.fixes.get(str(key), rule.fixes.get("default", "")),
                "what_if": metrics.get(rule.what_if) if rule.what_if else None,
            }
        )
    return jsonable(sorted(found, key=lambda f: -f["value"]))
