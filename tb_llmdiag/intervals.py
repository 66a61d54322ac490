"""Interval algebra over numpy arrays of [start, end) nanosecond intervals.

All functions are pure, vectorised, and accept unsorted input unless stated.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]


def merge(starts: I64, ends: I64) -> tuple[I64, I64]:
    """Union of intervals as sorted, disjoint [start, end) pairs.

    Touching intervals (end == next start) are merged. Empty or negative-length intervals are dropped.
    """
    keep = ends > starts
    s = np.asarray(starts, dtype=np.int64)[keep]
    e = np.asarray(ends, dtype=np.int64)[keep]
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    run_end = np.maximum.accumulate(e)
    # a new block starts where the start is past every earlier end
    new_block = np.empty(s.size, dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > run_end[:-1]
    block_id = np.cumsum(new_block) - 1
    out_s = s[new_block]
    out_e = np.zeros(out_s.size, dtype=np.int64)
    np.maximum.at(out_e, block_id, e)
    return out_s, out_e


def union_ns(starts: I64, ends: I64) -> int:
    """Total length of the union of intervals."""
    s, e = merge(starts, ends)
    return int((e - s).sum())


def clip(starts: I64, ends: I64, lo: int, hi: int) -> tuple[I64, I64]:
    """Intervals cut to [lo, hi); those left empty are dropped."""
    s = np.clip(starts, lo, hi)
    e = np.clip(ends, lo, hi)
    keep = e > s
    return s[keep], e[keep]


def gaps(starts: I64, ends: I64, lo: int, hi: int) -> tuple[I64, I64]:
    """The complement of the union of intervals within [lo, hi), as sorted [start, end) pairs."""
    s, e = merge(*clip(starts, ends, lo, hi))
    gap_s = np.concatenate(([lo], e)).astype(np.int64)
    gap_e = np.concatenate((s, [hi])).astype(np.int64)
    keep = gap_e > gap_s
    return gap_s[keep], gap_e[keep]


def overlap_per_window(starts: I64, ends: I64, win_starts: I64, win_ends: I64) -> I64:
    """For each window, the length of (union of intervals) ∩ window.

    Windows may overlap each other; intervals are merged first, then cumulative coverage is read at
    window edges, so the cost is O((n + w) log n).
    """
    s, e = merge(starts, ends)
    if s.size == 0:
        return np.zeros(len(win_starts), dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(e - s)))

    def covered_before(t: I64) -> I64:
        # coverage of (-inf, t): whole blocks ending before t, plus the part of a block containing t
        t = np.asarray(t, dtype=np.int64)
        i = np.searchsorted(s, t, side="right")  # blocks starting before or at t
        full = cum[i]
        last = np.maximum(i - 1, 0)
        over = np.where(i > 0, np.maximum(e[last] - t, 0), 0)
        return full - over

    return covered_before(win_ends) - covered_before(win_starts)
