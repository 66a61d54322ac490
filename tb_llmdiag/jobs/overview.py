"""A job of many ranks at a glance: per-step percentiles across ranks, the notable ranks and the outliers.

What the job view draws past a handful of ranks and what the CLI prints instead of every rank's report (#33):
- ``percentiles``: for ``step_ns``, ``waiting_ns`` (exposed waiting) and ``exposed_ns``, per common step, the
  ``p50``, ``p90`` and ``max`` across the ranks that have that step (numpy's linear percentile; null for a step
  no rank has).
- ``notable``: ``straggler_rank`` (the job's straggler, null without one), ``slowest_rank`` and ``fastest_rank``
  (the largest and smallest mean step over the common steps; ties: the lowest rank), ``typical_rank`` (the mean
  step nearest the median rank's; ties: the lowest rank); null without a rank with a common step.
- ``outliers``: the ranks whose mean step lies outside the median +- ``band`` (``band`` = max(3 robust sd, 2 %
  of the median), robust sd = 1.4826 x the median absolute deviation across ranks): ``slow step`` / ``fast
  step``; whose mean exposed waiting is above its median + max(3 robust sd, 2 % of the median step): ``waits
  long``; and the straggler: ``straggler``. Each ``{"rank", "step_ns", "step_vs_median_ratio", "reasons"}``;
  the straggler first, then by distance from the median step in bands, largest first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.jobs.straggler import JobTables, per_rank_mean
from tb_llmdiag.metrics.entry import ID, LOWER, NEITHER, NS, RATIO, TEXT, Entry

F64 = NDArray[np.float64]

#: the robust sd's factor on the median absolute deviation (the normal's), the band in robust sds, its floor
ROBUST_SD = 1.4826
BAND_SDS = 3.0
BAND_FLOOR_SHARE = 0.02


def percentiles(grid: F64) -> dict[str, list[float | None]]:
    """Per column (common step) of a ranks x steps matrix: p50, p90 and max over its known (non-NaN) values."""
    out: dict[str, list[float | None]] = {"p50": [], "p90": [], "max": []}
    for col in grid.T if grid.ndim == 2 else ():
        known = col[np.isfinite(col)]
        for name, q in (("p50", 50.0), ("p90", 90.0), ("max", 100.0)):
            out[name].append(float(np.percentile(known, q)) if known.size else None)
    return out


def _pick(values: F64, ranks: tuple[int, ...], order: F64) -> int | None:
    """The rank with the smallest ``order`` among the ranks with a known value (ties: the lowest rank)."""
    known = np.flatnonzero(np.isfinite(values))
    if not known.size:
        return None
    best = known[np.lexsort((np.array([ranks[i] for i in known]), order[known]))[0]]
    return int(ranks[best])


def notable(step: F64, ranks: tuple[int, ...], straggler: int | None) -> dict[str, int | None]:
    """The straggler, slowest, fastest and typical rank (module docstring)."""
    med = float(np.nanmedian(step)) if np.isfinite(step).any() else np.nan
    return {
        "straggler_rank": straggler,
        "slowest_rank": _pick(step, ranks, -step),
        "fastest_rank": _pick(step, ranks, step),
        "typical_rank": _pick(step, ranks, np.abs(step - med)),
    }


def _band(values: F64, floor: float) -> tuple[float, float]:
    """(median, band) of the known values: band = max(BAND_SDS robust sd, floor)."""
    med = float(np.nanmedian(values))
    mad = float(np.nanmedian(np.abs(values - med)))
    return med, max(BAND_SDS * ROBUST_SD * mad, floor)


def outliers(t: JobTables, ranks: tuple[int, ...], straggler: int | None) -> list[dict[str, Any]]:
    """The outlier ranks (module docstring)."""
    step, wait = per_rank_mean(t.step_ns), per_rank_mean(t.exposed_waiting_ns)
    if not np.isfinite(step).any():
        return []
    med, band = _band(step, BAND_FLOOR_SHARE * float(np.nanmedian(step)))
    wmed, wband = _band(wait, BAND_FLOOR_SHARE * med) if np.isfinite(wait).any() else (np.nan, np.inf)
    rows = []
    for i, r in enumerate(ranks):
        reasons = ["straggler"] if r == straggler else []
        if step[i] > med + band:
            reasons.append("slow step")
        elif step[i] < med - band:
            reasons.append("fast step")
        if wait[i] > wmed + wband:
            reasons.append("waits long")
        if reasons:
            dist = abs(step[i] - med) / band if band > 0 and np.isfinite(step[i]) else 0.0
            rows.append((r != straggler, -dist, r, i, reasons))
    rows.sort()
    return [
        {
            "rank": r,
            "step_ns": float(step[i]) if np.isfinite(step[i]) else None,
            "step_vs_median_ratio": float(step[i] / med) if np.isfinite(step[i]) and med > 0 else None,
            "reasons": reasons,
        }
        for _, _, r, i, reasons in rows
    ]


def overview(t: JobTables, ranks: tuple[int, ...], straggler: int | None) -> dict[str, Any]:
    """``{"percentiles", "notable", "outliers"}`` of a job (module docstring)."""
    return {
        "percentiles": {
            k: percentiles(getattr(t, attr))
            for k, attr in (("step_ns", "step_ns"), ("waiting_ns", "exposed_waiting_ns"), ("exposed_ns", "exposed_ns"))
        },
        "notable": notable(per_rank_mean(t.step_ns), ranks, straggler),
        "outliers": outliers(t, ranks, straggler),
    }


# The registry's entries of the job at a glance (``overview``): one row per key (metrics/entry.py); jobs/report.py
# collects the job level's in registry order (``JOB_ENTRIES``)
_OV = "the job at a glance (`jobs/overview.py`)"
_PCT = {"p50": "the median", "p90": "the 90th percentile", "max": "the largest"}
_PCT_OF = {"step_ns": "step time", "waiting_ns": "exposed waiting", "exposed_ns": "exposed collective time"}
ENTRIES: tuple[Entry, ...] = (
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
