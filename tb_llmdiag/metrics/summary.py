"""The engine summary of one trace: device, counts, device time and busy time, where the steps came from.

Definitions (exact, and checked against plain-``json`` computations in the tests):
- ``counts.*``: number of events of each kind; ``steps``: number of step windows.
- ``device_time_ns.kernel|memcpy|memset``: plain sums of those events' durations.
- ``device_busy_ns``: length of the union of all kernel, memcpy and memset intervals (all devices and
  streams together), so concurrent streams are not double counted.
- ``runtime_time_ns``: sum of RUNTIME and DRIVER API call durations.
- ``window_ns``: from the first event's start to the last event's end.
- ``step_source``: see ``metrics.steps.windows``; the steps themselves are listed once, in ``metrics.steps.per_step``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.entry import BYTES, COUNT, ID, NEITHER, NS, TEXT, TFLOP_PER_S, Entry, Intro
from tb_llmdiag.model import DEVICE_KINDS, Kind, Trace, kind_mask

_COUNTED = {
    "kernels": (Kind.KERNEL,),
    "memcpys": (Kind.MEMCPY,),
    "memsets": (Kind.MEMSET,),
    "runtime_calls": (Kind.RUNTIME,),
    "driver_calls": (Kind.DRIVER,),
    "cpu_ops": (Kind.CPU_OP,),
    "annotations": (Kind.ANNOTATION, Kind.GPU_ANNOTATION),
    "python_frames": (Kind.PYTHON,),
}


def summarize(ctx: Context) -> dict[str, Any]:
    trace, steps = ctx.trace, ctx.steps
    ev = trace.events
    per_kind = np.bincount(ev.kind, minlength=len(Kind))
    counts = {name: int(sum(per_kind[k] for k in kinds)) for name, kinds in _COUNTED.items()}
    counts["events"] = len(ev)
    counts["steps"] = len(steps)
    counts["memory_samples"] = len(trace.memory)
    dev = np.flatnonzero(kind_mask(ev.kind, DEVICE_KINDS))
    dev_kind, dev_dur = ev.kind[dev], ev.dur_ns[dev]
    device_time = {
        name: int(dev_dur[dev_kind == kind].sum())
        for name, kind in (("kernel", Kind.KERNEL), ("memcpy", Kind.MEMCPY), ("memset", Kind.MEMSET))
    }
    window = int(ev.end_ns.max() - ev.ts_ns.min()) if len(ev) else 0
    return {
        "device": _device(trace),
        "distributed": _distributed(trace),
        "window_ns": window,
        "counts": counts,
        "device_time_ns": device_time,
        "device_busy_ns": int((ctx.busy_e - ctx.busy_s).sum()),
        "runtime_time_ns": int(ev.dur_ns[kind_mask(ev.kind, (Kind.RUNTIME, Kind.DRIVER))].sum()),
        "step_source": steps.source,
    }


def _device(trace: Trace) -> dict[str, Any] | None:
    """The device the trace ran on: the first listed device that has activity, else the first listed."""
    if not trace.devices:
        return None
    active = set(np.unique(trace.events.device[trace.events.device >= 0]).tolist())
    chosen = next((d for d in trace.devices if d.index in active), trace.devices[0])
    return {
        "name": chosen.name,
        "count": len(active) if active else len(trace.devices),
        "total_memory_bytes": chosen.total_memory_bytes,
        "compute_capability": chosen.compute_capability,
        "peak_tflops": chosen.peak_tflops,
    }


def _distributed(trace: Trace) -> dict[str, Any] | None:
    d = trace.distributed
    if d is None:
        return None
    return {"rank": d.rank, "world_size": d.world_size, "backend": d.backend}


# The registry's entries of the `summary` section: one row per key (metrics/entry.py); metrics/registry.py collects
# them, docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = ("`summary` (metrics/summary.py)", "")

# a declared table, one entry per row: left as laid out
# fmt: off
ENTRIES: tuple[Entry, ...] = (
    ("summary.counts.annotations", COUNT, NEITHER, 0.02, "annotations",
     "the number of host user annotations (ANNOTATION, GPU_ANNOTATION rows)"),
    ("summary.counts.cpu_ops", COUNT, NEITHER, 0.02, "cpu ops", "the number of CPU operator rows"),
    ("summary.counts.driver_calls", COUNT, NEITHER, 0.02, "driver calls", "the number of driver API rows"),
    ("summary.counts.events", COUNT, NEITHER, 0.02, "events", "the number of rows in the trace"),
    ("summary.counts.kernels", COUNT, NEITHER, 0.02, "kernels", "the number of kernel rows"),
    ("summary.counts.memcpys", COUNT, NEITHER, 0.02, "memcpys", "the number of memcpy rows"),
    ("summary.counts.memory_samples", COUNT, NEITHER, 0.02, "memory samples", "the number of allocator samples"),
    ("summary.counts.memsets", COUNT, NEITHER, 0.02, "memsets", "the number of memset rows"),
    ("summary.counts.python_frames", COUNT, NEITHER, 0.02, "python frames", "the number of Python tracer rows"),
    ("summary.counts.runtime_calls", COUNT, NEITHER, 0.02, "runtime calls", "the number of runtime API rows"),
    ("summary.counts.steps", COUNT, NEITHER, 0.02, "steps", "the number of steps found"),
    ("summary.device.compute_capability", TEXT, NEITHER, 0, "compute capability", "e.g. `9.0`; null when unknown"),
    ("summary.device.count", COUNT, NEITHER, 0.02, "devices", "devices with activity (else listed)"),
    ("summary.device.name", TEXT, NEITHER, 0, "device",
     "the device the trace ran on: the first listed device with activity"),
    ("summary.device.peak_tflops", TFLOP_PER_S, NEITHER, 0.05, "peak",
     "the peak the trace states (XPlane); null otherwise"),
    ("summary.device.total_memory_bytes", BYTES, NEITHER, 0.02, "device memory",
     "the device's memory; null when the trace does not say"),
    ("summary.device_busy_ns", NS, NEITHER, 0.05, "device busy",
     "length of the union of all kernel, memcpy and memset intervals (all devices and streams)"),
    ("summary.device_time_ns.kernel", NS, NEITHER, 0.05, "kernel time",
     "plain sum of kernel durations (overlapping streams both count)"),
    ("summary.device_time_ns.memcpy", NS, NEITHER, 0.05, "memcpy time",
     "plain sum of memcpy durations (overlapping streams both count)"),
    ("summary.device_time_ns.memset", NS, NEITHER, 0.05, "memset time",
     "plain sum of memset durations (overlapping streams both count)"),
    ("summary.distributed.backend", TEXT, NEITHER, 0, "backend", "the process group backend (nccl...)"),
    ("summary.distributed.rank", ID, NEITHER, 0, "rank", "the trace's distributed rank"),
    ("summary.distributed.world_size", COUNT, NEITHER, 0.02, "world size", "ranks in the job"),
    ("summary.runtime_time_ns", NS, NEITHER, 0.05, "runtime calls", "summed duration of runtime and driver calls"),
    ("summary.step_source", TEXT, NEITHER, 0, "step source", "how steps were found (`steps.source`)"),
    ("summary.window_ns", NS, NEITHER, 0.05, "window", "length of the analysed window (`idle.window_ns`)"),
)

# fmt: on
