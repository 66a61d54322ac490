"""Reading a job for comparison: the report's ``jobs[]`` entry (``tb_llmdiag/jobs/report.py``) and its ranks' run
reports, as values by key and ranks x steps matrices. The ONE place that knows where a job entry keeps them.

- ``job_values``: every number a job row reads, by key: the registry's ``job.*`` keys (``jobs[].metrics``) and
  the keys the comparison derives (``table.DERIVED``: job tokens / s, tokens per job step, waiting share, load
  imbalance).
- ``job_matrices``: the heatmap's ranks x common steps matrices (``step_ns``, ``waiting_ns``, ``exposed_ns``,
  ``exposed_transfer_ns``) as float64 with NaN for unknown cells; a matrix the entry lacks (a
  report saved before it was added) is left out.
- ``rank_reports``: the run report of each rank of the job (matched by file name), in the job's rank order.

Definitions (docs/compare.md): the job step is the job analysis's (``job.job_step_ns``: the median across ranks
of each rank's mean step over the common steps); the job's tokens per step is the sum over ranks of each
rank's tokens per step (its run report's ``steps.tokens_per_step_median``), known only when every rank's run
report states it; job tokens / s = that sum / the job step (the noise band resamples the job step only).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tb_llmdiag.compare.series import value_at

MATRICES = ("step_ns", "waiting_ns", "exposed_ns", "exposed_transfer_ns")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) else None


def job_matrices(job: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The heatmap's matrices (ranks x common steps, NaN = unknown); empty without a view."""
    view = job.get("view") or {}
    heat = view.get("heatmap") if isinstance(view, Mapping) else None
    if not isinstance(heat, Mapping):
        return {}
    out = {}
    shape = None
    for name in MATRICES:
        m = heat.get(name)
        if not isinstance(m, list) or not all(isinstance(r, list) for r in m):
            continue
        try:
            arr = np.array([[np.nan if v is None else v for v in r] for r in m], dtype=np.float64)
        except (TypeError, ValueError):
            continue
        if arr.ndim != 2 or (shape is not None and arr.shape != shape):
            continue
        shape = arr.shape
        out[name] = arr
    return out if "step_ns" in out and out["step_ns"].size else {}


def rank_means(m: np.ndarray) -> np.ndarray:
    """Mean over steps per rank (NaN where a rank has no known step), as ``jobs.attribution.per_rank_mean``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        cnt = np.sum(~np.isnan(m), axis=-1)
        return np.where(cnt > 0, np.nansum(m, axis=-1) / np.maximum(cnt, 1), np.nan)


def job_ranks(job: Mapping[str, Any]) -> list[str]:
    """The job's ranks as names (``0``, ``1``... or the file name when a rank is unknown), heatmap row order."""
    view = job.get("view") or {}
    ranks = list(view.get("ranks") or []) if isinstance(view, Mapping) else []
    labels = list(view.get("labels") or []) if isinstance(view, Mapping) else []
    if len(ranks) == len(labels):
        return [str(r) for r in ranks]
    return [str(x) for x in labels]


def rank_reports(job: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any] | None]:
    """The run report of each job rank (heatmap row order), by the rank's file name; None when absent."""
    view = job.get("view") or {}
    labels = list(view.get("labels") or []) if isinstance(view, Mapping) else []
    by_name = {os.path.basename(str(r.get("path") or "")): r for r in runs}
    return [by_name.get(str(lab)) for lab in labels]


def tokens_per_job_step(ranks: Sequence[Mapping[str, Any] | None]) -> float | None:
    """Sum over ranks of their tokens per step (module docstring); None when a rank lacks it."""
    per = [_num(value_at(r, "steps.tokens_per_step_median")) if r is not None else None for r in ranks]
    if not per or any(p is None or p <= 0 for p in per):
        return None
    return float(sum(p for p in per if p is not None))


def job_values(job: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every value a job row reads, by key (module docstring)."""
    metrics = job.get("metrics") or {}
    out: dict[str, Any] = {f"job.{k}": v for k, v in metrics.items()} if isinstance(metrics, Mapping) else {}
    mats = job_matrices(job)
    step = _num(out.get("job.job_step_ns"))
    tokens = tokens_per_job_step(rank_reports(job, runs))
    out["job.tokens_per_step"] = tokens
    out["job.tokens_per_s"] = tokens * 1e9 / step if tokens is not None and step else None
    out["job.waiting_share"] = None
    out["job.imbalance_share"] = None
    if step and "waiting_ns" in mats:
        out["job.waiting_share"] = float(np.nanmedian(rank_means(mats["waiting_ns"]))) / step
    bars = (job.get("view") or {}).get("bars") if isinstance(job.get("view"), Mapping) else None
    compute = [_num(b.get("compute_ns")) for b in bars or [] if isinstance(b, Mapping)]
    if step and len(compute) >= 2 and all(c is not None for c in compute):
        known = [c for c in compute if c is not None]
        out["job.imbalance_share"] = (max(known) - min(known)) / step
    return out


def job_step_per_step(mats: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per common step: the median across ranks of the ranks' step times (what the overlay and the rank test use)."""
    m = mats.get("step_ns")
    if m is None or not m.size:
        return np.zeros(0)
    with np.errstate(invalid="ignore"):
        return np.nanmedian(m, axis=0)
