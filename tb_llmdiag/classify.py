"""Kernel taxonomy: device event name -> category, by a declared pattern table over the kernel's own name.

Contract:
- ``CATEGORIES`` is the fixed, ordered list of category names; a category code is its index.
- A kernel is classified by its **own name** (``own_name``): the qualified identifier before its template
  arguments and parameter list (``void ns::foo<cutlass::X, flashinfer::Y>(int)`` is ``ns::foo``; an Itanium
  mangled ``_ZN5aiter6rmsnormI...`` is ``aiter::rmsnorm``), so a template argument that mentions ``cutlass``
  or ``flashinfer`` never decides the category. Generic launch wrappers whose template argument *is* the
  kernel (``at::native::elementwise_kernel<.., direct_copy_kernel_cuda ..>``, ``cutlass::device_kernel<Gemm>``,
  ``ck_tile::kentry<..Fmha..>``: ``WRAPPER_KERNELS``) are matched on their head (own name + template
  arguments, without the parameter list).
- ``KERNEL_PATTERNS`` is data: ``(category, substrings, regex)`` rows tried top to bottom against the
  lower-cased match key, first match wins. Order matters: specific families (communication, MoE routing,
  KV-cache writes, rotary, norm, quantisation, attention) come before the broad ones (gemm, copy, reduce,
  elementwise) so that e.g. a cuBLAS split-K reduction is a GEMM, ``multi_tensor_apply_kernel<..Adam..>``
  the optimizer and ``reshape_and_cache_flash_kernel`` a KV-cache write, not attention.
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
# a declared table, one entry per row: left as laid out
# fmt: off
CATEGORIES: tuple[str, ...] = (
    "gemm",           # cuBLAS / cuBLASLt / CUTLASS / nvjet / hipBLASLt-Tensile Cijk_ / CK / Triton mm, MTIA fc
    "attention",      # flash / mem-efficient / cuDNN SDPA / flex / CK fmha / SageAttention / Triton attn_fwd
    "conv",           # cuDNN convolutions (CNNs; rare in LLMs)
    "copy",           # copies, dtype casts, cat, transpose/layout conversion, XLA data-movement fusions
    "elementwise",    # pointwise math: add/mul/activations/fill/dropout/RoPE, Triton and XLA loop fusions
    "norm",           # layer / RMS / batch norm (also fused add+norm(+quant))
    "softmax",        # softmax, log-softmax and the loss kernels built on it (cross-entropy, NLL)
    "reduce",         # reductions, scans, sort/top-k, Triton reductions
    "optimizer",      # multi_tensor_apply / foreach / fused Adam
    "quant",          # (de)quantisation and scaled low-precision casts: bitsandbytes, fp8/fp4/int8 quant
    "index",          # embedding lookups, gather/scatter, index_select/put, KV-cache writes
    "moe",            # MoE routing (top-k gating, histograms, offsets), permute/unpermute, finalize
    "communication",  # NCCL / RCCL collectives and p2p, custom all-reduce, DeepEP dispatch/combine
    "autotune",       # the compiler's autotuner's own kernels (XLA redzone checks, result comparison, delay)
    "memcpy",         # device memcpy events (by Kind)
    "memset",         # device memset events (by Kind)
    "other",
)
# fmt: on
CATEGORY_CODE: dict[str, int] = {name: i for i, name in enumerate(CATEGORIES)}

#: Categories counted as matrix-multiply-class work (the denominator of copy-vs-GEMM).
MATMUL_CATEGORIES: tuple[str, ...] = ("gemm", "attention", "conv")
#: Categories counted as copy-class work (the numerator of copy-vs-GEMM).
COPY_CATEGORIES: tuple[str, ...] = ("copy", "memcpy")

#: Own names (last ``::`` component, lower case) of launch wrappers whose template argument is the real
#: kernel: these are matched on their head (own name + template arguments) instead of the own name alone.
WRAPPER_KERNELS: frozenset[str] = frozenset(
    {
        "elementwise_kernel",
        "vectorized_elementwise_kernel",
        "unrolled_elementwise_kernel",
        "elementwise_kernel_manual_unroll",
        "index_elementwise_kernel",
        "reduce_kernel",
        "multi_tensor_apply_kernel",
        "device_kernel",
        "kernel",
        "kernel2",
        "kentry",
        "trampoline_kernel",
        "kernel_with_params",
    }
)

# Triton pointwise kernels whose fused op list is only data movement (``triton_poi_fused__to_copy_0``,
# ``triton_poi_fused_cat_clone_3``) are copies; any other pointwise fusion is elementwise.
_TRITON_COPY_ONLY = (
    r"^triton_poi_fused_(?:_?(?:to_copy|clone|cat|copy|transpose|permute|view|unsafe_view|stack|expand|t)_)+\d+$"
)
# XLA GPU fusions are named ``<kind>_<root op>_fusion[.N]`` (``loop_convert_fusion``, ``input_reduce_fusion``),
# single ops wrapped as a fusion ``wrapped_<op>``: a copy when every op named is data movement
# (``loop_convert_fusion``, ``wrapped_transpose``), a reduction, an index op, else elementwise.
_XLA = r"^(?:loop|input|wrapped)_"
_XLA_MOVE = (
    r"(?:convert|copy|transpose|concatenate|broadcast|bitcast|slice|dynamic_slice|dynamic_update_slice|pad"
    r"|reshape|reverse)"
)

#: (category, substrings, regex or None) rows, matched against the lower-cased match key (own name, or a
#: wrapper's head); first match wins. A row matches when any substring occurs in the key or the regex
#: searches true. Plain substrings are used wherever they suffice (C-speed ``in``); regexes only where
#: position or context matters. Keep specific families above broad ones.
# a declared table, one entry per row: left as laid out
# fmt: off
KERNEL_PATTERNS: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    # DeepEP's layout kernel counts the tokens per rank and per expert on this GPU: local routing work, no
    # communication, though it sits in the ``ep::`` namespace the next row takes for communication
    ("moe", ("ep::cuda::get_dispatch_layout", "ep::layout::get_dispatch_layout"), None),
    ("communication", ("nccl", "rccl", "cross_device_reduce", "multimem_all_reduce", "allreduce", "all_reduce",
                       "allgather", "all_gather", "reducescatter", "reduce_scatter", "alltoall", "all_to_all",
                       "sendrecv", "mscclpp", "nvshmem", "deep_ep", "deepep"),
     # DeepEP and other expert-parallel dispatch/combine kernels (``dpsk::ep::internode::combine``)
     r"(?:^|::)(?:ep|internode|intranode|internode_ll)::|(?:^|::)(?:dispatch|combine|notify_dispatch|notify_combine|"
     r"cached_notify|cached_notify_dispatch|cached_notify_combine)(?:_kernel)?$"),
    ("autotune", ("redzone", "xla_fp_comparison", "delaykernel", "repeatbufferkernel"), None),
    ("optimizer", ("multi_tensor_apply", "_foreach_", "fused_adam", "fusedadam", "adamfunctor", "adamwfunctor",
                   "adam_kernel", "adamw_kernel", "lamb_", "fused_sgd"), r"^triton_.*_(?:adam|sgd)"),
    ("moe", ("moe::dev::routing", "moe::dev::finalize", "moe_align", "moe_sum", "moe_permute", "moe_unpermute",
             "unpermute", "expandinputrows", "expand_input_rows", "topkgating", "topk_gating", "finalizemoe",
             "finalize_moe", "_finalize_matmul_scatter", "_combined_routing", "bitmatrix", "count_and_sort_expert",
             "count_expert", "get_fused_mapping"),
     None),
    ("index", ("reshape_and_cache", "store_kvcache", "concat_and_cache", "set_kv_buffer", "write_to_kv_cache",
               "kv_cache_write"), None),  # KV-cache writes: scatters by slot, not attention
    ("elementwise", ("rotary", "rope_", "_rope"), None),  # before index: ``rotary_embedding_kernel``
    ("norm", ("layer_norm", "layernorm", "rms_norm", "rmsnorm", "batch_norm", "batchnorm", "group_norm",
              "groupnorm", "instance_norm", "gammabeta", "bn_fw", "bn_bw", "norm_backward", "ln_fwd", "ln_bwd"),
     r"^triton_.*rsqrt"),
    ("gemm", ("marlin", "machete"), None),  # weight-quantised GEMMs (vLLM), not the quant row below
    ("quant", ("quant", "gemv_4bit", "gemm_4bit", "int8gemm", "int8_gemm", "igemmlt", "fp8_cast", "fp8_scale",
               "cast_to_fp8", "cast_to_fp4"), r"per_(?:token|channel|block|tensor|group)_cast"),
    ("attention", ("flash", "fmha", "attention", "attn", "sdpa", "mha_", "xformers", "sage_fwd", "sageattn",
                   "dot_do_o"), None),
    ("index", ("embedding", "index_select", "indexselect", "index_elementwise", "index_put", "scatter", "gather",
               "bounds_check_indices", "linearize_index", "indexfunc", "indexing_backward",
               "resolve_future_token_ids", "take_along", "masked_select", "nonzero"),
     _XLA + r"(?:gather|scatter)"),
    ("softmax", ("softmax", "cross_entropy", "crossentropy", "nll_loss", "nllloss", "classnllcriterion",
                 "logsumexp"), None),
    ("conv", ("winograd", "implicit_convolve", "scudnn", "cask_cudnn", "dgrad", "wgrad", "fprop", "cudnn::cnn",
              "cudnn$conv", "cudnn-conv"), r"conv(?!ert)"),
    ("copy", (), _TRITON_COPY_ONLY + "|" + _XLA + "(?:" + _XLA_MOVE + "_)*" + _XLA_MOVE + r"(?:_fusion)?(?:[._]\d+)?$"),
    ("reduce", (), _XLA + r"reduce"),
    ("elementwise", (), r"^triton_poi_|^(?:loop|input)_\w*fusion|^wrapped_"),  # other pointwise fusions
    ("reduce", (), r"^triton_(?:red|per)_"),  # Triton reductions not caught by norm/softmax above
    ("gemm", (), r"^triton_tem_"),  # Inductor templates (flex attention is caught above)
    ("copy", ("copy", "catarraybatched", "nchwtonhwc", "nhwctonchw", "transpose", "permute", "convert",
              "expand_to_fused"), r"\bcat_|\bcast"),
    ("gemm", ("gemm", "gemv", "nvjet", "cutlass", "cublas", "xmma", "s884", "s1688", "s16816", "h16816", "bmm",
              "matmul", "splitkreduce", "gemmk1", "gemmsn", "dot_kernel", "epilogue::impl", "hipblaslt", "rocblas",
              "wvsplitk", "reduce_1block_kernel"),
     r"(?:^|_)cijk_|\bkernel2\b|^fc-"),  # hipBLASLt / Tensile kernels are ``Cijk_Alik_Bljk_...``
    ("reduce", ("reduce", "cub::", "rocprim", "hipcub", "scan", "segmented", "radix_sort", "radixsort", "sort_",
                "topk", "argmax", "argmin", "sum_", "mean_", "cumsum", "max_dim", "min_dim", "vector_norm", "pool"),
     None),
    ("elementwise", ("elementwise", "functor", "fill", "gelu", "silu", "swiglu", "geglu", "relu", "sigmoid",
                     "tanh", "dropout", "pointwise", "clamp", "where", "threshold", "nan_to_num", "scalepacked",
                     "divide", "act_and_mul", "bias_rescale", "scal_kernel"),
     r"(?:^|[^a-z])(?:add|mul|div|sub|neg|sqrt|exp|log2|clip)(?:[^a-z]|$)"),
)
# fmt: on

#: Match keys are cut to their first characters: template arguments far into a wrapper's name never decide.
MAX_NAME_CHARS = 1024

_COMPILED: tuple[tuple[int, tuple[str, ...], re.Pattern[str] | None], ...] = tuple(
    (CATEGORY_CODE[cat], subs, re.compile(rx) if rx else None) for cat, subs, rx in KERNEL_PATTERNS
)
_OTHER = CATEGORY_CODE["other"]
_ANON = re.compile(r"\((?:anonymous namespace|anonymous)\)::")
_MANGLED_ID = re.compile(r"(\d+)")
_BRACKETS = re.compile(r"[<>()]")
_MANGLED_ARG = re.compile(r"(?<![0-9])(?<!L[a-z])(\d+)[A-Za-z_]")  # not a literal such as Li2E


def _demangled(name: str) -> tuple[str, int]:
    """``_ZN5aiter6kernelI...`` -> (``aiter::kernel``, where its template arguments start): the nested name of
    an Itanium mangled symbol; (the name, its length) when it is not one."""
    i = 3 if name.startswith("_ZN") else 2
    while i < len(name) and name[i] in "KVrL":  # cv-qualifiers
        i += 1
    parts: list[str] = []
    while i < len(name):
        if name.startswith("St", i):  # std::
            parts.append("std")
            i += 2
            continue
        m = _MANGLED_ID.match(name, i)
        if m is None:
            break
        n = int(m.group(1))
        parts.append(name[m.end() : m.end() + n])
        i = m.end() + n
        if not name.startswith("_ZN"):
            break
    return ("::".join(parts), i) if parts else (name, len(name))


def _mangled_first_argument(name: str, start: int) -> str:
    """The first identifier among a mangled name's template arguments (``ILi2ENS_38FmhaBatch...`` -> the
    38-character class name): what a wrapper such as ``ck_tile::kentry`` launches."""
    for m in _MANGLED_ARG.finditer(name, start):
        n = int(m.group(1))
        return name[m.end(1) : m.end(1) + n]
    return ""


def _head(name: str) -> str:
    """The name up to its parameter list: everything before the first ``(`` outside template arguments."""
    depth = 0  # angle-bracket depth; parentheses inside template arguments (lambdas, ``(8)>(0)``) are skipped
    paren = 0
    for m in _BRACKETS.finditer(name):
        ch = m.group()
        if ch == "(":
            if depth == 0 and paren == 0 and m.start() > 0:
                return name[: m.start()]
            paren += 1
        elif ch == ")":
            paren = max(0, paren - 1)
        elif paren == 0 and ch == "<":
            depth += 1
        elif paren == 0 and depth > 0:  # ">"
            depth -= 1
    return name


def _strip_templates(head: str) -> str:
    """``a::b<x<y>>::c<z>`` -> ``a::b::c`` (template arguments removed at every depth)."""
    out: list[str] = []
    depth = 0
    paren = 0
    last = 0
    for m in _BRACKETS.finditer(head):
        ch, i = m.group(), m.start()
        if ch == "(":
            paren += 1
        elif ch == ")":
            paren = max(0, paren - 1)
        elif paren == 0 and ch == "<":
            if depth == 0:
                out.append(head[last:i])
            depth += 1
        elif paren == 0 and depth > 0:  # ">"
            depth -= 1
            if depth == 0:
                last = i + 1
    if depth == 0:
        out.append(head[last:])
    return "".join(out)


def own_name(name: str) -> str:
    """The kernel's own name: the qualified identifier before its template arguments and parameter list,
    without return type (``void``, ``std::enable_if<..>::type``) or ``(anonymous namespace)::``."""
    if name.startswith("_Z"):
        return _demangled(name)[0]
    head = _head(_ANON.sub("", name[: 4 * MAX_NAME_CHARS]))
    words = _strip_templates(head).split()
    return words[-1] if words else name


def match_key(name: str) -> str:
    """The lower-cased text the pattern table reads: the own name, or a wrapper's head (see module doc)."""
    own = own_name(name)
    if own.rsplit("::", 1)[-1].lower() in WRAPPER_KERNELS:
        if name.startswith("_Z"):
            return (own + "::" + _mangled_first_argument(name, _demangled(name)[1])).lower()
        return _head(_ANON.sub("", name[: 4 * MAX_NAME_CHARS]))[:MAX_NAME_CHARS].lower()
    return own[:MAX_NAME_CHARS].lower()


def kernel_category(name: str) -> str:
    """The category of one kernel name (for tests and the UI); ``other`` when nothing matches."""
    return CATEGORIES[_kernel_code(name)]


def _kernel_code(name: str) -> int:
    low = match_key(name)
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
