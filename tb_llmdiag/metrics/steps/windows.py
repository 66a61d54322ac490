"""Training-step windows.

A step ends at the later of its host marker's end (``ProfilerStep#N`` or an XPlane step event) and the end
of the last device event launched from inside the marker (joined by correlation id): the GPU tail of a
step belongs to the step, as torch-tb-profiler defines it. It starts where its marker starts or, when the
device still runs the work of earlier steps then, where that work ends: steps never overlap. When the GPU
runs behind the host (the usual case of a GPU-bound loop), torch-tb-profiler's steps overlap by the queue
lag, so each one reads longer than the loop's period and their sum exceeds the window; here a step lasts
from the end of the previous step's work to the end of its own, so durations sum to the stepped window
and a GPU-bound step reads as its GPU time.
When a trace has no step markers (Axolotl never calls ``prof.step()``), steps are inferred from
``Optimizer.step#...`` annotations: step k runs from the end of optimizer step k-1 to the end of
optimizer step k, so N optimizer steps give N-1 whole steps. Annotations that overlap in time (nested
ones, or several optimizers each annotated inside one training step) are one optimizer step ending at the
latest end among them, so inferred steps are disjoint, sorted and never end before they start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.model import DEVICE_KINDS, EventTable, Kind, Trace, kind_mask

_STEP_NUMBER = re.compile(r"(\d+)\s*$")
_OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")


@dataclass(frozen=True)
class Steps:
    """One row per step, sorted by start. ``source``: profiler_step | xplane_step | optimizer_step | none."""

    index: NDArray[np.int64]  # the number in the marker's name (ProfilerStep#7 -> 7), else the ordinal
    names: tuple[str, ...]
    start_ns: NDArray[np.int64]
    host_end_ns: NDArray[np.int64]
    end_ns: NDArray[np.int64]
    source: str
    #: where each step's host marker starts (start_ns is later when earlier steps' device work still runs);
    #: host-side attribution (tokens, compiles, transfers) uses [host_start_ns, host_end_ns). None: start_ns.
    host_start_ns: NDArray[np.int64] | None = None

    @property
    def host_starts(self) -> NDArray[np.int64]:
        return self.start_ns if self.host_start_ns is None else self.host_start_ns

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    @property
    def duration_ns(self) -> NDArray[np.int64]:
        return self.end_ns - self.start_ns


def _markers(trace: Trace) -> tuple[EventTable, str]:
    ev = trace.events
    steps = ev.select(np.flatnonzero(ev.kind == Kind.STEP))  # a few rows: gather them, not mask every column
    if len(steps):
        return steps, ("xplane_step" if trace.source_kind == "xplane" else "profiler_step")
    opt = ev.select(np.flatnonzero((ev.kind == Kind.ANNOTATION) & ev.name_mask(_OPTIMIZER_STEP.match)))
    return opt, "optimizer_step"


def launch_end_per_window(ev: EventTable, starts: NDArray[np.int64], ends: NDArray[np.int64]) -> NDArray[np.int64]:
    """For each host window [start, end), the latest end of a device event launched inside it (-1 if none).

    Launches are RUNTIME/DRIVER events with a correlation id; device events carry the same id.
    Windows must be sorted and disjoint.
    """
    out = np.full(len(starts), -1, dtype=np.int64)
    dev = np.flatnonzero(kind_mask(ev.kind, DEVICE_KINDS))
    dev = dev[ev.correlation[dev] >= 0]
    host = np.flatnonzero(kind_mask(ev.kind, (Kind.RUNTIME, Kind.DRIVER)))
    host = host[ev.correlation[host] >= 0]
    if dev.size == 0 or host.size == 0 or len(starts) == 0:
        return out
    dev_corr = ev.correlation[dev]
    order = np.argsort(dev_corr, kind="stable")
    dev = dev[order]
    dev_corr, dev_end = dev_corr[order], ev.ts_ns[dev] + ev.dur_ns[dev]
    # several device events can share a correlation id (rare); keep the latest end per id
    first = np.flatnonzero(np.concatenate(([True], dev_corr[1:] != dev_corr[:-1])))
    uniq = dev_corr[first]
    latest = np.maximum.reduceat(dev_end, first)
    launch_ts, launch_corr = ev.ts_ns[host], ev.correlation[host]
    pos = np.searchsorted(uniq, launch_corr)
    pos_ok = pos < uniq.size
    matched = np.zeros(launch_corr.size, dtype=bool)
    matched[pos_ok] = uniq[pos[pos_ok]] == launch_corr[pos_ok]
    launch_ts, launch_end = launch_ts[matched], latest[pos[matched]]
    win = np.searchsorted(starts, launch_ts, side="right") - 1
    inside = (win >= 0) & (launch_ts < ends[np.clip(win, 0, None)])
    np.maximum.at(out, win[inside], launch_end[inside])
    return out


def optimizer_groups(ts: NDArray[np.int64], end: NDArray[np.int64]) -> tuple[NDArray[np.intp], NDArray[np.int64]]:
    """Overlapping ``Optimizer.step#`` annotations (sorted by start) as one optimizer step each:
    (index of each group's first annotation, each group's end = the latest end in it). Ends are strictly
    increasing, so the windows between consecutive ends are disjoint and well-formed."""
    if ts.size == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int64)
    reach = np.maximum.accumulate(end)
    # an annotation starting after everything before it has ended opens a new group (touching ones merge)
    new = np.ones(ts.size, dtype=bool)
    new[1:] = ts[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], ts.size) - 1
    return first, reach[last].astype(np.int64)


def disjoint_windows(starts: NDArray[np.int64], ends: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Windows sorted by start, made disjoint: each starts no earlier than every earlier window's end.

    start'_i = max(start_i, max_{j<i} end_j); end'_i = max(end_i, start'_i) (a window wholly inside an earlier
    one becomes empty at that one's end rather than negative).
    """
    if starts.size < 2:
        return starts, ends
    reach = np.maximum.accumulate(ends)
    new_starts = starts.copy()
    new_starts[1:] = np.maximum(starts[1:], reach[:-1])
    return new_starts, np.maximum(ends, new_starts)


def find_steps(trace: Trace) -> Steps:
    """The trace's training steps (see the module docstring for the definition)."""
    markers, source = _markers(trace)
    if len(markers) == 0 or (source == "optimizer_step" and len(markers) < 2):
        z = np.zeros(0, dtype=np.int64)
        return Steps(z, (), z, z, z, "none")
    order = np.argsort(markers.ts_ns, kind="stable")
    markers = markers.select(order)
    names = tuple(markers.name_of(i) for i in range(len(markers)))
    if source == "optimizer_step":
        first, group_end = optimizer_groups(markers.ts_ns, markers.end_ns)
        if len(first) < 2:
            z = np.zeros(0, dtype=np.int64)
            return Steps(z, (), z, z, z, "none")
        starts, host_ends = group_end[:-1], group_end[1:]
        names = tuple(names[i] for i in first[1:].tolist())
        index = np.arange(1, len(first), dtype=np.int64)
    else:
        starts, host_ends = markers.ts_ns, markers.end_ns
        numbers = [_STEP_NUMBER.search(n) for n in names]
        if all(numbers):
            index = np.array([int(m.group(1)) for m in numbers if m], dtype=np.int64)
        else:
            index = np.arange(len(names), dtype=np.int64)
    device_end = launch_end_per_window(trace.events, starts, host_ends)
    ends = np.maximum(host_ends, device_end)
    host_starts = starts.astype(np.int64)
    starts, ends = disjoint_windows(host_starts, ends.astype(np.int64))
    return Steps(
        index=index,
        names=names,
        start_ns=starts,
        host_end_ns=host_ends.astype(np.int64),
        end_ns=ends,
        source=source,
        host_start_ns=host_starts,
    )
