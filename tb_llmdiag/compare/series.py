"""Reading a run report for comparison: values by registry key, and the per-step columns the noise model needs.

``per_step`` is the ONE place that knows where a run report keeps its per-step values (``docs/report_schema.md``);
if a metric topic moves them, only ``STEP_ROWS`` / ``PER_STEP_PATHS`` change. Reports of schema 2 hold one list of
step rows (``metrics.steps.per_step[].duration_ns``...); schema 1 held parallel lists (``metrics.steps.durations_ns``,
``metrics.idle.step_breakdown.busy_ns``...): both are read, so a committed baseline of either schema compares. ``value_at`` resolves a registry key
(``docs/metrics.md``: ``headline.*``, ``summary.*``, ``what_if.*`` are run-report sections, anything else is
``metrics.<topic>.*``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: the list of step rows (schema 2); a column is the rows' field of the same name
STEP_ROWS: tuple[str, ...] = ("metrics", "steps", "per_step")

#: schema 1: per-step column -> path of its list inside the run report (every list aligned with the steps)
PER_STEP_PATHS: dict[str, tuple[str, ...]] = {
    "duration_ns": ("metrics", "steps", "durations_ns"),
    "index": ("metrics", "steps", "indexes"),
    "tokens": ("metrics", "steps", "tokens"),
    "busy_ns": ("metrics", "idle", "step_breakdown", "busy_ns"),
    "host_wait_ns": ("metrics", "idle", "step_breakdown", "host_wait_ns"),
    "sync_ns": ("metrics", "idle", "step_breakdown", "sync_ns"),
    "data_loader_ns": ("metrics", "idle", "step_breakdown", "data_loader_ns"),
    "other_ns": ("metrics", "idle", "step_breakdown", "other_ns"),
}

#: run-report sections that registry keys name directly (the rest are metric topics)
SECTIONS = ("summary", "headline", "what_if")


def _walk(doc: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(part)
    return doc


def per_step(run: Mapping[str, Any], column: str) -> np.ndarray | None:
    """One per-step column of a run report as float64, or None when the report lacks it, it holds a
    non-number (a null busy time without device activity), or its length differs from the step count."""
    rows = _walk(run, STEP_ROWS)
    if isinstance(rows, list):
        values: Any = [r.get(column) if isinstance(r, Mapping) else None for r in rows]
        durations: Any = rows
    else:
        values = _walk(run, PER_STEP_PATHS[column])
        durations = _walk(run, PER_STEP_PATHS["duration_ns"])
    if not isinstance(values, list) or not isinstance(durations, list) or len(values) != len(durations):
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return None
    return np.asarray(values, dtype=np.float64)


def step_columns(run: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Every per-step column the run report has (``duration_ns`` first; empty without steps)."""
    out = {}
    for column in PER_STEP_PATHS:
        arr = per_step(run, column)
        if arr is not None:
            out[column] = arr
    return out if "duration_ns" in out else {}


def value_at(run: Mapping[str, Any], key: str) -> Any:
    """The value a registry key names in a run report (``headline.tokens_per_s``, ``steps.median_ns``,
    ``kernels.by_category.gemm.share``); None when absent or the topic is unavailable."""
    parts = tuple(key.split("."))
    if parts[0] in SECTIONS:
        return _walk(run, parts)
    return _walk(run, ("metrics", *parts))
