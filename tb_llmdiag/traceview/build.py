"""The trace view's index of one trace: lanes, rows and merge pyramids, built once from the columnar model.

Contract:
- ``build(trace) -> (meta, arrays)``: ``meta`` is plain JSON (lanes, names, level tolerances), ``arrays`` a
  dict of 1-D numpy arrays (the event columns the view shows and the rows' pyramid levels, see ``lod``).
  Pure and vectorised: no per-event Python.
- Lanes, in display order: ``steps`` (the step ranges), one per host thread (CPU ops, annotations, python
  frames, runtime/driver calls, steps: a flame by nesting depth), one per accelerator stream (kernels,
  memcpy, memset), one per device for GPU-side annotations and syncs, one per device for collectives
  (communication kernels, also drawn on their stream), and one per device for the allocator's memory
  counter (``memory``: samples, not rows).
- Event categories (``CATEGORIES``): ``classify.CATEGORIES`` for device events (kernels by name, memcpy,
  memset by kind), then the host kinds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.classify import CATEGORIES as KERNEL_CATEGORIES
from tb_llmdiag.classify import CATEGORY_CODE, category_codes
from tb_llmdiag.model import Kind, Trace, kind_mask
from tb_llmdiag.traceview.lod import build_levels, depths

#: Bump when the index changes; part of the tab's cache key.
TRACEVIEW_VERSION = 1
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


def event_categories(trace: Trace) -> NDArray[np.uint8]:
    ev = trace.events
    cat = category_codes(ev.names, ev.kind, ev.name_id)
    for kind, name in _KIND_CAT.items():
        cat[ev.kind == int(kind)] = CATEGORIES.index(name)
    return cat


def _groups(keys: I64) -> tuple[I64, I64, I64]:
    """Unique keys, each row's group index, and the group sizes."""
    uniq, inv, counts = np.unique(keys, return_inverse=True, return_counts=True)
    return uniq, inv.astype(np.int64), counts


def _lane_members(trace: Trace, cat: NDArray[np.uint8]) -> tuple[list[dict[str, Any]], I64, I64]:
    """Lane descriptions (display order) and the (lane, event) membership pairs."""
    ev = trace.events
    lanes: list[dict[str, Any]] = []
    lane_of: list[I64] = []
    evs: list[I64] = []

    def add(lane: dict[str, Any], idx: I64) -> None:
        lane_of.append(np.full(idx.shape[0], len(lanes), dtype=np.int64))
        evs.append(idx.astype(np.int64))
        lanes.append({**lane, "events": int(idx.shape[0])})

    steps = np.flatnonzero(ev.kind == int(Kind.STEP))
    if steps.size:
        add({"id": "steps", "label": "Steps", "kind": "steps"}, steps)
    host = np.flatnonzero(kind_mask(ev.kind, HOST_KINDS) & (ev.device < 0))
    if host.size:
        tids, inv, counts = _groups(ev.tid[host])
        for g in np.argsort(-counts, kind="stable"):
            tid = int(tids[g])
            add({"id": f"host.{tid}", "label": f"Host thread {tid}", "kind": "host", "tid": tid}, host[inv == g])
    dev_mask = ev.device >= 0
    streams = np.flatnonzero(kind_mask(ev.kind, STREAM_KINDS) & dev_mask)
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
        idx = np.flatnonzero(kind_mask(ev.kind, kinds) & dev_mask)
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
    empty = np.zeros(0, np.int64)
    return lanes, (np.concatenate(lane_of) if lane_of else empty), (np.concatenate(evs) if evs else empty)


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


def build(trace: Trace) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The index (module docstring) of ``trace``."""
    ev = trace.events
    n = len(ev)
    cat = event_categories(trace)
    lanes, lane, member = _lane_members(trace, cat)
    ts, dur = ev.ts_ns.astype(np.int64), np.maximum(ev.dur_ns.astype(np.int64), 0)
    end = ts + dur
    order = np.lexsort((-dur[member], ts[member], lane))
    lane, member = lane[order], member[order]
    depth = np.minimum(depths(lane, ts[member], end[member]), MAX_DEPTH - 1)
    row_keys, row = np.unique(lane * MAX_DEPTH + depth, return_inverse=True)[:2]
    row = row.astype(np.int64)
    # rows in (lane, depth) order; inside a row by (start, -duration), as depth() saw them
    order = np.lexsort((-dur[member], ts[member], row))
    row, member = row[order], member[order]
    n_rows = int(row_keys.shape[0])
    row_lane = (row_keys // MAX_DEPTH).astype(np.int64)
    row_depth = (row_keys % MAX_DEPTH).astype(np.int64)
    for i, ln in enumerate(lanes):
        rows = np.flatnonzero(row_lane == i)
        ln["rows"] = [int(rows[0]), int(rows[-1]) + 1] if rows.size else [0, 0]
        ln["depth"] = int(rows.size)
    span = int(end.max()) if n else 0
    levels = build_levels(row, ts[member], end[member], member, n_rows, span)
    # each event's first row (the primary lane comes first in display order, but Steps before hosts)
    ev_row = np.full(n, -1, dtype=np.int32)
    ev_row[member[::-1]] = row[::-1].astype(np.int32)
    has_corr = np.flatnonzero(ev.correlation >= 0)
    corr_order = has_corr[np.argsort(ev.correlation[has_corr], kind="stable")]
    mem_lanes, mem_arrays = _memory(trace)
    arrays: dict[str, np.ndarray] = {
        "ev_ts": ts,
        "ev_dur": dur,
        "ev_name": ev.name_id.astype(np.int32),
        "ev_kind": ev.kind.astype(np.uint8),
        "ev_cat": cat.astype(np.uint8),
        "ev_corr": ev.correlation.astype(np.int64),
        "ev_shape": ev.shape_id.astype(np.int32),
        "ev_bytes": ev.bytes.astype(np.int64),
        "ev_row": ev_row,
        "ev_tid": ev.tid.astype(np.int64),
        "ev_stream": ev.stream.astype(np.int32),
        "ev_device": ev.device.astype(np.int16),
        "corr_sorted": ev.correlation[corr_order].astype(np.int64),
        "corr_ev": corr_order.astype(np.int64),
        "row_lane": row_lane,
        "row_depth": row_depth,
        **mem_arrays,
    }
    for i, lv in enumerate(levels):
        for col in ("off", "start", "end", "cmax", "ev", "n"):
            arrays[f"lv{i}_{col}"] = getattr(lv, col)
    meta = {
        "traceview_version": TRACEVIEW_VERSION,
        "n_events": n,
        "n_rows": n_rows,
        "span_ns": span,
        "source_kind": trace.source_kind,
        "names": list(ev.names),
        "shapes": list(ev.shapes),
        "categories": list(CATEGORIES),
        "levels": [lv.tol_ns for lv in levels],
        "lanes": lanes + mem_lanes,
    }
    return meta, arrays
