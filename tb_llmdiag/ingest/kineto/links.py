"""Kineto's forward-backward flows -> ``Trace.extra["fwd_links"]``: the forward operator each backward operator runs for.

PyTorch's profiler links the operator that recorded an autograd node (``aten::mm``, ``aten::_log_softmax``...) to the
backward operator autograd later runs for it (``MmBackward0``, ``LogSoftmaxBackward0``) by a pair of flow events with
one ``id`` and ``"cat": "fwdbwd"``: the start (``"ph": "s"``) at the forward operator's ``ts`` on its thread, the end
(``"ph": "f"``) at the backward operator's ``ts`` on the autograd thread. The scan keeps those flows as typed columns in
its one pass over each piece's decoded events (``_scan.c``, ``layout.FLOW_DTYPES``; launch flows, ``ac2g``, are
dropped there by their category); this resolves them once the rows are in time order.

Contract:
- ``fwd_links(events, ts_ns, tid, ids, end)``: the links as an int32 array of two rows: the backward operators' rows
  (ascending, each once) and, below each, its forward operator's row; None when no pair links two operators (a
  sparse pair of rows, not a column aligned with the events: a training trace links one operator in ten). A flow's operator is the CPU
  operator of the flow's thread that starts at exactly its time (the profiler writes both from one timestamp, and
  the reader reads both the same way, to the ns); where several start then (operators nested in the same ns), the
  innermost, i.e. the shortest (then the first row). A flow with no operator there, or without a thread or an id
  (-1), and an id without both ends, link nothing; an id with several starts links from the first in file order.
Cost: one pass over the event kinds, and per thread the flows name (two, usually) one mask and two binary searches.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.model import EventTable, Kind

I64 = NDArray[np.int64]


def _rows_at(events: EventTable, tid: I64, ts_ns: I64) -> I64:
    """Per flow (thread, time): the CPU operator row of that thread starting at that time (the innermost), else -1."""
    out = np.full(tid.size, -1, np.int64)
    ops = np.flatnonzero(events.kind == Kind.CPU_OP)
    op_tid = events.tid[ops]
    for t in np.unique(tid).tolist():  # the threads the flows name: the forward thread(s) and autograd's
        mine = ops[op_tid == t]
        if mine.size == 0:
            continue
        sel = np.flatnonzero(tid == t)
        starts = events.ts_ns[mine]  # rows are in time order
        q = ts_ns[sel]
        lo = np.searchsorted(starts, q, side="left")
        hi = np.searchsorted(starts, q, side="right")
        at = hi > lo
        out[sel[at]] = mine[lo[at]]
        tie = np.flatnonzero(hi - lo > 1)
        if tie.size:  # operators opened in the same ns: the shortest of each group (the first on a tie)
            n = (hi - lo)[tie]
            if int(n.sum()) <= 4 * mine.size:
                out[sel[tie]] = _shortest(events.dur_ns, mine, lo[tie], n)
            else:  # many flows on a few crowded instants: order the thread's operators once instead
                out[sel[tie]] = mine[np.lexsort((events.dur_ns[mine], starts))][lo[tie]]
    return out


def _shortest(dur: I64, rows: NDArray[np.intp], lo: NDArray[np.intp], n: NDArray[np.intp]) -> NDArray[np.intp]:
    """Per range ``rows[lo:lo + n]``, its row of the shortest duration (the first on a tie)."""
    first = np.concatenate(([0], np.cumsum(n)[:-1]))
    seg = np.repeat(np.arange(n.size), n)
    pos = np.repeat(lo - first, n) + np.arange(seg.size)
    order = np.lexsort((dur[rows[pos]], seg))
    return rows[pos[order[first]]]


def fwd_links(events: EventTable, ts_ns: I64, tid: I64, ids: I64, end: NDArray[np.bool_]) -> NDArray[np.int32] | None:
    """The links (module docstring)."""
    ok = (tid != -1) & (ids != -1)
    row = np.where(ok, _rows_at(events, tid, ts_ns), -1)
    s = (row >= 0) & ~end
    f = (row >= 0) & end
    if not s.any() or not f.any():
        return None
    s_id, first = np.unique(ids[s], return_index=True)  # the first start of each id, in file order
    s_row = row[s][first]
    f_id, f_row = ids[f], row[f]
    at = np.minimum(np.searchsorted(s_id, f_id), s_id.size - 1)
    hit = (s_id[at] == f_id) & (s_row[at] != f_row)
    if not hit.any():
        return None
    bwd, first = np.unique(f_row[hit], return_index=True)  # a backward operator ending two flows: the first
    return np.stack((bwd, s_row[at[hit]][first])).astype(np.int32)
