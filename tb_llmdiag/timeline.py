"""Downsampled timeline of one training step, for the tab's zoomable step view.

Contract:
- ``build_timelines(trace, steps)`` returns one ``StepTimeline`` dict per step (a trace without step
  markers gets one pseudo-step, index -1, covering its whole window). Pure: no I/O.
- Lanes: one per accelerator stream (kernels, memcpys, memsets, device-side syncs), then host lanes:
  launches (runtime/driver calls that launched device work), syncs (synchronising runtime calls) and
  the data loader (when the trace has DataLoader annotations). ``gaps`` are the stretches inside the
  step where no stream of the device was busy, each with a cause.
- Times are int ns relative to the step's start. Intervals are clipped to the step.
- Budget: a step never sends more than ``max_intervals`` intervals (lanes + gaps). When it would, every
  lane is merged with one tolerance ``resolution_ns`` (neighbours closer than it become one interval
  carrying ``n`` events and the name of the longest one); the tolerance doubles until the budget
  holds. Gaps shorter than the resolution vanish with it, so a gap that is drawn is real.
- Gap causes are ``metrics.idle.gap_causes`` (the report's own rule), and the host sync and data-loader
  lanes are ``metrics.context``'s ``sync_api`` and ``dataloader`` name families, so the tab draws what
  the report counts.
"""

from __future__ import annotations

import re
from typing import Any, Sequence, TypedDict

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.classify import kernel_category
from tb_llmdiag.intervals import gaps as complement
from tb_llmdiag.intervals import merge
from tb_llmdiag.metrics.context import HOST_KINDS_FOR, NAME_PATTERNS
from tb_llmdiag.metrics.idle import CAUSES, HostSignals, gap_causes
from tb_llmdiag.metrics.steps import find_steps
from tb_llmdiag.model import DEVICE_KINDS, Kind, Trace, kind_mask

#: Bump when the timeline JSON changes; part of the cache key.
TIMELINE_VERSION = 2
MAX_INTERVALS = 20_000
#: Gaps shorter than this are launch-to-launch jitter, not idle time worth drawing.
MIN_GAP_NS = 1_000

CATEGORIES = ("kernel", "memcpy", "memset", "device_sync", "launch", "runtime", "sync", "data_loader")

I64 = NDArray[np.int64]


class Lane(TypedDict):
    id: str
    label: str
    kind: str  # "gpu" | "host"
    start_ns: list[int]
    dur_ns: list[int]
    name: list[int]  # index into StepTimeline.names
    cat: list[int]  # index into StepTimeline.categories
    n: list[int]  # source events merged into the interval


class Gaps(TypedDict):
    start_ns: list[int]
    dur_ns: list[int]
    cause: list[int]  # index into StepTimeline.causes


class StepTimeline(TypedDict):
    timeline_version: int
    step: dict[str, Any]
    resolution_ns: int
    merged: bool
    source_events: int
    intervals: int
    names: list[str]
    name_category: list[str | None]  # classify.py's kernel category per name (device names), else null
    categories: list[str]
    causes: list[str]
    lanes: list[Lane]
    gaps: Gaps


def _merge_tol(s: I64, e: I64, key: I64, tol: int) -> tuple[I64, I64, I64, I64]:
    """Merge sorted-by-start intervals whose gap to the running end is <= tol.

    Returns (start, end, count, representative row) per block; the representative is the longest member.
    """
    if s.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    run_end = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1] + tol
    block = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    out_s = s[first]
    out_e = np.maximum.reduceat(e, first)
    count = np.diff(np.append(first, s.size))
    # longest member per block: sort by (block, -dur), take the first of each block
    order = np.lexsort((-(e - s), block))
    rep = key[order[np.searchsorted(block[order], np.arange(first.size))]]
    return out_s, out_e, count.astype(np.int64), rep


class _LaneSrc:
    __slots__ = ("id", "label", "kind", "s", "e", "name", "cat")

    def __init__(self, id_: str, label: str, kind: str, s: I64, e: I64, name: NDArray[Any], cat: NDArray[Any]):
        order = np.argsort(s, kind="stable")
        self.id, self.label, self.kind = id_, label, kind
        self.s, self.e, self.name, self.cat = s[order], e[order], name[order], cat[order]


def _family_mask(trace: Trace, family: str) -> NDArray[np.bool_]:
    """Rows of a ``metrics.context`` name family (its pattern, on the kinds it applies to)."""
    ev = trace.events
    return kind_mask(ev.kind, HOST_KINDS_FOR[family]) & ev.name_mask(re.compile(NAME_PATTERNS[family]).search)


def _prefilter(trace: Trace) -> dict[str, Any]:
    ev = trace.events
    kind = ev.kind
    device_mask = kind_mask(kind, (*DEVICE_KINDS, Kind.SYNC)) & (ev.device >= 0)
    runtime_mask = kind_mask(kind, (Kind.RUNTIME, Kind.DRIVER))
    sync_name = _family_mask(trace, "sync_api")  # runtime/driver rows only
    dl_mask = _family_mask(trace, "dataloader")
    cat = np.full(len(ev), -1, dtype=np.int64)
    cat[kind == Kind.KERNEL] = CATEGORIES.index("kernel")
    cat[kind == Kind.MEMCPY] = CATEGORIES.index("memcpy")
    cat[kind == Kind.MEMSET] = CATEGORIES.index("memset")
    cat[kind == Kind.SYNC] = CATEGORIES.index("device_sync")
    cat[runtime_mask] = CATEGORIES.index("runtime")
    cat[runtime_mask & (ev.correlation >= 0)] = CATEGORIES.index("launch")
    cat[runtime_mask & sync_name] = CATEGORIES.index("sync")
    cat[dl_mask] = CATEGORIES.index("data_loader")
    rows = np.flatnonzero(device_mask | runtime_mask | dl_mask)
    return {
        "rows": rows,
        "ts": ev.ts_ns[rows],
        "end": ev.end_ns[rows],
        "cat": cat[rows],
        "name": ev.name_id[rows].astype(np.int64),
        "device": ev.device[rows].astype(np.int64),
        "stream": ev.stream[rows].astype(np.int64),
        "is_device": device_mask[rows],
        "is_host_launch": runtime_mask[rows] & ~sync_name[rows],
        "is_sync": runtime_mask[rows] & sync_name[rows],
        "is_dl": dl_mask[rows],
    }


def _step_timeline(trace: Trace, pre: dict[str, Any], step: dict[str, Any], max_intervals: int,
                   host: HostSignals) -> StepTimeline:
    lo, hi = int(step["start_ns"]), int(step["end_ns"])
    inside = (pre["ts"] < hi) & (pre["end"] > lo)
    ts = np.clip(pre["ts"][inside], lo, hi) - lo
    end = np.clip(pre["end"][inside], lo, hi) - lo
    # zero-length events (instant syncs, clipped edges) still get 1 ns so they are drawn
    end = np.maximum(end, ts + 1)
    name, cat = pre["name"][inside], pre["cat"][inside]
    device, stream = pre["device"][inside], pre["stream"][inside]
    is_dev = pre["is_device"][inside]

    lanes: list[_LaneSrc] = []
    if is_dev.any():
        pairs = np.unique(np.stack([device[is_dev], stream[is_dev]], axis=1), axis=0)
        for d, st in pairs:
            m = is_dev & (device == d) & (stream == st)
            lanes.append(_LaneSrc(f"gpu{d}.s{st}", f"GPU {d} · stream {st}", "gpu", ts[m], end[m], name[m], cat[m]))
    host_groups = (("host.launch", "Host · launches", pre["is_host_launch"]),
                   ("host.sync", "Host · syncs", pre["is_sync"]),
                   ("host.dataloader", "Host · data loader", pre["is_dl"]))
    for lid, label, mask_all in host_groups:
        m = mask_all[inside]
        if m.any() or lid == "host.launch":
            lanes.append(_LaneSrc(lid, label, "host", ts[m], end[m], name[m], cat[m]))

    # The device's busy union (all streams; kernels, copies, memsets, not sync markers).
    busy_m = is_dev & (cat != CATEGORIES.index("device_sync"))
    bs, be = ts[busy_m], end[busy_m]
    border = np.argsort(bs, kind="stable")
    bs, be = bs[border], be[border]
    total_src = int(inside.sum())

    tol = 0
    span = max(hi - lo, 1)
    while True:
        merged = [_merge_tol(L.s, L.e, np.arange(L.s.size, dtype=np.int64), tol) for L in lanes]
        us, ue, _, _ = _merge_tol(bs, be, np.arange(bs.size, dtype=np.int64), tol)
        gs = np.concatenate(([0], ue)).astype(np.int64)
        ge = np.concatenate((us, [hi - lo])).astype(np.int64)
        if bs.size == 0:
            gs, ge = np.zeros(0, np.int64), np.zeros(0, np.int64)  # no device work: nothing to call idle
        keep = (ge - gs) >= max(MIN_GAP_NS, tol + 1)
        gs, ge = gs[keep], ge[keep]
        count = sum(int(x[0].size) for x in merged) + int(gs.size)
        if count <= max_intervals or tol >= span:
            break
        tol = max(1_000, tol * 2) if tol else max(1_000, span // max(max_intervals, 1))

    causes = gap_causes(gs + lo, ge + lo, host)
    names: dict[int, int] = {}
    out_lanes: list[Lane] = []
    for L, (s, e, n, rep) in zip(lanes, merged):
        name_ids = L.name[rep]
        local = [names.setdefault(int(i), len(names)) for i in name_ids]
        out_lanes.append(Lane(id=L.id, label=L.label, kind=L.kind, start_ns=s.tolist(), dur_ns=(e - s).tolist(),
                              name=local, cat=L.cat[rep].tolist(), n=n.tolist()))
    all_names = trace.events.names
    name_list = [all_names[i] if 0 <= i < len(all_names) else "?" for i in names]
    device_names = {int(L.name[r]) for L, (_, _, _, rep) in zip(lanes, merged) if L.kind == "gpu" for r in rep}
    name_category = [kernel_category(n) if i in device_names else None for i, n in zip(names, name_list)]
    return StepTimeline(
        timeline_version=TIMELINE_VERSION,
        step=dict(step),
        resolution_ns=int(tol),
        merged=bool(tol > 0),
        source_events=total_src,
        intervals=sum(len(x["start_ns"]) for x in out_lanes) + int(gs.size),
        names=name_list,
        name_category=name_category,
        categories=list(CATEGORIES),
        causes=list(CAUSES),
        lanes=out_lanes,
        gaps=Gaps(start_ns=gs.tolist(), dur_ns=(ge - gs).tolist(), cause=causes.tolist()),
    )


def step_breakdown(trace: Trace, steps: Sequence[dict[str, Any]] | None = None, *,
                   host: HostSignals | None = None) -> list[dict[str, Any]]:
    """Per step: device busy time and idle time by cause (ns; the parts sum to the step's duration).

    Busy is the union of kernels, copies and memsets on every stream, computed once; each step's gaps are
    its complement within the step (steps extended to their GPU tail may overlap the next one, so each
    step is cut on its own). Causes: ``metrics.idle.gap_causes``; ``host`` shares its signals with
    ``build_timelines``.
    """
    rows = step_rows(trace) if steps is None else list(steps)
    if not rows:
        return []
    ev = trace.events
    dev = kind_mask(ev.kind, DEVICE_KINDS)
    bs, be = merge(ev.ts_ns[dev], ev.end_ns[dev])
    host = host or HostSignals.of(trace)
    out: list[dict[str, Any]] = []
    for r in rows:
        lo, hi = int(r["start_ns"]), int(r["end_ns"])
        a, b = int(np.searchsorted(be, lo, side="right")), int(np.searchsorted(bs, hi, side="left"))
        gs, ge = complement(bs[a:b], be[a:b], lo, hi)
        codes = gap_causes(gs, ge, host)
        d = ge - gs
        parts = {f"{name}_ns": int(d[codes == i].sum()) for i, name in enumerate(CAUSES)}
        idle_ns = int(d.sum())
        out.append({"index": int(r["index"]), "name": r.get("name"), "duration_ns": hi - lo,
                    "busy_ns": hi - lo - idle_ns, **parts})
    return out


def step_rows(trace: Trace) -> list[dict[str, Any]]:
    """The trace's steps as plain dicts (``find_steps``), or one pseudo-step over the whole window."""
    st = find_steps(trace)
    rows = [
        {"index": int(st.index[i]), "name": st.names[i], "start_ns": int(st.start_ns[i]),
         "host_end_ns": int(st.host_end_ns[i]), "end_ns": int(st.end_ns[i]),
         "duration_ns": int(st.end_ns[i] - st.start_ns[i])}
        for i in range(len(st))
    ]
    if not rows and len(trace.events):
        end = int(trace.events.end_ns.max())
        start = int(trace.events.ts_ns.min())
        rows = [{"index": -1, "name": "whole trace (no step markers)", "start_ns": start, "host_end_ns": end,
                 "end_ns": end, "duration_ns": end - start}]
    return rows


def build_timelines(trace: Trace, steps: Sequence[dict[str, Any]] | None = None,
                    max_intervals: int = MAX_INTERVALS, *, host: HostSignals | None = None) -> list[StepTimeline]:
    """One downsampled timeline per step (see the module contract)."""
    rows = step_rows(trace) if steps is None else list(steps)
    if not rows:
        return []
    pre = _prefilter(trace)
    host = host or HostSignals.of(trace)
    return [_step_timeline(trace, pre, r, max_intervals, host) for r in rows]


def build(trace: Trace, steps: Sequence[dict[str, Any]] | None) -> tuple[list[StepTimeline], list[dict[str, Any]]]:
    """What the tab caches per trace: the step timelines and, when the trace has steps, their breakdown.

    The host signals behind the gap causes are computed once for both.
    """
    host = HostSignals.of(trace)
    timelines = build_timelines(trace, steps, host=host)
    return timelines, (step_breakdown(trace, steps, host=host) if steps else [])
