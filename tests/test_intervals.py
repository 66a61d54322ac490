"""Interval algebra (tb_llmdiag/intervals.py) against brute force: integer coverage bitmaps."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_llmdiag.intervals import covered_before, covered_before_each, merge, overlap_per_window, union_ns

LO, HI = -200, 1200
spans = st.lists(st.tuples(st.integers(LO, 1000), st.integers(-50, 200)), max_size=40)


def _arrays(rows: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    s = np.array([r[0] for r in rows], dtype=np.int64)
    return s, s + np.array([r[1] for r in rows], dtype=np.int64)


def _bitmap(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    covered = np.zeros(HI - LO, dtype=bool)
    for x, y in zip(s.tolist(), e.tolist()):
        if y > x:
            covered[x - LO:y - LO] = True
    return covered


@settings(max_examples=300, deadline=None)
@given(spans)
def test_merge_is_the_union_as_disjoint_sorted_blocks(rows: list[tuple[int, int]]) -> None:
    s, e = _arrays(rows)
    ms, me = merge(s, e)
    assert (me > ms).all() and (ms[1:] > me[:-1]).all()  # sorted, disjoint, not touching
    assert (_bitmap(ms, me) == _bitmap(s, e)).all()
    assert union_ns(s, e) == _bitmap(s, e).sum()


def test_merge_of_intervals_before_zero() -> None:
    ms, me = merge(np.array([-9, -5, 3]), np.array([-3, -4, 4]))
    assert ms.tolist() == [-9, 3] and me.tolist() == [-3, 4]


@settings(max_examples=300, deadline=None)
@given(spans, spans)
def test_covered_lengths_and_window_overlaps(rows: list[tuple[int, int]], windows: list[tuple[int, int]]) -> None:
    s, e = _arrays(rows)
    ms, me = merge(s, e)
    bitmap = _bitmap(s, e)
    w_s, w_e = _arrays(sorted(windows))
    before = [int(bitmap[:max(t - LO, 0)].sum()) for t in w_s.tolist()]
    assert covered_before(ms, me, w_s).tolist() == before
    at_start, at_end = covered_before_each(ms, me, w_s, w_e)
    assert at_start.tolist() == before
    assert at_end.tolist() == [int(bitmap[:max(t - LO, 0)].sum()) for t in w_e.tolist()]
    expect = [int(bitmap[max(a - LO, 0):max(b - LO, 0)].sum()) if b > a else 0 for a, b in zip(w_s.tolist(), w_e.tolist())]
    got = overlap_per_window(s, e, w_s, w_e)
    assert [max(int(x), 0) for x in got] == expect
