"""GEMMs and convolutions running in plain fp32 (no TF32, no bf16/fp16 tensor cores), from kernel names.

Definitions (device events whose start lies in the analysis window):
- fp32 matmul kernels: kernels classified ``gemm`` or ``conv`` (``classify.py``) whose name says fp32 SIMT /
  non-tensor-core math (``is_fp32_math``: ``sgemm`` (``ampere_sgemm_*``, ``volta_sgemm_*``,
  ``cutlass_80_simt_sgemm_*``), ``f32f32_f32f32`` xmma kernels, ``implicit_convolve_sgemm``, ``scudnn``, cuBLAS
  ``gemmSN``/``gemv`` kernels templated on ``float``) and not TF32 / half precision (``FAST_PATTERN``:
  ``tf32``, ``s1688``/``s16816`` tensor-op tiles, ``bf16``, ``f16``, ``h884``...). The reader does not keep
  operators' recorded input types, so names are the evidence.
- ``fp32_matmul_ns``: the union of their intervals (overlapping streams count once) within the window; ``fp32_matmul_share`` = / device
  busy time in the window; ``fp32_of_matmul_share`` = / the union of all gemm+conv kernels; ``top_kernel``: the fp32 kernel with the most time.
- ``fp32_tflops``, ``fast_tflops``: the device's dense fp32 (non-tensor) peak and its dense bf16/fp16
  tensor-core peak (``THROUGHPUT``; null for devices not in the table); ``speedup_ratio`` = fast / fp32.
- ``saving_share`` = fp32_matmul_ns x (1 - fp32_tflops / fast_tflops) / window_ns: the bound if every fp32
  GEMM ran at the bf16 peak ratio (real GEMMs gain less); null when the device is unknown.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tb_llmdiag.classify import CATEGORY_CODE
from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, share
from tb_llmdiag.metrics.entry import COUNT, LOWER, NEITHER, NS, RATIO, SHARE, TEXT, Entry, Intro
from tb_llmdiag.model import Kind

FP32_NAMES = ("sgemm", "f32f32_f32f32", "scudnn")  # implicit_convolve_sgemm holds sgemm
#: A whole identifier templated on float: from each identifier's start only (``(?<!\w)``), so a long run of
#: ``gemv``/``gemmSN_`` repeats is scanned once, not once per repeat (#27: linear on crafted names).
_FLOAT_TEMPLATE = re.compile(r"(?<!\w)(\w+)(?=<float)")


def is_fp32_math(name: str) -> bool:
    """An fp32 SIMT kernel name (any of ``FP32_NAMES``, or an identifier templated on
    ``float`` that holds ``gemv``, or holds ``gemmSN_`` and ends ``_kernel`` with a character between)."""
    if any(s in name for s in FP32_NAMES):
        return True
    for m in _FLOAT_TEMPLATE.finditer(name):
        word = m.group(1)
        at = word.find("gemmSN_")
        if "gemv" in word or (at >= 0 and word.endswith("_kernel") and at + 8 <= len(word) - 7):
            return True
    return False


FAST_PATTERN = re.compile(r"(?i)tf32|1688|16816|884|bf16|f16|fp16|half|bfloat|hgemm|e4m3|e5m2|int8")

#: (substring of the device name, dense fp32 TFLOP/s (no tensor cores), dense bf16/fp16 tensor-core TFLOP/s
#: with fp32 accumulation). First match wins; vendors' datasheets.
THROUGHPUT: tuple[tuple[str, float, float], ...] = (
    ("GB200", 80.0, 2500.0),
    ("B200", 80.0, 2250.0),
    ("H100 PCIe", 51.2, 756.5),
    ("H100 NVL", 60.0, 835.5),
    ("GH200", 67.0, 989.4),
    ("H200", 67.0, 989.4),
    ("H100", 67.0, 989.4),
    ("H800", 67.0, 989.4),
    ("A100", 19.5, 312.0),
    ("A800", 19.5, 312.0),
    ("L40S", 91.6, 362.1),
    ("L40", 90.5, 181.0),
    ("L4", 30.3, 121.0),
    ("A10G", 31.2, 70.0),
    ("A10", 31.2, 125.0),
    ("RTX 4090", 82.6, 165.2),
    ("RTX 4080", 48.7, 97.5),
    ("RTX 3090", 35.6, 71.0),
    ("RTX 2080 Ti", 13.4, 26.9),
    ("V100", 15.7, 125.0),
    ("T4", 8.1, 65.0),
    ("MI300X", 163.4, 1307.4),
    ("MI250X", 47.9, 383.0),
    ("MI250", 45.3, 362.1),
)


def throughput(ctx: Context) -> tuple[str | None, float | None, float | None]:
    for dv in ctx.trace.devices:
        for needle, fp32, fast in THROUGHPUT:
            if needle in dv.name:
                return dv.name, fp32, fast
    return (ctx.trace.devices[0].name if ctx.trace.devices else None), None, None


def _in_window(ctx: Context, rows: np.ndarray) -> int:
    """Length of the union of the rows' intervals within the analysis window."""
    ev = ctx.trace.events
    if rows.size == 0:
        return 0
    s, e = merge(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows])
    return int(overlap_per_window(s, e, ctx.win_s, ctx.win_e).sum())


def precision_metrics(ctx: Context) -> dict[str, Any]:
    ev = ctx.trace.events
    dev = ctx.dev[ctx.dev_in_win]
    cat = ctx.dev_cat[ctx.dev_in_win]
    mm = dev[((cat == CATEGORY_CODE["gemm"]) | (cat == CATEGORY_CODE["conv"])) & (ev.kind[dev] == Kind.KERNEL)]
    nid = ev.name_id[mm]
    used = np.unique(nid)
    slow = {int(i) for i in used if is_fp32_math(ev.names[i]) and not FAST_PATTERN.search(ev.names[i])}
    slow_name = np.zeros(len(ev.names), dtype=bool)
    slow_name[sorted(slow)] = True
    is32 = slow_name[nid]  # per row by its name id (was a Python test per GEMM row)
    d32 = ev.dur_ns[mm][is32]
    r32 = mm[is32]
    fp32_ns = _in_window(ctx, r32)
    top = None
    if d32.size:
        ids, inv = np.unique(nid[is32], return_inverse=True)
        top = ev.names[int(ids[np.argmax(np.bincount(inv, weights=d32))])]
    busy = int(overlap_per_window(ctx.busy_s, ctx.busy_e, ctx.win_s, ctx.win_e).sum()) if ctx.busy_s.size else 0
    device, fp32, fast = throughput(ctx)
    saving = None
    if fp32 and fast and ctx.window_ns > 0:
        saving = fp32_ns * (1.0 - fp32 / fast) / ctx.window_ns
    return {
        "available": True,
        "fp32_matmul_kernels": int(is32.sum()),
        "fp32_matmul_ns": fp32_ns,
        "fp32_matmul_share": share(fp32_ns, busy) if busy else None,
        "fp32_of_matmul_share": share(fp32_ns, _in_window(ctx, mm)) if mm.size else None,
        "top_kernel": top,
        "device": device,
        "fp32_tflops": fp32,
        "fast_tflops": fast,
        "speedup_ratio": fast / fp32 if fp32 and fast else None,
        "saving_share": saving,
    }


# The registry's entries of the `precision` topic: one row per key (metrics/entry.py); metrics/registry.py collects
# them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`precision` (metrics/gpu/precision.py)",
    "GEMM / convolution kernels in plain fp32 (no TF32, no bf16/fp16 tensor cores), by kernel name.",
)

ENTRIES: tuple[Entry, ...] = (
    (
        "precision.fp32_matmul_kernels",
        COUNT,
        LOWER,
        0.02,
        "fp32 matmul kernels",
        "gemm / conv kernels whose name says fp32 without tensor cores (`sgemm`, `f32f32_f32f32`, `scudnn`...)",
    ),
    (
        "precision.fp32_matmul_ns",
        NS,
        LOWER,
        0.05,
        "fp32 matmul time",
        "union of those kernels' intervals (overlapping streams count once)",
    ),
    ("precision.fp32_matmul_share", SHARE, LOWER, 0.1, "fp32 matmul share", "fp32_matmul_ns / device busy time"),
    (
        "precision.fp32_of_matmul_share",
        SHARE,
        LOWER,
        0.1,
        "fp32 share of matmuls",
        "fp32_matmul_ns / the union of all gemm + conv kernels",
    ),
    ("precision.top_kernel", TEXT, NEITHER, 0, "top fp32 kernel", "the fp32 matmul kernel with the most time"),
    (
        "precision.device",
        TEXT,
        NEITHER,
        0,
        "device",
        "the device name the throughput table matched (or the first device)",
    ),
    (
        "precision.fp32_tflops",
        RATIO,
        NEITHER,
        0,
        "fp32 peak TFLOP/s",
        "the device's dense fp32 peak without tensor cores (`precision.THROUGHPUT`); null when not in the table",
    ),
    (
        "precision.fast_tflops",
        RATIO,
        NEITHER,
        0,
        "bf16 peak TFLOP/s",
        "the device's dense bf16/fp16 tensor-core peak; null when not in the table",
    ),
    ("precision.speedup_ratio", RATIO, NEITHER, 0, "bf16 over fp32 peak", "fast_tflops / fp32_tflops"),
    (
        "precision.saving_share",
        SHARE,
        LOWER,
        0.1,
        "mixed-precision saving",
        "fp32_matmul_ns x (1 - fp32_tflops / fast_tflops) / window_ns: a bound; null when the device is unknown",
    ),
)
