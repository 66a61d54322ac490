"""The noise model's functions against hand computations and brute-force enumeration."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest

from tb_llmdiag.compare import stats
from tb_llmdiag.compare.table import STATISTICS


def brute_u_counts(n1: int, n2: int) -> list[int]:
    """Counts of U (pairs where the second sample's value is larger) over every choice of which ranks the
    second sample holds: enumeration, sharing nothing with the recurrence."""
    counts = [0] * (n1 * n2 + 1)
    for ranks in itertools.combinations(range(n1 + n2), n2):
        second = set(ranks)
        u = sum(1 for r in ranks for s in range(n1 + n2) if s not in second and s < r)
        counts[u] += 1
    return counts


@pytest.mark.parametrize("n1,n2", [(1, 1), (2, 3), (3, 3), (4, 3), (3, 5), (5, 5), (6, 4)])
def test_u_distribution_matches_enumeration(n1: int, n2: int) -> None:
    assert stats.u_distribution(n1, n2).tolist() == brute_u_counts(n1, n2)
    assert stats.u_distribution(n1, n2).sum() == comb(n1 + n2, n1)


def test_mann_whitney_u_by_hand() -> None:
    # y=2 beats 1 and ties 2 (1.5); y=4 and y=5 beat all three: 1.5 + 3 + 3
    assert stats.mann_whitney_u(np.array([1.0, 2, 3]), np.array([2.0, 4, 5])) == 7.5
    assert stats.mann_whitney_u(np.array([4.0, 5, 6]), np.array([1.0, 2, 3])) == 0.0


def test_rank_p_by_hand() -> None:
    # complete separation of 3 vs 3: only 1 of the C(6,3) = 20 orders is that extreme
    assert stats.rank_p_greater(np.array([1.0, 2, 3]), np.array([4.0, 5, 6])) == pytest.approx(1 / 20)
    # U = 8 (3 beats 1 and 2; 5 and 6 beat all): orders with U >= 8 are U = 8 and U = 9, one each
    assert stats.rank_p_greater(np.array([1.0, 2, 4]), np.array([3.0, 5, 6])) == pytest.approx(2 / 20)
    # the direction flag looks the other way
    assert stats.rank_p(np.array([4.0, 5, 6]), np.array([1.0, 2, 3]), increased=False) == pytest.approx(1 / 20)
    assert stats.rank_p_greater(np.array([]), np.array([1.0])) is None


def test_min_two_sided_p_states_the_power() -> None:
    assert stats.min_two_sided_p(3, 3) == pytest.approx(0.1)
    assert stats.min_two_sided_p(4, 3) == pytest.approx(2 / 35)      # 0.057: never below 5 %
    assert stats.min_two_sided_p(5, 5) == pytest.approx(2 / 252)
    assert stats.min_two_sided_p(10, 10) == pytest.approx(2 / 184756)
    assert stats.min_two_sided_p(0, 3) is None


def test_normal_approximation_is_close_to_exact_where_both_apply() -> None:
    x, y = np.arange(30, dtype=float), np.arange(30, dtype=float) + 6.5
    exact = stats.rank_p_greater(x, y)
    old = stats.EXACT_MAX_PAIRS
    try:
        stats.EXACT_MAX_PAIRS = 0
        approx = stats.rank_p_greater(x, y)
    finally:
        stats.EXACT_MAX_PAIRS = old
    assert approx == pytest.approx(exact, rel=0.1)  # 5.2e-3 against 4.8e-3 at 30 vs 30


def test_percentile_interval_interpolates_linearly() -> None:
    assert stats.percentile_interval(np.arange(101, dtype=float), 0.95) == pytest.approx((2.5, 97.5))
    assert stats.percentile_interval(np.array([10.0, 30, 50]), 0.5) == pytest.approx((20.0, 40.0))


def test_bootstrap_band_from_given_resamples() -> None:
    cols_b = {"duration_ns": np.array([[10.0, 20, 30]])}  # one rank x three steps
    cols_a = {"duration_ns": np.array([[40.0, 50, 60]])}
    # row 0 is the sample; then three resamples whose medians pair up as (10, 60), (20, 50), (30, 40)
    idx_b = np.array([[0, 1, 2], [0, 0, 0], [1, 1, 1], [2, 2, 2]])
    idx_a = np.array([[0, 1, 2], [2, 2, 2], [1, 1, 1], [0, 0, 0]])
    band = stats.bootstrap_band(STATISTICS["median_duration"].fn, cols_b, cols_a, idx_b, idx_a, level=0.5)
    assert band is not None
    assert (band.before, band.after) == (20.0, 50.0)
    # differences 50, 30, 10 -> quartiles 20 and 40
    assert (band.lo, band.hi) == pytest.approx((20.0, 40.0))
    # ratios - 1: 5, 1.5, 1/3 -> quartiles 1/3 + (1.5 - 1/3) / 2 and 1.5 + (5 - 1.5) / 2
    assert band.change_lo == pytest.approx(1 / 3 + (1.5 - 1 / 3) / 2)
    assert band.change_hi == pytest.approx(3.25)
    assert band.beyond_noise
    moved = stats.recentred(band, 10.0, 45.0)
    # shift = (45 - 10) - (50 - 20) = 5; relative shift = 4.5 - 2.5 = 2
    assert (moved.lo, moved.hi) == pytest.approx((25.0, 45.0))
    assert (moved.change_lo, moved.change_hi) == pytest.approx((band.change_lo + 2, 5.25))


def test_three_steps_each_beyond_noise_only_without_overlap() -> None:
    """With 3 steps a resample's median is the sample's minimum with probability 7/27, so the 2.5 % tail of the
    difference of medians is min(after) - max(before): the band excludes 0 exactly when the ranges do not overlap."""
    rng = np.random.default_rng(stats.SEED)
    idx_b = stats.resample_indexes(3, stats.RESAMPLES, rng)
    idx_a = stats.resample_indexes(3, stats.RESAMPLES, rng)
    fn = STATISTICS["median_duration"].fn
    apart = stats.bootstrap_band(fn, {"duration_ns": np.array([[1.0, 2, 3]])},
                                 {"duration_ns": np.array([[3.1, 4, 5]])}, idx_b, idx_a)
    overlap = stats.bootstrap_band(fn, {"duration_ns": np.array([[1.0, 2, 3.5]])},
                                   {"duration_ns": np.array([[3.0, 4, 5]])}, idx_b, idx_a)
    assert apart is not None and overlap is not None
    assert apart.beyond_noise and apart.lo == pytest.approx(3.1 - 3.0)
    assert not overlap.beyond_noise and overlap.lo == pytest.approx(3.0 - 3.5)


def test_resamples_are_seeded_and_row_zero_is_the_sample() -> None:
    a = stats.resample_indexes(5, 100, np.random.default_rng(stats.SEED))
    b = stats.resample_indexes(5, 100, np.random.default_rng(stats.SEED))
    assert (a == b).all() and a.shape == (101, 5)
    assert a[0].tolist() == [0, 1, 2, 3, 4]
    assert a.min() >= 0 and a.max() <= 4
