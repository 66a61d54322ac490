"""The trace view's index of one trace: lanes, rows and merge pyramids, built once from the columnar model.

Contract:
- ``build(trace) -> (meta, arrays)``: ``meta`` is plain JSON (lanes, names, level tolerances), ``arrays`` a
  dict of 1-D numpy arrays (the event columns the view shows and the rows' pyramid levels, see ``lod``).
  ``build_into(trace, put) -> meta`` hands each array to ``put(name, array)`` as soon as it is made and keeps
  no reference to it (a file writer then holds at most one level in memory: bounded peak on a 1 GB trace).
  Pure and vectorised: no per-event Python, no sort of all events beyond one ``argsort`` of the lanes' rows
  (the model's rows are sorted by start, so the lanes are filled in (start, -duration) order).
- Lanes, in display order: ``steps`` (the step ranges), one per host thread (CPU ops, annotations, python
  frames, runtime/driver calls, steps: a flame by nesting depth), one per accelerator stream (kernels,
  memcpy, memset), one per device for GPU-side annotations and syncs, one per device for collectives
  (communication kernels, also drawn on their stream), and one per device for the allocator's memory
  counter (``memory``: samples, not rows).
- Event categories (``CATEGORIES``): ``classify.CATEGORIES`` for device events (kernels by name, memcpy,
  memset by kind), then the host kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.classify import CATEGORIES as KERNEL_CATEGORIES
from tb_llmdiag.classify import CATEGORY_CODE, category_codes
from tb_llmdiag.ingest.source import release_free_memory
from tb_llmdiag.model import Kind, Trace, kind_mask
from tb_llmdiag.traceview.lod import Level, depths, iter_levels

#: Bump when the index changes; part of the tab's cache key.
TRACEVIEW_VERSION = 4  # 4: where each model part's kernels run (meta parts); 2: host lanes say their launch calls (the tab collapses those without); 3: an event wider than a pixel stands alone in every level
#: Deeper nesting is drawn at this depth (rows then overlap; queries stay correct through ``cmax``).
MAX_DEPTH = 64

HOST_CATEGORIES = (
    "cpu_op",
    "annotation",
    "step",
    "python",
    "runtime",
    "driver",
    "gpu_annotation",
    "sync",
    "host_other",
)
CATEGORIES: tuple[str, ...] = tuple(KERNEL_CATEGORIES) + HOST_CATEGORIES
_HOST_BASE = len(KERNEL_CATEGORIES)
_KIND_CAT = {
    Kind.CPU_OP: "cpu_op",
    Kind.ANNOTATION: "annotation",
    Kind.STEP: "step",
    Kind.PYTHON: "python",
    Kind.RUNTIME: "runtime",
    Kind.DRIVER: "driver",
    Kind.GPU_ANNOTATION: "gpu_annotation",
    Kind.SYNC: "sync",
    Kind.OTHER: "host_other",
}
HOST_KINDS = (Kind.CPU_OP, Kind.ANNOTATION, Kind.STEP, Kind.PYTHON, Kind.RUNTIME, Kind.DRIVER, Kind.OTHER)
STREAM_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
MARK_KINDS = (Kind.GPU_ANNOTATION, Kind.SYNC)

I64 = NDArray[np.int64]
#: The event columns stored as the model has them: (array name, EventTable column, dtype).
_EVENT_COLUMNS = (
    ("ev_name", "name_id", np.int32),
    ("ev_kind", "kind", np.uint8),
    ("ev_corr", "correlation", np.int64),
    ("ev_shape", "shape_id", np.int32),
    ("ev_bytes", "bytes", np.int64),
    ("ev_tid", "tid", np.int64),
    ("ev_stream", "stream", np.int32),
    ("ev_device", "device", np.int16),
)


def event_categories(trace: Trace) -> NDArray[np.uint8]:
    ev = trace.events
    cat = category_codes(ev.names, ev.kind, ev.name_id)
    for kind, name in _KIND_CAT.items():
        cat[ev.kind == int(kind)] = CATEGORIES.index(name)
    return cat


def _groups(keys: I64) -> tuple[I64, I64, I64]:
    """Unique keys, each row's group index, and the group sizes (one sort of the keys, no argsort)."""
    uniq = np.unique(keys)
    inv = np.searchsorted(uniq, keys).astype(np.int64)
    return uniq, inv, np.bincount(inv, minlength=uniq.shape[0]).astype(np.int64)


def start_order(ts: I64, dur: I64) -> I64:
    """Event ids by (start, -duration), ties by id. ``ts`` is sorted (the model's order), so only the runs of
    equal starts are reordered; an unsorted input is sorted whole."""
    n = ts.shape[0]
    if n and not bool(np.all(ts[1:] >= ts[:-1])):
        return np.lexsort((-dur, ts)).astype(np.int64)
    order = np.arange(n, dtype=np.int64)
    eq = ts[1:] == ts[:-1]
    if eq.any():
        tied = np.flatnonzero(np.r_[eq, False] | np.r_[False, eq])
        order[tied] = tied[np.lexsort((-dur[tied], ts[tied]))]
    return order


def _lane_members(trace: Trace, cat: NDArray[np.uint8], p: I64) -> tuple[list[dict[str, Any]], I64, I64]:
    """Lane descriptions (display order) and the (lane, event) membership pairs, sorted by lane then by the
    event order ``p`` (``start_order``): each lane's events are picked from ``p`` by a mask."""
    ev = trace.events

    def pick(mask: NDArray[np.bool_]) -> I64:
        return p[np.flatnonzero(mask[p])]

    lanes: list[dict[str, Any]] = []
    evs: list[I64] = []

    def add(lane: dict[str, Any], idx: I64) -> None:
        evs.append(idx.astype(np.int64, copy=False))
        lanes.append({**lane, "events": int(idx.shape[0])})

    steps = pick(ev.kind == int(Kind.STEP))
    if steps.size:
        add({"id": "steps", "label": "Steps", "kind": "steps"}, steps)
    host = pick(kind_mask(ev.kind, HOST_KINDS) & (ev.device < 0))
    if host.size:
        tids, inv, counts = _groups(ev.tid[host])
        launching = kind_mask(ev.kind[host], (Kind.RUNTIME, Kind.DRIVER))
        launches = np.bincount(inv, weights=launching, minlength=tids.size).astype(np.int64)
        # threads that launch device work first (the step's own work), then by their event count; the others
        # (data loader workers, XLA's compiler threads) start collapsed in the tab
        for g in np.lexsort((-counts, -(launches > 0).astype(np.int64))):
            tid = int(tids[g])
            desc = {"id": f"host.{tid}", "label": f"Host thread {tid}", "kind": "host", "tid": tid}
            add({**desc, "launches": int(launches[g])}, host[inv == g])
    dev_mask = ev.device >= 0
    streams = pick(kind_mask(ev.kind, STREAM_KINDS) & dev_mask)
    if streams.size:
        key = ev.device[streams].astype(np.int64) * (1 << 32) + (ev.stream[streams].astype(np.int64) & 0xFFFFFFFF)
        uniq, inv, _ = _groups(key)
        for g, k in enumerate(uniq):
            d, s = int(k) >> 32, int(k) & 0xFFFFFFFF
            s = s - (1 << 32) if s >= (1 << 31) else s
            add(
                {"id": f"gpu{d}.s{s}", "label": f"GPU {d} · stream {s}", "kind": "gpu", "device": d, "stream": s},
                streams[inv == g],
            )
    for kinds, suffix, label, lane_kind in ((MARK_KINDS, "marks", "annotations, syncs", "gpu_marks"),):
        idx = pick(kind_mask(ev.kind, kinds) & dev_mask)
        for d in np.unique(ev.device[idx]):
            add(
                {
                    "id": f"gpu{int(d)}.{suffix}",
                    "label": f"GPU {int(d)} · {label}",
                    "kind": lane_kind,
                    "device": int(d),
                },
                idx[ev.device[idx] == d],
            )
    comm = streams[cat[streams] == CATEGORY_CODE["communication"]] if streams.size else streams
    for d in np.unique(ev.device[comm]):
        add(
            {
                "id": f"gpu{int(d)}.collectives",
                "label": f"GPU {int(d)} · collectives",
                "kind": "collectives",
                "device": int(d),
            },
            comm[ev.device[comm] == d],
        )
    lane = np.repeat(np.arange(len(lanes), dtype=np.int64), [x.shape[0] for x in evs])
    member = np.concatenate(evs) if evs else np.zeros(0, np.int64)
    return lanes, lane, member


def _memory(trace: Trace) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    mem = trace.memory
    if len(mem) == 0:
        return [], {
            "mem_ts": np.zeros(0, np.int64),
            "mem_alloc": np.zeros(0, np.int64),
            "mem_reserved": np.zeros(0, np.int64),
        }
    order = np.lexsort((mem.ts_ns, mem.device))
    dev = mem.device[order]
    lanes = []
    for d in np.unique(dev):
        a, b = np.searchsorted(dev, d, "left"), np.searchsorted(dev, d, "right")
        name = "Host memory" if d < 0 else f"GPU {int(d)} · memory allocated"
        lanes.append(
            {"id": f"mem{int(d)}", "label": name, "kind": "memory", "device": int(d), "samples": [int(a), int(b)]}
        )
    return lanes, {
        "mem_ts": mem.ts_ns[order].astype(np.int64),
        "mem_alloc": mem.total_allocated_bytes[order].astype(np.int64),
        "mem_reserved": mem.total_reserved_bytes[order].astype(np.int64),
    }


Put = Callable[[str, np.ndarray], None]


def build(trace: Trace) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The index (module docstring) of ``trace``: its meta and arrays in memory (each its own copy)."""
    meta, arrays = build_for([trace], None)
    assert arrays is not None
    return meta, arrays


def build_for(handed: list[Trace], put: Put | None) -> tuple[dict[str, Any], dict[str, np.ndarray] | None]:
    """``build_into(handed, put)`` and None, or without ``put`` the meta and the arrays in memory (``build``)."""
    if put is not None:
        return build_into(handed, put), None
    arrays: dict[str, np.ndarray] = {}

    def keep(name: str, a: np.ndarray) -> None:
        arrays[name] = a.copy() if a.base is not None else a  # never a view into the trace's columns

    return build_into(handed, keep), arrays


def _put_event_columns(trace: Trace, ts: np.ndarray, dur: np.ndarray, cat: np.ndarray, put: Put) -> list[Any]:
    """The per-event columns, the correlation index and the memory lanes' arrays, handed to ``put``; returns the
    memory lanes."""
    ev = trace.events
    put("ev_ts", ts)
    put("ev_dur", dur)
    put("ev_cat", cat.astype(np.uint8, copy=False))
    for name, col, dt in _EVENT_COLUMNS:
        put(name, getattr(ev, col).astype(dt, copy=False))
    has_corr = np.flatnonzero(ev.correlation >= 0)
    corr_order = has_corr[np.argsort(ev.correlation[has_corr], kind="stable")]
    del has_corr
    put("corr_sorted", ev.correlation[corr_order].astype(np.int64))
    put("corr_ev", corr_order.astype(np.int64, copy=False))
    del corr_order
    mem_lanes, mem_arrays = _memory(trace)
    for name, a in mem_arrays.items():
        put(name, a)
    return mem_lanes


def _put_rows(lanes: list[dict[str, Any]], row_keys: np.ndarray, put: Put) -> None:
    """Each lane's row range and depth (set on ``lanes``), and each row's lane and depth, handed to ``put``."""
    row_lane = row_keys // MAX_DEPTH
    for i, ln in enumerate(lanes):
        rows = np.flatnonzero(row_lane == i)
        ln["rows"] = [int(rows[0]), int(rows[-1]) + 1] if rows.size else [0, 0]
        ln["depth"] = int(rows.size)
    put("row_lane", row_lane)
    put("row_depth", row_keys % MAX_DEPTH)


def _put_levels(levels: Iterator[Level], put: Put) -> list[int]:
    """Each level of detail's arrays handed to ``put`` as it is built (one level held at a time); its tolerances."""
    tols = []
    for i, lv in enumerate(levels):
        tols.append(lv.tol_ns)
        for col in ("off", "start", "end", "cmax", "ev", "n"):
            put(f"lv{i}_{col}", getattr(lv, col))
        del lv
    return tols


def build_into(handed: list[Trace], put: Put) -> dict[str, Any]:
    """The index of the trace in ``handed`` (a one-item list, emptied here): each array handed to ``put`` as soon
    as it is made (module docstring); returns the meta. The trace is dropped once its columns are written, before
    the rows and levels are built: a caller that hands over its only reference frees the trace's memory then."""
    trace = handed.pop()
    release_free_memory()  # the heap holes the analysis left (its arrays are gone by now in the tab's worker)
    ev = trace.events
    n = len(ev)
    ts = ev.ts_ns.astype(np.int64, copy=False)
    dur = ev.dur_ns.astype(np.int64, copy=False)
    if n and int(dur.min()) < 0:
        dur = np.maximum(dur, 0)
    span = int((ts + dur).max()) if n else 0
    cat = event_categories(trace)
    lanes, lane, member = _lane_members(trace, cat, start_order(ts, dur))
    mem_lanes = _put_event_columns(trace, ts, dur, cat, put)
    del cat
    source_kind, names, shapes = trace.source_kind, list(ev.names), list(ev.shapes)
    del trace, ev  # from here on: the lanes' members and the start and duration columns only
    release_free_memory()
    # rows: (lane, depth) pairs in that order; inside a row by (start, -duration), as depth() saw them
    start = ts[member]
    stop = start + dur[member]
    key = depths(lane, start, stop)
    del start, stop
    np.minimum(key, MAX_DEPTH - 1, out=key)
    lane *= MAX_DEPTH
    key += lane
    del lane
    present = np.bincount(key, minlength=len(lanes) * MAX_DEPTH) > 0
    row_keys = np.flatnonzero(present).astype(np.int64)
    n_rows = int(row_keys.shape[0])
    row = (np.cumsum(present, dtype=np.int64) - 1)[key]
    del key, present
    order = np.argsort(row.astype(np.int16) if n_rows < 2**15 else row, kind="stable")
    row = row[order]
    member = member[order]
    del order
    start = ts[member]
    stop = start + dur[member]
    del ts, dur
    _put_rows(lanes, row_keys, put)
    # each event's first row (the primary lane comes first in display order, but Steps before hosts)
    ev_row = np.full(n, -1, dtype=np.int32)
    ev_row[member[::-1]] = row[::-1].astype(np.int32)
    put("ev_row", ev_row)
    del ev_row
    levels = iter_levels(row, start, stop, member, n_rows, span)
    del row, start, stop, member  # the level builder holds the one level it merges from
    tols = _put_levels(levels, put)
    release_free_memory()  # the levels are written: their pages go back now, not to the tab worker's next task
    return {
        "traceview_version": TRACEVIEW_VERSION,
        "n_events": n,
        "n_rows": n_rows,
        "span_ns": span,
        "source_kind": source_kind,
        "names": names,
        "shapes": shapes,
        "categories": list(CATEGORIES),
        "levels": tols,
        "lanes": lanes + mem_lanes,
    }
