"""The optimizer step: its host time and kernel launches per step, and whether it runs fused / foreach.

Definitions (host ranges whose start lies in the analysis window):
- Optimizer ranges: ``Optimizer.step#<Class>.step`` annotations (what ``torch.optim`` records under the
  profiler); ``optimizer``: the class name of the one with the most time.
- ``calls``: their count; ``host_ns``: the union of the ranges; ``host_share`` = host_ns / window_ns.
- ``launches``: kernel-launch calls (``launch_api``) inside the ranges on the same thread; ``launches_per_step``
  = launches / steps (per optimizer call without steps).
- ``implementation``: ``fused`` when an ``aten::_fused_*`` op runs inside the ranges or the class is a Fused one
  (apex / DeepSpeed ``FusedAdam``), else ``foreach`` when an ``aten::_foreach_*`` op does or a kernel it launches
  is a multi-tensor one (``classify`` category ``optimizer``), else ``for_loop`` (one set of kernels per parameter), null without ranges.
- ``device_ns``: the union of the device events those launches submitted.
- ``saving_share`` = max(0, host_ns - device_ns) / window_ns when ``implementation`` is ``for_loop``, else 0:
  the host time the step spends beyond its own device work, which a fused / foreach step (a few launches per
  parameter group) mostly removes; a bound.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tb_llmdiag.classify import CATEGORY_CODE
from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, in_windows, share
from tb_llmdiag.metrics.entry import COUNT, LOWER, NEITHER, NS, PER_STEP, SHARE, TEXT, Entry, Intro
from tb_llmdiag.metrics.host.ranges import busy_ns, inside, launched_inside, named_rows
from tb_llmdiag.model import Kind

STEP = re.compile(r"^Optimizer\.step#(\w+)\.step$")
FUSED = re.compile(r"^aten::_fused_")
FOREACH = re.compile(r"^aten::_foreach_")


def optimizer_metrics(ctx: Context) -> dict[str, Any]:
    ev = ctx.trace.events
    opt = named_rows(ctx, STEP, (Kind.ANNOTATION, Kind.CPU_OP))
    opt = opt[in_windows(ev.ts_ns[opt], ctx.win_s, ctx.win_e)]
    if opt.size == 0:
        return {
            "available": True,
            "calls": 0,
            "optimizer": None,
            "implementation": None,
            "host_ns": 0,
            "host_share": 0.0,
            "launches": 0,
            "launches_per_step": None,
            "device_ns": 0,
            "saving_share": 0.0,
        }
    ids, inv = np.unique(ev.name_id[opt], return_inverse=True)
    top = ev.names[int(ids[np.argmax(np.bincount(inv, weights=ev.dur_ns[opt]))])]
    s, e = merge(ev.ts_ns[opt], ev.ts_ns[opt] + ev.dur_ns[opt])
    host_ns = int(overlap_per_window(s, e, ctx.win_s, ctx.win_e).sum())
    launches = ctx.cache.family("launch_api")
    n_launch = int(inside(ctx, launches, opt).sum())
    ops = ctx.cache.kinds(Kind.CPU_OP)
    ops = ops[inside(ctx, ops, opt)]
    names = {ev.names[i] for i in np.unique(ev.name_id[ops])}
    dev = launched_inside(ctx, opt)
    cls = STEP.match(top).group(1)  # type: ignore[union-attr]
    multi = (
        bool((ctx.dev_cat[np.searchsorted(ctx.dev, dev)] == CATEGORY_CODE["optimizer"]).any()) if dev.size else False
    )
    impl = (
        "fused"
        if any(FUSED.search(n) for n in names) or "Fused" in cls
        else "foreach"
        if any(FOREACH.search(n) for n in names) or multi
        else "for_loop"
    )
    device_ns = busy_ns(ctx, dev)
    per = ctx.n_steps or int(opt.size)
    saving = max(0, host_ns - device_ns) / ctx.window_ns if impl == "for_loop" and ctx.window_ns > 0 else 0.0
    return {
        "available": True,
        "calls": int(opt.size),
        "optimizer": cls,
        "implementation": impl,
        "host_ns": host_ns,
        "host_share": share(host_ns, ctx.window_ns),
        "launches": n_launch,
        "launches_per_step": n_launch / per,
        "device_ns": device_ns,
        "saving_share": saving,
    }


# The registry's entries of the `optimizer` topic: one row per key (metrics/entry.py); metrics/registry.py collects
# them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`optimizer` (metrics/training/optimizer.py)",
    "The `Optimizer.step#<Class>.step` ranges torch.optim records: host time, launches, implementation.",
)

ENTRIES: tuple[Entry, ...] = (
    ("optimizer.calls", COUNT, NEITHER, 0.02, "optimizer steps", "`Optimizer.step#...` ranges in the window"),
    ("optimizer.optimizer", TEXT, NEITHER, 0, "optimizer", "the optimizer class with the most step time"),
    (
        "optimizer.implementation",
        TEXT,
        NEITHER,
        0,
        "implementation",
        "`fused`, `foreach` or `for_loop` (one set of kernels per parameter); null without optimizer ranges",
    ),
    ("optimizer.host_ns", NS, LOWER, 0.05, "optimizer host time", "union of the optimizer ranges in the window"),
    ("optimizer.host_share", SHARE, LOWER, 0.1, "optimizer host share", "host_ns / window_ns"),
    ("optimizer.launches", COUNT, LOWER, 0.02, "optimizer launches", "kernel launch calls inside the optimizer ranges"),
    (
        "optimizer.launches_per_step",
        PER_STEP,
        LOWER,
        0.05,
        "optimizer launches per step",
        "launches / steps (per optimizer call without steps)",
    ),
    (
        "optimizer.device_ns",
        NS,
        NEITHER,
        0.05,
        "optimizer GPU time",
        "union of the device events the optimizer's launches submitted",
    ),
    (
        "optimizer.saving_share",
        SHARE,
        LOWER,
        0.1,
        "unfused optimizer saving",
        "max(0, host_ns - device_ns) / window_ns for a for-loop optimizer, else 0: a bound",
    ),
)
