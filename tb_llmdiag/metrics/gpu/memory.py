"""Device memory: allocator peaks from ``[memory]`` samples against the device's capacity.

Definitions (``profile_memory=True`` samples of accelerator ``device`` >= 0; the device with the highest
peak is reported):
- ``peak_allocated_bytes`` / ``peak_reserved_bytes``: max of Total Allocated / Total Reserved over the trace
  (the allocator's totals, so memory allocated before the profiler started counts).
- ``total_bytes``: the device's totalGlobalMem; ``peak_reserved_share`` = peak_reserved / total.
- ``peak_used_bytes``: peak reserved, or peak allocated when the samples carry no reservation;
  ``peak_used_share`` = peak_used / total; ``headroom_bytes`` = total - peak_used.
- Samples without allocator totals (-1: profilers before torch 1.10 record only deltas) are ignored; with
  none left the topic is unavailable (deltas alone cannot give an absolute peak).
- ``fragmentation_bytes``: reserved - allocated at the sample with the peak reservation (cached but
  unused blocks; ``expandable_segments:True`` returns them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.metrics.context import Context, share
from tb_llmdiag.metrics.entry import BYTES, COUNT, HIGHER, INDEX, LOWER, NEITHER, SHARE, Entry, Intro


def memory_metrics(ctx: Context) -> dict[str, Any]:
    mem = ctx.trace.memory
    on_dev = mem.device >= 0
    if len(mem) == 0 or not on_dev.any():
        return {"available": False, "reason": "no device [memory] samples (profile with profile_memory=True)"}
    on_dev &= mem.total_allocated_bytes >= 0  # -1: the sample has no allocator totals (pre-1.10 profilers)
    if not on_dev.any():
        return {"available": False, "reason": "the [memory] samples carry no allocator totals (old profiler version)"}
    dev_ids = np.unique(mem.device[on_dev])
    best: dict[str, Any] | None = None
    for d in dev_ids:  # a handful of devices at most
        m = on_dev & (mem.device == d)
        alloc, res = mem.total_allocated_bytes[m], mem.total_reserved_bytes[m]
        known_res = bool((res >= 0).any())
        i = int(np.argmax(res))
        row = {
            "device": int(d),
            "peak_allocated_bytes": int(alloc.max()),
            "peak_reserved_bytes": int(res.max()) if known_res else None,
            "fragmentation_bytes": int(max(res[i] - alloc[i], 0)) if known_res else None,
            "samples": int(m.sum()),
        }
        row["peak_used_bytes"] = row["peak_reserved_bytes"] if known_res else row["peak_allocated_bytes"]
        if best is None or row["peak_used_bytes"] > best["peak_used_bytes"]:
            best = row
    assert best is not None
    total = next((dv.total_memory_bytes for dv in ctx.trace.devices if dv.index == best["device"]), None)
    if total is None and ctx.trace.devices:
        total = ctx.trace.devices[0].total_memory_bytes
    best.update(
        {
            "available": True,
            "total_bytes": total,
            "peak_allocated_share": share(best["peak_allocated_bytes"], total),
            "peak_reserved_share": share(best["peak_reserved_bytes"], total),
            "peak_used_share": share(best["peak_used_bytes"], total),
            "headroom_bytes": int(total - best["peak_used_bytes"]) if total else None,
            "fragmentation_share": share(best["fragmentation_bytes"], total),
        }
    )
    return best


# The registry's entries of the `memory` topic: one row per key (metrics/entry.py); metrics/registry.py collects them
# through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`memory` (metrics/gpu/memory.py)",
    "From `[memory]` allocator samples (`profile_memory=True`) of accelerators; the device with the highest peak\nuse is reported. Samples without allocator totals (-1: profilers before torch 1.10 record only deltas) are\nignored, and with none left the topic is unavailable: deltas alone cannot give an absolute peak.",
)

ENTRIES: tuple[Entry, ...] = (
    ("memory.device", INDEX, NEITHER, 0, "device", "device index"),
    (
        "memory.fragmentation_bytes",
        BYTES,
        NEITHER,
        0.02,
        "fragmentation",
        "reserved - allocated at the peak-reservation sample (cached but unused)",
    ),
    ("memory.fragmentation_share", SHARE, LOWER, 0.1, "fragmentation share", "fragmentation_bytes / total_bytes"),
    ("memory.headroom_bytes", BYTES, HIGHER, 0.02, "headroom", "total_bytes - peak_used_bytes"),
    (
        "memory.peak_allocated_bytes",
        BYTES,
        NEITHER,
        0.02,
        "peak allocated",
        "max of the allocator's Total Allocated (memory allocated before the profiler started counts)",
    ),
    ("memory.peak_allocated_share", SHARE, NEITHER, 0.1, "peak allocated share", "peak_allocated_bytes / total_bytes"),
    ("memory.peak_reserved_bytes", BYTES, NEITHER, 0.02, "peak reserved", "max of the allocator's Total Reserved"),
    ("memory.peak_reserved_share", SHARE, NEITHER, 0.1, "peak reserved share", "peak_reserved_bytes / total_bytes"),
    (
        "memory.peak_used_bytes",
        BYTES,
        NEITHER,
        0.02,
        "peak used",
        "peak reserved, or peak allocated when the samples carry no reservation",
    ),
    ("memory.peak_used_share", SHARE, NEITHER, 0.1, "peak used share", "peak_used_bytes / total_bytes"),
    ("memory.samples", COUNT, NEITHER, 0.02, "samples", "its allocator sample count"),
    (
        "memory.total_bytes",
        BYTES,
        NEITHER,
        0.02,
        "total",
        "the device's `totalGlobalMem`; null when the trace does not say",
    ),
)
