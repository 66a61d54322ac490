"""The ``anatomy`` topic's declared tables: the model's parts, what names each piece of evidence maps to a part, the
attention backends, the data types of matmul kernels and the devices' dense peaks per data type.

Every table is data, tried top to bottom, first match wins (``part_of_names``: once per distinct name, then broadcast).
The evidence levels, strongest first (``EVIDENCE``): the ``nn.Module`` frames ``with_modules`` / ``with_stack`` record
(``module``), user and framework annotations (``record_function`` ranges: ``annotation``), both reached through the
forward operator of a backward one (``backward_link``, where the reader links them), a compiled graph's annotation
(``compiled_graph``), the recorded shapes (``shape``: a LoRA rank, the vocabulary), operator names (``op``) and kernel
names (``kernel``, with ``classify.py``'s category).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

#: the model's parts, in the report's order (compiled graphs, one entry each, and ``other`` come after them)
PARTS: tuple[str, ...] = (
    "embedding",
    "attention",
    "mlp",
    "norms",
    "lora",
    "moe",
    "lm_head",
    "loss",
    "optimizer",
    "communication",
    "data_movement",
)
PART_CODE: dict[str, int] = {p: i for i, p in enumerate(PARTS)}
#: evidence levels, strongest first: ``identified_by`` names one of them
EVIDENCE: tuple[str, ...] = ("module", "annotation", "backward_link", "compiled_graph", "shape", "op", "kernel")
EVIDENCE_CODE: dict[str, int] = {e: i for i, e in enumerate(EVIDENCE)}
#: a part an enclosing module keeps for what runs inside it (an MLP inside a MoE block is an expert)
STICKY_PARTS = ("moe",)

Table = tuple[tuple[str, str], ...]

# a declared table, one row per pattern: left as laid out
# fmt: off
#: ``nn.Module: <class>_<n>`` frames, by class name
MODULE_PARTS: Table = (
    ("moe", r"MoE|Moe|SparseMoe|BlockSparse|Experts?\b|Expert[A-Z]|MixtureOf|Router|MoEGate|TopK?Gate"),
    ("lm_head", r"LMHead|LmHead|LogitsProcessor"),
    ("attention", r"Attention|Attn|MultiheadAttention|Rotary|RoPE|QKV"),
    ("norms", r"Norm(?:[A-Z_]|\d|$)|RMSNorm|LayerNorm"),
    ("mlp", r"MLP|Mlp|FeedForward|FFN|SwiGLU|GeGLU|Activation$|^SiLU|^GELU"),
    ("embedding", r"Embedding|Embed(?:[A-Z]|$)"),
    ("loss", r"Loss$"),
)
#: ``record_function`` ranges and framework annotations
ANNOTATION_PARTS: Table = (
    ("optimizer", r"^Optimizer\.(?:step|zero_grad)#|(?i:clip_grad|zero_grad|optimizer[._ ]step)"),
    ("loss", r"(?i)\bloss\b"),
    ("attention", r"(?i)\battn\b|attention"),
    ("moe", r"(?i)\bmoe\b|\bexperts?\b|\brouter\b|^dispatch\b|^combine\b"),
    ("mlp", r"(?i)\bmlp\b|\bffn\b|feed.?forward"),
    ("lm_head", r"(?i)\blm_head\b|\blogits\b"),
    ("embedding", r"(?i)\bembed(?:ding)?s?\b"),
)
#: operator names (the outermost matching operator on the launch's chain decides)
OP_PARTS: Table = (
    ("optimizer", r"^aten::_foreach_|^aten::_fused_(?:adam|sgd)|^Optimizer\.|clip_grad"),
    ("loss", r"^aten::(?:cross_entropy|nll_loss|_?log_softmax|binary_cross_entropy|mse_loss)|"
             r"(?:NllLoss\w*|LogSoftmax|CrossEntropy\w*)Backward"),
    ("attention", r"^aten::(?:_?scaled_dot_product|_flash_attention|_efficient_attention|_cudnn_attention)|"
                  r"^flash_attn::|^vllm::unified_attention|^_vllm_fa|(?:ScaledDotProduct\w*|FlashAttn\w*|Sdpa\w*)Backward"),
    ("embedding", r"^aten::embedding|EmbeddingBackward"),
    ("norms", r"^aten::(?:native_)?(?:layer|rms|group)_norm|^aten::_fused_rms_norm|(?:Layer|Rms)NormBackward"),
    ("mlp", r"^aten::(?:silu|gelu|relu)|(?:Silu|Gelu|Relu)Backward"),
    ("data_movement", r"^aten::(?:to|_to_copy|copy_|contiguous|clone)$|ToCopyBackward|CopyBackwards"),
)
#: kernel names, before the category mapping below
KERNEL_PARTS: Table = (
    ("moe", r"(?i)grouped_gemm|matmul_ogs|\bmoe\b|moe_|_moe|expert|topk_?(?:gating|softmax)|permute"),
    ("attention", r"(?i)rotary|\brope\b|_rope_|reshape_and_cache|store_kvcache|kv_?cache"),
    ("mlp", r"(?i)silu|swiglu|geglu|gelu|act_and_mul|gated_act"),
    ("loss", r"(?i)cross_?entropy|log_?softmax|nll_loss"),
    ("embedding", r"(?i)embedding"),
)
#: ``classify.py`` category -> part, for kernels no name above matched
CATEGORY_PARTS: dict[str, str] = {
    "attention": "attention",
    "norm": "norms",
    "optimizer": "optimizer",
    "moe": "moe",
    "communication": "communication",
    "memcpy": "data_movement",
    "memset": "data_movement",
}
#: operators whose kernels are casts or copies (a part's ``casts_ns``)
CAST_OPS = r"^aten::(?:to|_to_copy|copy_|contiguous|clone)$"
#: compiled graphs: the annotation torch.compile's wrapper opens around each graph's run
COMPILED_GRAPH = re.compile(r"^## Call CompiledFxGraph (\w{1,8})|^Torch-Compiled Region: ([\d/]+)|^(CompiledFunction)\b")
#: attention kernels -> backend
BACKENDS: Table = (
    ("cudnn", r"(?i)cudnn\w*sdpa|cudnn_generated\w*fmha|\bcudnn\b.*attn"),
    ("flash", r"(?i)flash|fmhaSm\d+|fmha_v2|FmhaBatchPrefill|fmha_fwd|fmha_bwd"),
    ("efficient", r"(?i)fmha_cutlass|efficient_attention|mem_eff|AttentionKernel|attention_kernel_batched"),
    ("triton", r"(?i)attn_fwd|attn_bwd|unified_attention|_fwd_kernel|_bwd_kernel"),
)
#: matmul kernel names -> data type (first match), for the peak the part's GEMMs are held to
DTYPES: Table = (
    ("fp8", r"(?i)e4m3|e5m2|fp8|f8f8|_f8_"),
    ("tf32", r"(?i)tf32|xf32|1688|16816"),
    ("bf16", r"(?i)bf16|bfloat16|BFloat16|_BBS_|_BH_"),
    ("fp16", r"(?i)f16|fp16|half|hgemm|884|_HHS_"),
    ("fp32", r"(?i)sgemm|f32f32_f32f32|gemmSN|gemv.*float|_SS_"),
)
#: (substring of the device name, {data type: dense tensor-core (fp32: SIMT) peak TFLOP/s}); vendors' datasheets,
#: never a sparse figure. First match wins.
PEAKS_BY_DTYPE: tuple[tuple[str, dict[str, float]], ...] = (
    ("H100 PCIe", {"fp8": 1513.0, "bf16": 756.5, "fp16": 756.5, "tf32": 378.0, "fp32": 51.2}),
    ("GH200", {"fp8": 1978.9, "bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 67.0}),
    ("H200", {"fp8": 1978.9, "bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 67.0}),
    ("H100", {"fp8": 1978.9, "bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 67.0}),
    ("H800", {"fp8": 1978.9, "bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 67.0}),
    ("A100", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    ("A800", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}),
    ("MI300X", {"fp8": 2614.9, "bf16": 1307.4, "fp16": 1307.4, "tf32": 653.7, "fp32": 163.4}),
)
# fmt: on
DTYPE_BYTES: dict[str, int] = {"fp8": 1, "bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}

_MODULE = re.compile(r"^nn\.Module: (\w+?)(?:_\d+)?$")
_LINEAR = re.compile(r"Linear$")
_LORA = re.compile(r"(?i)lora")


def compiled(table: Table) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((p, re.compile(rx)) for p, rx in table)


_COMPILED = {
    "module": compiled(MODULE_PARTS),
    "annotation": compiled(ANNOTATION_PARTS),
    "op": compiled(OP_PARTS),
    "kernel": compiled(KERNEL_PARTS),
}


def first_match(table: tuple[tuple[str, re.Pattern[str]], ...], name: str) -> str | None:
    for label, rx in table:
        if rx.search(name):
            return label
    return None


def module_class(name: str) -> str | None:
    """``nn.Module: Qwen2Attention_3`` -> ``Qwen2Attention``; None for any other name."""
    m = _MODULE.match(name)
    return m.group(1) if m else None


def part_of_names(names: Sequence[str], ids: NDArray[np.intp], table: str) -> NDArray[np.int16]:
    """The part code (``PART_CODE``, -1: none) of each name id in ``ids`` by one table (``module``: the class of an
    ``nn.Module`` frame; ``annotation``, ``op``, ``kernel``: the whole name)."""
    rows = _COMPILED[table]
    out = np.full(ids.size, -1, np.int16)
    for j, i in enumerate(ids.tolist()):
        name = names[i]
        if table == "module":
            cls = module_class(name)
            if cls is None:
                continue
            name = cls
        p = first_match(rows, name)
        if p is not None:
            out[j] = PART_CODE[p]
    return out


def module_flags(names: Sequence[str], ids: NDArray[np.intp]) -> tuple[NDArray[np.bool_], ...]:
    """Per name id: an ``nn.Module`` frame; of a Linear-like class (``Linear``, ``QKVParallelLinear``...); of a LoRA
    class (``LoRALinear``, ``LoraLayer``...)."""
    cls = [module_class(names[i]) for i in ids.tolist()]
    is_mod = np.fromiter((c is not None for c in cls), bool, count=len(cls))
    linear = np.fromiter((c is not None and _LINEAR.search(c) is not None for c in cls), bool, count=len(cls))
    lora = np.fromiter((c is not None and _LORA.search(c) is not None for c in cls), bool, count=len(cls))
    return is_mod, linear, lora


def graph_label(name: str) -> str | None:
    """The entry name of a compiled graph's annotation (``compiled_graph:f54nxpr4``), else None."""
    m = COMPILED_GRAPH.match(name)
    if m is None:
        return None
    return "compiled_graph:" + (m.group(1) or m.group(2) or m.group(3))


def label_of(table: Table, name: str) -> str | None:
    """The first row of a small table (``BACKENDS``, ``DTYPES``) matching ``name``."""
    for label, rx in table:
        if re.search(rx, name):
            return label
    return None


def peaks_for(device: str | None) -> dict[str, float] | None:
    if not device:
        return None
    for needle, peaks in PEAKS_BY_DTYPE:
        if needle in device:
            return peaks
    return None
