"""The collective arguments PyTorch writes on NCCL kernel rows, kept for the jobs analysis (docs/jobs.md).

Kineto (PyTorch >= 2.1) writes a collective's message on its kernel row's args: ``In msg nelems``,
``Out msg nelems``, ``Group size``, ``dtype``, ``Process Group Name``, ``Process Group Ranks`` and, in newer
versions, ``Seq``. The row decoder keeps only the args every trace needs; this is a second, small pass over the
same text, armed once an event name is an NCCL/RCCL kernel's (``ncclKernel*``, ``ncclDevKernel*``: the rows that carry
these args; a trace without them pays two substring tests per distinct name), then run only on the pieces that contain
``"In msg nelems"`` at all (one ``bytes.find``), and per occurrence, so its cost follows the number of
collectives, not of events.

Contract:
- ``CommArgs.after_piece(buf, end, names)``: what the reader calls once per decoded piece, with its name table so
  far: arms on the first NCCL/RCCL kernel name, then ``scan``s the pieces that hold the needle.
- ``CommArgs.scan(buf, end)``: every args object in ``buf[:end]`` that holds ``"In msg nelems"`` and a
  ``correlation`` (kernel rows; ``record_param_comms`` CPU rows carry no correlation and are left out) adds one
  record. Malformed values are skipped (-1), never raised.
- ``CommArgs.columns(events)``: ``(extra, extra_names)`` for ``Trace``: the columns of
  ``metrics.comm.collectives.ARG_COLUMNS`` aligned with the events (-1 unknown), filled on the kernel rows whose
  correlation id a record carries; ``extra_names["comm_dtype"]`` and ``["comm_pg"]`` (``Process Group Name`` and,
  when present, ``|`` and ``Process Group Ranks``). Empty dicts when no record was found.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

import numpy as np

from tb_llmdiag.model import EventTable, Kind

#: what a piece must contain for the pass to run at all
COMM_NEEDLE = b'"In msg nelems"'
_NEEDLE = COMM_NEEDLE
_INT_KEYS: dict[str, bytes] = {
    "correlation": b"correlation",
    "comm_in_nelems": b"In msg nelems",
    "comm_out_nelems": b"Out msg nelems",
    "comm_group_size": b"Group size",
    "comm_seq": b"Seq",
}
_INT = {k: re.compile(rb'"' + re.escape(v) + rb'"\s*:\s*(-?\d{1,18})\b') for k, v in _INT_KEYS.items()}
_STR = {
    k: re.compile(rb'"' + re.escape(v) + rb'"\s*:\s*"([^"\\]{0,256})"')
    for k, v in (("dtype", b"dtype"), ("pg", b"Process Group Name"), ("ranks", b"Process Group Ranks"))
}
#: the kernel names (NCCL and RCCL) whose rows carry the args: the pass arms on the first one seen
_KERNEL_HINTS = ("ncclKernel", "ncclDevKernel")
#: an args object longer than this is not a kernel row's (those are ~1 KB): skipped
_MAX_ARGS_BYTES = 1 << 16


def args_bodies(buf: Any, end: int, needle: bytes) -> Iterator[bytes]:
    """The text inside the braces around each ``needle`` in ``buf[:end]`` (an ``args`` object of decoded JSON
    text): found with plain byte searches, bounded to ``_MAX_ARGS_BYTES`` either side."""
    find = buf.find if hasattr(buf, "find") else bytes(buf[:end]).find
    at = find(needle, 0, end)
    while at >= 0:
        lo = buf.rfind(b"{", max(0, at - _MAX_ARGS_BYTES), at)
        hi = find(b"}", at, min(end, at + _MAX_ARGS_BYTES))
        if lo >= 0 and hi >= 0:
            yield bytes(buf[lo + 1 : hi])
        at = find(needle, (hi if hi >= 0 else at) + 1, end)


class CommArgs:
    """Accumulates the records of the pieces of one trace (see the module docstring)."""

    def __init__(self) -> None:
        self.ints: dict[str, list[int]] = {k: [] for k in _INT_KEYS}
        self.dtype: list[int] = []
        self.pg: list[int] = []
        self.dtype_names: dict[str, int] = {}
        self.pg_names: dict[str, int] = {}
        self.armed = False  # some event name is an NCCL/RCCL kernel's
        self._names_seen = 0

    def after_piece(self, buf: Any, end: int, names: Sequence[str]) -> None:
        """Scan ``buf[:end]`` when the trace has NCCL kernels and the piece holds the needle (module docstring)."""
        if not self.armed:
            self.armed = any(k in t for t in islice(names, self._names_seen, None) for k in _KERNEL_HINTS)
            self._names_seen = len(names)
        if self.armed and buf.find(COMM_NEEDLE, 0, end) >= 0:
            self.scan(buf, end)

    def __len__(self) -> int:
        return len(self.dtype)

    def scan(self, buf: Any, end: int) -> None:
        """Add the records of ``buf[:end]`` (bytes, bytearray or memoryview of decoded JSON text)."""
        for body in args_bodies(buf, end, _NEEDLE):
            self._add(body)

    def _add(self, body: bytes) -> None:
        vals = {k: rx.search(body) for k, rx in _INT.items()}
        if vals["correlation"] is None:
            return
        for k, m in vals.items():
            self.ints[k].append(int(m.group(1)) if m is not None else -1)
        strs = {k: rx.search(body) for k, rx in _STR.items()}
        self.dtype.append(
            _intern(self.dtype_names, strs["dtype"].group(1).decode("ascii", "replace"))
            if strs["dtype"] is not None
            else -1
        )
        if strs["pg"] is not None:
            pg = strs["pg"].group(1).decode("ascii", "replace")
            if strs["ranks"] is not None:
                pg += "|" + strs["ranks"].group(1).decode("ascii", "replace")
            self.pg.append(_intern(self.pg_names, pg))
        else:
            self.pg.append(-1)

    def columns(self, events: EventTable) -> tuple[dict[str, np.ndarray], dict[str, tuple[str, ...]]]:
        """The ``Trace.extra`` columns and ``extra_names`` (see the module docstring)."""
        if not len(self):
            return {}, {}
        corr = np.asarray(self.ints["correlation"], np.int64)
        order = np.argsort(corr, kind="stable")
        corr = corr[order]
        n = len(events)
        rows = np.flatnonzero((events.kind == Kind.KERNEL) & (events.correlation >= 0))
        pos = np.clip(np.searchsorted(corr, events.correlation[rows]), 0, corr.size - 1)
        hit = corr[pos] == events.correlation[rows]
        rows, src = rows[hit], order[pos[hit]]
        extra: dict[str, np.ndarray] = {}
        for k in _INT_KEYS:
            if k == "correlation":
                continue
            col = np.full(n, -1, np.int64)
            col[rows] = np.asarray(self.ints[k], np.int64)[src]
            extra[k] = col
        for k, vals in (("comm_dtype_id", self.dtype), ("comm_pg_id", self.pg)):
            col32 = np.full(n, -1, np.int32)
            col32[rows] = np.asarray(vals, np.int32)[src]
            extra[k] = col32
        names = {"comm_dtype": tuple(self.dtype_names), "comm_pg": tuple(self.pg_names)}
        return extra, names


def _intern(table: dict[str, int], s: str) -> int:
    if s not in table:
        table[s] = len(table)
    return table[s]
