"""Registry entries of the job level: ``jobs[].metrics`` as ``job.*`` and what the job view draws as
``job.view.*`` (``tb_llmdiag/jobs/``, docs/jobs.md; ``registry.py`` explains the fields). The job level is computed
above the metrics layer (``jobs/``), which the registry may not import, so its entries are declared here; the
job's view of the attribution topic sits with that topic (``metrics/attribution.py``)."""

from __future__ import annotations

from tb_llmdiag.metrics.entry import (
    BYTES,
    COUNT,
    FLAG,
    HIGHER,
    ID,
    INDEX,
    LOWER,
    NEITHER,
    NS,
    PER_STEP,
    RATIO,
    SHARE,
    TEXT,
    Entry,
    Intro,
)

_WHAT_IF = "an upper bound on the gain, from durations only"
_CAUSE = (
    "`straggler_cause_evidence`: the straggler's largest positive difference per step against the median of "
    "the other ranks (`jobs.straggler`)"
)

#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`job`: a run with several ranks (`jobs[]` of the report; tb_llmdiag/jobs/, docs/jobs.md)",
    "`job.*` is `jobs[].metrics.*`; `job.view.*` is `jobs[].view.*`, what the tab's job view draws. Ranks are "
    "matched by their collectives, never by timestamps across files (clocks may differ).",
)

_LINK = "the link (`jobs.purposes.link_metrics`; the table: `metrics.comm_purpose.LINKS`)"
_LINK_ENTRIES: tuple[Entry, ...] = (
    ("job.purposes[].transfer_busbw_bytes_per_s", "bytes_per_s", HIGHER, 0.1, "transfer bus bandwidth",
     "known bytes of the purpose's matched collectives / their transfer time (no waiting) x the nccl-tests factor"),
    ("job.link", TEXT, NEITHER, 0, "link", "the fastest link the GPUs' peers on one host can share; " + _LINK),
    ("job.link_bytes_per_s", "bytes_per_s", NEITHER, 0, "link bandwidth", "its per-GPU bandwidth in one direction"),
    ("job.link_purpose", TEXT, NEITHER, 0, "purpose on the link",
     "the purpose with the most exposed time among those with a median message of at least 1 MiB"),
    ("job.link_busbw_bytes_per_s", "bytes_per_s", HIGHER, 0.1, "transfer bus bandwidth",
     "that purpose's transfer_busbw_bytes_per_s"),
    ("job.link_busbw_ratio", RATIO, HIGHER, 0.1, "vs the link", "link_busbw_bytes_per_s / link_bytes_per_s"),
    ("job.link_network_ratio", RATIO, HIGHER, 0.1, "vs a 400 Gb/s NIC", "link_busbw_bytes_per_s / 50 GB/s"),
    ("job.link_exposed_share", SHARE, LOWER, 0.1, "exposed share", "that purpose's exposed share of the job step"),
    ("job.link_median_bytes", BYTES, NEITHER, 0.1, "median message", "that purpose's median message size"),
)  # fmt: skip

_OV = "the job at a glance (`jobs/overview.py`)"
_PCT = {"p50": "the median", "p90": "the 90th percentile", "max": "the largest"}
_PCT_OF = {"step_ns": "step time", "waiting_ns": "exposed waiting", "exposed_ns": "exposed collective time"}
_OVERVIEW_ENTRIES: tuple[Entry, ...] = (
    *(
        (f"job.view.percentiles.{k}.{p}[]", NS, LOWER, 0.05, f"{what} {p}",
         f"per common step: {words} of the ranks' {what} (null: no rank has the step); " + _OV)
        for k, what in _PCT_OF.items()
        for p, words in _PCT.items()
    ),
    *(
        (f"job.view.notable.{k}_rank", ID, NEITHER, 0, f"{k} rank", f"{words}; null when none; " + _OV)
        for k, words in (
            ("straggler", "the job's straggler (`straggler_rank`)"),
            ("slowest", "the rank with the largest mean step over the common steps"),
            ("fastest", "the rank with the smallest mean step over the common steps"),
            ("typical", "the rank whose mean step is nearest the median rank's"),
        )
    ),
    ("job.view.outliers[].rank", ID, NEITHER, 0, "outlier rank",
     "a rank outside the median +- max(3 robust sd, 2 %) in mean step or above it in waiting, or the straggler; " + _OV),
    ("job.view.outliers[].step_ns", NS, LOWER, 0.05, "mean step", "the outlier's mean step over the common steps"),
    ("job.view.outliers[].step_vs_median_ratio", RATIO, NEITHER, 0.05, "vs median",
     "the outlier's mean step / the median rank's mean step"),
    ("job.view.outliers[].reasons[]", TEXT, NEITHER, 0, "why",
     "straggler, slow step, fast step, waits long (`jobs/overview.py`)"),
)  # fmt: skip

_PP = "per purpose over the ranks (`jobs.purposes`; purposes: `metrics.comm_purpose`)"
_PURPOSE_ENTRIES: tuple[Entry, ...] = (
    ("job.purposes[].purpose", TEXT, NEITHER, 0, "purpose", _PP),
    ("job.purposes[].count_per_step", PER_STEP, NEITHER, 0.02, "per step", "collectives per step, the median rank's; " + _PP),
    ("job.purposes[].step_bytes", BYTES, NEITHER, 0.02, "bytes per step", "known bytes per step, the median rank's; " + _PP),
    ("job.purposes[].median_bytes", BYTES, NEITHER, 0.02, "median message", "median known message over all ranks; " + _PP),
    ("job.purposes[].exposed_ns_per_step", NS, LOWER, 0.05, "exposed per step",
     "per-collective time no compute of its rank overlaps, summed per step, the median rank's; " + _PP),
    ("job.purposes[].exposed_share", SHARE, LOWER, 0.1, "exposed share", "exposed_ns_per_step / job_step_ns"),
    ("job.purposes[].group_size", COUNT, NEITHER, 0, "group size", "largest group size stated; " + _PP),
    ("job.top_purpose", TEXT, NEITHER, 0, "top purpose", "the purpose with the most exposed time per step"),
    ("job.top_purpose_exposed_share", SHARE, LOWER, 0.1, "top purpose exposed share", "its exposed_share"),
)  # fmt: skip
_PIPE = "(`jobs.pipeline`; null without send/recv)"
_PIPELINE_ENTRIES: tuple[Entry, ...] = (
    ("job.pipeline_stage_count", COUNT, NEITHER, 0, "stages", "ranks with pipeline send/recv " + _PIPE),
    ("job.pipeline_micro_batches", COUNT, NEITHER, 0, "micro-batches", "the fewest send/recv per step on a rank, halved " + _PIPE),
    ("job.pipeline_bubble_share", SHARE, LOWER, 0.1, "pipeline bubble",
     "mean over stages of their send/recv wait / their step; with a slow stage at most the expectation " + _PIPE),
    ("job.pipeline_bubble_expected_share", SHARE, NEITHER, 0, "expected bubble", "(p-1)/(m+p-1) " + _PIPE),
    ("job.pipeline_bubble_at_4m_share", SHARE, NEITHER, 0, "bubble at 4x micro-batches", "(p-1)/(4m+p-1) " + _PIPE),
    ("job.pipeline_bubble_saving_share", SHARE, NEITHER, 0.1, "bubble saving",
     "pipeline_bubble_share - pipeline_bubble_at_4m_share, at least 0: an upper bound " + _PIPE),
    ("job.pipeline_stage_ranks[]", INDEX, NEITHER, 0, "stage ranks", "the ranks of the stages " + _PIPE),
    ("job.pipeline_stage_wait_shares[]", SHARE, NEITHER, 0.1, "stage waits", "per stage, its send/recv wait / its step " + _PIPE),
    ("job.pipeline_stage_own_ns[]", NS, NEITHER, 0.05, "stage own time", "per stage, its step less its send/recv wait " + _PIPE),
    ("job.pipeline_host_bound_stages[]", INDEX, NEITHER, 0, "host-bound stages",
     "ranks of stages whose GPU idles > 20 % of their step " + _PIPE),
    ("job.pipeline_straggler_stage_rank", INDEX, NEITHER, 0, "slow stage",
     "the stage whose own time is >= 1.5x the others' median and exceeds it by >= 25 % of the job step " + _PIPE),
    ("job.pipeline_straggler_own_ns", NS, NEITHER, 0.05, "slow stage own time", "its own time " + _PIPE),
    ("job.pipeline_others_own_ns", NS, NEITHER, 0.05, "other stages own time", "the other stages' median own time " + _PIPE),
    ("job.pipeline_straggler_own_ratio", "ratio", NEITHER, 0.05, "own time ratio",
     "the slowest stage's own time / the others' median " + _PIPE),
    ("job.pipeline_balance_saving_share", SHARE, NEITHER, 0.1, "balancing saving",
     "(slow stage own time - the stages' mean own time) / job_step_ns " + _PIPE),
    ("job.pipeline_straggler_cause", TEXT, NEITHER, 0, "slow stage cause", "its largest difference (`jobs.straggler`) " + _PIPE),
)  # fmt: skip

ENTRIES: tuple[Entry, ...] = (
    (
        "job.rank_count",
        COUNT,
        NEITHER,
        0,
        "ranks",
        "ranks analysed (one trace each; duplicates and missing ranks are stated in `notes`)",
    ),
    ("job.ranks[]", ID, NEITHER, 0, "ranks", "the ranks analysed, from distributedInfo, else the file name"),
    ("job.common_step_count", COUNT, NEITHER, 0, "common steps", "steps (by ProfilerStep number) every rank recorded"),
    (
        "job.job_step_ns",
        NS,
        LOWER,
        0.05,
        "job step",
        "the median across ranks of each rank's mean step time over the common steps",
    ),
    (
        "job.matched_collective_count",
        COUNT,
        NEITHER,
        0.02,
        "matched collectives",
        "collectives matched across the ranks of their group (by sequence number when stated, else by step, kind and order)",
    ),
    (
        "job.clock_aligned",
        FLAG,
        NEITHER,
        0,
        "clocks aligned",
        "whether matched collectives end within a small tolerance on every rank (then step starts compare across ranks)",
    ),
    (
        "job.waiting_known",
        FLAG,
        NEITHER,
        0,
        "waiting known",
        "false when no collective could be matched: waiting is then unknown and counted as transfer",
    ),
    (
        "job.exposed_transfer_ns_per_step",
        NS,
        LOWER,
        0.05,
        "exposed transfer",
        "median across ranks of the per-step collective time no compute hides, less its waiting part",
    ),
    (
        "job.exposed_share",
        SHARE,
        LOWER,
        0.1,
        "exposed communication share",
        "median across ranks of exposed collective time (waiting included) per step / job_step_ns",
    ),
    (
        "job.exposed_transfer_share",
        SHARE,
        LOWER,
        0.1,
        "exposed transfer share",
        "exposed_transfer_ns_per_step / job_step_ns",
    ),
    ("job.overlap_share", SHARE, HIGHER, 0.1, "overlap share", "1 - exposed / collective time (median rank)"),
    ("job.top_collective_kind", TEXT, NEITHER, 0, "top collective kind", "the kind with the most transfer time"),
    ("job.collective_by_kind[].kind", TEXT, NEITHER, 0, "kind", "per collective kind over matched collectives"),
    ("job.collective_by_kind[].count", COUNT, NEITHER, 0.02, "count", "matched collectives of the kind"),
    (
        "job.collective_by_kind[].transfer_ns",
        NS,
        LOWER,
        0.05,
        "transfer",
        "summed transfer time (the minimum kernel duration across ranks of each matched collective)",
    ),
    (
        "job.collective_by_kind[].bytes",
        BYTES,
        NEITHER,
        0.02,
        "bytes",
        "summed message bytes where the trace states them, else null",
    ),
    (
        "job.collective_by_kind[].busbw_bytes_per_s",
        "bytes_per_s",
        HIGHER,
        0.1,
        "bus bandwidth",
        "nccl-tests bus bandwidth over transfer time (waiting stripped); null without sizes",
    ),
    ("job.exposed_what_if.step_ns", NS, NEITHER, 0.05, "step", "job_step_ns"),
    (
        "job.exposed_what_if.step_after_ns",
        NS,
        NEITHER,
        0.05,
        "step if hidden",
        "job_step_ns - exposed_transfer_ns_per_step: all exposed transfer hidden behind compute; " + _WHAT_IF,
    ),
    ("job.exposed_what_if.bound", TEXT, NEITHER, 0, "bound", "`upper`: the what-if bounds the gain from above"),
    ("job.exposed_what_if.assumes", TEXT, NEITHER, 0, "assumes", "what the what-if assumes"),
    (
        "job.straggler_rank",
        ID,
        NEITHER,
        0,
        "straggler",
        "the rank whose late arrivals cause at least half of the others' exposed waiting and which itself waits no "
        "more than the median rank; null when none (the rank that waits longest is never named)",
    ),
    (
        "job.straggler_others_wait_ns_per_step",
        NS,
        LOWER,
        0.05,
        "others wait",
        "mean exposed waiting the straggler causes the other ranks per step",
    ),
    (
        "job.straggler_others_wait_share",
        SHARE,
        LOWER,
        0.1,
        "others wait share",
        "straggler_others_wait_ns_per_step / job_step_ns",
    ),
    (
        "job.straggler_consistency_share",
        SHARE,
        NEITHER,
        0.1,
        "consistency",
        "the straggler's part of all caused exposed waiting",
    ),
    (
        "job.straggler_last_arrivals",
        COUNT,
        NEITHER,
        0.02,
        "last arrivals",
        "matched collectives the straggler arrived last to",
    ),
    (
        "job.straggler_last_steps",
        COUNT,
        NEITHER,
        0.02,
        "steps waited for most",
        "common steps in which the straggler caused more exposed waiting than any other rank (and some)",
    ),
    (
        "job.straggler_last_step_share",
        SHARE,
        NEITHER,
        0.1,
        "share of steps waited for most",
        "straggler_last_steps / common_step_count; the straggler rule needs more than 0.5 (else the ranks take turns)",
    ),
    (
        "job.straggler_others_wait_step_sd_ns",
        NS,
        NEITHER,
        0.1,
        "wait step-to-step spread",
        "sample standard deviation over the common steps of the exposed waiting the straggler causes per step "
        "(the capture's own step-to-step noise); null with one common step",
    ),
    (
        "job.straggler_others_wait_low_ns_per_step",
        NS,
        LOWER,
        0.1,
        "others wait, 95 % lower bound",
        "mean - t x sd / sqrt(steps) of the per-step wait the straggler causes, at least 0 (t: Student's one-sided 95 % "
        "quantile, steps - 1 degrees of freedom): the wait the capture supports given its step-to-step spread; null "
        "with one common step",
    ),
    (
        "job.straggler_others_wait_low_share",
        SHARE,
        LOWER,
        0.1,
        "others wait share, 95 % lower bound",
        "straggler_others_wait_low_ns_per_step / job_step_ns; the straggler rule needs it above its threshold too "
        "(beyond the step-to-step noise)",
    ),
    (
        "job.profiler_overhead_ns_by_rank[]",
        NS,
        NEITHER,
        0.1,
        "profiler cost per rank",
        "each rank's capture.profiler_overhead_ns (the profiler's own cost in its profiled median step), in the order "
        "of `ranks`; null where not estimated",
    ),
    (
        "job.straggler_profiler_excess_ns_per_step",
        NS,
        NEITHER,
        0.1,
        "profiler's extra cost on the straggler",
        "the straggler's profiler cost less the median of the other ranks' (`profiler_overhead_ns_by_rank`): how much "
        "later the profiler alone can make it arrive each step; null when either is unknown",
    ),
    (
        "job.straggler_profiler_basis",
        TEXT,
        NEITHER,
        0,
        "profiler cost basis",
        "unprofiled_steps (every rank measured against the unprofiled steps its capture helper timed), model (every "
        "rank modelled from what it recorded) or mixed",
    ),
    (
        "job.straggler_others_wait_beyond_profiler_ns_per_step",
        NS,
        LOWER,
        0.1,
        "others wait beyond the profiler, 95 % lower bound",
        "max(0, straggler_others_wait_low_ns_per_step - max(0, straggler_profiler_excess_ns_per_step)): the wait the "
        "capture supports beyond the profiler's extra cost on the straggler (the lower bound itself when that is unknown; "
        "the mean wait in place of the bound with one common step)",
    ),
    (
        "job.straggler_others_wait_beyond_profiler_share",
        SHARE,
        LOWER,
        0.1,
        "others wait beyond the profiler, 95 % lower bound share",
        "straggler_others_wait_beyond_profiler_ns_per_step / job_step_ns; the straggler rule needs it above its "
        "threshold too (a straggler of the unprofiled run, not of the profiler)",
    ),
    (
        "job.straggler_significance",
        TEXT,
        NEITHER,
        0,
        "significance",
        "which check decided the straggler rule: significant, noise_unknown (fires on its threshold alone: fewer than "
        "two common steps), intermittent (a floor failed but it spikes: fires, named as intermittent), "
        "below_threshold, not_most_steps, within_noise, within_profiler_cost (the last four: no finding; a job note "
        "says why)",
    ),
    (
        "job.straggler_cause",
        TEXT,
        NEITHER,
        0,
        "cause",
        "more_tokens, longer_gpu_compute, data_loader_stall, host_sync, host_bound_launching, late_step_start, unexplained",
    ),
    ("job.straggler_cause_evidence.cause", TEXT, NEITHER, 0, "largest difference", _CAUSE + ": which part"),
    ("job.straggler_cause_evidence.quantity", TEXT, NEITHER, 0, "quantity", _CAUSE + ": the per-step column compared"),
    (
        "job.straggler_cause_evidence.straggler_ns_per_step",
        NS,
        NEITHER,
        0.05,
        "straggler",
        _CAUSE + ": the straggler's value",
    ),
    (
        "job.straggler_cause_evidence.median_rank_ns_per_step",
        NS,
        NEITHER,
        0.05,
        "median rank",
        _CAUSE + ": the median of the other ranks",
    ),
    (
        "job.straggler_cause_evidence.difference_ns_per_step",
        NS,
        NEITHER,
        0.05,
        "difference",
        _CAUSE + ": straggler - median",
    ),
    (
        "job.straggler_tokens.straggler_tokens_per_step",
        PER_STEP,
        NEITHER,
        0.02,
        "straggler tokens",
        "token slots per step of the straggler",
    ),
    (
        "job.straggler_tokens.median_rank_tokens_per_step",
        PER_STEP,
        NEITHER,
        0.02,
        "median tokens",
        "median of the other ranks' token slots per step",
    ),
    (
        "job.straggler_tokens.excess_share",
        SHARE,
        NEITHER,
        0.1,
        "token excess",
        "straggler tokens / median tokens - 1 (above 1 when it has more than twice the tokens)",
    ),
    ("job.straggler_what_if.step_ns", NS, NEITHER, 0.05, "step", "job_step_ns"),
    (
        "job.straggler_what_if.step_after_ns",
        NS,
        NEITHER,
        0.05,
        "step if matched",
        "the step had the straggler arrived with the second-last rank (ByteDance-style); " + _WHAT_IF,
    ),
    ("job.straggler_what_if.saving_ns", NS, NEITHER, 0.05, "saving", "step_ns - step_after_ns"),
    ("job.straggler_what_if.saving_share", SHARE, NEITHER, 0.1, "saving share", "saving_ns / step_ns"),
    ("job.straggler_what_if.bound", TEXT, NEITHER, 0, "bound", "`upper`"),
    (
        "job.schema",
        ID,
        NEITHER,
        0,
        "job section schema",
        "version of the job section (`jobs.report.JOB_REPORT_SCHEMA`)",
    ),
    ("job.view.ranks[]", ID, NEITHER, 0, "ranks", "the heatmap's rows and the bars, in rank order"),
    ("job.files[].rank", ID, NEITHER, 0, "rank", "the rank discovery read from the file's name (null: none)"),
    ("job.findings[].value", SHARE, LOWER, 0.1, "value", "the share of the job step the finding's metric reports"),
    ("job.findings[].threshold", SHARE, NEITHER, 0, "threshold", "the share above which the rule fires"),
    ("job.findings[].what_if.step_ns", NS, NEITHER, 0.05, "step", "job_step_ns"),
    ("job.findings[].what_if.step_after_ns", NS, NEITHER, 0.05, "step after", "the step after the fix; " + _WHAT_IF),
    ("job.findings[].what_if.saving_ns", NS, NEITHER, 0.05, "saving", "step_ns - step_after_ns"),
    ("job.findings[].what_if.saving_share", SHARE, NEITHER, 0.1, "saving share", "saving_ns / step_ns"),
    ("job.view.steps[]", INDEX, NEITHER, 0, "steps", "the common step numbers (heatmap columns)"),
    (
        "job.view.heatmap.step_ns[][]",
        NS,
        LOWER,
        0.05,
        "step time",
        "ranks x common steps: each rank's step time (device window)",
    ),
    (
        "job.view.heatmap.waiting_ns[][]",
        NS,
        LOWER,
        0.05,
        "waiting",
        "ranks x common steps: collective time spent waiting for a peer that no compute hides",
    ),
    (
        "job.view.heatmap.exposed_ns[][]",
        NS,
        LOWER,
        0.05,
        "exposed",
        "ranks x common steps: collective time no compute hides (waiting included)",
    ),
    (
        "job.view.heatmap.exposed_transfer_ns[][]",
        NS,
        LOWER,
        0.05,
        "exposed transfer",
        "ranks x common steps: exposed collective time that is not waiting for a peer",
    ),
    ("job.view.bars[].rank", ID, NEITHER, 0, "rank", "per rank: its mean step split into parts that sum to it"),
    ("job.view.bars[].step_ns", NS, LOWER, 0.05, "step", "the rank's mean step time over the common steps"),
    (
        "job.view.bars[].compute_ns",
        NS,
        NEITHER,
        0.05,
        "compute",
        "mean busy compute kernels (collectives excluded) per step",
    ),
    ("job.view.bars[].exposed_transfer_ns", NS, LOWER, 0.05, "exposed transfer", "mean exposed transfer per step"),
    ("job.view.bars[].waiting_ns", NS, LOWER, 0.05, "waiting", "mean exposed waiting per step"),
    ("job.view.bars[].idle_ns", NS, LOWER, 0.05, "idle", "mean time without device activity per step"),
    ("job.view.bars[].other_ns", NS, NEITHER, 0.05, "other", "the rest: device busy with memcpy/memset only"),
    (
        "job.view.per_rank.caused_wait_ns_per_step[]",
        NS,
        LOWER,
        0.05,
        "caused waiting",
        "per rank: exposed waiting it causes the others per step",
    ),
    (
        "job.view.per_rank.last_arrivals[]",
        COUNT,
        NEITHER,
        0.02,
        "last arrivals",
        "per rank: matched collectives it arrived last to",
    ),
    (
        "job.view.per_rank.top_finding_ids[][]",
        TEXT,
        NEITHER,
        0,
        "top findings",
        "per rank: its top per-rank finding ids",
    ),
    # the intermittent straggler (jobs/intermittent.py, #25): its spike steps and the noise they are measured against
    (
        "job.straggler_intermittent",
        FLAG,
        NEITHER,
        0,
        "intermittent",
        "the straggler keeps the others waiting a lot in a few steps only: 1 to half the common steps are spike steps "
        "and their waits summed are above the rule's threshold share of the typical step (jobs/intermittent.py)",
    ),
    (
        "job.straggler_spike_steps[]",
        INDEX,
        NEITHER,
        0,
        "spike steps",
        "steps whose caused wait is at least half the typical step and more than 3 robust sd above the straggler's median "
        "per-step wait",
    ),
    ("job.straggler_spike_wait_ns[]", NS, LOWER, 0.05, "spike wait", "the caused wait in each spike step"),
    (
        "job.straggler_spike_share",
        SHARE,
        LOWER,
        0.1,
        "spike share",
        "the spike steps' waits summed / (common steps x typical step); null without a spike",
    ),
    (
        "job.straggler_others_wait_noise_ns",
        NS,
        NEITHER,
        0.05,
        "wait noise",
        "1.4826 x the median absolute deviation of the straggler's per-step caused wait (a robust sd)",
    ),
    (
        "job.straggler_typical_step_ns",
        NS,
        NEITHER,
        0.05,
        "typical step",
        "the median of every rank's step times over the common steps: the step without the spikes",
    ),
    *_PURPOSE_ENTRIES,
    *_PIPELINE_ENTRIES,
    *_OVERVIEW_ENTRIES,
    *_LINK_ENTRIES,
)

#: the pipeline stage straggler's cause evidence: the same fields as the straggler's (``jobs.straggler``)
ENTRIES = ENTRIES + tuple(
    (k.replace("job.straggler_cause_evidence.", "job.pipeline_straggler_cause_evidence."), u, b, t, label,
     d.replace("the straggler", "the slow pipeline stage"))
    for k, u, b, t, label, d in ENTRIES
    if k.startswith("job.straggler_cause_evidence.")
)  # fmt: skip
