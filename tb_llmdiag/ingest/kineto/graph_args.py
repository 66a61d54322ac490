"""The CUDA graph fields Kineto (CUDA 12+) writes on the kernels a graph replays: ``graph id`` and ``graph node id``.

A second, small pass over the same text, like ``comm_args.py``: armed once an event name is a graph launch's
(``cudaGraphLaunch``, ``hipGraphLaunch``, ``cuGraphLaunch``: a trace without them pays one substring test per distinct
name), then run on the pieces that contain ``"graph id"`` (one ``bytes.find``), per occurrence. The replayed
kernels follow their launch call in the file (events are written in time order), so arming on the piece that holds
the first launch misses none.

Contract:
- ``GraphArgs.after_piece(buf, end, names)``: once armed, scans ``buf[:end]`` when it holds the needle; every args object with a
  ``"graph id"`` and a ``correlation`` adds one record (correlation, graph id, graph node id or -1), in file order.
  Malformed values are skipped, never raised.
- ``GraphArgs.columns(events)``: ``{"graph_id", "graph_node_id"}`` int64 columns aligned with the events (-1
  unknown), or ``{}`` when no record was found. A replay's kernels share the graph launch's correlation id and
  one graph id; its node ids are given to its kernel rows in time order (the file lists a replay's kernels in
  the order they ran), so each kernel row gets one node of its graph.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import islice
from typing import Any

import numpy as np

from tb_llmdiag.ingest.kineto.comm_args import args_bodies
from tb_llmdiag.model import EventTable, Kind

GRAPH_NEEDLE = b'"graph id"'
_INT = {
    "correlation": re.compile(rb'"correlation"\s*:\s*(-?\d{1,18})\b'),
    "graph": re.compile(rb'"graph id"\s*:\s*(-?\d{1,18})\b'),
    "node": re.compile(rb'"graph node id"\s*:\s*(-?\d{1,18})\b'),
}


class GraphArgs:
    """Accumulates the graph records of one trace's pieces (see the module docstring)."""

    def __init__(self) -> None:
        self.corr: list[int] = []
        self.graph: list[int] = []
        self.node: list[int] = []
        self.armed = False  # some event name is a graph launch's
        self._names_seen = 0

    def __len__(self) -> int:
        return len(self.corr)

    def after_piece(self, buf: Any, end: int, names: Sequence[str]) -> None:
        """Arm on the first graph launch name, then scan the pieces holding the needle (module docstring)."""
        if not self.armed:
            self.armed = any("GraphLaunch" in t for t in islice(names, self._names_seen, None))
            self._names_seen = len(names)
        if self.armed and buf.find(GRAPH_NEEDLE, 0, end) >= 0:
            self.scan(buf, end)

    def scan(self, buf: Any, end: int) -> None:
        """Add the records of ``buf[:end]`` (bytes, bytearray or memoryview of decoded JSON text)."""
        for body in args_bodies(buf, end, GRAPH_NEEDLE):
            self._add(body)

    def _add(self, body: bytes) -> None:
        m = {k: rx.search(body) for k, rx in _INT.items()}
        if m["correlation"] is None or m["graph"] is None:
            return
        self.corr.append(int(m["correlation"].group(1)))
        self.graph.append(int(m["graph"].group(1)))
        self.node.append(int(m["node"].group(1)) if m["node"] is not None else -1)

    def columns(self, events: EventTable) -> dict[str, np.ndarray]:
        """The ``Trace.extra`` columns (see the module docstring)."""
        if not len(self):
            return {}
        corr = np.asarray(self.corr, np.int64)
        rec = np.argsort(corr, kind="stable")  # file order within a correlation id
        rows = np.flatnonzero((events.kind == Kind.KERNEL) & (events.correlation >= 0))
        rows = rows[np.argsort(events.correlation[rows], kind="stable")]  # time order within one (rows are sorted)
        key_r = _ranked(corr[rec])
        key_k = _ranked(events.correlation[rows])
        pos = np.clip(np.searchsorted(key_r, key_k), 0, max(key_r.size - 1, 0))
        hit = key_r[pos] == key_k
        n = len(events)
        out = {"graph_id": np.full(n, -1, np.int64), "graph_node_id": np.full(n, -1, np.int64)}
        out["graph_id"][rows[hit]] = np.asarray(self.graph, np.int64)[rec[pos[hit]]]
        out["graph_node_id"][rows[hit]] = np.asarray(self.node, np.int64)[rec[pos[hit]]]
        # a kernel beyond its correlation's records still belongs to the launch's graph
        first = np.searchsorted(corr[rec], events.correlation[rows])
        same = (first < corr.size) & (corr[rec][np.minimum(first, corr.size - 1)] == events.correlation[rows])
        miss = same & ~hit
        out["graph_id"][rows[miss]] = np.asarray(self.graph, np.int64)[rec[first[miss]]]
        return out


def _ranked(sorted_corr: np.ndarray) -> np.ndarray:
    """A sortable (correlation, rank within it) key per element of an ascending correlation column."""
    n = sorted_corr.size
    if n == 0:
        return np.zeros(0, np.int64)
    start = np.ones(n, dtype=bool)
    start[1:] = sorted_corr[1:] != sorted_corr[:-1]
    idx = np.arange(n)
    rank = idx - np.maximum.accumulate(np.where(start, idx, 0))
    return sorted_corr * (1 << 20) + np.minimum(rank, (1 << 20) - 1)
