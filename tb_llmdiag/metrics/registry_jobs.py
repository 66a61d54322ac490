"""Registry entries of the report's job sections (``report.jobs[]``: ``scale.reduce`` around
``jobs.report.job_report``; definitions in docs/jobs.md). Each job metric is registered where it is held
(``metrics``) and where a job finding repeats it (``findings[].evidence``)."""

from __future__ import annotations

from tb_llmdiag.metrics.registry_data import (
    AS_METRIC, BYTES, COUNT, HIGHER, ID, INDEX, LOWER, NEITHER, NS, PER_S, PER_STEP, SHARE, Entry)

J = "report.jobs[]"

#: (key relative to the job metrics, unit, better, tolerance, label, definition)
_JOB: tuple[Entry, ...] = (
    ("rank_count", COUNT, NEITHER, 0, "ranks", "ranks analysed together (one per rank; duplicates left out)"),
    ("ranks[]", ID, NEITHER, 0, "rank", "a rank of the job, in order"),
    ("common_step_count", COUNT, NEITHER, 0, "common steps", "steps every rank profiled"),
    ("job_step_ns", NS, LOWER, 0.05, "job step", "the median rank's mean step time"),
    ("matched_collective_count", COUNT, NEITHER, 0.02, "matched collectives", "collectives matched across ranks"),
    ("exposed_transfer_ns_per_step", NS, LOWER, 0.1, "exposed transfer",
     "median rank's collective transfer per step that no compute hides (waiting excluded)"),
    ("exposed_share", SHARE, LOWER, 0.1, "exposed communication share",
     "median rank's exposed collective time (waiting included) / job step"),
    ("exposed_transfer_share", SHARE, LOWER, 0.1, "exposed transfer share", "exposed_transfer_ns_per_step / job step"),
    ("overlap_share", SHARE, HIGHER, 0.1, "overlap share", "1 - exposed / collective time (median rank)"),
    ("collective_by_kind[].count", COUNT, NEITHER, 0.02, "collectives", "matched collectives of this kind"),
    ("collective_by_kind[].transfer_ns", NS, LOWER, 0.1, "transfer", "transfer time of this kind's collectives"),
    ("collective_by_kind[].bytes", BYTES, NEITHER, 0.02, "bytes", "payload the NCCL args give; null when unknown"),
    ("collective_by_kind[].busbw_bytes_per_s", PER_S, HIGHER, 0.1, "bus bandwidth",
     "achieved bus bandwidth in bytes/s (nccl-tests factor); null without byte counts"),
    ("exposed_what_if.step_ns", NS, LOWER, 0.05, "step", "the job step the what-if starts from"),
    ("exposed_what_if.step_after_ns", NS, LOWER, 0.05, "step after",
     "upper bound: the job step with all exposed transfer hidden behind compute"),
    ("straggler_rank", ID, NEITHER, 0, "straggler", "the rank the others wait for, consistently; null when none"),
    ("straggler_others_wait_ns_per_step", NS, LOWER, 0.1, "others wait",
     "exposed waiting the straggler causes the other ranks per step"),
    ("straggler_others_wait_share", SHARE, LOWER, 0.1, "others wait share",
     "straggler_others_wait_ns_per_step / job step"),
    ("straggler_consistency_share", SHARE, NEITHER, 0.1, "consistency",
     "share of matched collectives the straggler arrived last at"),
    ("straggler_last_arrivals", COUNT, NEITHER, 0.1, "last arrivals", "collectives the straggler arrived last at"),
    ("straggler_cause_evidence.straggler_ns_per_step", NS, NEITHER, 0.1, "straggler",
     "the straggler's mean per step of the quantity that differs most (its `quantity`)"),
    ("straggler_cause_evidence.median_rank_ns_per_step", NS, NEITHER, 0.1, "median rank",
     "the same quantity for the median of the other ranks"),
    ("straggler_cause_evidence.difference_ns_per_step", NS, LOWER, 0.1, "difference", "straggler - median rank"),
    ("straggler_tokens.straggler_tokens_per_step", PER_STEP, NEITHER, 0.05, "straggler tokens",
     "the straggler's tokens per step"),
    ("straggler_tokens.median_rank_tokens_per_step", PER_STEP, NEITHER, 0.05, "median rank tokens",
     "tokens per step of the median other rank"),
    ("straggler_tokens.excess_share", SHARE, LOWER, 0.1, "token excess",
     "(straggler tokens - median) / median: 1.0 is twice the tokens"),
    ("straggler_what_if.step_ns", NS, LOWER, 0.05, "step", "the job step the what-if starts from"),
    ("straggler_what_if.step_after_ns", NS, LOWER, 0.05, "step after",
     "upper bound: the job step if the straggler caused no waiting"),
    ("straggler_what_if.saving_ns", NS, HIGHER, 0.1, "saving", "step_ns - step_after_ns"),
    ("straggler_what_if.saving_share", SHARE, HIGHER, 0.1, "saving share", "saving_ns / step_ns"),
)

_OWN: tuple[Entry, ...] = (
    (f"{J}.schema", ID, NEITHER, 0, "job schema", "version of the job section (jobs.report.JOB_REPORT_SCHEMA)"),
    (f"{J}.ranks_total", COUNT, NEITHER, 0, "trace files", "trace files of the job, readable or not"),
    (f"{J}.errors[].rank", ID, NEITHER, 0, "rank", "the rank of a trace that could not be read; null when unknown"),
    (f"{J}.findings[].value", AS_METRIC, NEITHER, 0, "value", "the job metric the finding compares"),
    (f"{J}.findings[].threshold", AS_METRIC, NEITHER, 0, "threshold", "the rule's threshold"),
    (f"{J}.findings[].what_if.step_ns", NS, LOWER, 0.05, "step", "the job step the what-if starts from"),
    (f"{J}.findings[].what_if.step_after_ns", NS, LOWER, 0.05, "step after", "upper bound of the step after the fix"),
    (f"{J}.findings[].what_if.saving_ns", NS, HIGHER, 0.1, "saving", "step_ns - step_after_ns"),
    (f"{J}.findings[].what_if.saving_share", SHARE, HIGHER, 0.1, "saving share", "saving_ns / step_ns"),
    (f"{J}.view.ranks[]", ID, NEITHER, 0, "rank", "the job view's rows"),
    (f"{J}.view.steps[]", INDEX, NEITHER, 0, "step", "the job view's columns: the common steps"),
    (f"{J}.view.heatmap.step_ns[][]", NS, LOWER, 0.05, "step", "step time per rank (row) and step (column)"),
    (f"{J}.view.heatmap.waiting_ns[][]", NS, LOWER, 0.1, "waiting",
     "exposed waiting per rank and step (collective time waiting for a peer, no compute hiding it)"),
    (f"{J}.view.bars[].rank", ID, NEITHER, 0, "rank", "the bar's rank"),
    (f"{J}.view.bars[].step_ns", NS, LOWER, 0.05, "step", "the rank's mean step"),
    (f"{J}.view.bars[].compute_ns", NS, NEITHER, 0.05, "compute", "mean busy compute per step"),
    (f"{J}.view.bars[].exposed_transfer_ns", NS, LOWER, 0.1, "exposed transfer", "mean exposed transfer per step"),
    (f"{J}.view.bars[].waiting_ns", NS, LOWER, 0.1, "waiting", "mean exposed waiting per step"),
    (f"{J}.view.bars[].idle_ns", NS, LOWER, 0.1, "idle", "mean time per step with no device activity"),
    (f"{J}.view.bars[].other_ns", NS, NEITHER, 0.1, "other", "the rest of the step: device busy with copies only"),
    (f"{J}.view.per_rank.caused_wait_ns_per_step[]", NS, LOWER, 0.1, "caused waiting",
     "exposed waiting each rank causes the others per step"),
    (f"{J}.view.per_rank.last_arrivals[]", COUNT, NEITHER, 0.1, "last arrivals", "collectives each rank arrived last at"),
)


def _at(prefix: str, e: Entry) -> Entry:
    return (f"{prefix}.{e[0]}", *e[1:])  # type: ignore[return-value]


JOB_METRICS: tuple[Entry, ...] = (*(_at(f"{J}.metrics", e) for e in _JOB),
                                  *(_at(f"{J}.findings[].evidence", e) for e in _JOB), *_OWN)
