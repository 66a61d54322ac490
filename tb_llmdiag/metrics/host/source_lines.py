"""The user's source line (``file:line``) of host events, through autograd's backward.

A finding's ``source`` is the innermost frame of the user's own code around its culprit (``host_tree.user_frame``:
installed packages left out), recorded with ``with_stack=True``. Autograd runs a backward operator on its own thread,
under no frame of the user's (at most the generated code of a compiled graph): its source is its forward operator's,
which the reader links to it (``Trace.extra["fwd_links"]``, from Kineto's ``fwdbwd`` flows: the backward operators'
rows, ascending, over their forward operators' rows).

Contract (no I/O; the per-call work is bounded by ``MAX_ROWS`` queried rows):
- ``user_frames(ctx)``: the Python frames of the user's code by thread (rows, starts, ends; by start, longer
  first), kept per trace.
- ``rows_source(ctx, rows)``: of the ``MAX_ROWS`` longest of ``rows`` (a culprit's calls), each one's source: where
  it runs in a backward operator linked to its forward operator (the innermost linked one around it on its thread;
  else, for the engine's range around a backward node, the first linked one inside it), that forward operator's
  innermost user frame; else its own innermost user frame (the latest started one around it on its thread, or itself).
  The ``file:line`` holding the most of their durations (the first in text order on a tie); None when none has one.
- ``forward_of(links, rows)``: per row, the forward operator's row where the row is a linked backward operator, else
  -1 (``links``: ``Trace.extra["fwd_links"]`` or None).
- ``under_backward(names)``: whether a chain of names runs inside a backward operator (``BACKWARD``).
"Around" is containment: started at or before it and ended at or after its end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.metrics.context import Context, used_names
from tb_llmdiag.metrics.host.tree import user_frame
from tb_llmdiag.model import EventTable, Kind

IDX = NDArray[np.intp]
#: the longest calls of a culprit that are read for its source (its time is mostly theirs)
MAX_ROWS = 256
#: an operator autograd runs in the backward pass (its node, or the engine's range around it)
BACKWARD = re.compile(r"^autograd::engine::evaluate_function: |Backward\d*$")
_CHUNK = 32  # queried rows per containment scan: bounded temporaries


def forward_of(links: NDArray[np.int32] | None, rows: NDArray[np.integer[Any]]) -> IDX:
    """Per row, its forward operator's row where it is a linked backward operator, else -1."""
    out = np.full(rows.shape, -1, np.intp)
    if links is None or links.shape[1] == 0:
        return out
    at = np.minimum(np.searchsorted(links[0], rows), links.shape[1] - 1)
    hit = links[0][at] == rows
    out[hit] = links[1][at[hit]]
    return out


def under_backward(names: Iterable[str]) -> bool:
    """Whether one of the names (a chain, outermost first) is a backward operator's."""
    return any(BACKWARD.search(n) is not None for n in names)


#: tid -> rows (by start), and whether any of them nest (else the latest started is the only one around them)
ByThread = dict[int, tuple[NDArray[np.int32], bool]]


def _by_thread(ev: EventTable, rows: IDX) -> ByThread:
    """``rows`` (by start) split by thread, with their starts and ends."""
    tid = ev.tid[rows]
    order = np.argsort(tid, kind="stable")
    cut = np.flatnonzero(np.diff(tid[order])) + 1
    out: ByThread = {}
    for part in np.split(order, cut) if order.size else []:
        r = rows[part]
        ts = ev.ts_ns[r]
        nest = bool(((ts + ev.dur_ns[r])[:-1] > ts[1:]).any())
        out[int(tid[part[0]])] = (r.astype(np.int32), nest)
    return out


def user_frames(ctx: Context) -> ByThread:
    """The Python frames of the user's code (each distinct frame name tested once), by thread, start, longer first;
    kept per trace."""

    def compute() -> ByThread:
        ev = ctx.trace.events
        py = ev.kind == Kind.PYTHON
        ids = used_names(ev.name_id[py], len(ev.names))  # no per-row array kept: a mask and the rows found
        mine = np.fromiter((user_frame(ev.names[i]) is not None for i in ids.tolist()), bool, count=ids.size)
        flag = np.zeros(len(ev.names), bool)
        flag[ids[mine]] = True
        py &= flag[ev.name_id]
        rows = np.flatnonzero(py)
        del py
        return _by_thread(ev, rows[np.lexsort((-ev.dur_ns[rows], ev.ts_ns[rows]))])

    return ctx.cache.derived("user_frames", (ctx.trace.events,), compute)


def _around(ev: EventTable, cands: ByThread, rows: IDX, inside: bool = False) -> IDX:
    """Per row, the candidate around it on its thread that started last, else -1; with ``inside``, where none is
    around it, the first that starts inside it."""
    out = np.full(rows.size, -1, np.intp)
    r_tid = ev.tid[rows]
    for t in np.unique(r_tid).tolist():
        if t not in cands:
            continue
        mine, nest = cands[t]
        c_ts = ev.ts_ns[mine]
        c_end = c_ts + ev.dur_ns[mine]
        sel = np.flatnonzero(r_tid == t)
        q_ts = ev.ts_ns[rows[sel]]
        q_end = q_ts + ev.dur_ns[rows[sel]]
        pred = np.searchsorted(c_ts, q_ts, side="right") - 1
        hit = (pred >= 0) & (c_end[np.maximum(pred, 0)] >= q_end)
        out[sel[hit]] = mine[pred[hit]]
        for lo in range(0, int((~hit).sum()) if nest else 0, _CHUNK):  # the latest started is not around it: scan
            miss = np.flatnonzero(~hit)[lo : lo + _CHUNK]
            ok = (c_ts[None, :] <= q_ts[miss, None]) & (c_end[None, :] >= q_end[miss, None])
            last = c_ts.size - 1 - np.argmax(ok[:, ::-1], axis=1)
            found = ok.any(axis=1)
            out[sel[miss[found]]] = mine[last[found]]
        if inside:
            first = np.searchsorted(c_ts, q_ts, side="left")
            more = (out[sel] < 0) & (first < c_ts.size)
            more[more] = c_ts[first[more]] < q_end[more]
            out[sel[more]] = mine[first[more]]
    return out


def rows_source(ctx: Context, rows: IDX) -> str | None:
    """The source of a culprit's calls (module docstring)."""
    ev = ctx.trace.events
    frames = user_frames(ctx)
    if rows.size == 0 or not frames:
        return None
    if rows.size > MAX_ROWS:
        rows = rows[np.argsort(-ev.dur_ns[rows], kind="stable")[:MAX_ROWS]]
    start = rows.astype(np.intp)
    links = ctx.trace.extra.get("fwd_links")
    if links is not None:
        linked = ctx.cache.derived("linked_rows", (links,), lambda: _by_thread(ev, links[0].astype(np.intp)))
        bwd = _around(ev, linked, start, inside=True)
        has = bwd >= 0
        start[has] = forward_of(links, bwd[has])
    src = _around(ev, frames, start)
    own = [
        i for i in np.flatnonzero(ev.kind[start] == Kind.PYTHON).tolist() if user_frame(ev.names[ev.name_id[start[i]]])
    ]
    src[own] = start[own]  # a frame of the user's code is its own source
    ok = src >= 0
    ids, inv = np.unique(ev.name_id[src[ok]], return_inverse=True)  # each frame's name read once
    per = np.bincount(inv.reshape(-1), weights=ev.dur_ns[rows[ok]], minlength=ids.size)
    weight: dict[str, float] = {}
    for i, w in zip(ids.tolist(), per.tolist()):
        f = user_frame(ev.names[i])
        if f is not None:
            text = f"{f[0]}:{f[1]}"
            weight[text] = weight.get(text, 0.0) + w
    return min(weight, key=lambda t: (-weight[t], t)) if weight else None
