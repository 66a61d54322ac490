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
