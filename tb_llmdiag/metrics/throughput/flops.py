"""Achieved TFLOP/s, MFU and tokens/s from recorded shapes (``record_shapes=True``).

Definitions:
- ``flops``: sum of ``metrics.throughput.shapes`` FLOPs over counted operators whose start lies in the analysis
  window (hardware FLOPs of what ran, recompute included); ``flops_per_step`` = flops / steps.
- ``achieved_tflops`` = flops / window seconds / 1e12.
- ``peak_tflops``: the trace's own figure when it states one (XPlane), else the dense BF16/FP16 tensor-core
  peak of the device from ``PEAK_TFLOPS`` (never a sparse figure); null for unknown devices.
  ``mfu_share`` = achieved / peak (null when either is unknown).
- ``median_step_tokens_per_s``: the run's one tokens/s, on the basis of the step time, the savings and the what-if
  (the median step): the median step's token slots (``steps.tokens_per_step_median``) / the median step
  (``steps.median_ns``), padding included. The what-if scales it by the median step over the fixed step.
- ``tokens_per_s``: the mean step's: sum of token slots per step (``steps.per_step[i].tokens``) / total step time
  (padding included); it differs from the median step's when slower steps or uneven batches pull the mean (fp32_math:
  144.9 ms mean against 128.7 ms median, 11 % fewer tokens/s).
- ``token_batch_share``: the share of matmul FLOPs that run on the token embedding's batch
  (``shapes.token_batch_share``); MFU and tokens/s are not reported when it is < ``TOKEN_BATCH_MIN`` (the
  recorded token embedding is not what the GEMMs run on: a T5/CLIP text encoder beside a diffusion
  transformer; null, without a recorded token embedding, e.g. a compiled graph, decides nothing), nor without
  device activity, nor from a partly read file (``run.read_complete`` false); then ``mfu_share`` and both tokens/s are null and ``mfu_withheld`` says why (achieved TFLOP/s stays).
- ``available`` is false, with the reason, when no FLOP-counted operator has shapes, or when convolution
  kernels take over 5 % of device time (their FLOPs are not counted, so MFU would be misleading).
"""

from __future__ import annotations

from typing import Any

from tb_llmdiag.metrics.context import Context, in_windows, per_step
from tb_llmdiag.metrics.entry import FLOP, HIGHER, NEITHER, PER_S, SHARE, TEXT, TFLOP_PER_S, Entry, Intro
from tb_llmdiag.metrics.throughput.shapes import op_flops, token_batch_share

#: (substring of the device name, dense BF16/FP16 tensor-core peak TFLOP/s). First match wins.
PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    ("GB200", 2500.0),
    ("B200", 2250.0),
    ("H200", 989.4),
    ("H100 PCIe", 756.5),
    ("H100 NVL", 835.5),
    ("H100", 989.4),
    ("H800", 989.4),
    ("GH200", 989.4),
    ("H20", 148.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.1),
    ("L40", 181.0),
    ("L4", 121.0),
    ("A10G", 70.0),
    ("A10", 125.0),
    ("RTX 4090", 165.2),
    ("RTX 3090", 71.0),
    ("V100", 125.0),
    ("T4", 65.0),
    ("MI300X", 1307.4),
    ("MI250X", 383.0),
    ("MI250", 362.1),
)


#: At least this share of matmul FLOPs must run on the token embedding's batch for MFU and tokens/s to be shown.
TOKEN_BATCH_MIN = 0.5

#: Above this share of device time in convolutions, MFU from GEMM/attention shapes would be misleading.
CONV_SHARE_LIMIT = 0.05


def peak_tflops(ctx: Context) -> tuple[float | None, str | None]:
    for dv in ctx.trace.devices:
        if dv.peak_tflops:
            return float(dv.peak_tflops), dv.name
    for dv in ctx.trace.devices:
        for needle, peak in PEAK_TFLOPS:
            if needle in dv.name:
                return peak, dv.name
    return None, (ctx.trace.devices[0].name if ctx.trace.devices else None)


def withheld(ctx: Context, run: dict[str, Any], batch_share: float | None) -> str | None:
    """Why MFU and tokens/s are not shown (module docstring), or None."""
    if run.get("read_complete") is False:
        return "only part of the file was read"
    if not ctx.dev.size:
        return "no device activity in the trace"
    if batch_share is not None and batch_share < TOKEN_BATCH_MIN:
        return "the recorded shapes are not an LLM's token batch"
    return None


def median_step_tokens_per_s(steps_topic: dict[str, Any]) -> float | None:
    """The median step's token slots / the median step, per second (module docstring); None when either is unknown."""
    tokens, median = steps_topic.get("tokens_per_step_median"), steps_topic.get("median_ns")
    if not (isinstance(tokens, (int, float)) and tokens > 0 and isinstance(median, (int, float)) and median > 0):
        return None
    return float(tokens) * 1e9 / float(median)


def flops_metrics(
    ctx: Context,
    steps_topic: dict[str, Any],
    kernels_topic: dict[str, Any] | None = None,
    run: dict[str, Any] | None = None,
) -> dict[str, Any]:
    ev = ctx.trace.events
    conv = ((kernels_topic or {}).get("by_category") or {}).get("conv") or {}
    if (conv.get("share") or 0.0) > CONV_SHARE_LIMIT:
        return {
            "available": False,
            "reason": "convolutions carry much of the device time and their FLOPs are not counted",
            "peak_tflops": None,
            "device": None,
            "tokens_per_s": None,
            "median_step_tokens_per_s": None,
        }
    rows, flops, is_mm = op_flops(ev)
    batch_share = token_batch_share(ev, rows, flops, is_mm)
    why = withheld(ctx, run or {}, batch_share)
    inwin = in_windows(ev.ts_ns[rows], ctx.win_s, ctx.win_e)
    total = float(flops[inwin].sum()) if rows.size else 0.0
    peak, device = peak_tflops(ctx)
    step_rows = (steps_topic.get("per_step") or []) if steps_topic.get("available") else []
    tokens = [r["tokens"] for r in step_rows] if step_rows and step_rows[0].get("tokens") is not None else None
    step_total = float(sum(max(r["duration_ns"], 0) for r in step_rows)) if tokens else 0.0
    tokens_per_s = sum(tokens) / (step_total / 1e9) if tokens and step_total > 0 and why is None else None
    median_tps = median_step_tokens_per_s(steps_topic) if tokens and why is None else None
    if total <= 0:
        return {
            "available": False,
            "reason": "no GEMM/attention operators with recorded shapes (capture with input shapes recorded)",
            "peak_tflops": peak,
            "device": device,
            "tokens_per_s": tokens_per_s,
            "median_step_tokens_per_s": median_tps,
            "token_batch_share": batch_share,
            "mfu_withheld": why,
        }
    seconds = ctx.window_ns / 1e9
    achieved = total / seconds / 1e12 if seconds > 0 else None
    if achieved is not None and peak and achieved > peak:  # over 100 % of the device's peak: impossible
        return {
            "available": False,
            "reason": "the recorded shapes imply more FLOPs than the device can run in the "
            "window (over 100 % of its peak): the shapes are not trustworthy",
            "peak_tflops": peak,
            "device": device,
            "tokens_per_s": tokens_per_s,
            "median_step_tokens_per_s": median_tps,
        }
    return {
        "available": True,
        "flops": total,
        "matmul_flops": float(flops[inwin & is_mm].sum()),
        "flops_per_step": per_step(total, ctx),
        "achieved_tflops": achieved,
        "peak_tflops": peak,
        "device": device,
        "mfu_share": achieved / peak if achieved is not None and peak and why is None else None,
        "tokens_per_s": tokens_per_s,
        "median_step_tokens_per_s": median_tps,
        "token_batch_share": batch_share,
        "mfu_withheld": why,
    }


# The registry's entries of the `flops` topic: one row per key (metrics/entry.py); metrics/registry.py collects them
# through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`flops` (metrics/throughput/flops.py, metrics/throughput/shapes.py)",
    "From recorded input shapes (`record_shapes=True`), per unique (operator, shape) pair. Leaf operators only,\nso nothing counts twice; backward GEMMs run through the same `aten::mm`/`addmm`/`bmm` and are counted:\n\n- `aten::mm`, `aten::addmm`, `aten::_scaled_mm`: [M,K] x [K,N] -> 2MKN\n- `aten::bmm`, `aten::baddbmm`: [B,M,K] x [B,K,N] -> 2BMKN\n- `aten::_scaled_dot_product_{flash,efficient,cudnn}_attention`: q [B,H,L,D], k [B,H,S,D] -> 4BHLSD\n  (the full L x S scores; causal masking would halve this); their `_backward`: 2.5x that;\n  `flash_attn::_flash_attn_forward/_backward`: the same with q [B,L,H,D].",
)

ENTRIES: tuple[Entry, ...] = (
    ("flops.achieved_tflops", TFLOP_PER_S, HIGHER, 0.05, "achieved tflops", "flops / window seconds / 1e12"),
    ("flops.device", TEXT, NEITHER, 0, "device", "the device name the peak is looked up for"),
    (
        "flops.flops",
        FLOP,
        NEITHER,
        0.02,
        "flops",
        "FLOPs of counted operators starting in the window (hardware FLOPs: recompute included)",
    ),
    ("flops.flops_per_step", FLOP, NEITHER, 0.02, "flops per step", "flops / steps"),
    ("flops.matmul_flops", FLOP, NEITHER, 0.02, "matmul flops", "the GEMM part of `flops`"),
    (
        "flops.mfu_share",
        SHARE,
        HIGHER,
        0.1,
        "mfu share",
        "achieved / peak; null when either is unknown or when `mfu_withheld` says why it is not shown",
    ),
    (
        "flops.token_batch_share",
        SHARE,
        NEITHER,
        0.02,
        "token batch share",
        "the share of matmul FLOPs whose left operand has as many rows as a token-embedding call has token slots "
        "(an LLM's linear layers run on its [tokens, hidden] batch: near 1 on LLM training, prefill and decode, "
        "near 0 for a diffusion transformer beside its T5/CLIP text encoder); null without token-embedding calls",
    ),
    (
        "flops.mfu_withheld",
        TEXT,
        NEITHER,
        0,
        "mfu withheld",
        "why `mfu_share` and both tokens/s are null though FLOPs were counted: only part of the file was read, no "
        "device activity, or `token_batch_share` < 0.5 (the recorded token embedding is not what the GEMMs run on: "
        "not an LLM's token batch); null when they are shown",
    ),
    (
        "flops.peak_tflops",
        TFLOP_PER_S,
        NEITHER,
        0.05,
        "peak tflops",
        "the trace's own peak (XPlane) or the dense BF16/FP16 tensor-core peak of the device name in "
        "`flops.PEAK_TFLOPS` (H100 SXM/H200 989.4, H100 PCIe 756.5, A100 312, ...; never a sparse figure); "
        "null for unknown devices",
    ),
    (
        "flops.median_step_tokens_per_s",
        PER_S,
        HIGHER,
        0.05,
        "tokens/s (median step)",
        "`steps.tokens_per_step_median` / `steps.median_ns` (padded token slots per second of the median step): the "
        "run's one tokens/s (`headline.tokens_per_s`), on the basis of the step time, the savings and the what-if; "
        "null when `mfu_withheld` says why",
    ),
    (
        "flops.tokens_per_s",
        PER_S,
        HIGHER,
        0.05,
        "tokens/s (mean step)",
        "sum of the steps' `tokens` (`steps.per_step[].tokens`) / sum of step durations: padded token slots per "
        "second of the mean step, not the basis of the what-if or the headline (`median_step_tokens_per_s` is); null "
        "when `mfu_withheld` says why",
    ),
)
