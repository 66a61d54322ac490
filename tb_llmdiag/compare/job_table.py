"""The metric table of a job comparison: the job's numbers (``job.*`` registry keys and the keys ``table.DERIVED``
adds) and how each is judged. The noise model resamples the job's common steps (the columns of the heatmap's
ranks x steps matrices, ``job_series.job_matrices``): a resampled step keeps every rank's values of that step, and
each statistic is computed as the job analysis computes its figure (the median across ranks of each rank's mean
over the steps), so on the steps themselves it equals the report's number.

Gated (``check`` may fail on them): job tokens / s, the job step (when both sides do the same work per job step)
and the exposed transfer share (collective transfer no compute hides: what a transport or overlap change moves).
The waiting and exposed shares split the same job step and are shown, not gated (as the run table's idle shares);
numbers with one value per job (overlap, the straggler's caused wait, compute imbalance) are shown, not gated.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

import numpy as np

from tb_llmdiag.compare.table import Row, Statistic

Columns = Mapping[str, np.ndarray]


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
            return _median_of_means(cols[name], idx) / _job_step(cols, idx)

    return stat


def _of(name: str) -> Callable[[Columns, np.ndarray], np.ndarray]:
    def stat(cols: Columns, idx: np.ndarray) -> np.ndarray:
        return _median_of_means(cols[name], idx)

    return stat


def _tokens_per_s(cols: Columns, idx: np.ndarray) -> np.ndarray:
    taken = cols["tokens"][:, idx]
    with np.errstate(invalid="ignore", divide="ignore"):
        tokens = np.nanmean(taken, axis=2).sum(axis=0) if taken.size else np.full(idx.shape[0], np.nan)
        return 1e9 * tokens / _job_step(cols, idx)


def step_values(cols: Columns) -> np.ndarray:
    """Per common step: the median across ranks of the ranks' step times."""
    return _nanmedian(cols["step_ns"], 0)


def _per_step_share(name: str) -> Callable[[Columns], np.ndarray]:
    def values(cols: Columns) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return _nanmedian(cols[name], 0) / step_values(cols)

    return values


def _per_step_tokens_per_s(cols: Columns) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1e9 * cols["tokens"].sum(axis=0) / step_values(cols)


JOB_STATISTICS: dict[str, Statistic] = {
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

JOB_ROWS: tuple[Row, ...] = (
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
