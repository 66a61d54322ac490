"""Downsampled timeline of one training step, for the tab's zoomable step view.

Contract:
- ``build(trace, breakdown)`` returns one ``StepTimeline`` dict per step (a trace without step markers gets
  one pseudo-step, index -1, covering its whole window) and the ``/steps`` rows, both from the analysis's
  ``metrics.steps.gaps.StepBreakdown`` (``metrics.analyze(trace).breakdown``): nothing here recomputes the busy
  union or an idle cause. Pure: no I/O.
- Lanes: one per accelerator stream (kernels, memcpys, memsets, device-side syncs), then host lanes:
  launches (runtime/driver calls that launched device work), syncs (synchronising runtime calls) and
  the data loader (when the trace has DataLoader annotations). ``gaps`` are the stretches inside the
  step where no stream of the device was busy, each with a cause.
- Times are int ns relative to the step's start. Intervals are clipped to the step.
- Budget: a step never sends more than ``max_intervals`` intervals (lanes + gaps). When it would, every
  lane is merged with one tolerance ``resolution_ns`` (neighbours closer than it become one interval
  carrying ``n`` events and the name of the longest one); the tolerance doubles until the budget
  holds. Gaps shorter than the resolution vanish with it, so a gap that is drawn is real.
- ``gaps`` are the breakdown's idle gaps clipped to the step, with the cause decided over the whole gap
  (a gap crossing a step boundary has one cause on both sides), and the host sync and data-loader lanes
  are ``metrics.context``'s ``sync_api`` and ``dataloader`` name families, so the tab draws what the
  report counts. Without step markers, the gaps are those of the report's window (first to last device
  event).
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.classify import kernel_category
from tb_llmdiag.intervals import merge_within
from tb_llmdiag.metrics.context import HOST_KINDS_FOR, NAME_PATTERNS
from tb_llmdiag.metrics.steps.gaps import CAUSES, IdleGaps, StepBreakdown
from tb_llmdiag.metrics.workload import device_kind
from tb_llmdiag.model import DEVICE_KINDS, Kind, Trace, kind_mask

#: Bump when the timeline JSON changes; part of the cache key.
TIMELINE_VERSION = 4
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
        "device_label": device_kind(trace),  # lanes named by the device the trace reports: "MTIA 9 · stream 801"
    }


def _step_gaps(gaps: IdleGaps, lo: int, hi: int) -> tuple[I64, I64, NDArray[np.uint8]]:
    """The gaps overlapping [lo, hi), clipped to it, relative to lo, with their causes."""
    a = int(np.searchsorted(gaps.end_ns, lo, side="right"))
    b = int(np.searchsorted(gaps.start_ns, hi, side="left"))
    gs = np.clip(gaps.start_ns[a:b], lo, hi) - lo
    ge = np.clip(gaps.end_ns[a:b], lo, hi) - lo
    return gs, ge, gaps.cause[a:b]


def _lanes(pre: dict[str, Any], inside: np.ndarray, lo: int, hi: int) -> list[_LaneSrc]:
    """The step's events as lanes: one per device stream, then the host's launches, syncs and data loader."""
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
            lanes.append(
                _LaneSrc(
                    f"gpu{d}.s{st}", f"{pre['device_label']} {d} · stream {st}", "gpu", ts[m], end[m], name[m], cat[m]
                )
            )
    host_groups = (
        ("host.launch", "Host · launches", pre["is_host_launch"]),
        ("host.sync", "Host · syncs", pre["is_sync"]),
        ("host.dataloader", "Host · data loader", pre["is_dl"]),
    )
    for lid, label, mask_all in host_groups:
        m = mask_all[inside]
        if m.any() or lid == "host.launch":
            lanes.append(_LaneSrc(lid, label, "host", ts[m], end[m], name[m], cat[m]))
    return lanes


Merged = list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def _coarsen(
    lanes: list[_LaneSrc], gaps: tuple[np.ndarray, np.ndarray, np.ndarray], span: int, max_intervals: int
) -> tuple[int, Merged, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The finest resolution ``tol`` at which the lanes' merged intervals and the gaps fit ``max_intervals``: at
    ``tol``, gaps up to ``tol`` long vanish with the busy intervals they separate (merged like a lane)."""
    all_gs, all_ge, all_cause = gaps
    tol = 0
    while True:
        merged = [merge_within(L.s, L.e, np.arange(L.s.size, dtype=np.int64), tol) for L in lanes]
        keep = (all_ge - all_gs) >= max(MIN_GAP_NS, tol + 1)
        gs, ge, causes = all_gs[keep], all_ge[keep], all_cause[keep]
        count = sum(int(x[0].size) for x in merged) + int(gs.size)
        if count <= max_intervals or tol >= span:
            return tol, merged, (gs, ge, causes)
        tol = max(1_000, tol * 2) if tol else max(1_000, span // max(max_intervals, 1))


def _step_timeline(
    trace: Trace, pre: dict[str, Any], step: dict[str, Any], max_intervals: int, gaps: IdleGaps
) -> StepTimeline:
    lo, hi = int(step["start_ns"]), int(step["end_ns"])
    inside = (pre["ts"] < hi) & (pre["end"] > lo)
    lanes = _lanes(pre, inside, lo, hi)
    # the analysis's idle gaps in this step
    tol, merged, (gs, ge, causes) = _coarsen(lanes, _step_gaps(gaps, lo, hi), max(hi - lo, 1), max_intervals)

    names: dict[int, int] = {}
    out_lanes: list[Lane] = []
    for L, (s, e, n, rep) in zip(lanes, merged):
        name_ids = L.name[rep]
        local = [names.setdefault(int(i), len(names)) for i in name_ids]
        out_lanes.append(
            Lane(
                id=L.id,
                label=L.label,
                kind=L.kind,
                start_ns=s.tolist(),
                dur_ns=(e - s).tolist(),
                name=local,
                cat=L.cat[rep].tolist(),
                n=n.tolist(),
            )
        )
    all_names = trace.events.names
    name_list = [all_names[i] if 0 <= i < len(all_names) else "?" for i in names]
    device_names = {int(L.name[r]) for L, (_, _, _, rep) in zip(lanes, merged) if L.kind == "gpu" for r in rep}
    name_category = [kernel_category(n) if i in device_names else None for i, n in zip(names, name_list)]
    return StepTimeline(
        timeline_version=TIMELINE_VERSION,
        step=dict(step),
        resolution_ns=int(tol),
        merged=bool(tol > 0),
        source_events=int(inside.sum()),
        intervals=sum(len(x["start_ns"]) for x in out_lanes) + int(gs.size),
        names=name_list,
        name_category=name_category,
        categories=list(CATEGORIES),
        causes=list(CAUSES),
        lanes=out_lanes,
        gaps=Gaps(start_ns=gs.tolist(), dur_ns=(ge - gs).tolist(), cause=causes.tolist()),
    )


def step_rows(trace: Trace, breakdown: StepBreakdown) -> list[dict[str, Any]]:
    """The step windows the timelines cover: the breakdown's steps, or one pseudo-step over the whole trace
    (index -1) when it has none."""
    rows = [
        {k: r[k] for k in ("index", "name", "start_ns", "host_end_ns", "end_ns", "duration_ns")}
        for r in breakdown.rows()
    ]
    if not rows and len(trace.events):
        end = int(trace.events.end_ns.max())
        start = int(trace.events.ts_ns.min())
        rows = [
            {
                "index": -1,
                "name": "whole trace (no step markers)",
                "start_ns": start,
                "host_end_ns": end,
                "end_ns": end,
                "duration_ns": end - start,
            }
        ]
    return rows


def build_timelines(trace: Trace, breakdown: StepBreakdown, max_intervals: int = MAX_INTERVALS) -> list[StepTimeline]:
    """One downsampled timeline per step (see the module contract)."""
    rows = step_rows(trace, breakdown)
    if not rows:
        return []
    pre = _prefilter(trace)
    return [_step_timeline(trace, pre, r, max_intervals, breakdown.gaps) for r in rows]


def steps_body(breakdown: StepBreakdown) -> list[dict[str, Any]]:
    """The tab's ``/steps`` rows: per step ``index``, ``name``, ``duration_ns``, ``busy_ns`` (collectives
    excluded), ``collective_ns`` (only collectives) and the idle ns of each cause (``metrics.steps.gaps``; they sum to
    the duration); empty without steps or device activity."""
    if not breakdown.available:
        return []
    keys = ("index", "name", "duration_ns", "busy_ns", "collective_ns", *(f"{c}_ns" for c in CAUSES))
    return [{k: r[k] for k in keys} for r in breakdown.rows()]


def build(trace: Trace, breakdown: StepBreakdown) -> tuple[list[StepTimeline], list[dict[str, Any]]]:
    """What the tab caches per trace: the step timelines and the ``/steps`` rows, both from the analysis's
    step breakdown (``metrics.analyze(trace, steps).breakdown``)."""
    return build_timelines(trace, breakdown), steps_body(breakdown)
