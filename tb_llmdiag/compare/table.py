"""The metric table of a comparison: the registry's numbers for two runs, the change, and whether it is beyond
the metric's tolerance and beyond step-to-step noise.

``ROWS`` is the declared table (registry keys, in display order); ``STATISTICS`` the per-step statistics the
noise model resamples (``stats.py``). A row whose value is absent on both sides is left out; a ``*`` key expands
to the map's entries (categories under 1 % of device time on both sides are left out).

Work normalisation: when both runs know their tokens per step (``steps.tokens_per_step_median``) and they differ
by more than that metric's tolerance, rows marked ``same_work`` (the step time) are shown but not judged
(``comparable: false``): a step that does more work is not a slower step. Tokens / s and time per token are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_llmdiag.compare import stats
from tb_llmdiag.compare.series import value_at
from tb_llmdiag.metrics import registry
from tb_llmdiag.metrics.registry import Metric

Columns = Mapping[str, np.ndarray]

#: numbers the comparison derives that no single report holds (documented in docs/compare.md)
DERIVED: dict[str, Metric] = {
    "work.ns_per_token": Metric(
        "work.ns_per_token",
        "ns",
        "lower",
        0.05,
        "time per token",
        "sum of step durations / sum of tokens per step (1e9 / tokens_per_s)",
    ),
    "job.tokens_per_s": Metric(
        "job.tokens_per_s",
        "per_s",
        "higher",
        0.05,
        "job tokens/s",
        "job tokens per step / job.job_step_ns (all ranks' tokens)",
    ),
    "job.tokens_per_step": Metric(
        "job.tokens_per_step",
        "count_per_step",
        "neither",
        0.05,
        "job tokens per step",
        "sum over ranks of each rank's mean token slots per common step",
    ),
    "job.waiting_share": Metric(
        "job.waiting_share",
        "share",
        "lower",
        0.1,
        "waiting share",
        "median across ranks of exposed waiting per step (for a late peer) / job.job_step_ns",
    ),
    "job.imbalance_share": Metric(
        "job.imbalance_share",
        "share",
        "lower",
        0.1,
        "compute imbalance",
        "(largest - smallest rank's mean compute per step) / job.job_step_ns",
    ),
}

#: shares must also move by this much of the whole (1 percentage point) to count as beyond tolerance
SHARE_FLOOR = 0.01
#: keys whose change must also exceed an absolute amount: a coefficient of variation going 0.01 -> 0.02 is
#: +100 % but still a steady step
KEY_FLOORS: dict[str, float] = {"headline.step_cv": 0.05, "steps.cv": 0.05}
#: units of numbers that count things: the same configuration gives the same count, so one value per run is
#: judged on its tolerance alone
EXACT_UNITS = ("count", "count_per_step", "bytes")
#: categories below this share of device time on both sides are left out of the table
CATEGORY_MIN_SHARE = 0.01


def _take(cols: Columns, name: str, idx: np.ndarray) -> np.ndarray:
    return cols[name][idx]


def _ratio_of_sums(num: str, den: str, scale: float = 1.0) -> Callable[[Columns, np.ndarray], np.ndarray]:
    def stat(cols: Columns, idx: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return scale * _take(cols, num, idx).sum(axis=1) / _take(cols, den, idx).sum(axis=1)

    return stat


def _median_duration(cols: Columns, idx: np.ndarray) -> np.ndarray:
    return np.median(_take(cols, "duration_ns", idx), axis=1)


def _cv_duration(cols: Columns, idx: np.ndarray) -> np.ndarray:
    d = _take(cols, "duration_ns", idx)
    with np.errstate(divide="ignore", invalid="ignore"):
        return d.std(axis=1) / d.mean(axis=1)


def _per_step_ratio(num: str, den: str, scale: float = 1.0) -> Callable[[Columns], np.ndarray]:
    def values(cols: Columns) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return scale * cols[num] / cols[den]

    return values


@dataclass(frozen=True)
class Statistic:
    """How a row is computed from per-step columns: on resample index rows (``fn``), the per-step values the
    rank test compares (``values``; None when the statistic has none, like the cv), and the columns it needs."""

    fn: stats.Statistic
    values: Callable[[Columns], np.ndarray] | None
    needs: tuple[str, ...]
    definition: str


STATISTICS: dict[str, Statistic] = {
    "median_duration": Statistic(
        _median_duration, lambda c: c["duration_ns"], ("duration_ns",), "median of the step durations"
    ),
    "cv_duration": Statistic(_cv_duration, None, ("duration_ns",), "std / mean of the step durations"),
    "tokens_per_s": Statistic(
        _ratio_of_sums("tokens", "duration_ns", 1e9),
        _per_step_ratio("tokens", "duration_ns", 1e9),
        ("tokens", "duration_ns"),
        "sum of tokens / sum of step durations",
    ),
    "ns_per_token": Statistic(
        _ratio_of_sums("duration_ns", "tokens"),
        _per_step_ratio("duration_ns", "tokens"),
        ("tokens", "duration_ns"),
        "sum of step durations / sum of tokens",
    ),
    **{
        f"{c}_share": Statistic(
            _ratio_of_sums(f"{c}_ns", "duration_ns"),
            _per_step_ratio(f"{c}_ns", "duration_ns"),
            (f"{c}_ns", "duration_ns"),
            f"sum of per-step {c} time / sum of step durations",
        )
        for c in ("busy", "host_wait", "sync", "data_loader")
    },
}


@dataclass(frozen=True)
class Row:
    key: str  # registry key (or DERIVED)
    stat: str | None = None  # STATISTICS name; None: one value per run, no noise model
    same_work: bool = False  # only judged when both runs do the same work per step
    gate: bool = True  # `check` may fail on it (False: shown for reading; see ROWS)


#: Not gated: time per token (tokens/s again, inverted) and the step cv: the spread of a handful of steps is itself
#: too noisy to gate on (noise_a / noise_b, one configuration captured twice: cv 0.023 and 0.086). Rows with one
#: value per run are gated only when the number is a count (``EXACT_UNITS``): a time-based number without
#: per-step values (MFU, data-loader stall share, copy share of device time) cannot tell a regression from
#: noise (the stall share went 4.6 % -> 6.5 % between the two noise-only captures), and tokens/s, the step
#: time and GPU busy, which have noise bands, carry the gate for them. The idle shares (host wait, sync, data
#: loader) have noise bands but are not gated either: they split the same step time that tokens/s and the step
#: median gate, so gating them again counts one regression twice and turns run-to-run drift into more failures
#: (pageable vs noise_a, one configuration captured twice: host wait share 32.8 % -> 38.9 %). The counts that
#: name a cause (syncs, pageable copies per step) are gated.
ROWS: tuple[Row, ...] = (
    Row("headline.tokens_per_s", "tokens_per_s"),
    Row("work.ns_per_token", "ns_per_token", gate=False),
    Row("steps.tokens_per_step_median"),
    Row("headline.step_median_ns", "median_duration", same_work=True),
    Row("headline.step_cv", "cv_duration", gate=False),
    Row("headline.mfu_share"),
    Row("headline.gpu_busy_share", "busy_share"),
    Row("idle.host_wait_share", "host_wait_share", gate=False),
    Row("idle.sync_share", "sync_share", gate=False),
    Row("idle.data_loader_share", "data_loader_share", gate=False),
    Row("dataloader.stall_share"),
    Row("headline.launches_per_step"),
    Row("host_sync.syncs_per_step"),
    Row("memcpy.htod_pageable_per_step"),
    Row("headline.copy_share"),
    Row("kernels.by_category.*.share"),
    Row("xla.communication_share"),
    Row("xla.collective_share"),  # its name before the metric topics' step-list change
    Row("memory.peak_used_bytes"),
)


def entry(key: str) -> Metric | None:
    """The registry (or DERIVED) entry of a table key; None when the registry does not name it (a row kept
    for a key's older or newer name)."""
    return DERIVED.get(key) or registry.metric(key)


def lookup(key: str) -> Metric:
    """``entry`` of a key the table shows (rows without one are left out before this is asked)."""
    found = entry(key)
    if found is None:
        raise KeyError(f"{key} has no metric registry entry")
    return found


def gated(row: Row, m: Metric) -> bool:
    """Whether ``check`` may fail on the row: a direction, not switched off, and a noise band or a count."""
    return row.gate and m.better != "neither" and (row.stat is not None or m.unit in EXACT_UNITS)


def derived_value(run: Mapping[str, Any], key: str) -> Any:
    if key == "work.ns_per_token":
        tps = value_at(run, "headline.tokens_per_s")
        return 1e9 / tps if isinstance(tps, (int, float)) and tps > 0 else None
    return value_at(run, key)


def expand(row: Row, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Row]:
    """A ``*`` row as one row per map key present on either side (largest first); other rows as they are."""
    if "*" not in row.key:
        return [row] if entry(row.key) is not None else []
    head, tail = row.key.split(".*.", 1)
    found: dict[str, float] = {}
    for run in (before, after):
        entries = value_at(run, head)
        if isinstance(entries, Mapping):
            for name, item in entries.items():
                v = item.get(tail) if isinstance(item, Mapping) else None
                if isinstance(v, (int, float)):
                    found[name] = max(found.get(name, 0.0), float(v))
    keep = sorted((n for n, v in found.items() if v >= CATEGORY_MIN_SHARE), key=lambda n: (-found[n], n))
    rows = [Row(f"{head}.{name}.{tail}", row.stat, row.same_work, row.gate) for name in keep]
    return [r for r in rows if entry(r.key) is not None]


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) else None


def direction(better: str, before: float, after: float) -> str:
    """``same``, ``better``, ``worse``, or ``changed`` (a metric that is neither better lower nor higher)."""
    if after == before:
        return "same"
    if better == "neither":
        return "changed"
    up = after > before
    return "better" if up == (better == "higher") else "worse"


def beyond_tolerance(unit: str, before: float, after: float, tolerance: float, key: str = "") -> bool:
    """|after - before| > tolerance x |before| (any change from 0 counts); shares must also move SHARE_FLOOR,
    keys in KEY_FLOORS their floor."""
    delta = abs(after - before)
    if unit == "share" and delta < SHARE_FLOOR:
        return False
    if delta < KEY_FLOORS.get(key, 0.0):
        return False
    if before == 0:
        return delta > 0
    return delta > tolerance * abs(before)
