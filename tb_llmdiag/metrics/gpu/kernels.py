"""Device time by kernel category (``classify.CATEGORIES``) and the top kernels.

Definitions (device events whose start lies in the analysis window):
- ``device_time_ns``: plain sum of durations of kernels, memcpys and memsets (overlapping streams both count).
- ``by_category[c]``: ``{"time_ns", "count", "share"}`` with share = time_ns / device_time_ns; every
  category is present (0 when absent), so shares sum to 1.
- ``copy_share``: copy + memcpy shares. ``gemm_share``: gemm + attention + conv shares (matmul-class work).
- ``copy_vs_gemm_ratio``: copy_share / gemm_share; null when there is no matmul-class time.
- ``copy_step_share``: length of the union of copy-class intervals within the window / window_ns (an upper
  bound on what removing the copies would save).
- ``top_kernels``: the ``top`` names with most total time: name, category, count, total_ns, mean_ns, share.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.classify import CATEGORIES, COPY_CATEGORIES, MATMUL_CATEGORIES
from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, share
from tb_llmdiag.metrics.entry import COUNT, LOWER, NEITHER, NS, RATIO, SHARE, TEXT, Entry, Intro


def _union_in_window(ctx: Context, rows: np.ndarray) -> int:
    ev = ctx.trace.events
    s, e = merge(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows])
    return int(overlap_per_window(s, e, ctx.win_s, ctx.win_e).sum())


def kernel_metrics(ctx: Context, *, top: int = 15) -> dict[str, Any]:
    if ctx.dev.size == 0:
        return {"available": False, "reason": "no device activity in the trace"}
    ev = ctx.trace.events
    rows = ctx.dev[ctx.dev_in_win]
    cat = ctx.dev_cat[ctx.dev_in_win]
    dur = ev.dur_ns[rows]
    total = int(dur.sum())
    time_by_cat = np.bincount(cat, weights=dur, minlength=len(CATEGORIES))
    count_by_cat = np.bincount(cat, minlength=len(CATEGORIES))
    by_category: dict[str, dict[str, Any]] = {
        name: {
            "time_ns": int(time_by_cat[i]),
            "count": int(count_by_cat[i]),
            "share": share(int(time_by_cat[i]), total),
        }
        for i, name in enumerate(CATEGORIES)
    }
    copy_codes = np.array([CATEGORIES.index(c) for c in COPY_CATEGORIES], np.uint8)
    copy_ns = sum(by_category[c]["time_ns"] for c in COPY_CATEGORIES)
    gemm_ns = sum(by_category[c]["time_ns"] for c in MATMUL_CATEGORIES)
    name_id = ev.name_id[rows]
    per_name = np.bincount(name_id, weights=dur, minlength=len(ev.names))
    per_count = np.bincount(name_id, minlength=len(ev.names))
    first_cat = np.zeros(len(ev.names), np.uint8)
    first_cat[name_id] = cat
    order = np.argsort(-per_name, kind="stable")[:top]
    top_rows = [
        {
            "name": ev.names[i],
            "category": CATEGORIES[int(first_cat[i])],
            "count": int(per_count[i]),
            "total_ns": int(per_name[i]),
            "mean_ns": int(per_name[i] // per_count[i]),
            "share": share(int(per_name[i]), total),
        }
        for i in order
        if per_count[i] > 0
    ]
    return {
        "available": True,
        "device_time_ns": total,
        "device_events": int(rows.size),
        "by_category": by_category,
        "copy_ns": copy_ns,
        "gemm_ns": gemm_ns,
        "copy_share": share(copy_ns, total),
        "gemm_share": share(gemm_ns, total),
        "copy_vs_gemm_ratio": share(copy_ns, gemm_ns),
        "copy_step_share": share(_union_in_window(ctx, rows[np.isin(cat, copy_codes)]), ctx.window_ns),
        "top_kernels": top_rows,
    }


# The registry's entries of the `kernels` topic: one row per key (metrics/entry.py); metrics/registry.py collects them
# through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`kernels` (metrics/gpu/kernels.py, classify.py)",
    "Device events in the window, each in one category of `classify.CATEGORIES`: `gemm`, `attention`, `conv`,\n`copy`, `elementwise`, `norm`, `softmax` (softmax and the losses built on it), `reduce`, `optimizer`, `quant`\n(quantisation and scaled fp8/fp4/int8 casts), `index` (embedding lookups, gather/scatter, KV-cache writes), `moe`\n(MoE routing, permute, finalize), `communication` (collectives, DeepEP dispatch/combine), `autotune` (the\ncompiler's autotuner's own kernels: XLA redzone checks, result comparisons), `memcpy`, `memset` (by event kind),\n`other`. Kernels are classified by their **own name** (the identifier before template arguments and parameter\nlists, so `void foo<cutlass::X>(...)` is `foo`; launch wrappers such as `elementwise_kernel<..functor..>` or\n`ck_tile::kentry<Fmha..>` by what they launch) with the table `classify.KERNEL_PATTERNS` (first matching row\nwins). ROCm hipBLASLt/Tensile `Cijk_*` kernels are GEMMs; Triton kernels go by their generated names\n(`triton_poi_fused__to_copy_0` is a copy, `triton_poi_fused_add_mul_0` elementwise, `triton_red_fused_..._rsqrt_...`\nnorm, `triton_tem_*` a GEMM template); XLA GPU fusions by kind and root op (`loop_convert_fusion` copy,\n`input_reduce_fusion` reduce, `loop_add_fusion` elementwise, `gemm_fusion_*` / `__cublas$gemm` GEMM).",
)

# a declared table, one entry per row: left as laid out
# fmt: off
#: the shared part of the definitions of `kernels.top_kernels[]`'s fields
_TOP_KERNELS_ENTRY = (
    "`top_kernels` entry: the 15 names with most time: `name`, `category`, `count`, `total_ns`, `mean_ns`, `share` "
    "(of device_time_ns)"
)

ENTRIES: tuple[Entry, ...] = (
    ("kernels.by_category.*.count", COUNT, NEITHER, 0.02, "category count", "the category's device events"),
    ("kernels.by_category.*.share", SHARE, NEITHER, 0.1, "category share",
     "time_ns / device_time_ns; the shares sum to 1"),
    ("kernels.by_category.*.time_ns", NS, NEITHER, 0.05, "category time",
     "summed duration of the category's device events (categories: `classify.CATEGORIES`)"),
    ("kernels.copy_ns", NS, LOWER, 0.05, "copy", "copy + memcpy time"),
    ("kernels.copy_share", SHARE, LOWER, 0.1, "copy share", "copy_ns / device_time_ns"),
    ("kernels.copy_step_share", SHARE, LOWER, 0.1, "copy step share",
     "length of the union of copy-class intervals in the window / window_ns: the most removing the copies "
     "could save"),
    ("kernels.copy_vs_gemm_ratio", RATIO, LOWER, 0.1, "copy vs gemm ratio",
     "copy_ns / gemm_ns; null with no matmul-class time"),
    ("kernels.device_events", COUNT, NEITHER, 0.02, "device events", "the number of device events in the window"),
    ("kernels.device_time_ns", NS, NEITHER, 0.05, "device time",
     "plain sum of device event durations (overlapping streams both count)"),
    ("kernels.gemm_ns", NS, NEITHER, 0.05, "gemm", "gemm + attention + conv time (matrix-multiply-class work)"),
    ("kernels.gemm_share", SHARE, NEITHER, 0.1, "gemm share", "gemm_ns / device_time_ns"),
    ("kernels.top_kernels[].category", TEXT, NEITHER, 0, "top kernel category",
     "`category` of each " + _TOP_KERNELS_ENTRY),
    ("kernels.top_kernels[].count", COUNT, NEITHER, 0.02, "top kernel count",
     "`count` of each " + _TOP_KERNELS_ENTRY),
    ("kernels.top_kernels[].mean_ns", NS, NEITHER, 0.05, "top kernel mean",
     "`mean_ns` of each " + _TOP_KERNELS_ENTRY),
    ("kernels.top_kernels[].name", TEXT, NEITHER, 0, "top kernel name",
     "`name` of each " + _TOP_KERNELS_ENTRY),
    ("kernels.top_kernels[].share", SHARE, NEITHER, 0.1, "top kernel share",
     "`share` of each " + _TOP_KERNELS_ENTRY),
    ("kernels.top_kernels[].total_ns", NS, NEITHER, 0.05, "top kernel total",
     "`total_ns` of each " + _TOP_KERNELS_ENTRY),
)
# fmt: on
