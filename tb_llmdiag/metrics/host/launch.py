"""Launch overhead: kernels and launches per step, kernel sizes, and the CUDA API table.

Definitions (events whose start lies in the analysis window):
- ``kernels``: device events of Kind KERNEL; ``kernels_per_step`` = kernels / steps (null without steps).
- ``launches``: runtime/driver calls that submit work (cudaLaunchKernel*, cuLaunchKernel*, hipLaunchKernel,
  cudaGraphLaunch...); ``launches_per_step`` likewise.
- ``kernel_median_ns``, ``kernel_mean_ns``: over kernel durations. ``tiny_kernel_share``: share of kernels
  shorter than ``tiny_ns`` (10 us); ``tiny_kernel_time_share``: their share of kernel time. Kernels a CUDA/HIP
  graph replays (``metrics.gpu.graphs``) are not launched one by one: the tiny-kernel counts leave them out
  (``graph_kernels`` counts them; null shares when every kernel is replayed).
- ``launch_api_median_ns``: median duration of the launch calls (the host cost per launch).
- ``runtime_ns``: sum of all runtime+driver call durations; ``runtime_share`` = length of their union within
  the window / window_ns (host time inside the CUDA runtime).
- ``api``: per runtime/driver API name (top ``top`` by total time): count, total_ns, mean_ns, max_ns, and
  share = total_ns / runtime_ns (like Nsight's CUDA API summary).
- ``tiny_kernel_saving_share``: an upper bound on what fusing the tiny kernels would save:
  min(idle.host_wait_share, tiny kernels per step x launch_api_median_ns / median step).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, in_windows, per_step, share
from tb_llmdiag.metrics.entry import COUNT, LOWER, NEITHER, NS, PER_STEP, SHARE, TEXT, Entry, Intro
from tb_llmdiag.model import Kind

TINY_NS = 10_000


def _union(s: np.ndarray, e: np.ndarray, ctx: Context) -> int:
    ms, me = merge(s, e)
    return int(overlap_per_window(ms, me, ctx.win_s, ctx.win_e).sum())


def launch_metrics(ctx: Context, idle: dict[str, Any], *, tiny_ns: int = TINY_NS, top: int = 15) -> dict[str, Any]:
    ev = ctx.trace.events
    host = ctx.cache.kinds(Kind.RUNTIME, Kind.DRIVER)
    host = host[in_windows(ev.ts_ns[host], ctx.win_s, ctx.win_e)]
    if ctx.dev.size == 0 and host.size == 0:
        return {"available": False, "reason": "no device activity and no runtime calls in the trace"}
    k_pos = np.flatnonzero(ctx.dev_in_win)
    k_pos = k_pos[ev.kind[ctx.dev[k_pos]] == Kind.KERNEL]
    k_rows = ctx.dev[k_pos]
    k_dur = ev.dur_ns[k_rows]
    replayed = ctx.graph.is_graph[k_pos]
    own_dur = k_dur[~replayed]  # kernels launched one by one
    launch = ctx.cache.family("launch_api")
    launch = launch[in_windows(ev.ts_ns[launch], ctx.win_s, ctx.win_e)]
    l_dur = ev.dur_ns[launch]
    h_dur = ev.dur_ns[host]
    runtime_ns = int(h_dur.sum())
    tiny = own_dur < tiny_ns
    per_api = np.bincount(ev.name_id[host], weights=h_dur, minlength=len(ev.names))
    per_api_n = np.bincount(ev.name_id[host], minlength=len(ev.names))
    per_api_max = np.zeros(len(ev.names), np.int64)
    np.maximum.at(per_api_max, ev.name_id[host], h_dur)
    order = np.argsort(-per_api, kind="stable")[:top]
    api = [
        {
            "name": ev.names[i],
            "count": int(per_api_n[i]),
            "total_ns": int(per_api[i]),
            "mean_ns": int(per_api[i] // per_api_n[i]),
            "max_ns": int(per_api_max[i]),
            "share": share(int(per_api[i]), runtime_ns),
        }
        for i in order
        if per_api_n[i] > 0
    ]
    launch_median = int(np.median(l_dur)) if l_dur.size else None
    tiny_per_step = per_step(int(tiny.sum()), ctx)
    saving = None
    med = ctx.step_median_ns
    if tiny_per_step is not None and launch_median is not None and med:
        saving = min(float(idle.get("host_wait_share") or 0.0), tiny_per_step * launch_median / med)
    return {
        "available": True,
        "kernels": int(k_rows.size),
        "kernels_per_step": per_step(int(k_rows.size), ctx),
        "launches": int(launch.size),
        "launches_per_step": per_step(int(launch.size), ctx),
        "kernel_median_ns": int(np.median(k_dur)) if k_dur.size else None,
        "kernel_mean_ns": int(k_dur.mean()) if k_dur.size else None,
        "tiny_kernel_ns": tiny_ns,
        "tiny_kernels": int(tiny.sum()),
        "tiny_kernels_per_step": tiny_per_step,
        "tiny_kernel_share": share(int(tiny.sum()), int(own_dur.size)),
        "tiny_kernel_time_share": share(int(own_dur[tiny].sum()), int(own_dur.sum())),
        "graph_kernels": int(replayed.sum()),
        "launch_api_median_ns": launch_median,
        "runtime_ns": runtime_ns,
        "runtime_share": share(_union(ev.ts_ns[host], ev.ts_ns[host] + h_dur, ctx), ctx.window_ns),
        "api": api,
        "tiny_kernel_saving_share": saving,
    }


# The registry's entries of the `launch` topic: one row per key (metrics/entry.py); metrics/registry.py collects them
# through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = ("`launch` (metrics/host/launch.py)", "")

# a declared table, one entry per row: left as laid out
# fmt: off
#: the shared part of the definitions of `launch.api[]`'s fields
_API_ENTRY = (
    "`api` entry: per runtime/driver API (top 15 by total): `name`, `count`, `total_ns`, `mean_ns`, `max_ns`, "
    "`share` (of runtime_ns), like Nsight's CUDA API summary"
)

ENTRIES: tuple[Entry, ...] = (
    ("launch.kernel_mean_ns", NS, NEITHER, 0.05, "kernel mean", "mean kernel duration"),
    ("launch.kernel_median_ns", NS, NEITHER, 0.05, "kernel median", "median kernel duration"),
    ("launch.kernels", COUNT, NEITHER, 0.02, "kernels", "KERNEL events in the window"),
    ("launch.kernels_per_step", PER_STEP, NEITHER, 0.05, "kernels per step", "kernels / steps"),
    ("launch.launch_api_median_ns", NS, NEITHER, 0.05, "launch api median",
     "median duration of the launch calls: the host's cost per launch"),
    ("launch.launches", COUNT, NEITHER, 0.02, "launches",
     "runtime/driver calls that submit work: `cudaLaunchKernel*`, `cudaLaunchCooperativeKernel`, "
     "`cudaGraphLaunch`, `cuLaunch*`, `hipLaunchKernel`, `hip(Ext)ModuleLaunchKernel`"),
    ("launch.launches_per_step", PER_STEP, NEITHER, 0.05, "launches per step", "launches / steps"),
    ("launch.runtime_ns", NS, NEITHER, 0.05, "runtime", "sum of all runtime + driver call durations in the window"),
    ("launch.runtime_share", SHARE, LOWER, 0.1, "runtime share",
     "length of the union of those calls within the window / window_ns"),
    ("launch.tiny_kernel_ns", NS, NEITHER, 0, "tiny kernel", "the \"tiny\" cut-off, 10 000 ns"),
    ("launch.tiny_kernel_saving_share", SHARE, LOWER, 0.1, "tiny kernel saving share",
     "min(`idle.host_wait_share`, tiny kernels per step x launch_api_median_ns / median step): what fusing "
     "them could save at most"),
    ("launch.tiny_kernel_share", SHARE, LOWER, 0.1, "tiny kernel share", "tiny_kernels / kernels launched one by one (graph replays left out)"),
    ("launch.graph_kernels", COUNT, NEITHER, 0.02, "replayed kernels", "kernels a CUDA/HIP graph replayed (not launched one by one; left out of the tiny-kernel counts)"),
    ("launch.tiny_kernel_time_share", SHARE, LOWER, 0.1, "tiny kernel time share", "their share of kernel time"),
    ("launch.tiny_kernels", COUNT, LOWER, 0.02, "tiny kernels", "kernels shorter than the cut-off"),
    ("launch.tiny_kernels_per_step", PER_STEP, LOWER, 0.05, "tiny kernels per step", "tiny_kernels / steps"),
    ("launch.api[].count", COUNT, NEITHER, 0.02, "api count",
     "`count` of each " + _API_ENTRY),
    ("launch.api[].max_ns", NS, NEITHER, 0.05, "api max",
     "`max_ns` of each " + _API_ENTRY),
    ("launch.api[].mean_ns", NS, NEITHER, 0.05, "api mean",
     "`mean_ns` of each " + _API_ENTRY),
    ("launch.api[].name", TEXT, NEITHER, 0, "api name",
     "`name` of each " + _API_ENTRY),
    ("launch.api[].share", SHARE, NEITHER, 0.1, "api share",
     "`share` of each " + _API_ENTRY),
    ("launch.api[].total_ns", NS, NEITHER, 0.05, "api total",
     "`total_ns` of each " + _API_ENTRY),
)

# fmt: on
