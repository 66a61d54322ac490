"""CUDA/HIP graph replays: the device work a graph launch replays, found once per trace (``Context.graph``).

Definitions:
- A *graph launch* is a runtime/driver call ``cudaGraphLaunch`` / ``hipGraphLaunch`` / ``cuGraphLaunch`` (any
  suffix). A *replay* is one such call; its device events are those carrying the call's correlation id
  (CUPTI and roctracer give every kernel of a replayed graph the launch's correlation), or, where Kineto wrote
  it (CUDA 12+), a ``graph id`` >= 0 on the kernel row (``Trace.extra["graph_id"]``).
- A *graph* groups replays: by the recorded ``graph id`` when present, else by the replay's device work (the
  sequence of its events' names: replays of one captured graph run the same kernels in the same order).
- A replay's events are submitted together by one host call: the idle gaps between them are not the host
  launching work (``metrics.steps.gaps`` never counts them as ``host_wait``), and they are not launches (``launch``
  leaves them out of the tiny-kernel counts). No host operator launched them one by one, so op attribution inside
  a graph is unavailable: the trace cannot say which operator a replayed kernel belongs to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.model import Trace

I64 = NDArray[np.int64]
IDX = NDArray[np.intp]

GRAPH_LAUNCH = re.compile(r"^(?:cuda|hip)GraphLaunch|^cuGraphLaunch")


@dataclass(frozen=True)
class GraphReplays:
    """Per device row of the context (``Context.dev`` order): whether a graph replayed it, its replay (the launch
    row, -1 when only a ``graph id`` says it is a replay) and its graph (an index into ``graphs``, -1 if none)."""

    is_graph: NDArray[np.bool_]
    replay: IDX
    graph: NDArray[np.int32]
    graph_ids: tuple[int, ...]  # per graph: the recorded graph id, -1 when grouped by the kernels' names
    nodes: NDArray[np.int32]  # per graph: distinct recorded graph node ids (0 when none were recorded)
    launches: int  # graph launch calls in the trace
    launch_rows: IDX  # their rows

    @property
    def count(self) -> int:
        return int(self.is_graph.sum())


def graph_replays(trace: Trace, dev: IDX, launcher: IDX, launch_rows: IDX) -> GraphReplays:
    """The replays among ``dev`` (device rows) given each row's launching call (``RowCache.launcher``, -1 none) and
    the graph launch calls' rows (``RowCache.rows_named(GRAPH_LAUNCH, RUNTIME, DRIVER)``: names searched once)."""
    ev = trace.events
    by_launch = np.isin(launcher, launch_rows) & (launcher >= 0)
    gid_col = trace.extra.get("graph_id")
    gid = gid_col[dev].astype(np.int64) if gid_col is not None else np.full(dev.size, -1, np.int64)
    is_graph = by_launch | (gid >= 0)
    replay = np.where(by_launch, launcher, -1).astype(np.intp)
    launches = int(launch_rows.size)
    graph, graph_ids = _group(ev.name_id[dev], replay, gid, is_graph)
    node_col = trace.extra.get("graph_node_id")
    nodes = np.zeros(len(graph_ids), np.int32)
    if node_col is not None and len(graph_ids):
        node = node_col[dev].astype(np.int64)
        ok = is_graph & (node >= 0) & (graph >= 0)
        pairs = np.unique(np.stack((graph[ok].astype(np.int64), node[ok])), axis=1) if ok.any() else np.zeros((2, 0))
        nodes = np.bincount(pairs[0].astype(np.intp), minlength=len(graph_ids)).astype(np.int32)
    return GraphReplays(is_graph, replay, graph, graph_ids, nodes, launches, launch_rows)


def _group(
    name_id: NDArray[np.int32], replay: IDX, gid: I64, is_graph: NDArray[np.bool_]
) -> tuple[NDArray[np.int32], tuple[int, ...]]:
    """Graph index per row: the recorded graph id's, else one per distinct kernel-name sequence of a replay."""
    graph = np.full(replay.size, -1, np.int32)
    ids: list[int] = []
    rec = is_graph & (gid >= 0)
    if rec.any():
        u, inv = np.unique(gid[rec], return_inverse=True)
        graph[rec] = inv.astype(np.int32)
        ids.extend(int(x) for x in u)
    rest = np.flatnonzero(is_graph & ~rec & (replay >= 0))
    if rest.size:
        # one signature per replay: its events' name ids in time order (a replay has tens to thousands of events
        # and a trace a few hundred replays: one tuple per replay, not per event)
        order = rest[np.argsort(replay[rest], kind="stable")]
        cut = np.flatnonzero(np.diff(replay[order])) + 1
        sig_of: dict[bytes, int] = {}
        for part in np.split(order, cut):
            key = name_id[part].tobytes()
            if key not in sig_of:
                sig_of[key] = len(ids)
                ids.append(-1)
            graph[part] = sig_of[key]
    return graph, tuple(ids)


def replay_queued_end(ts: I64, launch_end: I64, is_graph: NDArray[np.bool_], replay: IDX) -> I64:
    """``launch_end`` with every replayed event but the first of its replay marked as queued before it started
    (its replay's first event start): the gaps inside a replay are never the host launching work."""
    out = launch_end.copy()
    rows = np.flatnonzero(is_graph & (replay >= 0))
    if rows.size == 0:
        return out
    order = rows[np.lexsort((ts[rows], replay[rows]))]
    first = np.ones(order.size, dtype=bool)
    first[1:] = replay[order[1:]] != replay[order[:-1]]
    start = ts[order][np.maximum.accumulate(np.where(first, np.arange(order.size), 0))]
    later = order[~first]
    out[later] = np.maximum(start[~first] - 1, 0)
    return out
