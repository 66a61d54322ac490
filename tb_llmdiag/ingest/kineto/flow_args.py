"""Kineto's forward-backward flows (``"cat": "fwdbwd"``): which forward operator each backward operator runs for.

PyTorch's profiler links an operator that records an autograd node (``aten::mm``, ``aten::_log_softmax``...) to the
backward node autograd later runs for it (``MmBackward0``, ``LogSoftmaxBackward0``) by a pair of flow events with one
``id``: the start (``"ph": "s"``) at the forward operator's ``ts`` on its thread, the end (``"ph": "f"``) at the
backward operator's ``ts`` on the autograd thread. The decoder builds flow events as small Structs (``structs._FLOWS``:
cat, id, ts, tid); this keeps the ``fwdbwd`` ones, per piece, as plain lists (a few per autograd node).

Contract:
- ``FlowArgs.add(events)``: the ``fwdbwd`` flow events of one decoded piece (others dropped).
- ``FlowArgs.columns(events, origin_ns)``: ``{"fwd_row": int32 column}`` aligned with the events: on each backward
  operator row, the row of its forward operator; -1 elsewhere. An end (or start) is the CPU operator on its thread
  whose start is nearest its ``ts`` (within ``TOLERANCE_NS``: timestamps written as floats of epoch microseconds
  lose a fraction of a microsecond); an id without both ends, or an end with no operator there, links nothing.
  ``{}`` when the trace has no such flow.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.ingest.kineto.structs import _FlowEnd, _FlowStart
from tb_llmdiag.model import EventTable, Kind

#: the largest distance between a flow's ts and its operator's start
TOLERANCE_NS = 1000
_CAT = "fwdbwd"


class FlowArgs:
    """Accumulates the ``fwdbwd`` flows of one trace's pieces (module docstring)."""

    def __init__(self) -> None:
        self.flows: list[Any] = []  # the decoded flow Structs, in file order

    def __len__(self) -> int:
        return len(self.flows)

    def add(self, events: list[Any]) -> None:
        start, end = _FlowStart, _FlowEnd
        self.flows += [e for e in events if (e.__class__ is end or e.__class__ is start) and e.cat == _CAT]

    def columns(self, events: EventTable, origin_ns: int) -> dict[str, NDArray[Any]]:
        """The ``Trace.extra`` column (module docstring)."""
        if not self.flows:
            return {}
        tid, ts, ids, end = _numbers(self.flows)
        ts_ns = np.rint((ts - origin_ns / 1000.0) * 1000.0).astype(np.int64)
        row = _rows_at(events, tid, ts_ns)
        found = row >= 0
        s_id, s_row = ids[found & ~end], row[found & ~end]
        f_id, f_row = ids[found & end], row[found & end]
        if s_id.size == 0 or f_id.size == 0:
            return {}
        order = np.argsort(s_id, kind="stable")
        s_id, s_row = s_id[order], s_row[order]
        at = np.clip(np.searchsorted(s_id, f_id), 0, s_id.size - 1)
        hit = s_id[at] == f_id
        if not hit.any():
            return {}
        out = np.full(len(events), -1, np.int32)
        out[f_row[hit]] = s_row[at[hit]]
        return {"fwd_row": out}


def _numbers(
    flows: list[Any],
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64], NDArray[np.bool_]]:
    """The flows' thread ids, times (us), ids and whether each is an end, as arrays, without the flows whose thread id,
    time or id is not a plain number (one conversion per column; per flow only when a column holds something else)."""
    cols = []
    for attr in ("tid", "ts", "id"):
        vals = [getattr(e, attr) for e in flows]
        try:
            cols.append(np.array(vals, np.float64))
        except (TypeError, ValueError):
            cols.append(np.array([_num(v) for v in vals], np.float64))
    tid, ts, ids = cols
    end = np.fromiter((e.__class__ is _FlowEnd for e in flows), bool, count=len(flows))
    ok = np.isfinite(tid) & np.isfinite(ts) & np.isfinite(ids)
    return tid[ok].astype(np.int64), ts[ok], ids[ok].astype(np.int64), end[ok]


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")


def _rows_at(events: EventTable, tid: NDArray[np.int64], ts_ns: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per (thread, time): the CPU operator row of that thread starting nearest the time (within ``TOLERANCE_NS``),
    else -1. One search per thread the flows name (two: the forward thread and autograd's)."""
    out = np.full(tid.size, -1, np.int64)
    ops = np.flatnonzero(events.kind == Kind.CPU_OP)
    op_tid = events.tid[ops]
    for t in np.unique(tid).tolist():
        mine = ops[op_tid == t]
        if mine.size == 0:
            continue
        sel = np.flatnonzero(tid == t)
        starts = events.ts_ns[mine]  # rows are in time order
        q = ts_ns[sel]
        hi = np.clip(np.searchsorted(starts, q, side="left"), 0, mine.size - 1)
        lo = np.clip(hi - 1, 0, mine.size - 1)
        pick = np.where(np.abs(starts[hi] - q) <= np.abs(starts[lo] - q), hi, lo)
        near = np.abs(starts[pick] - q) <= TOLERANCE_NS
        out[sel[near]] = mine[pick[near]]
    return out
