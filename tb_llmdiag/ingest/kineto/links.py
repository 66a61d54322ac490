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
Cost: two binary searches per flow over the rows (in time order), then the few rows starting at each flow's time (at
most 64 read per flow: a crowded instant, which no profiler writes, links nothing beyond them).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.model import EventTable, Kind

I64 = NDArray[np.int64]


def _rows_at(events: EventTable, tid: I64, ts_ns: I64) -> I64:
    """Per flow (thread, time): the CPU operator row of that thread starting at that time (the innermost), else -1.
    The rows are in time order: the rows starting at that time are found by two binary searches over all of them."""
    lo = np.searchsorted(events.ts_ns, ts_ns, side="left")
    n = np.searchsorted(events.ts_ns, ts_ns, side="right") - lo
    if int(n.sum()) > 64 * max(ts_ns.size, 1):  # crowded instants (not a profiler's trace): bounded work instead
        n = np.minimum(n, 64)
    first = np.concatenate(([0], np.cumsum(n)[:-1]))
    flow = np.repeat(np.arange(n.size), n)  # one entry per (flow, row starting at its time)
    row = np.repeat(lo - first, n) + np.arange(flow.size)
    ok = (events.kind[row] == Kind.CPU_OP) & (events.tid[row] == tid[flow])
    flow, row = flow[ok], row[ok]
    out = np.full(tid.size, -1, np.int64)
    out[flow] = row
    many = np.bincount(flow, minlength=tid.size)[flow] > 1
    if many.any():  # operators nested in the same ns: per flow, the shortest (then the first row)
        flow, row = flow[many], row[many]
        order = np.lexsort((events.dur_ns[row], flow))
        flow, row = flow[order], row[order]
        head = np.ones(flow.size, bool)
        head[1:] = flow[1:] != flow[:-1]
        out[flow[head]] = row[head]
    return out


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
