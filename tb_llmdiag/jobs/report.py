"""The job section of a report: findings, metrics and what the job view draws, as one JSON-safe dict.

``job_report(summaries)`` = analyze_job -> job_metrics -> evaluate, plus:
- ``notes``: the analysis' notes, then a note for each finding a floor held back (``findings.held_back``).
- ``heatmap``: ranks x common steps, ``step_ns`` and ``waiting_ns`` (exposed waiting: the rank's collective
  time spent waiting for a peer that no compute hides), ``exposed_ns`` (collective time no compute hides),
  ``exposed_transfer_ns`` (its part that is not waiting; what ``llmdiag compare`` resamples
  for a job's noise bands).
- ``bars``: per rank, the mean step split into parts that sum to the step: ``compute_ns`` (busy compute
  kernels), ``exposed_transfer_ns``, ``waiting_ns`` (exposed waiting), ``idle_ns`` (no device activity) and
  ``other_ns`` (device busy with memcpy/memset only).
- ``per_rank``: caused waiting per step, how often it arrived last, its top per-rank finding ids.
Null stands for unknown (a rank without a common step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tb_llmdiag.jobs.analysis import JobAnalysis, analyze_job
from tb_llmdiag.jobs.attribution import per_rank_mean
from tb_llmdiag.jobs.findings import evaluate, held_back, job_metrics
from tb_llmdiag.jobs.summary import RankSummary
from tb_llmdiag.jsonsafe import jsonable

JOB_REPORT_SCHEMA = 1


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
    return jsonable(
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
        "findings": evaluate(metrics),
        "view": job_view(a),
    }
