"""Interval algebra (tb_llmdiag/intervals.py) against brute force: integer coverage bitmaps."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_llmdiag.intervals import (covered_before, covered_before_each, merge, merge_within, overlap_per_window, subtract,
                                  union_ns, union_ns_by_group)

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


def test_subtract_intervals() -> None:
    s, e = subtract(np.array([0, 50]), np.array([40, 100]), np.array([10, 30, 60]), np.array([20, 55, 70]))
    assert s.tolist() == [0, 20, 55, 70] and e.tolist() == [10, 30, 60, 100]


@settings(max_examples=300, deadline=None)
@given(spans, spans)
def test_subtract_is_a_minus_b_as_disjoint_sorted_blocks(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    a_s, a_e = merge(*_arrays(a))
    b_s, b_e = merge(*_arrays(b))
    s, e = subtract(a_s, a_e, b_s, b_e)
    assert (e > s).all() and (s[1:] > e[:-1]).all()  # sorted, disjoint, not touching
    assert (_bitmap(s, e) == (_bitmap(a_s, a_e) & ~_bitmap(b_s, b_e))).all()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(LO, 1000), st.integers(-50, 200)), max_size=60),
       st.booleans())
def test_union_ns_by_group_is_the_union_per_group(rows: list[tuple[int, int, int]], by_start: bool) -> None:
    if by_start:  # the sorted fast path as well as the general one
        rows = sorted(rows, key=lambda r: r[1])
    g = np.array([r[0] for r in rows], dtype=np.int64)
    s, e = _arrays([(r[1], r[2]) for r in rows])
    got = union_ns_by_group(g, s, e, 6)
    assert got.tolist() == [float(_bitmap(s[g == k], e[g == k]).sum()) for k in range(6)]


@settings(max_examples=300, deadline=None)
@given(spans, st.integers(0, 60))
def test_merge_within_fills_only_holes_up_to_tol(rows: list[tuple[int, int]], tol: int) -> None:
    s, e = _arrays(sorted((x, max(d, 1)) for x, d in rows))  # the timeline draws every interval >= 1 ns
    key = np.arange(s.size, dtype=np.int64)
    ms, me, count, rep = merge_within(s, e, key, tol)
    assert count.sum() == s.size
    assert (ms[1:] > me[:-1] + tol).all()  # blocks further apart than tol
    # each block covers its members and the holes between them, which are at most tol long
    covered, merged = _bitmap(s, e), _bitmap(ms, me)
    assert (merged | ~covered).all()
    holes = merged & ~covered
    if holes.any():
        edges = np.diff(np.concatenate(([0], holes.astype(np.int8), [0])))
        assert (np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1) <= tol).all()
    # the representative is the (first) longest member of its block
    first = np.concatenate(([0], np.cumsum(count)[:-1]))
    for b in range(ms.size):
        dur = (e - s)[first[b]:first[b] + count[b]]
        assert rep[b] == first[b] + int(np.argmax(dur))
