"""Level of detail over rows of intervals: nesting depth, merge pyramids and O(log n + output) range queries.

Contract:
- A *row* is a run of intervals sorted by start (ties: longer first) that one lane draws at one depth.
  Rows are stored concatenated, ``off[r]:off[r + 1]`` being row ``r``.
- ``cmax`` is the running maximum of ``end`` within a row: sorted even where intervals overlap, so the first
  interval reaching past ``t`` is ``searchsorted(cmax, t, "right")`` and a query never scans.
- A pyramid level merges a row's neighbours whose gap to the running end is at most the level's tolerance
  into one interval carrying ``n`` source events and the event id (``ev``) of its longest recorded event; an event
  longer than the tolerance (wider than a pixel) is never merged: it stands alone, whatever its neighbours. Level 0 is
  the rows as recorded (tolerance 0). Tolerances grow by ``LEVEL_FACTOR``; a level is kept only when it has
  at most ``KEEP_RATIO`` of the last kept level's intervals (sparse rows do not multiply storage).
- ``query`` picks the coarsest level whose tolerance is <= the requested resolution, slices the range by
  binary search and merges that slice once more at the resolution: what comes back is at most about one
  interval per two pixels per row, however many events the range holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]
I32 = NDArray[np.int32]
Ints = NDArray[np.signedinteger[Any]]  # event ids and counts: int64 in a query, int32 while building the levels

FIRST_TOL_NS = 1_000
LEVEL_FACTOR = 4
KEEP_RATIO = 0.75
_ROW_SHIFT = 44  # row code * 2**44 + time: rows sort apart while times stay below ~4.8 h


def depths(group: I64, start: I64, end: I64) -> I64:
    """Nesting depth of each interval within its group. Input sorted by (group, start, -duration).

    Depth = intervals of the group opened before this one (ties: the longer one) that are still open at its
    start, i.e. its enclosing ancestors when the group nests properly (host ops on one thread). Zero-length
    intervals count as 1 ns long, so a marker inside a range sits below it.
    """
    n = start.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    # keys group * 2**44 + time: one sort of the ends answers every group at once. The earlier groups' ends all
    # sort before this group's starts, and there are as many of them as earlier events, so the depth is the
    # position minus the ends at or before the start. Temporaries are reused in place (bounded peak).
    key = group << _ROW_SHIFT
    ends = start + 1
    np.maximum(ends, end, out=ends)
    ends += key
    ends.sort()
    key += start
    depth = np.arange(n, dtype=np.int64)
    depth -= np.searchsorted(ends, key, side="right")
    del ends, key
    return np.maximum(depth, 0, out=depth)


def row_cummax(row: I64, end: I64) -> I64:
    """Running maximum of ``end`` restarting at each row (rows ascending)."""
    if end.shape[0] == 0:
        return end.copy()
    shifted = row << _ROW_SHIFT
    out = shifted + end
    np.maximum.accumulate(out, out=out)
    out -= shifted
    return out


def merge_rows(
    row: I64, start: I64, end: I64, ev: Ints, n: Ints, tol: int, ev_dur: I64
) -> tuple[I64, I64, I64, Ints, Ints]:
    """One pyramid step: merge neighbours of a row closer than ``tol`` (gap to the running end <= tol), except
    that an interval whose longest event is longer than ``tol`` stays on its own. Returns (row, start, end, ev of the longest recorded event among the members, n summed); ``ev_dur`` is
    every event's recorded duration (indexed by ``ev``)."""
    return merge_step(row, start, end, ev, n, ev_dur[ev], tol)[:5]


def merge_step(
    row: I64, start: I64, end: I64, ev: Ints, n: Ints | None, dur: I64, tol: int
) -> tuple[I64, I64, I64, Ints, Ints, I64]:
    """``merge_rows`` given each interval's named-event duration ``dur`` (returned for the merged intervals too,
    so the level builder needs no per-event table) and ``n`` None for all ones. Temporaries are dropped as
    soon as used: the peak is a few arrays of the input's length."""
    k = start.shape[0]
    if k == 0:
        return row, start, end, ev, (np.ones(0, np.int32) if n is None else n), dur
    reach = row_cummax(row, end)[:-1]
    reach += tol
    new = np.ones(k, dtype=bool)
    np.greater(start[1:], reach, out=new[1:])
    del reach
    new[1:] |= row[1:] != row[:-1]
    # an event wider than the tolerance stands alone: it opens a group and so does whatever follows it
    wide = dur > tol
    new |= wide
    new[1:] |= wide[:-1]
    del wide
    first = np.flatnonzero(new)
    gid = np.cumsum(new, dtype=np.int32 if k < 2**31 else np.int64)
    del new
    gid -= 1
    g_max = np.maximum.reduceat(dur, first)
    is_max = np.flatnonzero(dur == g_max[gid])
    mg = gid[is_max]
    del gid
    is_max = is_max[np.r_[True, mg[1:] != mg[:-1]]]  # the first longest of each group
    del mg
    g_ev = ev[is_max]
    del is_max
    g_end = np.maximum.reduceat(end, first)
    g_n = np.diff(np.r_[first, k]).astype(np.int32) if n is None else np.add.reduceat(n, first)
    g_row = row[first]
    return g_row, start[first], g_end, g_ev, g_n, g_max


@dataclass(frozen=True)
class Level:
    tol_ns: int
    off: I64  # n_rows + 1 offsets
    start: I64
    end: I64
    cmax: I64
    ev: I32
    n: I32


def offsets(row: I64, n_rows: int) -> I64:
    return np.searchsorted(row, np.arange(n_rows + 1, dtype=np.int64), side="left").astype(np.int64)


def build_levels(row: I64, start: I64, end: I64, ev: I64, n_rows: int, span_ns: int) -> list[Level]:
    """Level 0 (as recorded) and the merged levels up to a tolerance covering ``span_ns``."""
    return list(iter_levels(row, start, end, ev, n_rows, span_ns))


def iter_levels(row: I64, start: I64, end: I64, ev: I64, n_rows: int, span_ns: int) -> Iterator[Level]:
    """``build_levels`` one level at a time: each merge step reads the previous step's intervals (never level 0
    again), so the work is the sum of the levels' sizes, and only the level being merged is held."""
    dur = end - start
    cur: tuple[I64, I64, I64, Ints, Ints | None, I64] = (row, start, end, ev.astype(np.int32), None, dur)
    del row, start, end, ev, dur
    last_kept = cur[1].shape[0]
    yield _level(0, cur, n_rows)
    tol = FIRST_TOL_NS
    while tol < max(span_ns, FIRST_TOL_NS) * LEVEL_FACTOR and cur[1].shape[0] > n_rows:
        cur = merge_step(*cur, tol)
        if cur[1].shape[0] <= KEEP_RATIO * last_kept:
            last_kept = cur[1].shape[0]
            yield _level(tol, cur, n_rows)
        tol *= LEVEL_FACTOR


def _level(tol: int, cur: tuple[I64, I64, I64, Ints, Ints | None, I64], n_rows: int) -> Level:
    r, s, e, ev, n, _ = cur
    counts = np.ones(s.shape[0], np.int32) if n is None else n.astype(np.int32, copy=False)
    return Level(tol, offsets(r, n_rows), s, e, row_cummax(r, e), ev.astype(np.int32, copy=False), counts)


@dataclass(frozen=True)
class Slice:
    start: I64
    end: I64
    ev: I64
    n: I64


def pick_level(tols: list[int], resolution_ns: float) -> int:
    best = 0
    for i, t in enumerate(tols):
        if t <= resolution_ns:
            best = i
    return best


def query(levels: list[Level], r: int, a: int, b: int, resolution_ns: float, ev_dur: I64) -> Slice:
    """Row ``r``'s intervals overlapping [a, b), merged at ``resolution_ns`` (``ev_dur``: each event's
    recorded duration, to name a merged interval after its longest event)."""
    lv = levels[pick_level([x.tol_ns for x in levels], resolution_ns)]
    o0, o1 = int(lv.off[r]), int(lv.off[r + 1])
    lo = o0 + int(np.searchsorted(lv.cmax[o0:o1], a, side="right"))
    hi = o0 + int(np.searchsorted(lv.start[o0:o1], b, side="left"))
    hi = max(hi, lo)
    s = np.asarray(lv.start[lo:hi], dtype=np.int64)
    e = np.asarray(lv.end[lo:hi], dtype=np.int64)
    ev = np.asarray(lv.ev[lo:hi], dtype=np.int64)
    n = np.asarray(lv.n[lo:hi], dtype=np.int64)
    # the binary search bounds the slice; intervals ending at or before a (possible only where the row
    # overlaps itself) are dropped here
    keep = e > a
    if not keep.all():
        s, e, ev, n = s[keep], e[keep], ev[keep], n[keep]
    tol = int(resolution_ns)
    if tol > lv.tol_ns and s.shape[0] > 1:
        _, s, e, ev, n = merge_rows(np.zeros(s.shape[0], np.int64), s, e, ev, n, tol, ev_dur)
    return Slice(s, e, ev, n)
