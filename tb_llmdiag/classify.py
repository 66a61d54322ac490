"""Kernel taxonomy: device event name -> category, by a declared pattern table.

Contract:
- ``CATEGORIES`` is the fixed, ordered list of category names; a category code is its index.
- ``KERNEL_PATTERNS`` is data: ``(category, substrings, regex)`` rows tried top to bottom against the
  lower-cased name, first match wins. Order matters: specific families (communication, optimizer,
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

#: (category, substrings, regex or None) rows, matched against the lower-cased name; first match wins.
#: A row matches when any substring occurs in the name or the regex searches true. Plain substrings are
#: used wherever they suffice (C-speed ``in``); regexes only where position or context matters.
#: Keep specific families above broad ones.
KERNEL_PATTERNS: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("communication", ("nccl", "rccl", "cross_device_reduce", "multimem_all_reduce", "allreduce", "all_reduce",
                       "allgather", "all_gather", "reducescatter", "reduce_scatter", "alltoall", "all_to_all",
                       "sendrecv"), None),
    ("optimizer", ("multi_tensor_apply", "_foreach_", "fused_adam", "fusedadam", "adamfunctor", "adamwfunctor",
                   "adam_kernel", "adamw_kernel", "lamb_", "fused_sgd"), r"^triton_.*_(?:adam|sgd)"),
    ("attention", ("flash", "fmha", "attention", "attn", "sdpa", "mha_", "xformers"), None),
    ("quant", ("dequant", "kquantize", "quantize_", "gemv_4bit", "gemm_4bit", "int8gemm", "int8_gemm", "igemmlt",
               "fp8_cast", "fp8_quant", "fp8_scale"), None),
    ("index", ("embedding", "index_select", "indexselect", "index_elementwise", "index_put", "scatter", "gather",
               "bounds_check_indices", "linearize_index", "take_along", "masked_select", "nonzero"), None),
    ("norm", ("layer_norm", "layernorm", "rms_norm", "rmsnorm", "batch_norm", "batchnorm", "group_norm",
              "groupnorm", "instance_norm", "gammabeta", "bn_fw", "bn_bw", "norm_backward"), r"^triton_.*rsqrt"),
    ("softmax", ("softmax", "cross_entropy", "crossentropy", "nll_loss", "nllloss", "classnllcriterion",
                 "logsumexp"), None),
    ("conv", ("winograd", "implicit_convolve", "scudnn", "cask_cudnn", "dgrad", "wgrad", "fprop", "cudnn::cnn"),
     r"conv(?!ert)"),
    ("copy", (), _TRITON_COPY_ONLY),
    ("elementwise", (), r"^triton_poi_"),  # other Triton pointwise fusions (even with _to_copy inside)
    ("reduce", (), r"^triton_(?:red|per)_"),  # Triton reductions not caught by norm/softmax above
    ("copy", ("copy", "catarraybatched", "nchwtonhwc", "nhwctonchw", "transpose", "permute", "convert"),
     r"\bcat_|\bcast"),
    ("gemm", ("gemm", "gemv", "nvjet", "cutlass", "cublas", "xmma", "s884", "s1688", "s16816", "h16816", "bmm",
              "matmul", "splitkreduce", "gemmk1", "gemmsn", "dot_kernel", "epilogue::impl"),
     r"^triton_tem_fused_.*mm|\bkernel2\b|^fc-"),
    ("reduce", ("reduce", "cub::", "scan", "segmented", "radix_sort", "radixsort", "sort_", "topk", "argmax",
                "argmin", "sum_", "mean_", "cumsum", "max_dim", "min_dim", "vector_norm", "pool"), None),
    ("elementwise", ("elementwise", "functor", "fill", "gelu", "silu", "swiglu", "geglu", "relu", "sigmoid",
                     "tanh", "dropout", "rotary", "rope", "pointwise", "clamp", "where", "threshold", "nan_to_num",
                     "scalepacked", "divide"),
     r"(?:^|[^a-z])(?:add|mul|div|sub|neg|sqrt|exp|log2|clip)(?:[^a-z]|$)"),
)

#: Names are matched on their first characters only: template arguments far into a name never decide.
MAX_NAME_CHARS = 1024

_COMPILED: tuple[tuple[int, tuple[str, ...], re.Pattern[str] | None], ...] = tuple(
    (CATEGORY_CODE[cat], subs, re.compile(rx) if rx else None) for cat, subs, rx in KERNEL_PATTERNS
)
_OTHER = CATEGORY_CODE["other"]


def kernel_category(name: str) -> str:
    """The category of one kernel name (for tests and the UI); ``other`` when nothing matches."""
    return CATEGORIES[_kernel_code(name)]


def _kernel_code(name: str) -> int:
    low = name[:MAX_NAME_CHARS].lower()
    for code, subs, rx in _COMPILED:
        if any(s in low for s in subs) or (rx is not None and rx.search(low)):
            return code
    return _OTHER


@lru_cache(maxsize=16)
def classify_names(names: tuple[str, ...]) -> NDArray[np.uint8]:
    """Category code of every name in an interned name table, as if each were a kernel.

    One regex pass per unique name; cached per names tuple (tables share their ``names``).
    """
    return np.fromiter((_kernel_code(n) for n in names), dtype=np.uint8, count=len(names))


def _codes_for(names: tuple[str, ...], name_ids: NDArray[np.int32]) -> NDArray[np.uint8]:
    """Category codes for the given name ids, classifying only the names actually used."""
    used = np.unique(name_ids)
    table = np.full(len(names), _OTHER, dtype=np.uint8)
    table[used] = np.fromiter((_kernel_code(names[i]) for i in used), dtype=np.uint8, count=used.size)
    return table[name_ids]


def categorize(events: EventTable) -> NDArray[np.uint8]:
    """Category code per row: kernels by name, memcpy/memset by kind, everything else ``other``."""
    return category_codes(events.names, events.kind, events.name_id)


def category_codes(names: tuple[str, ...], kind: NDArray[np.uint8], name_id: NDArray[np.int32]) -> NDArray[np.uint8]:
    """``categorize`` of the rows with these kind and name id columns (no need to select a whole table)."""
    out = np.full(kind.shape, _OTHER, dtype=np.uint8)
    if kind.size == 0:
        return out
    kernel = kind == Kind.KERNEL
    if kernel.any():
        out[kernel] = _codes_for(names, name_id[kernel])
    out[kind == Kind.MEMCPY] = CATEGORY_CODE["memcpy"]
    out[kind == Kind.MEMSET] = CATEGORY_CODE["memset"]
    return out
