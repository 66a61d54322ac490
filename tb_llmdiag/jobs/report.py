"""The job section of a report: findings, metrics and what the job view draws, as one JSON-safe dict.

``job_report(summaries)`` = analyze_job -> job_metrics -> the findings engine over ``JOB_RULES``
(``findings/job.py``: ``job_findings``), plus:
- ``notes``: the analysis' notes, then a note for each finding a floor held back (``findings.job.held_back``).
- ``metrics`` (``job_metrics``): a flat JSON-safe dict (units in key names, null for unknowns, no NaN):
  - ``straggler_others_wait_share`` = the mean exposed waiting (waiting no compute hides) the straggler causes
    the other ranks per step / the median rank's step time (``jobs.cross_rank``). ``straggler_*`` keys are null
    when no rank is consistently the last to arrive.
  - ``exposed_transfer_share`` = the median across ranks of exposed transfer per step (collective time no
    compute hides, less its waiting part: ``JobTables.exposed_transfer_ns``) / the median rank's step time.
    ``waiting_known`` is false when no collective could be matched across ranks (one rank alone): then the
    waiting part is unknown and counted as transfer.
  - ``exposed_share`` likewise with waiting left in; ``overlap_share`` = 1 - exposed / collective (median rank).
  - What-ifs are upper bounds: removing the straggler's delay (``jobs.straggler.what_if``), or hiding all
    exposed transfer behind compute (step - exposed transfer).
  - What the straggler's floors read (``findings/job.py``): ``straggler_last_step_share``,
    ``straggler_others_wait_low_share``, ``straggler_others_wait_beyond_profiler_share``, and
    ``straggler_significance``, the engine's ``verdict`` on the rule.
  - The profiler's own cost per rank (#25): ``profiler_overhead_ns_by_rank`` (each rank's
    ``capture.profiler_overhead_ns``, following ``ranks``; null where not estimated);
    ``straggler_profiler_excess_ns_per_step`` = the straggler's minus the median of the other ranks' (null when
    either is unknown): how much later the profiler alone can make it arrive each step;
    ``straggler_profiler_basis`` = ``unprofiled_steps`` (every rank measured against the unprofiled steps its capture
    helper timed), ``model`` (every rank modelled from what it recorded) or ``mixed``;
    ``straggler_others_wait_beyond_profiler_ns_per_step`` = max(0, the wait's 95 % lower bound - max(0, that
    excess)): the wait the capture supports beyond the profiler's extra cost on the straggler (the lower bound
    itself when the excess is unknown; the mean wait in place of the bound with one common step), and its
    ``_share`` of the job step.
- ``heatmap``: ranks x common steps, ``step_ns`` and ``waiting_ns`` (exposed waiting: the rank's collective
  time spent waiting for a peer that no compute hides), ``exposed_ns`` (collective time no compute hides),
  ``exposed_transfer_ns`` (its part that is not waiting; what ``llmdiag compare`` resamples
  for a job's noise bands).
- ``bars``: per rank, the mean step split into parts that sum to the step: ``compute_ns`` (busy compute
  kernels), ``exposed_transfer_ns``, ``waiting_ns`` (exposed waiting), ``idle_ns`` (no device activity) and
  ``other_ns`` (device busy with memcpy/memset only).
- ``per_rank``: caused waiting per step, how often it arrived last, its top per-rank finding ids.
- ``percentiles``, ``notable``, ``outliers``: the job at a glance, for many ranks (``jobs/overview.py``).
Null stands for unknown (a rank without a common step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tb_llmdiag.findings.engine import Metrics, job_findings_of, rank, verdict
from tb_llmdiag.findings.job import JOB_RULES, STRAGGLER_RULE, held_back
from tb_llmdiag.jobs.cross_rank import JobAnalysis, analyze_job
from tb_llmdiag.jobs.intermittent import ENTRIES as INTERMITTENT_ENTRIES
from tb_llmdiag.jobs.intermittent import spikes
from tb_llmdiag.jobs.overview import ENTRIES as OVERVIEW_ENTRIES
from tb_llmdiag.jobs.overview import overview
from tb_llmdiag.jobs.pipeline import CAUSE_EVIDENCE_ENTRIES as PIPELINE_CAUSE_EVIDENCE_ENTRIES
from tb_llmdiag.jobs.pipeline import ENTRIES as PIPELINE_ENTRIES
from tb_llmdiag.jobs.purposes import ENTRIES as PURPOSE_ENTRIES
from tb_llmdiag.jobs.purposes import LINK_ENTRIES, link_metrics
from tb_llmdiag.jobs.rank_summary import RankSummary
from tb_llmdiag.jobs.straggler import ENTRIES as STRAGGLER_ENTRIES
from tb_llmdiag.jobs.straggler import WHAT_IF_WORDS, per_rank_mean
from tb_llmdiag.jsonsafe import json_array, json_object
from tb_llmdiag.metrics.comm.collectives import KINDS
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
    SHARE,
    TEXT,
    Entry,
    Intro,
)

JOB_REPORT_SCHEMA = 1


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
    out.update(_purpose_metrics(a))
    out.update(_pipeline_metrics(a))
    out.update(_floor_metrics(a))
    low = out["straggler_others_wait_low_ns_per_step"]
    out.update(_profiler_metrics(a, low if low is not None else out["straggler_others_wait_ns_per_step"]))
    out.update(_spike_metrics(a))
    out["straggler_significance"] = verdict(STRAGGLER_RULE, out) if s is not None else None
    return json_object(out)


def _purpose_metrics(a: JobAnalysis) -> dict[str, Any]:
    """Communication by purpose over the ranks (``jobs.purposes``) and the leading one."""
    top = a.purposes[0] if a.purposes else None
    return {
        "purposes": a.purposes,
        "top_purpose": top["purpose"] if top else None,
        "top_purpose_exposed_share": top["exposed_share"] if top else None,
        **link_metrics(a.purposes, a.device_name),
    }


_PIPELINE_KEYS = (
    "stage_count",
    "micro_batches",
    "bubble_share",
    "bubble_expected_share",
    "bubble_at_4m_share",
    "stage_ranks",
    "stage_wait_shares",
    "stage_own_ns",
    "host_bound_stages",
    "straggler_stage_rank",
    "straggler_own_ns",
    "others_own_ns",
    "straggler_own_ratio",
)


def _pipeline_metrics(a: JobAnalysis) -> dict[str, Any]:
    """The pipeline's figures (``jobs.pipeline``) as ``pipeline_*`` keys; null without send/recv."""
    p, step = a.pipeline or {}, a.job_step_ns
    out: dict[str, Any] = {f"pipeline_{k}": p.get(k) for k in _PIPELINE_KEYS}
    bubble, at4m = p.get("bubble_share"), p.get("bubble_at_4m_share")
    out["pipeline_bubble_saving_share"] = max(bubble - at4m, 0.0) if bubble is not None and at4m is not None else None
    bal = p.get("balance_saving_ns")
    out["pipeline_balance_saving_share"] = bal / step if bal is not None and step > 0 else None
    attr = a.pipeline_attribution or {}
    out["pipeline_straggler_cause"] = attr.get("cause")
    out["pipeline_straggler_cause_evidence"] = attr.get("evidence")
    return out


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


def _profiler_metrics(a: JobAnalysis, low_ns: float | None) -> dict[str, Any]:
    """The profiler's own cost per rank and what the straggler's wait (``low_ns``: its 95 % lower bound, else its
    mean) is beyond it (module docstring)."""
    p, s, step = a.profiler_overhead_ns, a.straggler_pos, a.job_step_ns
    by_rank = [float(x) if np.isfinite(x) else None for x in p] if p.size == len(a.ranks) else [None] * len(a.ranks)
    excess, basis = None, None
    mine = by_rank[s] if s is not None and by_rank else None
    if s is not None and mine is not None:
        others = np.delete(p, s)
        if np.isfinite(others).any():
            excess = mine - float(np.nanmedian(others))
            known = {a.overhead_basis[i] for i in range(len(by_rank)) if by_rank[i] is not None}
            basis = known.pop() if len(known) == 1 else "mixed"
    beyond = max(low_ns - max(excess or 0.0, 0.0), 0.0) if low_ns is not None else None
    return {
        "profiler_overhead_ns_by_rank": by_rank,
        "straggler_profiler_excess_ns_per_step": excess,
        "straggler_profiler_basis": basis,
        "straggler_others_wait_beyond_profiler_ns_per_step": beyond,
        "straggler_others_wait_beyond_profiler_share": beyond / step if beyond is not None and step > 0 else None,
    }


def _spike_metrics(a: JobAnalysis) -> dict[str, Any]:
    """The straggler's spike steps (``jobs/intermittent.py``): an intermittent straggler; null without a straggler."""
    s = a.straggler_pos
    if s is None or a.caused_wait_by_step_ns.size == 0:
        sp = spikes(np.zeros(0), np.zeros(0), a.steps, STRAGGLER_RULE.above or 0.0)
    else:
        sp = spikes(a.caused_wait_by_step_ns[s], a.tables.step_ns, a.steps, STRAGGLER_RULE.above or 0.0)
    return {
        "straggler_intermittent": sp["intermittent"] if s is not None else None,
        "straggler_spike_steps": sp["spike_steps"],
        "straggler_spike_wait_ns": sp["spike_wait_ns"],
        "straggler_spike_share": sp["spike_share"],
        "straggler_others_wait_noise_ns": sp["noise_ns"],
        "straggler_typical_step_ns": sp["typical_step_ns"],
    }


def job_findings(metrics: Metrics) -> list[dict[str, Any]]:
    """The job rules that fire (``findings/job.py``), largest share of the job step first."""
    return json_array(rank(job_findings_of(metrics, JOB_RULES)))


def _bars(a: JobAnalysis) -> list[dict[str, Any]]:
    t = a.tables
    step = per_rank_mean(t.step_ns)
    parts = {
        "compute_ns": per_rank_mean(t.compute_ns),
        "exposed_transfer_ns": per_rank_mean(t.exposed_transfer_ns),
        "waiting_ns": per_rank_mean(t.exposed_waiting_ns),
        "idle_ns": per_rank_mean(t.idle_ns),
    }
    other = np.maximum(step - sum(parts.values()), 0.0)
    return [
        {"rank": r, "step_ns": step[i], **{k: v[i] for k, v in parts.items()}, "other_ns": other[i]}
        for i, r in enumerate(a.ranks)
    ]


def job_view(a: JobAnalysis) -> dict[str, Any]:
    """What the job view draws (see the module docstring), JSON-safe."""
    t = a.tables
    straggler = a.ranks[a.straggler_pos] if a.straggler_pos is not None else None
    return json_object(
        {
            "ranks": list(a.ranks),
            "labels": list(a.labels),
            "steps": a.steps.tolist(),
            "heatmap": {
                "step_ns": t.step_ns,
                "waiting_ns": t.exposed_waiting_ns,
                "exposed_ns": t.exposed_ns,
                "exposed_transfer_ns": t.exposed_transfer_ns,
            },
            "bars": _bars(a),
            "per_rank": {
                "caused_wait_ns_per_step": a.caused_wait_ns,
                "last_arrivals": a.last_count,
                "top_finding_ids": [list(x) for x in a.top_finding_ids],
            },
            **overview(t, a.ranks, straggler),
        }
    )


def job_report(summaries: Sequence[RankSummary]) -> dict[str, Any]:
    """The job section: ``{"schema", "notes", "metrics", "findings", "view"}`` (JSON-safe, no NaN)."""
    a = analyze_job(summaries)
    metrics = job_metrics(a)
    return {
        "schema": JOB_REPORT_SCHEMA,
        "notes": list(a.notes) + held_back(metrics),
        "metrics": metrics,
        "findings": job_findings(metrics),
        "view": job_view(a),
    }


# The registry's entries of the job level (``jobs[]`` of the report as ``job.*``; docs/jobs.md): the job's metrics as
# ``job_metrics`` assembles them, the job section's own keys and the view it draws; one row per key
# (metrics/entry.py). ``JOB_ENTRIES`` collects them with those of the modules that compute the rest, in registry
# order (docs/metrics.md's `job` section); the whole registry (tb_llmdiag/registry.py) reads it
#: docs/metrics.md: the section's title and the prose before its table
JOB_INTRO: Intro = (
    "`job`: a run with several ranks (`jobs[]` of the report; tb_llmdiag/jobs/, docs/jobs.md)",
    "`job.*` is `jobs[].metrics.*`; `job.view.*` is `jobs[].view.*`, what the tab's job view draws. Ranks are "
    "matched by their collectives, never by timestamps across files (clocks may differ).",
)

_METRIC_ENTRIES: tuple[Entry, ...] = (
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
        "job_step_ns - exposed_transfer_ns_per_step: all exposed transfer hidden behind compute; " + WHAT_IF_WORDS,
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
)

#: the job section's own keys (its schema, the ``jobs[]`` entry's files: ``jobs/build.py``, its findings) and the view
_VIEW_ENTRIES: tuple[Entry, ...] = (
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
    (
        "job.findings[].what_if.step_after_ns",
        NS,
        NEITHER,
        0.05,
        "step after",
        "the step after the fix; " + WHAT_IF_WORDS,
    ),
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
)

#: the job level in registry order
JOB_ENTRIES: tuple[Entry, ...] = (
    *_METRIC_ENTRIES,
    *STRAGGLER_ENTRIES,
    *_VIEW_ENTRIES,
    *INTERMITTENT_ENTRIES,
    *PURPOSE_ENTRIES,
    *PIPELINE_ENTRIES,
    *OVERVIEW_ENTRIES,
    *LINK_ENTRIES,
    *PIPELINE_CAUSE_EVIDENCE_ENTRIES,
)
