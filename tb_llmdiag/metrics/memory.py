"""Device memory: allocator peaks from ``[memory]`` samples against the device's capacity.

Definitions (``profile_memory=True`` samples of accelerator ``device`` >= 0; the device with the highest
peak is reported):
- ``peak_allocated_bytes`` / ``peak_reserved_bytes``: max of Total Allocated / Total Reserved over the trace
  (the allocator's totals, so memory allocated before the profiler started counts).
- ``total_bytes``: the device's totalGlobalMem; ``peak_reserved_share`` = peak_reserved / total;
  ``headroom_bytes`` = total - peak_reserved.
- ``fragmentation_bytes``: reserved - allocated at the sample with the peak reservation (cached but
  unused blocks; ``expandable_segments:True`` returns them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.metrics.context import Context, share


def memory_metrics(ctx: Context) -> dict[str, Any]:
    mem = ctx.trace.memory
    on_dev = mem.device >= 0
    if len(mem) == 0 or not on_dev.any():
        return {"available": False, "reason": "no device [memory] samples (profile with profile_memory=True)"}
    dev_ids = np.unique(mem.device[on_dev])
    best: dict[str, Any] | None = None
    for d in dev_ids:  # a handful of devices at most
        m = mem.device == d
        alloc, res = mem.total_allocated_bytes[m], mem.total_reserved_bytes[m]
        i = int(np.argmax(res))
        row = {"device": int(d), "peak_allocated_bytes": int(alloc.max()), "peak_reserved_bytes": int(res.max()),
               "fragmentation_bytes": int(max(res[i] - alloc[i], 0)), "samples": int(m.sum())}
        if best is None or row["peak_reserved_bytes"] > best["peak_reserved_bytes"]:
            best = row
    assert best is not None
    total = next((dv.total_memory_bytes for dv in ctx.trace.devices if dv.index == best["device"]), None)
    if total is None and ctx.trace.devices:
        total = ctx.trace.devices[0].total_memory_bytes
    best.update({
        "available": True,
        "total_bytes": total,
        "peak_allocated_share": share(best["peak_allocated_bytes"], total),
        "peak_reserved_share": share(best["peak_reserved_bytes"], total),
        "headroom_bytes": int(total - best["peak_reserved_bytes"]) if total else None,
        "fragmentation_share": share(best["fragmentation_bytes"], total),
    })
    return best
