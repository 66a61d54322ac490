"""Kernel taxonomy: device event name -> category, by a declared pattern table.

Contract:
- ``CATEGORIES`` is the fixed, ordered list of category names; a category code is its index.
- ``KERNEL_PATTERNS`` is data: ``(category, regex)`` rows tried top to bottom, first match wins
  (case-insensitive ``re.search``). Order matters: specific families (communication, optimizer,
  attention, quantisation) come before the broad ones (gemm, copy, reduce, elementwise) so that
  e.g. a cuBLAS split-K reduction is a GEMM and ``multi_tensor_apply_kernel<..AdamFunctor..>`` is
  the optimizer, not an elementwise kernel.
- Memcpy and memset events are classified by their ``Kind``, not their name.
- Work is per unique name (``classify_names``), then broadcast with ``name_id``.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.model import EventTable, Kind

#: Category names; a category code is the index into this tuple.
CATEGORIES: tuple[str, ...] = (
    "gemm",           # cuBLAS / cuBLASLt / CUTLASS / nvjet / Triton mm templates, MTIA fc
    "attention",      # flash / mem-efficient / cuDNN SDPA / flex attention
    "conv",           # cuDNN convolutions (CNNs; rare in LLMs)
    "copy",           # copies, dtype casts, cat, transpose/layout conversion
    "elementwise",    # pointwise math: add/mul/activations/fill/dropout/RoPE, Triton pointwise
    "norm",           # layer / RMS / batch norm
    "softmax",        # softmax, log-softmax and the loss kernels built on it (cross-entropy, NLL)
    "reduce",         # reductions, scans, sort/top-k, Triton reductions
    "optimizer",      # multi_tensor_apply / foreach / fused Adam
    "quant",          # (de)quantisation: bitsandbytes 4/8-bit, fp8 casts with scaling
    "index",          # embedding lookups, gather/scatter, index_select/put
    "communication",  # NCCL / RCCL collectives and p2p
    "memcpy",         # device memcpy events (by Kind)
    "memset",         # device memset events (by Kind)
    "other",
)
CATEGORY_CODE: dict[str, int] = {name: i for i, name in enumerate(CATEGORIES)}

#: Categories counted as matrix-multiply-class work (the denominator of copy-vs-GEMM).
MATMUL_CATEGORIES: tuple[str, ...] = ("gemm", "attention", "conv")
#: Categories counted as copy-class work (the numerator of copy-vs-GEMM).
COPY_CATEGORIES: tuple[str, ...] = ("copy", "memcpy")

# Triton pointwise kernels whose fused op list is only data movement (``triton_poi_fused__to_copy_0``,
# ``triton_poi_fused_cat_clone_3``) are copies; any other pointwise fusion is elementwise.
_TRITON_COPY_ONLY = r"^triton_poi_fused_(?:_?(?:to_copy|clone|cat|copy|transpose|permute|view|unsafe_view|stack|expand|t)_)+\d+$"

#: (category, regex) rows; first match wins. Keep specific families above broad ones.
KERNEL_PATTERNS: tuple[tuple[str, str], ...] = (
    ("communication", r"nccl|rccl|cross_device_reduce|multimem_all_reduce|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv"),
    ("optimizer", r"multi_tensor_apply|_foreach_|fused_?adam|adam_?w?(?:functor|_kernel|_step)|lamb_|fused_sgd|triton_.*_(?:adam|sgd)"),
    ("attention", r"flash|fmha|attention|attn|sdpa|mha_|flex_attention|xformers"),
    ("quant", r"dequant|kquantize|quantize_|gemv_4bit|gemm_4bit|int8_?gemm|igemmlt|fp8_?(?:cast|quant|scale)"),
    ("index", r"embedding|index_?select|indexselect|index_elementwise|index_put|scatter|gather|bounds_check_indices|linearize_index|take_along|masked_select|nonzero"),
    ("norm", r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|gammabeta|bn_fw|bn_bw|norm_backward|triton_\w*(?:pow_rsqrt|_rsqrt_|_rsqrt$|native_layer_norm|native_group_norm)"),
    ("softmax", r"softmax|cross_?entropy|nll_?loss|classnllcriterion|logsumexp"),
    ("conv", r"conv(?!ert)|winograd|implicit_convolve|scudnn|cask_cudnn|dgrad|wgrad|fprop|cudnn::cnn"),
    ("copy", _TRITON_COPY_ONLY + r"|^(?!triton_).*?(?:copy|catarraybatched|\bcat_|nchwtonhwc|nhwctonchw|transpose|permute|convert|\bcast)"),
    ("gemm", r"gemm|gemv|nvjet|cutlass|cublas|xmma|s884|s1688|s16816|h16816|bmm|matmul|triton_tem_fused_.*mm|splitkreduce|gemmk1|gemmsn|dot_kernel|\bkernel2\b|^fc-|epilogue::impl"),
    ("reduce", r"reduce|cub::|scan|segmented|radix_?sort|sort_|topk|argmax|argmin|triton_red_|triton_per_|sum_|mean_|cumsum|max_dim|min_dim|vector_norm|pool"),
    ("elementwise", r"elementwise|functor|triton_poi_|fill|gelu|silu|swiglu|geglu|relu|sigmoid|tanh|dropout|rotary|rope|pointwise|clamp|where|threshold|nan_to_num|scalepacked|divide|(?:^|[^a-z])(?:add|mul|div|sub|neg|sqrt|exp|log2|clip)(?:[^a-z]|$)"),
)

_COMPILED: tuple[tuple[int, re.Pattern[str]], ...] = tuple(
    (CATEGORY_CODE[cat], re.compile(rx, re.IGNORECASE)) for cat, rx in KERNEL_PATTERNS
)
_OTHER = CATEGORY_CODE["other"]


def kernel_category(name: str) -> str:
    """The category of one kernel name (for tests and the UI); ``other`` when nothing matches."""
    return CATEGORIES[_kernel_code(name)]


def _kernel_code(name: str) -> int:
    for code, rx in _COMPILED:
        if rx.search(name):
            return code
    return _OTHER


@lru_cache(maxsize=16)
def classify_names(names: tuple[str, ...]) -> NDArray[np.uint8]:
    """Category code of every name in an interned name table, as if each were a kernel.

    One regex pass per unique name; cached per names tuple (tables share their ``names``).
    """
    return np.fromiter((_kernel_code(n) for n in names), dtype=np.uint8, count=len(names))


def categorize(events: EventTable) -> NDArray[np.uint8]:
    """Category code per row: kernels by name, memcpy/memset by kind, everything else ``other``."""
    out = np.full(len(events), _OTHER, dtype=np.uint8)
    if len(events) == 0:
        return out
    kernel = events.kind == Kind.KERNEL
    if kernel.any():
        out[kernel] = classify_names(events.names)[events.name_id[kernel]]
    out[events.kind == Kind.MEMCPY] = CATEGORY_CODE["memcpy"]
    out[events.kind == Kind.MEMSET] = CATEGORY_CODE["memset"]
    return out
