"""The metric table of a comparison: the registry's numbers of two sides (two runs, or two jobs), the change,
and whether it is beyond the metric's tolerance and beyond step-to-step noise.

``ROWS`` is the declared table (registry keys, in display order: a run's rows, then a job's; a side has only
its level's values, and a row whose value is absent on both sides is left out); ``STATISTICS`` the per-step
statistics the noise model resamples (``stats.py``) over a side's ranks x steps columns (``side.py``). A ``*``
key expands to the map's entries (categories under 1 % of device time on both sides are left out).

Work normalisation: when both sides know their tokens per step (``steps.tokens_per_step_median``, a job's
``job.tokens_per_step``) and they differ by more than that metric's tolerance, rows marked ``same_work`` (the
step time) are shown but not judged (``comparable: false``): a step that does more work is not a slower step.
Tokens / s and time per token are.

A job's statistics resample the job's common steps (the columns of its matrices): a resampled step keeps every
rank's values of that step, and each statistic is computed as the job analysis computes its figure (the median
across ranks of each rank's mean over the steps), so on the steps themselves it equals the report's number.
A run's statistics read its one rank.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tb_llmdiag import registry
from tb_llmdiag.compare import stats
from tb_llmdiag.compare.side import Side
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
        "the median step / its tokens (1e9 / headline.tokens_per_s: on the median step, as tokens/s)",
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
    """A run's one rank of column ``name`` on the resample index rows."""
    return np.asarray(cols[name][0][idx])


def _ratio_of_sums(num: str, den: str, scale: float = 1.0) -> Callable[[Columns, np.ndarray], np.ndarray]:
    def stat(cols: Columns, idx: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(scale * _take(cols, num, idx).sum(axis=1) / _take(cols, den, idx).sum(axis=1))

    return stat


def _median_ratio(num: str, den: str, scale: float = 1.0) -> Callable[[Columns, np.ndarray], np.ndarray]:
    """Per resample row: the median of ``num`` over the median of ``den`` (tokens/s on the median step, as the run
    report's ``headline.tokens_per_s``)."""

    def stat(cols: Columns, idx: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(
                scale * np.median(_take(cols, num, idx), axis=1) / np.median(_take(cols, den, idx), axis=1)
            )

    return stat


def _median_duration(cols: Columns, idx: np.ndarray) -> np.ndarray:
    return np.asarray(np.median(_take(cols, "duration_ns", idx), axis=1))


def _cv_duration(cols: Columns, idx: np.ndarray) -> np.ndarray:
    d = _take(cols, "duration_ns", idx)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(d.std(axis=1) / d.mean(axis=1))


def _per_step_ratio(num: str, den: str, scale: float = 1.0) -> Callable[[Columns], np.ndarray]:
    def values(cols: Columns) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(scale * cols[num][0] / cols[den][0])

    return values


# a job: the median across ranks of each rank's mean over the resampled common steps (module docstring)


def _nanmedian(x: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN slice is NaN, and the row is then unmodelled
        return np.asarray(np.nanmedian(x, axis=axis))


def _median_of_means(m: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Per resample row: the median across ranks of each rank's mean over the resampled steps."""
    taken = m[:, idx]  # ranks x resamples x steps
    with np.errstate(invalid="ignore", divide="ignore"):
        cnt = np.sum(~np.isnan(taken), axis=2)
        means = np.where(cnt > 0, np.nansum(taken, axis=2) / np.maximum(cnt, 1), np.nan)
    return _nanmedian(means, 0)


def _job_step(cols: Columns, idx: np.ndarray) -> np.ndarray:
    return _median_of_means(cols["step_ns"], idx)


def _share(name: str) -> Callable[[Columns, np.ndarray], np.ndarray]:
    def stat(cols: Columns, idx: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(_median_of_means(cols[name], idx) / _job_step(cols, idx))

    return stat


def _of(name: str) -> Callable[[Columns, np.ndarray], np.ndarray]:
    def stat(cols: Columns, idx: np.ndarray) -> np.ndarray:
        return _median_of_means(cols[name], idx)

    return stat


def _tokens_per_s(cols: Columns, idx: np.ndarray) -> np.ndarray:
    taken = cols["tokens"][:, idx]
    with np.errstate(invalid="ignore", divide="ignore"):
        tokens = np.nanmean(taken, axis=2).sum(axis=0) if taken.size else np.full(idx.shape[0], np.nan)
        return np.asarray(1e9 * tokens / _job_step(cols, idx))


def step_values(cols: Columns) -> np.ndarray:
    """Per common step: the median across ranks of the ranks' step times."""
    return _nanmedian(cols["step_ns"], 0)


def _per_step_share(name: str) -> Callable[[Columns], np.ndarray]:
    def values(cols: Columns) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(_nanmedian(cols[name], 0) / step_values(cols))

    return values


def _per_step_tokens_per_s(cols: Columns) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(1e9 * cols["tokens"].sum(axis=0) / step_values(cols))


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
        _median_duration, lambda c: c["duration_ns"][0], ("duration_ns",), "median of the step durations"
    ),
    "cv_duration": Statistic(_cv_duration, None, ("duration_ns",), "std / mean of the step durations"),
    "tokens_per_s": Statistic(
        _median_ratio("tokens", "duration_ns", 1e9),
        _per_step_ratio("tokens", "duration_ns", 1e9),
        ("tokens", "duration_ns"),
        "median tokens per step / median step duration",
    ),
    "ns_per_token": Statistic(
        _median_ratio("duration_ns", "tokens"),
        _per_step_ratio("duration_ns", "tokens"),
        ("tokens", "duration_ns"),
        "median step duration / median tokens per step",
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
    # a job
    "job_step": Statistic(_job_step, step_values, ("step_ns",), "median across ranks of each rank's mean step time"),
    "job_tokens_per_s": Statistic(
        _tokens_per_s,
        _per_step_tokens_per_s,
        ("tokens", "step_ns"),
        "sum over ranks of mean tokens per step / the job step",
    ),
    "exposed_transfer_ns": Statistic(
        _of("exposed_transfer_ns"),
        lambda c: _nanmedian(c["exposed_transfer_ns"], 0),
        ("exposed_transfer_ns",),
        "median across ranks of each rank's mean exposed transfer per step",
    ),
    **{
        f"{name}_share": Statistic(
            _share(f"{name}_ns"),
            _per_step_share(f"{name}_ns"),
            (f"{name}_ns", "step_ns"),
            f"median across ranks of each rank's mean {name.replace('_', ' ')} per step / the job step",
        )
        for name in ("exposed_transfer", "exposed", "waiting")
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
    # a job's rows: job tokens / s, the job step (same work) and the exposed transfer share (collective transfer
    # no compute hides: what a transport or overlap change moves) are gated; the waiting and exposed shares
    # split the same job step and are shown, not gated (as a run's idle shares); numbers with one value per job
    # (overlap, the straggler's caused wait, compute imbalance) are shown, not gated
    Row("job.tokens_per_s", "job_tokens_per_s"),
    Row("job.tokens_per_step"),
    Row("job.job_step_ns", "job_step", same_work=True),
    Row("job.exposed_transfer_share", "exposed_transfer_share"),
    Row("job.exposed_transfer_ns_per_step", "exposed_transfer_ns", gate=False),
    Row("job.exposed_share", "exposed_share", gate=False),
    Row("job.waiting_share", "waiting_share", gate=False),
    Row("job.overlap_share"),
    Row("job.straggler_others_wait_ns_per_step"),
    Row("job.straggler_others_wait_share"),
    Row("job.imbalance_share"),
    Row("job.matched_collective_count"),
    Row("job.common_step_count"),
    Row("job.rank_count"),
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


def expand(row: Row, sides: Sequence[Side]) -> list[Row]:
    """A ``*`` row as one row per map key present on either side (largest first); other rows as they are."""
    if "*" not in row.key:
        return [row] if entry(row.key) is not None else []
    head, tail = row.key.split(".*.", 1)
    found: dict[str, float] = {}
    for side in sides:
        entries = side.value(head)
        if isinstance(entries, Mapping):
            for name, item in entries.items():
                v = item.get(tail) if isinstance(item, Mapping) else None
                if isinstance(v, (int, float)):
                    found[name] = max(found.get(name, 0.0), float(v))
    keep = sorted((n for n, v in found.items() if v >= CATEGORY_MIN_SHARE), key=lambda n: (-found[n], n))
    rows = [Row(f"{head}.{name}.{tail}", row.stat, row.same_work, row.gate) for name in keep]
    return [r for r in rows if entry(r.key) is not None]


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
