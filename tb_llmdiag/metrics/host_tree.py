"""The host call forest of one trace: every host event's parent and its node in the call tree, as columns.

Contract (``HostForest.build(trace)``; no I/O, no per-event Python):
- Host events are the rows of kinds CPU_OP, ANNOTATION, PYTHON, RUNTIME and DRIVER (step markers are not: a
  step's time is the step's, and ``ProfilerStep#N`` ranges cross the Python frames of ``prof.step()``). They are ordered by
  thread, then start, then longer first (``rows``: indices into ``trace.events``); ``thread`` is a dense code
  per host thread (``tids[thread]`` is the trace's tid).
- ``parent``: the position (into ``rows``) of the latest-started earlier event of the same thread still open
  (end > start) at its start, or -1; ``depth``: how many ancestors it has. Where a thread's events nest
  properly (what the profiler records for one thread) that is the enclosing event; where they do not (a
  ``record_function`` range opened inside a short Python frame and closed in another), every instant still
  belongs to exactly one innermost event: the latest-started one open then. A child may then end after its
  parent (``attribution`` clips it to its parent when it subtracts).
- ``node``: the call-tree node of each event: events with the same chain of names from their root down share
  a node (roots of all threads merge by name, as a profiler's call tree does). ``node_parent``, ``node_name``
  (a name id), ``node_kind`` (a ``Kind``) and ``node_depth`` describe the nodes; nodes are numbered level by
  level, so a parent's number is below its children's.
Cost: one stable radix sort by thread, pointer jumping for the parents and depths (a few rounds over the
events still unresolved) and one ``np.unique`` per level for the nodes (levels: the deepest nesting, a few dozen
with Python frames).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.model import Kind, Trace, kind_mask

I64 = NDArray[np.int64]
IDX = NDArray[np.intp]

HOST_KINDS = (Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON, Kind.RUNTIME, Kind.DRIVER)


def thread_codes(tid: I64) -> tuple[NDArray[np.int32], I64]:
    """Dense codes of thread ids and the distinct ids (by counting when the ids span a small range, the usual
    case: no sort)."""
    if tid.size == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    lo, hi = int(tid.min()), int(tid.max())
    if hi - lo < 1 << 22:
        seen = np.bincount(tid - lo, minlength=hi - lo + 1) > 0
        ids = np.flatnonzero(seen)
        lut = np.cumsum(seen, dtype=np.int32) - 1
        return lut[tid - lo], ids.astype(np.int64) + lo
    ids, code = np.unique(tid, return_inverse=True)
    return code.astype(np.int32), ids.astype(np.int64)


def _by_thread(trace: Trace, rows: IDX) -> tuple[IDX, NDArray[np.int32], I64]:
    """Host rows ordered by thread, start, longer first; their thread codes; the thread ids."""
    ev = trace.events
    code, tids = thread_codes(ev.tid[rows])
    order = np.argsort(code.astype(np.uint16) if tids.size < 1 << 16 else code, kind="stable")
    rows, code = rows[order], code[order]
    ts = ev.ts_ns[rows]
    tie = np.flatnonzero((ts[1:] == ts[:-1]) & (code[1:] == code[:-1]))
    if tie.size:  # equal starts on one thread: the longer (the enclosing one) first
        pos = np.unique(np.concatenate((tie, tie + 1)))
        sub = np.lexsort((-ev.dur_ns[rows[pos]], ts[pos], code[pos]))
        rows[pos] = rows[pos[sub]]
    return rows, code, tids


@dataclass(frozen=True)
class HostForest:
    rows: IDX  # host event rows (into trace.events), by thread, start, longer first
    end_ns: I64  # per position: the event's end, cut to its parent's where it crossed it (``_nest``)
    thread: NDArray[np.int32]  # per position: dense thread code
    tids: I64  # thread code -> tid
    depth: I64
    parent: IDX  # per position: the parent's position, -1 at a root
    node: IDX  # per position: call-tree node
    node_parent: IDX  # per node: parent node, -1 at a root
    node_name: NDArray[np.int32]
    node_kind: NDArray[np.uint8]
    node_depth: I64

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @property
    def n_nodes(self) -> int:
        return int(self.node_parent.shape[0])

    def path(self, node: int) -> list[int]:
        """The nodes from the root down to ``node``."""
        out = []
        while node >= 0:
            out.append(node)
            node = int(self.node_parent[node])
        return out[::-1]

    def subtree_sum(self, per_node: NDArray[np.float64] | I64) -> NDArray[np.float64]:
        """Per node, the sum of ``per_node`` over the node and its descendants (one pass per level, deepest first)."""
        out = np.asarray(per_node, np.float64).copy()
        for d in range(int(self.node_depth.max()) if self.n_nodes else 0, 0, -1):
            lvl = np.flatnonzero(self.node_depth == d)
            np.add.at(out, self.node_parent[lvl], out[lvl])
        return out

    @staticmethod
    def build(trace: Trace) -> HostForest:
        ev = trace.events
        rows, code, tids = _by_thread(trace, np.flatnonzero(kind_mask(ev.kind, HOST_KINDS)))
        ts = ev.ts_ns[rows]
        end = ts + ev.dur_ns[rows]
        keep, parent = _nest(ev.kind[rows], code, ts, end)
        if not keep.all():
            rows, code, ts, end = rows[keep], code[keep], ts[keep], end[keep]
        n = rows.size
        depth = _ranks(parent)
        node = np.zeros(n, dtype=np.intp)
        name = ev.name_id[rows].astype(np.int64)
        n_names = max(len(ev.names), 1)
        by_depth = np.argsort(depth.astype(np.uint16) if n and depth.max() < 1 << 16 else depth, kind="stable")
        bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2 if n else 1))
        n_par: list[IDX] = []
        n_nam: list[I64] = []
        n_kind: list[NDArray[np.uint8]] = []
        n_dep: list[I64] = []
        made = 0
        for d in range(bounds.size - 1):
            cur = by_depth[bounds[d] : bounds[d + 1]]
            key = node[parent[cur]].astype(np.int64) * n_names + name[cur] if d else name[cur]
            uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
            node[cur] = inv.reshape(-1) + made
            n_par.append(node[parent[cur[first]]] if d else np.full(uniq.size, -1, np.intp))
            n_nam.append(name[cur[first]])
            n_kind.append(ev.kind[rows[cur[first]]])
            n_dep.append(np.full(uniq.size, d, np.int64))
            made += uniq.size

        def cat(parts: list[NDArray[np.generic]], dtype: type) -> NDArray[np.generic]:
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

        return HostForest(
            rows=rows,
            end_ns=end,
            thread=code,
            tids=tids,
            depth=depth,
            parent=parent,
            node=node,
            node_parent=cat(n_par, np.intp),
            node_name=cat(n_nam, np.int32),
            node_kind=cat(n_kind, np.uint8),
            node_depth=cat(n_dep, np.int64),
        )


def _nest(kind: NDArray[np.uint8], code: NDArray[np.int32], ts: I64, end: I64) -> tuple[NDArray[np.bool_], IDX]:
    """Make each thread's events nest, then find each one's parent by counting (``_counted``).

    An event that starts inside its parent and ends after it (they cross) breaks the nesting. A
    ``record_function`` range opens inside the short Python frames of its ``__enter__`` and closes inside those
    of its ``__exit__``: where a non-Python event crosses a Python frame, that frame (and the frames above it
    that it crosses too) are left out: they hold no time of their own. Any other crossing event (a Python frame
    closing a range, operators with clock jitter) is cut at its parent's end, with the events that start after
    it and before that end. Repeated until nothing crosses (a pass or two). Returns which events are kept and
    the parents (positions among the kept ones); ``end`` is cut in place.
    """
    keep = np.ones(ts.size, bool)
    at = np.arange(ts.size)
    shift = max(int(end.max()) + 2, 2).bit_length() if ts.size else 1
    key = (code.astype(np.int64) << shift) + ts  # sorted: by thread, then start
    for _ in range(4):
        parent = _counted(code[at], ts[at], end[at])
        v = np.flatnonzero(parent >= 0)
        v = v[end[at[v]] > end[at[parent[v]]]]
        # only real crossings (it starts inside its parent): a counted parent that has already ended is a
        # consequence of an earlier crossing, and right once that one is resolved
        v = v[ts[at[v]] < end[at[parent[v]]]]
        if v.size == 0:
            return keep, parent
        p = parent[v]
        frame = (kind[at[p]] == Kind.PYTHON) & (kind[at[v]] != Kind.PYTHON)
        _cut(at, key, code, end, v[~frame], p[~frame], shift)
        v, p = v[frame], p[frame]
        while v.size:  # the frames it crosses, up its chain (its ancestors nest: they were counted before it)
            keep[at[p]] = False
            up = parent[p] >= 0
            v, p = v[up], parent[p[up]]
            more = (end[at[p]] < end[at[v]]) & (kind[at[p]] == Kind.PYTHON)
            v, p = v[more], p[more]
        at = np.flatnonzero(keep)
    parent = _counted(code[at], ts[at], end[at])  # pragma: no cover - still crossing after 4 passes: cut
    v = np.flatnonzero(parent >= 0)  # pragma: no cover
    end[at[v]] = np.minimum(end[at[v]], end[at[parent[v]]])  # pragma: no cover
    return keep, parent  # pragma: no cover


def _cut(at: IDX, key: I64, code: NDArray[np.int32], end: I64, v: IDX, p: IDX, shift: int) -> None:
    """Cut each crossing event ``v`` (positions among ``at``) and the events of its thread starting after it and
    before its parent's end at that end (where they end later)."""
    if v.size == 0:
        return
    limit = end[at[p]]
    hi = np.searchsorted(key[at], (code[at[v]].astype(np.int64) << shift) + limit, side="left")
    n = np.maximum(hi - v, 0)
    pos = np.repeat(v - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
    rows = at[pos]
    np.minimum.at(end, rows, np.repeat(limit, n))


def _counted(code: NDArray[np.int32], ts: I64, end: I64) -> IDX:
    """The parent by counting open events (exact for properly nested events; ``_parents``). Zero-length events
    count as 1 ns long here, so a marker sits below the range it is in."""
    n = ts.size
    if n == 0:
        return np.zeros(0, np.intp)
    shift = max(int(end.max()) + 2, 2).bit_length()
    if int(code.max()) >= 1 << (62 - shift):  # pragma: no cover - would need hours of trace and many threads
        raise ValueError("trace too long to nest by counting")
    grp = code.astype(np.int64) << shift
    ends = np.maximum(end, ts + 1)
    ends += grp
    ends.sort()
    grp += ts
    depth = np.arange(n, dtype=np.int64) - np.searchsorted(ends, grp, side="right")
    del ends, grp
    np.maximum(depth, 0, out=depth)
    by_depth = np.argsort(depth.astype(np.uint16) if depth.max() < 1 << 16 else depth, kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
    out = np.full(n, -1, np.intp)
    for d in range(1, bounds.size - 1):  # per level: both sides sorted, so the search walks memory in order
        up, cur = by_depth[bounds[d - 1] : bounds[d]], by_depth[bounds[d] : bounds[d + 1]]
        out[cur] = up[np.maximum(np.searchsorted(up, cur, side="right") - 1, 0)]
    return out


def _ranks(parent: IDX) -> I64:
    """Depth of each event in its parent forest, by pointer doubling (list ranking: log-of-depth rounds)."""
    rank = (parent >= 0).astype(np.int64)
    anc = parent.copy()
    live = np.flatnonzero(anc >= 0)
    while live.size:
        a = anc[live]
        rank[live] += rank[a]  # both sides read the previous round's values
        anc[live] = anc[a]
        live = live[anc[live] >= 0]
    return rank
