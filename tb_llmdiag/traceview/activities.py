"""What the host and the GPU do in a time range: the top activities by time, from the model's columns.

Contract (``top_activities(trace, analysis, start_ns, end_ns, *, top, step)`` -> the ``activities`` dict, every key
in the metric registry under ``activities.*``; pure, vectorised, no per-event Python):
- The range is [start_ns, end_ns) on the trace's clock (ns since its first event, the clock of ``steps.per_step``
  and of the trace view). An event counts with the part of it inside the range.
- ``gpu``: the range's device time as the report splits a step (``metrics.steps.gaps``): ``busy_ns`` (device work other
  than collectives), ``collective_ns`` and the idle time by cause (``host_wait_ns``, ``sync_ns``, ``data_loader_ns``,
  ``other_ns``), from the analysis's one busy union and idle gaps; for a step's range they are its
  ``steps.per_step`` row. ``by_category``: per trace-view category of the device events (``classify``: gemm,
  attention, copy, ...), the union of their time in the range; ``top``: the ``top`` device activity names (kernels,
  memcpys, memsets) by the union of their time in the range (streams running one name at once count once).
- ``host``: per trace-view host category (``cpu_op``, ``annotation``, ``python``, ``runtime``, ``driver``,
  ``host_other``; the step markers are the range itself and are left out), the ``top`` names by the union of
  their calls' time in the range (nested or concurrent calls of one name count once: the length the trace view
  shows them covering), each with ``gpu_host_wait_ns``: the part of that time in which the GPU sat idle waiting
  for the host (the gaps of cause ``host_wait``), the measure behind the ``host_bound`` finding's ``host_op``.
- Shares are of the range's duration, so each is in 0..1.

The numbers are those of the trace view's events (their start, duration and category as drawn); an attribution
of time to activities (``metrics/attribution/``) can replace the per-name unions here without changing the shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.errors import BadRange, cut, listed
from tb_llmdiag.intervals import clip, covered_before_each, merge, overlap_per_window, union_ns_by_group
from tb_llmdiag.metrics import Analysis
from tb_llmdiag.metrics.entry import COUNT, INDEX, LOWER, NEITHER, NS, SHARE, TEXT, Entry, Intro
from tb_llmdiag.metrics.steps.gaps import CAUSES, HOST_WAIT
from tb_llmdiag.model import Kind, Trace, kind_mask
from tb_llmdiag.traceview.build import CATEGORIES, HOST_CATEGORIES, STREAM_KINDS, event_categories

I64 = NDArray[np.int64]
#: host kinds listed (``Kind.STEP``: the step markers are the ranges asked about, not an activity in them)
LISTED_HOST_KINDS = (Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON, Kind.RUNTIME, Kind.DRIVER, Kind.OTHER)
DEFAULT_TOP = 5


def _window(lo: int, hi: int, s: I64, e: I64) -> int:
    return int(overlap_per_window(s, e, np.array([lo], np.int64), np.array([hi], np.int64))[0])


def _share(part: float, whole: int) -> float | None:
    return float(part) / whole if whole > 0 else None


def gpu_split(analysis: Analysis, lo: int, hi: int) -> dict[str, Any]:
    """The range's device time: busy, collective and idle by cause (module docstring)."""
    ctx, gaps = analysis.context, analysis.breakdown.gaps
    busy_all = _window(lo, hi, ctx.busy_s, ctx.busy_e)
    work = _window(lo, hi, ctx.work_s, ctx.work_e)
    out: dict[str, Any] = {"busy_ns": work, "busy_share": _share(work, hi - lo), "collective_ns": busy_all - work}
    for code, cause in enumerate(CAUSES):
        m = gaps.cause == code
        out[f"{cause}_ns"] = _window(lo, hi, gaps.start_ns[m], gaps.end_ns[m]) if m.any() else 0
    return out


def _ranked(
    names: tuple[str, ...], nid: NDArray[np.int32], s: I64, e: I64, top: int, dur: int
) -> tuple[list[int], NDArray[np.float64], NDArray[np.int64]]:
    """The ``top`` name ids by the union of their [s, e) in the range, the unions and the counts per name id."""
    per = union_ns_by_group(nid, s, e, len(names))
    count = np.bincount(nid, minlength=len(names))
    order = [int(i) for i in np.argsort(-per, kind="stable")[:top] if per[i] > 0]
    return order, per, count


def top_activities(
    trace: Trace, analysis: Analysis, start_ns: int, end_ns: int, *, top: int = DEFAULT_TOP, step: int | None = None
) -> dict[str, Any]:
    """The ``activities`` answer for [start_ns, end_ns) (module docstring); ``step`` is recorded as given. Raises
    BadRange when ``top`` is below 1."""
    if top < 1:
        raise BadRange(f"top must be 1 or more, not {cut(str(top))}")
    lo, hi = int(start_ns), int(end_ns)
    dur = max(hi - lo, 0)
    ev = trace.events
    first = int(np.searchsorted(ev.ts_ns, hi, side="left"))  # rows are sorted by start: none after ``hi`` counts
    rows = np.flatnonzero(ev.ts_ns[:first] + ev.dur_ns[:first] > lo)
    s, e = np.clip(ev.ts_ns[rows], lo, hi), np.clip(ev.ts_ns[rows] + ev.dur_ns[rows], lo, hi)
    kind, nid, cat = ev.kind[rows], ev.name_id[rows], event_categories(trace)[rows]
    device = kind_mask(kind, STREAM_KINDS) & (ev.device[rows] >= 0)
    gpu: dict[str, Any] = gpu_split(analysis, lo, hi) if dur else {}
    d_order, d_per, d_count = _ranked(ev.names, nid[device], s[device], e[device], top, dur)
    d_cat = np.zeros(len(ev.names), np.int64)
    d_cat[nid[device]] = cat[device]
    by_cat = union_ns_by_group(cat[device], s[device], e[device], len(CATEGORIES))
    gpu["by_category"] = {
        CATEGORIES[c]: {"time_ns": int(by_cat[c]), "share": _share(by_cat[c], dur)}
        for c in np.argsort(-by_cat, kind="stable")
        if by_cat[c] > 0
    }
    gpu["top"] = [
        {
            "name": ev.names[i],
            "category": CATEGORIES[int(d_cat[i])],
            "time_ns": int(d_per[i]),
            "share": _share(d_per[i], dur),
            "count": int(d_count[i]),
        }
        for i in d_order
    ]
    host_mask = kind_mask(kind, LISTED_HOST_KINDS) & (ev.device[rows] < 0)
    gaps = analysis.breakdown.gaps
    hw_s, hw_e = merge(*clip(gaps.start_ns[gaps.cause == HOST_WAIT], gaps.end_ns[gaps.cause == HOST_WAIT], lo, hi))
    host: dict[str, Any] = {}
    for c in HOST_CATEGORIES:
        m = host_mask & (cat == CATEGORIES.index(c))
        if not m.any():
            continue
        order, per, count = _ranked(ev.names, nid[m], s[m], e[m], top, dur)
        at_s, at_e = covered_before_each(hw_s, hw_e, s[m], e[m])
        waited = union_ns_by_group(nid[m], at_s, at_e, len(ev.names))
        host[c] = [
            {
                "name": ev.names[i],
                "time_ns": int(per[i]),
                "share": _share(per[i], dur),
                "count": int(count[i]),
                "gpu_host_wait_ns": int(waited[i]),
            }
            for i in order
        ]
    return {"start_ns": lo, "end_ns": hi, "duration_ns": dur, "step": step, "gpu": gpu, "host": host}


#: times a range may give: int64 ns (the columns' type; beyond it numpy overflows)
INT64_LIMIT = 2**63


def step_range(report: Mapping[str, Any], step: int) -> tuple[int, int]:
    """``(start_ns, end_ns)`` of step ``step`` (its ``index``, as the report and the profiler number it).

    Raises:
        BadRange: the report has no such step (the message lists the ones it has).
    """
    rows = ((report.get("metrics") or {}).get("steps") or {}).get("per_step") or []
    for r in rows:
        if r.get("index") == step:
            return int(r["start_ns"]), int(r["end_ns"])
    have = listed(r.get("index") for r in rows) or "none: the trace has no step markers"
    raise BadRange(f"no step {cut(str(step))} in run {report.get('run')} (steps: {have})")


def asked_range(
    report: Mapping[str, Any], step: int | None, start_ns: int | None, end_ns: int | None
) -> tuple[int, int]:
    """The range a question names: step ``step``'s window, or [start_ns, end_ns) (the whole window when neither is
    given), checked against the run's report.

    Raises:
        BadRange: an unknown step, both a step and times, a range that is empty or outside the trace, or a time
            beyond int64 ns.
    """
    for what, v in (("start_ns", start_ns), ("end_ns", end_ns)):
        if v is not None and not -INT64_LIMIT <= v < INT64_LIMIT:
            raise BadRange(f"{what} {cut(str(v))} is beyond int64 ns (times are ns since the trace start, < 2^63)")
    if step is not None and (start_ns is not None or end_ns is not None):
        raise BadRange("give a step or a time range (start_ns, end_ns), not both")
    if step is not None:
        return step_range(report, step)
    window = int(((report.get("summary") or {}).get("window_ns")) or 0)
    lo = 0 if start_ns is None else int(start_ns)
    hi = window if end_ns is None else int(end_ns)
    if not 0 <= lo < hi or lo >= window:
        raise BadRange(f"empty range or outside the trace: [{lo}, {hi}) ns; the trace covers [0, {window}) ns")
    return lo, hi


# The registry's entries of ``activities`` (what ``top_activities`` answers; ``parts*``: the agent's ``anatomy`` tool
# with a step or range, ``api.Analysed.anatomy_in``): one row per key (metrics/entry.py), collected by the whole
# registry (tb_llmdiag/registry.py)
_UNION = (
    "the union of the time its events cover inside the range (streams or calls running one name at once count once)"
)

#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`activities` (traceview/activities.py; `api.analyze(tf).activities`, not part of the run report)",
    "What the host and the GPU do in one time range or step: the top activities by time, with the numbers the "
    "trace view draws. The agent's `top_activities` tool answers with it (docs/agents.md).",
)

# a declared table, one entry per row: left as laid out
# fmt: off
ENTRIES: tuple[Entry, ...] = (
    ("activities.start_ns", NS, NEITHER, 0, "range start",
     "start of the range asked about, in ns since the trace's first event (the clock of `steps.per_step`)"),
    ("activities.end_ns", NS, NEITHER, 0, "range end", "end of the range (exclusive)"),
    ("activities.duration_ns", NS, NEITHER, 0, "range", "end_ns - start_ns"),
    ("activities.step", INDEX, NEITHER, 0, "step", "the step whose window the range is, or null for a range given by times"),
    ("activities.gpu.busy_ns", NS, NEITHER, 0.05, "GPU busy",
     "device time in the range covered by work other than collectives (the union over devices and streams); for a "
     "step's range, its `steps.per_step[].busy_ns`"),
    ("activities.gpu.busy_share", SHARE, NEITHER, 0.05, "GPU busy share", "busy_ns / duration_ns"),
    ("activities.gpu.collective_ns", NS, LOWER, 0.05, "collectives only",
     "device time in the range that only collectives cover (`steps.per_step[].collective_ns` for a step)"),
    ("activities.gpu.host_wait_ns", NS, LOWER, 0.05, "GPU waits for the host",
     "idle time in the range of gaps of cause `host_wait` (`metrics/steps/gaps.py`; `steps.per_step[].host_wait_ns`)"),
    ("activities.gpu.sync_ns", NS, LOWER, 0.05, "GPU idle after a sync", "idle time in the range of gaps of cause `sync`"),
    ("activities.gpu.data_loader_ns", NS, LOWER, 0.05, "GPU waits for data",
     "idle time in the range of gaps of cause `data_loader`"),
    ("activities.gpu.other_ns", NS, LOWER, 0.05, "GPU idle, other", "idle time in the range of gaps of cause `other`"),
    ("activities.gpu.by_category.*.time_ns", NS, NEITHER, 0.05, "category time",
     "per trace-view category of device events (kernel categories of `classify`, memcpy, memset): " + _UNION),
    ("activities.gpu.by_category.*.share", SHARE, NEITHER, 0.05, "category share", "time_ns / duration_ns"),
    ("activities.gpu.top[].name", TEXT, NEITHER, 0, "device activity", "a kernel, memcpy or memset name"),
    ("activities.gpu.top[].category", TEXT, NEITHER, 0, "category", "its trace-view category"),
    ("activities.gpu.top[].time_ns", NS, NEITHER, 0.05, "time", "of the top device names by time: " + _UNION),
    ("activities.gpu.top[].share", SHARE, NEITHER, 0.05, "share of the range", "time_ns / duration_ns"),
    ("activities.gpu.top[].count", COUNT, NEITHER, 0.05, "events", "its events overlapping the range"),
    ("activities.parts_busy_ns", NS, NEITHER, 0.05, "GPU busy in the range (by part)",
     "the agent's `anatomy` tool with a step or range: for a step, the sum of its parts' `anatomy.parts.*.step_time_ns` "
     "(device events counted in the step they start in); for a range given by times, the device-busy union within "
     "it (all devices and streams, collectives included)"),
    ("activities.parts[].name", TEXT, NEITHER, 0, "model part",
     "a part of the model (`anatomy.parts`) with device time in the range, largest first"),
    ("activities.parts[].time_ns", NS, NEITHER, 0.05, "part time in the range",
     "its share of `parts_busy_ns`, each instant split equally among the device events running then"),
    ("activities.parts[].share", SHARE, NEITHER, 0.05, "part share of the range's busy time", "time_ns / parts_busy_ns"),
    ("activities.host.*[].name", TEXT, NEITHER, 0, "host activity",
     "per host category of the trace view (`cpu_op`, `annotation`, `python`, `runtime`, `driver`, `host_other`), "
     "the top names by time"),
    ("activities.host.*[].time_ns", NS, NEITHER, 0.05, "time", _UNION),
    ("activities.host.*[].share", SHARE, NEITHER, 0.05, "share of the range", "time_ns / duration_ns"),
    ("activities.host.*[].count", COUNT, NEITHER, 0.05, "calls", "its calls overlapping the range"),
    ("activities.host.*[].gpu_host_wait_ns", NS, LOWER, 0.05, "while the GPU waited",
     "the part of time_ns in which the GPU sat idle waiting for the host (gaps of cause `host_wait`): the measure "
     "`idle.host_wait_top_ops` and the `host_bound` finding's `host_op` read over the whole window"),
)
# fmt: on
