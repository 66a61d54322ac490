"""The host call forest of one trace: every host event's parent and its node in the call tree, as columns.

Contract (``HostForest.build(trace)``; no I/O, no per-event Python):
- Host events are the rows of kinds CPU_OP, ANNOTATION, PYTHON, RUNTIME and DRIVER (step markers are not: a
  step's time is the step's, and ``ProfilerStep#N`` ranges cross the Python frames of ``prof.step()``), less the
  Python frames of installed packages (``_kept_frames``: torch, transformers... hold no cause of their own; the
  user's frames, built-in functions and ``nn.Module`` frames stay). They are ordered by
  thread, then start, then longer first (``rows``: indices into ``trace.events``); threads are numbered densely
  (``tids[code]`` is the trace's tid).
- ``bounds``: where each thread's positions start among ``rows`` (and the end).
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

import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.model import EventTable, Kind, Trace, kind_mask

I64 = NDArray[np.int64]
IDX = NDArray[np.intp]
P32 = NDArray[np.int32]  # positions and codes: int32 halves the forest's memory (a trace holds < 2**31 events)
CHUNK = 1 << 16  # events per search: bounds the temporaries on big traces
Levels = tuple[NDArray[np.int32], I64]  # positions by depth, and where each depth starts among them

_FRAME = re.compile(r"^(?P<file>[^()]+\.py)\((?P<line>\d+)\): ?(?P<fn>.*)$")
#: a frame outside the user's code: installed packages (traces name them relative to site-packages) and the harness
LIBRARY = re.compile(
    r"(?:^|/)(?:torch|transformers|peft|accelerate|trl|datasets|tokenizers|numpy|triton|deepspeed|lightning|"
    r"pytorch_lightning|vllm|sglang|diffusers|xformers|flash_attn|apex|bitsandbytes|liger_kernel|unsloth|torchtune|"
    r"torchao|timm|safetensors|huggingface_hub|megatron|tb_llmdiag|contextlib|threading|functools|typing|importlib)/"
    r"|site-packages|dist-packages"
    r"|^<|/lib/python3|^python3\.\d+/"
)


def user_frame(name: str) -> tuple[str, int, str] | None:
    """(file, line, function) of a Python frame of the user's code, else None."""
    m = _FRAME.match(name)
    if m is None or LIBRARY.search(m["file"]):
        return None
    return m["file"], int(m["line"]), m["fn"]


def _kept_frames(ev: EventTable, rows: P32) -> P32:
    """``rows`` without the Python frames of installed packages (``LIBRARY``; checked once per name): their time
    goes to the frame or operator around them. Built-in functions (``gc.collect``, ``time.sleep``) and
    ``nn.Module`` frames stay: they say what the user's code does."""
    py = ev.kind[rows] == Kind.PYTHON
    ids = np.unique(ev.name_id[rows[py]])
    drop = np.fromiter(
        (
            LIBRARY.search(ev.names[i]) is not None and not ev.names[i].startswith(("<built-in function", "nn.Module"))
            for i in ids.tolist()
        ),
        bool,
        count=ids.size,
    )
    if not drop.any():
        return rows
    flag = np.zeros(len(ev.names), bool)
    flag[ids[drop]] = True
    return rows[~(py & flag[ev.name_id[rows]])]


HOST_KINDS = (Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON, Kind.RUNTIME, Kind.DRIVER)


def thread_codes(tid: I64) -> tuple[NDArray[np.int32], I64]:
    """Dense codes of thread ids and the distinct ids (by counting when the ids span a small range, the usual
    case: no sort)."""
    if tid.size == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    lo, hi = int(tid.min()), int(tid.max())
    if hi - lo < 1 << 22:
        off = tid - lo
        seen = np.bincount(off, minlength=hi - lo + 1) > 0
        ids = np.flatnonzero(seen)
        lut = np.cumsum(seen, dtype=np.int32) - 1
        return lut[off], ids.astype(np.int64) + lo
    ids, code = np.unique(tid, return_inverse=True)
    return code.astype(np.int32), ids.astype(np.int64)


def _by_thread(trace: Trace, rows: P32) -> tuple[P32, P32, I64, I64]:
    """Host rows ordered by thread, start, longer first; their thread codes, the thread ids and their starts."""
    ev = trace.events
    code, tids = thread_codes(ev.tid[rows])
    order = np.argsort(code.astype(np.uint16) if tids.size < 1 << 16 else code, kind="stable")
    rows, code = rows[order].astype(np.int32), code[order]
    del order
    ts = ev.ts_ns[rows]
    tie = np.flatnonzero((ts[1:] == ts[:-1]) & (code[1:] == code[:-1]))
    if tie.size:  # equal starts on one thread: the longer (the enclosing one) first
        pos = np.unique(np.concatenate((tie, tie + 1)))
        sub = np.lexsort((-ev.dur_ns[rows[pos]], ts[pos], code[pos]))
        rows[pos] = rows[pos[sub]]
        ts[pos] = ts[pos[sub]]
    return rows.astype(np.int32, copy=False), code, tids, ts


@dataclass(frozen=True)
class HostForest:
    rows: P32  # host event rows (into trace.events), by thread, start, longer first
    end_ns: I64  # per position: the event's end, cut to its parent's where it crossed it (``_nest``)
    bounds: IDX  # per thread code: where its positions start, and the end (positions are by thread)
    tids: I64  # thread code -> tid
    parent: P32  # per position: the parent's position, -1 at a root
    node: P32  # per position: call-tree node
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
        host = np.flatnonzero(kind_mask(ev.kind, HOST_KINDS)).astype(np.int32)
        rows, code, tids, ts = _by_thread(trace, _kept_frames(ev, host))
        del host
        end = ev.dur_ns[rows]
        end += ts
        keep, parent, levels, code, end = _nest(ev, rows, code, ts, end)
        del ts
        if keep is not None:
            rows = rows[keep]
        del keep
        node, nodes = _nodes(ev, rows, parent, levels)
        bounds = _thread_bounds(code, tids.size)
        del code
        return HostForest(rows, end, bounds, tids, parent, node, *nodes)


def _nodes(
    ev: EventTable, rows: P32, parent: P32, levels: Levels
) -> tuple[P32, tuple[IDX, NDArray[np.int32], NDArray[np.uint8], I64]]:
    """Call-tree nodes, level by level: events of one level with the same parent node and name share a node."""
    n = rows.size
    node = np.zeros(n, dtype=np.int32)
    n_names = max(len(ev.names), 1)
    by_depth, bounds = levels
    parts: list[tuple[IDX, NDArray[np.int32], NDArray[np.uint8], I64]] = []
    made = 0
    for d in range(bounds.size - 1):
        cur = by_depth[bounds[d] : bounds[d + 1]]
        name = ev.name_id[rows[cur]]
        key = node[parent[cur]].astype(np.int64) * n_names + name if d else name
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        node[cur] = inv.reshape(-1) + made
        up = node[parent[cur[first]]].astype(np.intp) if d else np.full(uniq.size, -1, np.intp)
        parts.append((up, name[first], ev.kind[rows[cur[first]]], np.full(uniq.size, d, np.int64)))
        made += uniq.size
    if not parts:
        return node, (np.zeros(0, np.intp), np.zeros(0, np.int32), np.zeros(0, np.uint8), np.zeros(0, np.int64))
    return node, tuple(np.concatenate([p[i] for p in parts]) for i in range(4))  # type: ignore[return-value]


def _nest(
    ev: EventTable, rows: P32, code: P32, ts: I64, end: I64
) -> tuple[NDArray[np.bool_] | None, P32, Levels, P32, I64]:
    """Make each thread's events nest, then find each one's parent by counting (``_counted``).

    An event that starts inside its parent and ends after it (they cross) breaks the nesting. A
    ``record_function`` range opens inside the short Python frames of its ``__enter__`` and closes inside those
    of its ``__exit__``: a frame inside which a range starts and that ends before the range does is left out (it
    holds no time of its own), and everything that starts inside a range ends no later than it (``_ranges_first``,
    before any counting). Any crossing left (operators with clock jitter) is cut at its parent's end, with the
    events that start after it and before that end, or, where a non-Python event crosses a Python frame, that
    frame and the frames above it that it crosses too are left out; counted again until nothing crosses (once,
    usually). Returns which events are kept (None: all), the parents (positions among the kept ones), their
    levels, thread codes and ends (``end`` is cut in place, then compacted).
    """
    kind = ev.kind[rows]
    keep = _ranges_first(kind, code, ts, end)
    kept = np.ones(ts.size, bool) if keep is not None else None
    for _ in range(4):
        if keep is not None:  # compact in place of gathering: the arrays shrink, nothing is copied twice
            assert kept is not None
            at = np.flatnonzero(kept)
            kept[at[~keep]] = False
            code, ts, end, kind = code[keep], ts[keep], end[keep], kind[keep]
            del at
        parent, levels = _counted(code, ts, end)
        # a real crossing starts inside its parent and ends after it (a counted parent that has already ended
        # follows from an earlier crossing and is right once that one is resolved)
        v = _crossing(parent, ts, end)
        if v.size == 0:
            return kept, parent, levels, code, end
        p = parent[v]
        frame = (kind[p] == Kind.PYTHON) & (kind[v] != Kind.PYTHON)
        _cut(code, ts, end, v[~frame], end[p[~frame]])
        v, p = v[frame], p[frame]
        keep = np.ones(ts.size, bool)
        while v.size:  # the frames it crosses, up its chain (its ancestors nest: they were counted before it)
            keep[p] = False
            up = parent[p] >= 0
            v, p = v[up], parent[p[up]]
            more = (end[p] < end[v]) & (kind[p] == Kind.PYTHON)
            v, p = v[more], p[more]
        if kept is None:
            kept = np.ones(ts.size, bool)
        if keep.all():
            keep = None
    raise ValueError("host events still cross after 4 passes")  # pragma: no cover - each pass resolves a level


def _crossing(parent: P32, ts: I64, end: I64) -> P32:
    """The positions of the events that start inside their parent and end after it (chunk by chunk: bounded
    temporaries)."""
    out = []
    for lo in range(0, ts.size, CHUNK):
        hi = min(lo + CHUNK, ts.size)
        p = parent[lo:hi]
        p_end = end[np.maximum(p, 0)]
        cross = end[lo:hi] > p_end
        cross &= ts[lo:hi] < p_end
        cross &= p >= 0
        out.append(lo + np.flatnonzero(cross).astype(np.int32))
    return np.concatenate(out) if out else np.zeros(0, np.int32)


def _thread_bounds(code: P32, n_threads: int | None = None) -> IDX:
    """Where each thread's positions start (codes ascending), and the end."""
    n = (int(code.max()) + 1 if code.size else 0) if n_threads is None else n_threads
    return np.searchsorted(code, np.arange(n + 1))


def _ranges_first(kind: NDArray[np.uint8], code: P32, ts: I64, end: I64) -> NDArray[np.bool_] | None:
    """The usual crossings, resolved before any counting: each event that starts inside a ``record_function`` range
    (the innermost one open at its start) ends no later than it (``end`` is cut in place), and a Python frame inside
    which a range starts and that ends before that range does is left out (returns which events are kept, None:
    all). Ranges are few: every search here is into one thread's ranges."""
    ann_all = np.flatnonzero(kind == Kind.ANNOTATION)
    if ann_all.size == 0:
        return None
    keep = np.ones(ts.size, bool)
    bounds = _thread_bounds(code)
    for c in np.unique(code[ann_all]).tolist():
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        ann = ann_all[(ann_all >= lo) & (ann_all < hi)]
        a_ts, a_end = ts[ann], end[ann]
        a_par = _counted(code[ann], a_ts, a_end)[0]  # ranges nest among themselves
        # the innermost range open at each event's start: the last one started at or before it, or up its chain
        for lo_c in range(lo, hi, CHUNK):  # bounded temporaries
            hi_c = min(lo_c + CHUNK, hi)
            at = np.searchsorted(a_ts, ts[lo_c:hi_c], side="right") - 1
            own = ann[(ann >= lo_c) & (ann < hi_c)]
            at[own - lo_c] = np.searchsorted(ann, own) - 1  # a range looks from the one before it
            live = np.flatnonzero(at >= 0)
            while live.size:
                live = live[a_end[at[live]] <= ts[lo_c + live]]
                at[live] = a_par[at[live]]
                live = live[at[live] >= 0]
            inside = np.flatnonzero(at >= 0)
            np.minimum.at(end, lo_c + inside, a_end[at[inside]])
        # a frame that a range starts in and outlives: the ranges' largest end over those starting inside it
        fr = lo + np.flatnonzero(kind[lo:hi] == Kind.PYTHON)
        f_lo = np.searchsorted(a_ts, ts[fr], side="right")
        f_hi = np.searchsorted(a_ts, end[fr], side="left")
        has = f_hi > f_lo
        fr, f_lo, f_hi = fr[has], f_lo[has], f_hi[has]
        if fr.size:
            keep[fr[_range_max(a_end, f_lo, f_hi) > end[fr]]] = False
    return None if keep.all() else keep


def _range_max(values: I64, lo: IDX, hi: IDX) -> I64:
    """max(values[lo:hi]) per query (hi > lo), by a sparse table over ``values`` (a few levels of its length)."""
    table = [values]
    while 1 << len(table) <= values.size:
        prev, w = table[-1], 1 << (len(table) - 1)
        table.append(np.maximum(prev[:-w], prev[w:]))
    k = np.log2(hi - lo).astype(np.intp)
    out = np.empty(lo.size, values.dtype)
    for lvl in np.unique(k).tolist():
        m = k == lvl
        t = table[lvl]
        out[m] = np.maximum(t[lo[m]], t[hi[m] - (1 << lvl)])
    return out


def _cut(code: P32, ts: I64, end: I64, v: P32, limit: I64) -> None:
    """Cut each crossing event (position ``v``) and the events of its thread that start after it and before
    ``limit`` (its parent's end) at that limit, where they end later."""
    if v.size == 0:
        return
    bounds = _thread_bounds(code)
    hi = np.empty(v.size, np.intp)
    for c in np.unique(code[v]).tolist():
        m = code[v] == c
        lo_c = int(bounds[c])
        hi[m] = lo_c + np.searchsorted(ts[lo_c : int(bounds[c + 1])], limit[m], side="left")
    n = np.maximum(hi - v, 0)
    pos = np.repeat(v - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
    np.minimum.at(end, pos, np.repeat(limit, n))


def _counted(code: P32, ts: I64, end: I64) -> tuple[P32, Levels]:
    """The parent and depth by counting open events (exact where events nest properly: ``_nest``): the depth is
    the thread's events opened before it minus those ended at or before its start; the parent the last earlier
    event one level up. Zero-length events count as 1 ns long here, so a marker sits below the range it is in.
    Returns the parents and the levels: the positions by depth (stable) and where each depth starts."""
    n = ts.size
    depth = np.zeros(n, np.int32)
    if n == 0:
        return np.zeros(0, np.int32), (np.zeros(0, np.int32), np.zeros(1, np.int64))
    bounds = _thread_bounds(code)
    for c in range(bounds.size - 1):  # per thread: the sorted ends of its events, searched by its starts
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        if hi > lo:
            ends = ts[lo:hi] + 1
            np.maximum(ends, end[lo:hi], out=ends)
            ends.sort()
            for lo_c in range(lo, hi, CHUNK):  # bounded temporaries
                hi_c = min(lo_c + CHUNK, hi)
                found = np.searchsorted(ends, ts[lo_c:hi_c], side="right")
                np.subtract(np.arange(lo_c - lo, hi_c - lo), found, out=found)
                depth[lo_c:hi_c] = found
            del ends
    np.maximum(depth, 0, out=depth)
    level = np.concatenate(([0], np.cumsum(np.bincount(depth))))
    by_depth = np.empty(n, np.int32)  # the positions by depth, stable: level by level (no int64 sort of them all)
    for d in range(level.size - 1):
        by_depth[level[d] : level[d + 1]] = np.flatnonzero(depth == d)
    del depth
    parent = np.full(n, -1, np.int32)
    for d in range(1, level.size - 1):  # per level: both sides sorted, so the search walks memory in order
        up, cur = by_depth[level[d - 1] : level[d]], by_depth[level[d] : level[d + 1]]
        parent[cur] = up[np.maximum(np.searchsorted(up, cur, side="right") - 1, 0)]
    return parent, (by_depth, level)
