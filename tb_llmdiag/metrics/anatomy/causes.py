"""The ``anatomy`` topic's figures for the rules that name a cause at a part (``findings/parts.py``): the core attention
on a slow backend, fp32 GEMMs by part, the part leading each kind of time, and the efficiency what-if.

Definitions (ns; device rows of the analysis window; ``w``: each row's share of the busy union, ``anatomy.py``):
- The math backend's core (``math_core``): the device events launched inside
  ``aten::_scaled_dot_product_attention_math`` or its softmax's backward (``SafeSoftmaxBackward``: the math path's own
  softmax), and the batched GEMMs of the backward whose operand is the attention's score matrix: a ``[B*H, L, S]``
  operand or product (either order of L and S) of a recorded math-SDPA call's query ``[B, H, L, D]`` and key ``[B, Hkv, S, D]``.
  Only the attention computes a tensor of that shape, so these are the backward's score GEMMs (the reader does not
  link a backward operator to its forward one).
- ``attention.core_ns``: the attention part's time on the ``math`` and ``eager`` backends (``core_per_step_ns`` per
  step, ``core_share`` of ``busy_ns``); ``core_flops``: the FLOPs
  of its score GEMMs (forward and backward, ``metrics.throughput.shapes``); ``core_fused_ns``: those FLOPs at the reference speed
  (below), what a fused kernel (flash, cuDNN) doing the same GEMMs would take (a causal fused kernel skips about half
  of them, so this errs long); ``core_saving_share``: (core_ns - core_fused_ns) / window_ns, null without FLOPs or a
  reference. ``fallback``: why the recorded call could not take the flash kernel when its shapes say so (head dim over
  256 or not a multiple of 8, an explicit attention mask), else that nothing recorded excludes flash (the reader does
  not keep input dtypes).
- ``reference_tflops`` / ``reference_part``: the fastest achieved TFLOP/s of a part holding at least
  ``REFERENCE_MIN_SHARE`` of the counted FLOPs in a data type other than fp32: the speed this trace's own GEMMs reach.
  Per part ``efficiency_saving_ns`` = its counted GEMM time less its FLOPs at that speed (0 when faster), and
  ``efficiency_saving_share`` = that / window_ns: the what-if of running the part as fast as the trace's best GEMMs.
- Per part ``fp32_gemm_ns``: its time in fp32 GEMM kernels (``precision.is_fp32_math``); ``flop_share``: its counted
  FLOPs over all counted FLOPs (null without any); ``launches_per_step``.
- The leading part per kind (``LEADER_KINDS``: ``time``, ``gemm`` (its GEMM-category time), ``fp32_gemm``, ``casts``,
  ``copy`` (``copy`` and ``memcpy`` categories), ``launches``), ``other`` left out: ``<kind>_part`` (its name),
  ``<kind>_part_words`` (as a sentence says it), ``<kind>_part_share`` (of that kind's total over every part). For
  ``fp32_gemm`` also its fp32 GEMM time over ``busy_ns`` (``fp32_gemm_part_busy_share``) and the part's ``dtype``,
  ``achieved_tflops`` and ``efficiency_saving_share`` (``fp32_gemm_part_dtype``, ``_tflops``, ``_saving_share``).
- ``weight_casts_ns`` / ``weight_casts_share`` (of the window): casts launched inside a GEMM operator (``aten::linear >
  aten::to``: autocast casting a weight stored in another dtype on every call); those casts are placed in the GEMM's
  part, not ``data_movement``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.classify import CATEGORY_CODE
from tb_llmdiag.metrics.anatomy.chain import Chains, NodeFeatures, gather
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.gpu.precision import is_fp32_math
from tb_llmdiag.metrics.throughput.shapes import op_rows, parse_dims, per_pair

IDX = NDArray[np.intp]
F64 = NDArray[np.float64]
#: a part whose counted FLOPs are at least this share of the trace's can set the reference speed
REFERENCE_MIN_SHARE = 0.05
#: flash / memory-efficient kernels take head dims up to this, a multiple of 8
FLASH_MAX_HEAD_DIM = 256
MATH_SDPA = "aten::_scaled_dot_product_attention_math"
_BMM = ("aten::bmm", "aten::baddbmm")
#: the kinds of time a leading part is found for, and how a label names each
LEADER_WORDS = {
    "time": "GPU time",
    "gemm": "GEMM time",
    "fp32_gemm": "fp32 GEMM time",
    "casts": "cast time",
    "copy": "copy time",
    "launches": "launches",
}
LEADER_KINDS = tuple(LEADER_WORDS)


def _math_calls(ev: Any) -> list[list[list[int]]]:
    """The distinct recorded input dims of the math-SDPA calls (query and key 4-D)."""
    rows = op_rows(ev, (MATH_SDPA,))
    out: list[list[list[int]]] = []
    for sid in np.unique(ev.shape_id[rows]).tolist() if rows.size else ():
        d = parse_dims(ev.shapes[sid]) if sid >= 0 else None
        if d is not None and len(d) >= 2 and len(d[0]) == 4 and len(d[1]) == 4:
            out.append(d)
    return out


def math_core(ctx: Context, rows: IDX, ch: Chains, f: NodeFeatures) -> NDArray[np.bool_]:
    """Per device row: part of the math backend's core attention (module docstring)."""
    node = ch.node
    core = gather(f.math_sdpa, node, False)
    ev = ctx.trace.events
    calls = _math_calls(ev)
    sr = ch.shape_row
    if not calls or not (sr >= 0).any():
        return core
    scores = {(q[0] * q[1], a, b) for q, k, *_ in calls for a, b in ((q[2], k[2]), (k[2], q[2]))}

    def score_bmm(name: str, d: list[list[int]]) -> float:
        a = 1 if name == "aten::baddbmm" else 0
        if name not in _BMM or len(d) <= a + 1 or len(d[a]) != 3 or len(d[a + 1]) != 3:
            return 0.0
        out = (d[a][0], d[a][1], d[a + 1][2])
        return float(out in scores or tuple(d[a]) in scores or tuple(d[a + 1]) in scores)

    u, inv = np.unique(sr[sr >= 0], return_inverse=True)
    hit = per_pair(ev, u, score_bmm)[inv] > 0
    core[np.flatnonzero(sr >= 0)[hit]] = True
    return core


def fallback(ev: Any) -> str | None:
    """Why the recorded math-SDPA calls could not take flash, from their shapes (module docstring); None without any."""
    calls = _math_calls(ev)
    if not calls:
        return None
    d = calls[0]
    head = d[0][3]
    if head > FLASH_MAX_HEAD_DIM or head % 8:
        return f"head dim {head}: flash takes up to {FLASH_MAX_HEAD_DIM}, a multiple of 8"
    if len(d) > 3 and d[3]:
        return "an explicit attention mask is passed: flash takes none (the memory-efficient and cuDNN kernels do)"
    return (
        f"nothing recorded excludes flash (head dim {head}, no explicit mask): a forced backend "
        "(sdpa_kernel(SDPBackend.MATH), enable_flash_sdp(False)) or fp32 / fp64 inputs"
    )


def core_flops(ctx: Context, rows: IDX, ch: Chains, core: NDArray[np.bool_]) -> float:
    """FLOPs of the core attention's batched GEMMs, once per operator (forward and backward)."""
    ev = ctx.trace.events
    sr = ch.shape_row[core & (ch.shape_row >= 0)]
    if sr.size == 0:
        return 0.0
    u = np.unique(sr)
    fl = per_pair(ev, u, lambda n, d: _bmm_flops(n, d))
    return float(fl.sum())


def _bmm_flops(name: str, d: list[list[int]]) -> float:
    a = 1 if name == "aten::baddbmm" else 0
    if name not in _BMM or len(d) <= a + 1 or len(d[a]) != 3 or len(d[a + 1]) != 3:
        return 0.0
    (b, m, k), (_, _, n) = d[a], d[a + 1]
    return 2.0 * b * m * k * n


def fp32_gemm_weights(ctx: Context, rows: IDX, w: F64) -> F64:
    """Per device row: its busy share when it is an fp32 GEMM kernel, else 0."""
    ev = ctx.trace.events
    cat = ctx.dev_cat if rows is ctx.dev else ctx.dev_cat[np.searchsorted(ctx.dev, rows)]
    gemm = cat == CATEGORY_CODE["gemm"]
    ids = np.unique(ev.name_id[rows[gemm]])
    flag = np.zeros(len(ev.names), bool)
    flag[ids] = [is_fp32_math(ev.names[i]) for i in ids.tolist()]
    return np.where(gemm & flag[ev.name_id[rows]], w, 0.0)


def reference(parts: dict[str, Any]) -> tuple[float | None, str | None]:
    """The reference speed and the part that reaches it (module docstring)."""
    total = sum(p["flops"] or 0.0 for p in parts.values())
    best: tuple[float | None, str | None] = (None, None)
    for name, p in parts.items():
        t = p.get("achieved_tflops")
        ok = p["flops"] and total and p["flops"] >= REFERENCE_MIN_SHARE * total and p.get("dtype") != "fp32"
        if ok and t is not None and p.get("efficiency_withheld") != _OVER_PEAK and (best[0] is None or t > best[0]):
            best = (float(t), name)
    return best


_OVER_PEAK = "the recorded shapes imply more than the device's peak for the data type"


def efficiency_whatif(parts: dict[str, Any], window_ns: int) -> dict[str, Any]:
    """Adds ``efficiency_saving_ns`` / ``_share`` to each part (module docstring); the reference speed and part."""
    ref, ref_part = reference(parts)
    for p in parts.values():
        gap = None
        if ref and p["flops"]:
            gap = int(max(0.0, p["flop_kernel_ns"] - p["flops"] / (ref * 1e3)))
        p["efficiency_saving_ns"] = gap
        p["efficiency_saving_share"] = gap / window_ns if gap is not None and window_ns > 0 else None
    return {
        "reference_tflops": ref,
        "reference_part": ref_part,
        "reference_part_words": part_words(ref_part) if ref_part else None,
    }


def attention_core(
    attention: dict[str, Any], flops: float, ref: float | None, window_ns: int, steps: int, why: str | None
) -> None:
    """Adds the core attention's figures to the attention part, in place (module docstring)."""
    backends = attention.get("backends") or {}
    core = int(backends.get("math", 0) + backends.get("eager", 0))
    fused = int(round(flops / (ref * 1e3))) if flops > 0 and ref else None
    attention["core_ns"] = core
    attention["core_per_step_ns"] = int(round(core / steps)) if steps else None
    attention["core_share"] = core / attention["time_ns"] * attention["share"] if attention["time_ns"] else None
    attention["core_flops"] = flops if flops > 0 else None
    attention["core_fused_ns"] = fused
    ok = fused is not None and core > 0 and window_ns > 0
    attention["core_saving_share"] = max(0.0, core - fused) / window_ns if ok and fused is not None else None
    attention["fallback"] = why if attention.get("backend") == "math" else None


#: how a summary names a part
PART_WORDS: dict[str, str] = {
    "embedding": "the embedding",
    "attention": "attention",
    "mlp": "the MLP",
    "norms": "the norms",
    "lora": "the LoRA adapters",
    "moe": "the MoE experts",
    "lm_head": "the LM head",
    "loss": "the loss",
    "optimizer": "the optimizer",
    "communication": "communication",
    "data_movement": "data movement",
}


def part_words(name: str) -> str:
    """A part's name in a sentence (``compiled_graph:<id>``: "the compiled graph <id>")."""
    if name.startswith("compiled_graph:"):
        return "the compiled graph " + name.split(":", 1)[1]
    return PART_WORDS.get(name, name)


def leaders(parts: dict[str, Any], busy_ns: int, steps: int) -> dict[str, Any]:
    """Per kind of time, the named part holding the most of it (module docstring): topic-level keys."""
    value = {
        "time": lambda p: p["time_ns"],
        "gemm": lambda p: p["categories"].get("gemm", 0),
        "fp32_gemm": lambda p: p.get("fp32_gemm_ns") or 0,
        "casts": lambda p: p["casts_ns"],
        "copy": lambda p: p["categories"].get("copy", 0) + p["categories"].get("memcpy", 0),
        "launches": lambda p: p["launches"],
    }
    total_flops = sum(p["flops"] or 0.0 for p in parts.values())
    for p in parts.values():
        p["flop_share"] = (p["flops"] or 0.0) / total_flops if total_flops > 0 else None
        p["launches_per_step"] = p["launches"] / steps if steps else None
    out: dict[str, Any] = {}
    for kind in LEADER_KINDS:
        vals = {n: float(value[kind](p)) for n, p in parts.items()}
        total = sum(vals.values())
        named = {n: v for n, v in vals.items() if n != "other" and v > 0}
        top = max(named, key=lambda n: named[n]) if named and total > 0 else None
        out[f"{kind}_part"] = top
        out[f"{kind}_part_words"] = part_words(top) if top else None
        out[f"{kind}_part_share"] = named[top] / total if top else None
    fp32 = out["fp32_gemm_part"]
    own = parts[fp32] if fp32 else {}
    ns = float(own.get("fp32_gemm_ns") or 0)
    out["fp32_gemm_part_busy_share"] = ns / busy_ns if fp32 and busy_ns > 0 else None
    out["fp32_gemm_part_dtype"] = own.get("dtype")
    out["fp32_gemm_part_tflops"] = own.get("achieved_tflops")
    out["fp32_gemm_part_saving_share"] = own.get("efficiency_saving_share")
    return out
