"""The noise model: is the change between two runs larger than their step-to-step variation?

Method (docs/compare.md states it for users):
- **Bootstrap interval.** Each side's steps are resampled with replacement ``RESAMPLES`` times (a seeded
  ``numpy.random.Generator``, so the same two reports always give the same answer); a per-step column is
  resampled as a whole step (a step's duration, tokens and busy time stay together). The statistic (the
  median step, tokens / s as median tokens over median duration...) is computed on every resample of each
  side, and the ``LEVEL`` percentile interval of the difference AFTER - BEFORE is the noise band (shown as a
  relative change through the interval of AFTER / BEFORE - 1 when BEFORE's statistic is positive on every
  resample). A change is *beyond noise* when the band excludes 0. Both sides are resampled independently.
- **Exact rank test** (reported beside it): the Mann-Whitney U of the two sides' per-step values and its
  one-sided exact p-value in the direction of the change (no-ties null distribution; ties count 1/2;
  the normal approximation above ``EXACT_MAX_PAIRS`` pairs).
  ``min_two_sided_p(n1, n2) = 2 / C(n1 + n2, n1)`` is the smallest p the test can ever give: 0.1 for 3 vs 3
  steps, 0.057 for 4 vs 3, 0.0079 for 5 vs 5, so with 3-4 steps per side no rank test can reach 5 %.
- With fewer than ``MIN_STEPS`` steps on a side there is no spread to judge and the band is None.

All functions are pure and vectorised over the resamples (an index matrix of shape (resamples, steps)).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from math import comb, erfc, sqrt

import numpy as np

RESAMPLES = 4000
SEED = 20261123
LEVEL = 0.95
MIN_STEPS = 3
#: above this many pairs (n1 x n2) the rank test uses the normal approximation (exact below)
EXACT_MAX_PAIRS = 2500

#: a statistic: (per-step columns, index matrix (resamples, steps)) -> one value per resample row
Statistic = Callable[[Mapping[str, np.ndarray], np.ndarray], np.ndarray]


def resample_indexes(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Row 0 is the sample itself (0..n-1); rows 1.. are bootstrap resamples with replacement."""
    idx = rng.integers(0, n, size=(resamples + 1, n))
    idx[0] = np.arange(n)
    return idx


def paired_indexes(nb: int, na: int, seed: int, resamples: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The two sides' ``resample_indexes`` from one generator seeded with ``seed`` (before's drawn first), or None
    when either side has fewer than MIN_STEPS steps (no band)."""
    if nb < MIN_STEPS or na < MIN_STEPS:
        return None
    rng = np.random.default_rng(seed)
    return resample_indexes(nb, resamples, rng), resample_indexes(na, resamples, rng)


def percentile_interval(samples: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The central ``level`` percentile interval of ``samples`` (linear interpolation between order statistics)."""
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(samples, [tail, 1.0 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Band:
    """The bootstrap interval of AFTER - BEFORE for one statistic, in the statistic's unit."""

    before: float  # the statistic on BEFORE's steps
    after: float  # the statistic on AFTER's steps
    lo: float  # interval of the difference after - before
    hi: float
    change_lo: float | None = None  # interval of after / before - 1 (None when BEFORE's statistic can be <= 0)
    change_hi: float | None = None

    @property
    def beyond_noise(self) -> bool:
        """The band excludes no change. (after - before > 0 exactly when after / before - 1 > 0 on each
        resample, so deciding on the difference or on the ratio gives the same answer.)"""
        return self.lo > 0 or self.hi < 0


def recentred(band: Band, before: float, after: float) -> Band:
    """The band moved onto another pair of point values (the reports' own figures), keeping its width and
    asymmetry about the statistic: lo' = (after - before) + (lo - (band.after - band.before)), and the same
    for the relative band. With the statistic equal to the figures (the median step, tokens / s) nothing moves."""
    shift = (after - before) - (band.after - band.before)
    clo = chi = None
    if band.change_lo is not None and band.change_hi is not None and before > 0 and band.before > 0:
        rshift = (after / before) - (band.after / band.before)
        clo, chi = band.change_lo + rshift, band.change_hi + rshift
    return Band(before=before, after=after, lo=band.lo + shift, hi=band.hi + shift, change_lo=clo, change_hi=chi)


def bootstrap_band(
    stat: Statistic,
    before: Mapping[str, np.ndarray],
    after: Mapping[str, np.ndarray],
    idx_before: np.ndarray,
    idx_after: np.ndarray,
    level: float = LEVEL,
) -> Band | None:
    """The noise band of ``stat`` from two index matrices (``resample_indexes``; row 0 the samples themselves).
    None when the statistic is not finite on some resample (a zero denominator)."""
    sb = stat(before, idx_before)
    sa = stat(after, idx_after)
    if not (np.all(np.isfinite(sb)) and np.all(np.isfinite(sa))):
        return None
    diff = sa[1:] - sb[1:]
    lo, hi = percentile_interval(diff, level)
    rlo = rhi = None
    if np.all(sb > 0):
        rlo, rhi = percentile_interval(sa[1:] / sb[1:] - 1.0, level)
    return Band(before=float(sb[0]), after=float(sa[0]), lo=lo, hi=hi, change_lo=rlo, change_hi=rhi)


def mann_whitney_u(x: np.ndarray, y: np.ndarray) -> float:
    """U of ``y`` over ``x``: the number of pairs (x_i, y_j) with y_j > x_i, ties counting 1/2."""
    x = np.asarray(x, dtype=np.float64)[:, None]
    y = np.asarray(y, dtype=np.float64)[None, :]
    return float((y > x).sum() + 0.5 * (y == x).sum())


def u_distribution(n1: int, n2: int) -> np.ndarray:
    """Counts of each U value 0..n1*n2 over the C(n1+n2, n1) equally likely rank orders (no ties):
    f(n1, n2, u) = f(n1 - 1, n2, u - n2) + f(n1, n2 - 1, u), with U counted for the second sample."""
    # table[j] holds the distribution for (i, j) while row i is built
    prev = [np.ones(1, dtype=np.float64) for _ in range(n2 + 1)]  # i = 0: U is always 0
    for i in range(1, n1 + 1):
        cur = [np.ones(1, dtype=np.float64)]  # j = 0: U is always 0
        for j in range(1, n2 + 1):
            dist = np.zeros(i * j + 1, dtype=np.float64)
            a = prev[j]  # (i - 1, j): the largest value is from sample 1
            dist[: a.size] += a
            b = cur[j - 1]  # (i, j - 1): it is from sample 2, beating all i
            dist[i : i + b.size] += b
            cur.append(dist)
        prev = cur
    return prev[n2]


def rank_p_greater(x: np.ndarray, y: np.ndarray) -> float | None:
    """One-sided exact p-value that ``y`` tends to be larger than ``x`` (P[U >= u_observed] under no
    difference); None when either side is empty."""
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        return None
    u = mann_whitney_u(x, y)
    if n1 * n2 > EXACT_MAX_PAIRS:  # normal approximation with continuity correction
        mean, sd = n1 * n2 / 2.0, sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)
        return float(0.5 * erfc((u - 0.5 - mean) / (sd * sqrt(2.0))))
    dist = u_distribution(n1, n2)
    values = np.arange(dist.size, dtype=np.float64)
    return float(dist[values >= u - 1e-9].sum() / dist.sum())


def rank_p(x: np.ndarray, y: np.ndarray, increased: bool) -> float | None:
    """One-sided exact p in the direction of the observed change (``increased``: y above x)."""
    return rank_p_greater(x, y) if increased else rank_p_greater(-np.asarray(x), -np.asarray(y))


def min_two_sided_p(n1: int, n2: int) -> float | None:
    """The smallest two-sided p an exact rank test can give with n1 and n2 observations: 2 / C(n1+n2, n1)."""
    if n1 <= 0 or n2 <= 0:
        return None
    return min(1.0, 2.0 / comb(n1 + n2, n1))
