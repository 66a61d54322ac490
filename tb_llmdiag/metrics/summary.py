"""The engine summary of one trace: device, counts, device time and busy time, where the steps came from.

Definitions (exact, and checked against plain-``json`` computations in the tests):
- ``counts.*``: number of events of each kind; ``steps``: number of step windows.
- ``device_time_ns.kernel|memcpy|memset``: plain sums of those events' durations.
- ``device_busy_ns``: length of the union of all kernel, memcpy and memset intervals (all devices and
  streams together), so concurrent streams are not double counted.
- ``runtime_time_ns``: sum of RUNTIME and DRIVER API call durations.
- ``window_ns``: from the first event's start to the last event's end.
- ``step_source``: see ``metrics.steps``; the steps themselves are listed once, in ``metrics.steps.per_step``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.metrics.context import Context
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
