"""``metrics.context.in_windows`` against a plain per-time reference: which times fall inside the step windows.

The function finds the answer with one binary search and one gather per time (it sets the report's peak memory where it
kept more per-time arrays); the reference walks the windows for each time in Python.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_llmdiag.metrics.context import in_windows


def _reference(ts: list[int], bounds: list[tuple[int, int]]) -> list[bool]:
    return [any(s <= t < e for s, e in bounds) for t in ts]


def _windows(cuts: list[int]) -> list[tuple[int, int]]:
    """Sorted, disjoint windows [s, e) from sorted cut points taken in pairs (a window may be empty: s == e)."""
    return [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-1_000, 1_000), max_size=12),
    st.lists(st.integers(-1_200, 1_200), max_size=60),
)
def test_in_windows_matches_the_reference(cuts: list[int], ts: list[int]) -> None:
    bounds = _windows(sorted(cuts))
    win_s = np.array([s for s, _ in bounds], np.int64)
    win_e = np.array([e for _, e in bounds], np.int64)
    got = in_windows(np.array(ts, np.int64), win_s, win_e)
    assert got.dtype == np.bool_
    assert got.tolist() == _reference(ts, bounds)


def test_in_windows_edges() -> None:
    win_s = np.array([10, 30], np.int64)
    win_e = np.array([20, 30], np.int64)  # the second window is empty
    ts = np.array([np.iinfo(np.int64).min, 9, 10, 19, 20, 29, 30, 31, np.iinfo(np.int64).max], np.int64)
    assert in_windows(ts, win_s, win_e).tolist() == [False, False, True, True, False, False, False, False, False]
    assert in_windows(ts, win_s[:0], win_e[:0]).tolist() == [False] * ts.size
    assert in_windows(ts[:0], win_s, win_e).tolist() == []
