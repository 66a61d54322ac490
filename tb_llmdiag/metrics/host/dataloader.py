"""Data-loader time, and the part of it the GPU waits through.

Definitions (host ranges named ``enumerate(DataLoader)#...__next__``, which torch.utils.data records
under the profiler; ranges are clipped to the analysis window):
- ``calls``, ``calls_per_step``; ``host_ns`` = length of the union of the ranges; ``host_share`` = host_ns /
  window_ns (what torch-tb-profiler calls "DataLoader" before its priority rules).
- ``stall_ns`` = length of (loader ranges ∩ GPU idle): the GPU-visible wait (R8: severity uses this, not
  the CPU fetch time). ``stall_share`` = stall_ns / window_ns.
- ``iterator``: ``single_process`` (``num_workers=0``: batches are built on the training thread) or
  ``multi_process``, from the iterator class in the range's name; null when unknown.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, in_windows, per_step, share
from tb_llmdiag.metrics.entry import COUNT, LOWER, NEITHER, NS, PER_STEP, SHARE, TEXT, Entry, Intro
from tb_llmdiag.metrics.steps.gaps import IdleGaps


def dataloader_metrics(ctx: Context, gaps: IdleGaps) -> dict[str, Any]:
    ev = ctx.trace.events
    rows = ctx.cache.family("dataloader")
    if rows.size == 0:
        return {
            "available": False,
            "reason": "no DataLoader ranges in the trace (custom loop or no torch DataLoader)",
            "calls": 0,
        }
    s, e = ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]
    inwin = in_windows(s, ctx.win_s, ctx.win_e) | in_windows(np.maximum(e - 1, s), ctx.win_s, ctx.win_e)
    ms, me = merge(s, e)
    host_ns = int(overlap_per_window(ms, me, ctx.win_s, ctx.win_e).sum())
    stall_ns = int(overlap_per_window(ms, me, gaps.start_ns, gaps.end_ns).sum()) if len(gaps) else 0
    names = {ev.names[int(i)] for i in np.unique(ev.name_id[rows])}
    if any("SingleProcess" in n for n in names):
        iterator = "single_process"
    elif any("MultiProcess" in n for n in names):
        iterator = "multi_process"
    else:
        iterator = None
    return {
        "available": True,
        "calls": int(inwin.sum()),
        "calls_per_step": per_step(int(inwin.sum()), ctx),
        "host_ns": host_ns,
        "host_share": share(host_ns, ctx.window_ns),
        "stall_ns": stall_ns,
        "stall_share": share(stall_ns, ctx.window_ns),
        "iterator": iterator,
    }


# The registry's entries of the `dataloader` topic: one row per key (metrics/entry.py); metrics/registry.py collects
# them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`dataloader` (metrics/host/dataloader.py)",
    "Host ranges named `enumerate(DataLoader)#...__next__` (recorded by `torch.utils.data` under the profiler).\n\nOn `../shared/traces/kineto_resnet50/resnet50_num_workers_0` `stall_share` is 0.334, where\ntorch-tb-profiler reports DataLoader at 33.4 % of step time.",
)

ENTRIES: tuple[Entry, ...] = (
    ("dataloader.calls", COUNT, NEITHER, 0.02, "calls", "ranges in the window"),
    ("dataloader.calls_per_step", PER_STEP, NEITHER, 0.05, "calls per step", "calls / steps"),
    ("dataloader.host_ns", NS, NEITHER, 0.05, "host", "length of their union within the window"),
    ("dataloader.host_share", SHARE, NEITHER, 0.1, "host share", "host_ns / window_ns"),
    (
        "dataloader.iterator",
        TEXT,
        NEITHER,
        0,
        "iterator",
        "`single_process` (`num_workers=0`), `multi_process`, or null, from the iterator class in the name",
    ),
    (
        "dataloader.stall_ns",
        NS,
        LOWER,
        0.05,
        "stall",
        "length of (loader ranges ∩ GPU idle gaps): the wait the GPU sees",
    ),
    ("dataloader.stall_share", SHARE, LOWER, 0.1, "stall share", "stall_ns / window_ns"),
)
