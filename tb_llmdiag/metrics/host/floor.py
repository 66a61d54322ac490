"""The host floor: the host's own time per step, which no device-side fix can hide.

Once the kernels run faster, a step cannot get shorter than the time the host needs to issue its work: the
what-if bounds device-time savings by it (``findings/whatif.py``, docs/whatif.md).

Definitions (Kineto traces with steps; each step's host window is [host start, host end), ``metrics.steps.windows``):
- Launching threads: the host threads that issue at least one launch call (``launch_api``: cudaLaunchKernel,
  cudaGraphLaunch, hip/cu equivalents) whose start lies in the analysis window (the Python thread and the
  autograd engine's threads); ``threads_count``.
- Per step i with at least one such launch starting in its host window: ``span_i`` = end of its last launch
  call - the step's host start; ``blocked_i`` = the length of the union of the launching threads' blocking
  calls (``sync_api``: cuda*Synchronize, blocking cudaMemcpy...; ``sync_op``: ``.item()`` and other device value
  reads that reach the device; collectives' host waits show as these) within [host start, last launch end):
  time the host waits for the device, which a faster device shortens; ``own_i`` = span_i - blocked_i, the
  host's critical path to its last launch without blocking (Python, dispatch, launch calls, the data loader's
  ``__next__``).
- A step that launches nothing has nothing to issue: span_i = blocked_i = own_i = 0.
- ``median_ns``: the median of own_i over all steps (so it compares with ``steps.median_ns``; ``steps_count``:
  the steps with a launch); ``span_median_ns``, ``blocked_median_ns``: the medians of span_i and blocked_i (each
  its own median: they need not add up).
- Launches blocked on a full launch queue (a GPU-bound step whose host runs a full queue ahead: the launch call
  waits for a slot, which a kernel ending frees): a launch call at least ``QUEUE_BLOCK_FACTOR`` x the median launch
  call's duration and ``QUEUE_BLOCK_MIN_NS`` longer than it, that ends within ``QUEUE_SLACK_NS`` after a device event
  of the same device that started before the call ended (the queue moved, then the call returned), the device busy
  ``QUEUE_BUSY_SHARE`` of the time it waits (a full queue keeps it busy). The part of it
  beyond the median launch, [start + median, end), is time the host waits for the device, as a sync's is: it joins
  ``blocked_i`` (``queue_blocked_median_ns``: the median over steps of that part alone; ``queue_blocked_launches``:
  how many such calls start in the window).
Unavailable without steps or without launch calls (XPlane traces, CPU-only traces).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, in_windows
from tb_llmdiag.metrics.entry import COUNT, LOWER, NEITHER, NS, Entry, Intro

#: a launch call this many times the median launch, and at least QUEUE_BLOCK_MIN_NS longer, may be queue-blocked
QUEUE_BLOCK_FACTOR = 10.0
QUEUE_BLOCK_MIN_NS = 50_000
#: ... when it ends this soon after a device event (of its device, started before it ended) ends
QUEUE_SLACK_NS = 20_000
#: ... and the device is busy at least this share of the time it waits (a full queue keeps it busy)
QUEUE_BUSY_SHARE = 0.9


def queue_blocked(ctx: Context, launch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The launch calls among ``launch`` (rows) blocked on a full launch queue (module docstring): the [start, end)
    of the part of each beyond the median launch call."""
    ev = ctx.trace.events
    d = ev.dur_ns[launch]
    med = float(np.median(d)) if d.size else 0.0
    long = launch[(d >= QUEUE_BLOCK_FACTOR * med) & (d >= med + QUEUE_BLOCK_MIN_NS)]
    dev = ctx.dev
    if long.size == 0 or dev.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    end = ev.ts_ns[long] + ev.dur_ns[long]
    dev_end = ev.ts_ns[dev] + ev.dur_ns[dev]
    order = np.argsort(dev_end, kind="stable")
    de, ds, dd = dev_end[order], ev.ts_ns[dev][order], ev.device[dev][order]
    lo = np.searchsorted(de, end - QUEUE_SLACK_NS, side="left")
    hi = np.searchsorted(de, end, side="right")
    dev_of = ev.device[long]
    ok = np.zeros(long.size, bool)
    for k in np.flatnonzero(hi > lo):  # few: only the long launch calls
        sel = slice(lo[k], hi[k])
        ok[k] = bool(((ds[sel] < end[k]) & ((dd[sel] == dev_of[k]) | (dev_of[k] < 0))).any())
    hit = long[ok]
    qs, qe = (ev.ts_ns[hit] + int(med)).astype(np.int64), (ev.ts_ns[hit] + ev.dur_ns[hit]).astype(np.int64)
    # a full queue keeps the device busy the whole time the call waits
    busy = overlap_per_window(ctx.busy_s, ctx.busy_e, qs, qe) if qs.size else np.zeros(0, np.int64)
    full = busy >= QUEUE_BUSY_SHARE * (qe - qs)
    return qs[full], qe[full]


def host_floor_metrics(ctx: Context) -> dict[str, Any]:
    st = ctx.steps
    if len(st) == 0:
        return {"available": False, "reason": "no steps: the host floor is a time per step"}
    ev = ctx.trace.events
    launch = ctx.cache.family("launch_api")
    launch = launch[in_windows(ev.ts_ns[launch], ctx.win_s, ctx.win_e)]
    if launch.size == 0:
        return {"available": False, "reason": "no kernel launch calls in the steps (no CUDA/HIP runtime events)"}
    threads = np.unique(ev.tid[launch])
    hs = st.host_starts.astype(np.int64)
    he = st.host_end_ns.astype(np.int64)
    # the step whose host window holds each launch's start (host windows are sorted by start)
    ts = ev.ts_ns[launch]
    i = np.searchsorted(hs, ts, side="right") - 1
    ok = i >= 0
    ok[ok] = ts[ok] < he[i[ok]]
    last = np.full(len(st), -1, dtype=np.int64)
    np.maximum.at(last, i[ok], (ts + ev.dur_ns[launch])[ok])
    has = last >= 0
    if not has.any():
        return {"available": False, "reason": "no kernel launch call starts inside a step's host window"}
    sync = np.concatenate((ctx.cache.family("sync_api"), ctx.cache.family("sync_op")))
    sync = sync[np.isin(ev.tid[sync], threads)]
    qs, qe = queue_blocked(ctx, launch)
    ss, se = merge(np.concatenate((ev.ts_ns[sync], qs)), np.concatenate((ev.ts_ns[sync] + ev.dur_ns[sync], qe)))
    end = np.where(has, last, hs)  # a step that launches nothing: an empty span
    span = end - hs
    blocked = overlap_per_window(ss, se, hs, end)
    qm_s, qm_e = merge(qs, qe)
    queue = overlap_per_window(qm_s, qm_e, hs, end)
    own = np.maximum(span - blocked, 0)
    return {
        "available": True,
        "median_ns": int(np.median(own)),
        "span_median_ns": int(np.median(span)),
        "blocked_median_ns": int(np.median(blocked)),
        "queue_blocked_median_ns": int(np.median(queue)),
        "queue_blocked_launches": int(qs.size),
        "steps_count": int(has.sum()),
        "threads_count": int(threads.size),
    }


# The registry's entries of the `host_floor` topic: one row per key (metrics/entry.py); metrics/registry.py collects
# them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`host_floor` (metrics/host/floor.py)",
    "The host's own time per step: what the host needs to issue the step's work, which no faster kernel can\nhide. The what-if bounds device-side savings by it (docs/whatif.md). Kineto runs with steps and launch calls\nonly.",
)

ENTRIES: tuple[Entry, ...] = (
    (
        "host_floor.median_ns",
        NS,
        LOWER,
        0.05,
        "host floor",
        "median over steps of the host's own time per step: from the step's host start to the end of its last "
        "launch call, less the time the launching threads are blocked in syncs (`sync_api`, `sync_op`) meanwhile "
        "(0 for a step that launches nothing); no device-side fix takes a step below it (docs/whatif.md)",
    ),
    (
        "host_floor.span_median_ns",
        NS,
        NEITHER,
        0.05,
        "host span",
        "median over steps of the time from the step's host start to the end of its last launch call",
    ),
    (
        "host_floor.blocked_median_ns",
        NS,
        NEITHER,
        0.05,
        "host blocked",
        "median over steps of the time the launching threads are blocked in syncs before the step's last launch",
    ),
    (
        "host_floor.queue_blocked_median_ns",
        NS,
        NEITHER,
        0.05,
        "blocked on a full launch queue",
        "median over steps of the time launch calls wait for a slot in a full launch queue (a call 10x the median "
        "launch and 50 us longer, ending within 20 us of a device event's end, the device busy 90 % of the wait): "
        "counted as blocked, not as the "
        "host's own time",
    ),
    (
        "host_floor.queue_blocked_launches",
        COUNT,
        NEITHER,
        0,
        "queue-blocked launches",
        "launch calls in the window blocked on a full launch queue",
    ),
    ("host_floor.steps_count", COUNT, NEITHER, 0, "steps", "steps with at least one launch call in their host window"),
    (
        "host_floor.threads_count",
        COUNT,
        NEITHER,
        0,
        "launching threads",
        "host threads that issue launch calls in the window (the Python thread, the autograd engine's)",
    ),
)
