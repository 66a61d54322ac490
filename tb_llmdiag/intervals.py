"""Interval algebra over numpy arrays of [start, end) nanosecond intervals.

All functions are pure, vectorised, and accept unsorted input unless stated. ``merge`` / ``gaps`` /
``subtract`` give sets; ``covered_before*`` / ``overlap_per_window`` / ``union_ns_by_group`` give lengths;
``merge_within`` coarsens a lane for drawing.
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
    # a new block starts where the start is past every earlier end; a block ends at the running end
    # of its last interval
    new_block = np.empty(s.size, dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > run_end[:-1]
    first = np.flatnonzero(new_block)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], run_end[last]


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


def covered_before(s: I64, e: I64, t: I64) -> I64:
    """For sorted, disjoint [s, e) blocks (``merge``'s output), the covered length of (-inf, t) at each t.

    Non-decreasing in t: it is a clock that runs only inside the blocks, so for any interval [a, b) the
    covered part of it has length ``covered_before(b) - covered_before(a)``.
    """
    t = np.asarray(t, dtype=np.int64)
    if s.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    return _covered_at(e, _cum(s, e), np.searchsorted(s, t, side="right"), t)


def covered_before_each(s: I64, e: I64, starts: I64, ends: I64) -> tuple[I64, I64]:
    """``covered_before`` at each start and at each end of intervals [starts, ends) whose starts are sorted.

    Same values, found by counting instead of one binary search per time: the blocks starting before
    each start come from one pass over the (few) blocks, and an end needs a search only when the next
    block starts at or before it.
    """
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    if s.size == 0 or starts.size == 0:
        return np.zeros(starts.shape, dtype=np.int64), np.zeros(ends.shape, dtype=np.int64)
    # blocks starting at or before each start: each block counts from the first start at or past it on
    i_start = np.cumsum(np.bincount(np.searchsorted(starts, s, side="left"), minlength=starts.size + 1)[:-1])
    next_s = np.append(s, np.iinfo(np.int64).max)[i_start]
    far = (ends >= next_s) | (ends < starts)
    del next_s  # temporaries are dropped as soon as used: on 10^6 operators this sets the report's peak memory
    i_end = i_start.copy()
    i_end[far] = np.searchsorted(s, ends[far], side="right")
    del far
    cum = _cum(s, e)
    at_start = _covered_at(e, cum, i_start, starts)
    del i_start
    return at_start, _covered_at(e, cum, i_end, ends)


def _cum(s: I64, e: I64) -> I64:
    """Covered length of the first k blocks, k = 0..n."""
    return np.concatenate(([0], np.cumsum(e - s))).astype(np.int64)


def _covered_at(e: I64, cum: I64, i: I64, t: I64) -> I64:
    """Covered length before each t, given ``i`` = how many blocks start at or before it."""
    if t.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    # whole blocks up to i, less what the last of them runs past t (nothing when i == 0: min(t) <= t)
    ends_before = np.concatenate(([t.min()], e)).astype(np.int64)
    over = ends_before[i]
    over -= t
    np.maximum(over, 0, out=over)
    out = cum[i]
    out -= over
    return out


def overlap_per_window(starts: I64, ends: I64, win_starts: I64, win_ends: I64) -> I64:
    """For each window, the length of (union of intervals) ∩ window.

    Windows may overlap each other; intervals are merged first, then cumulative coverage is read at
    window edges, so the cost is O((n + w) log n).
    """
    s, e = merge(starts, ends)
    if s.size == 0:
        return np.zeros(len(win_starts), dtype=np.int64)
    cum = _cum(s, e)
    w_s, w_e = np.asarray(win_starts, dtype=np.int64), np.asarray(win_ends, dtype=np.int64)
    return _covered_at(e, cum, np.searchsorted(s, w_e, side="right"), w_e) - _covered_at(
        e, cum, np.searchsorted(s, w_s, side="right"), w_s
    )


def subtract(a_s: I64, a_e: I64, b_s: I64, b_e: I64) -> tuple[I64, I64]:
    """A minus B for two sets of sorted, disjoint [start, end) intervals, as sorted disjoint intervals."""
    if a_s.size == 0:
        return a_s.copy(), a_e.copy()
    pos = np.concatenate((a_s, a_e, b_s, b_e)).astype(np.int64)
    na, nb = a_s.size, b_s.size
    da = np.concatenate((np.ones(na, np.int64), -np.ones(na, np.int64), np.zeros(2 * nb, np.int64)))
    db = np.concatenate((np.zeros(2 * na, np.int64), np.ones(nb, np.int64), -np.ones(nb, np.int64)))
    order = np.argsort(pos, kind="stable")
    pos, a, b = pos[order], np.cumsum(da[order]), np.cumsum(db[order])
    seg_s, seg_e = pos[:-1], pos[1:]
    keep = (a[:-1] > 0) & (b[:-1] <= 0) & (seg_e > seg_s)
    return merge(seg_s[keep], seg_e[keep])


def union_ns_by_group(group: NDArray[np.integer], starts: I64, ends: I64, n_groups: int) -> NDArray[np.float64]:
    """Per group id 0..n_groups-1, the length of the union of its [start, end) intervals, as float64 (exact
    below 2**53). Empty and negative intervals add nothing. Fastest when starts are sorted (ts-sorted rows)."""
    s = np.asarray(starts, np.int64)
    if s.size == 0:
        return np.zeros(n_groups)
    group = np.asarray(group)
    # by group, then start: a stable sort by group of start-sorted rows (numpy's stable sort is a radix
    # sort for 16-bit keys, ~7x faster than np.lexsort on name ids)
    by_start = None if bool((s[1:] >= s[:-1]).all()) else np.argsort(s, kind="stable")
    key = group if by_start is None else group[by_start]
    key = key.astype(np.uint16 if int(group.min()) >= 0 and int(group.max()) < 2**16 else np.int64)
    order = np.argsort(key, kind="stable")
    g = key[order]
    if by_start is not None:
        order = by_start[order]
    s, e = s[order], np.asarray(ends, np.int64)[order]
    np.maximum(e, s, out=e)  # a negative interval becomes an empty one: it adds nothing
    del order, key  # dropped early: with 10^6 operators this function sets the report's peak memory
    first = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
    lo, span = int(s.min()), int(e.max() - s.min()) + 1
    if (int(g[-1]) + 1) * span < 2**62:
        # running max of ends within each group in one pass: lift each group above all earlier ones
        off = np.multiply(g, np.int64(span), dtype=np.int64)
        reach = e  # the ends (this function's own gathered copy) become the reach in place: one array less
        reach -= lo
        reach += off
        np.maximum.accumulate(reach, out=reach)
        reach -= off
        reach += lo
        before = off  # and the offsets' array is reused below
        del off
    else:  # pragma: no cover - needs ~1e5 names over hours of trace
        reach = np.concatenate([np.maximum.accumulate(part) for part in np.split(e, first[1:])])
        before = np.empty_like(reach)
    del e
    # each interval adds what it reaches past everything before it in its group
    before[1:] = reach[:-1]
    before[first] = s[first]
    np.maximum(before, s, out=before)
    reach -= before
    out = np.zeros(n_groups)
    out[g[first]] = np.add.reduceat(reach, first)
    return out


def merge_within(s: I64, e: I64, key: I64, tol: int) -> tuple[I64, I64, I64, I64]:
    """Merge start-sorted intervals whose gap to the running end of the earlier ones is <= tol (tol 0: touching
    or overlapping ones), for drawing a lane at a coarser resolution.

    Returns (start, end, count, representative) per block: ``count`` members, and ``key`` of the longest
    member (the first of the longest on ties).
    """
    if s.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    run_end = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1] + tol
    block = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    out_s = s[first]
    out_e = np.maximum.reduceat(e, first)
    count = np.diff(np.append(first, s.size))
    # longest member per block: sort by (block, -dur), take the first of each block
    order = np.lexsort((-(e - s), block))
    rep = key[order[np.searchsorted(block[order], np.arange(first.size))]]
    return out_s, out_e, count.astype(np.int64), rep
