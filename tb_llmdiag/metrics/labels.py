"""The words a user reads for what the report holds as keys and names (issue #36): beside the metric registry,
as data.

- ``LABELS``: a registry key -> the label a user reads, for the keys findings show as evidence whose entry's own
  label is the key's words ("tokens cv", "first index"); ``registry.METRICS`` carries these labels, so the tab
  (``./metric_registry``), the text and Markdown renderers and the agent read one label per key.
- ``EVIDENCE_KEY_LABELS``: the label of an evidence value a rule computes with a named function (no registry key:
  ``host_is``, ``where``), by its evidence key.
- ``VALUE_WORDS``: a named value the report holds (``more_tokens``, ``all_reduce``, ``multi_process``) -> its
  words; served to the tab as ``value_labels``.
- ``OP_WORDS`` and ``chain_words``: the common operators and autograd nodes of a PyTorch trace in words ("attention
  backward (cuDNN)" for ``autograd::engine::evaluate_function: ScaledDotProductCudnnAttentionBackward0 >
  aten::_cudnn_attention_backward``); the findings write op chains in these words into their text, while the metrics
  keep the trace's own names (what the trace view searches). An operator the table does not know keeps its name.

``words_of`` is the one function that turns a value shown as text into words (a named value, an op chain).
tests/test_wording.py renders every rule, every finding of every fixture and every job through the four surfaces
and fails on a placeholder, an internal key or a negative cost.
"""

from __future__ import annotations

import re

# a declared table, one entry per row
# fmt: off
LABELS: dict[str, str] = {
    "steps.count": "profiled steps",
    "steps.cv_excluding_first": "step time variation (CV, first step excluded)",
    "steps.median_ns": "median step",
    "steps.max_ns": "slowest step",
    "steps.outlier_count": "slow steps",
    "steps.outlier_main_cause": "main cause of the slow steps",
    "steps.mean_excess_share": "time the slow steps add",
    "steps.tokens_cv": "variation of tokens per step (CV)",
    "steps.tokens_corr": "correlation of step time with tokens",
    "steps.tokens_per_step_median": "median tokens per step",
    "steps.first_over_rest": "first step over the others",
    "steps.first_index": "first profiled step",
    "steps.warmup_excess_share": "extra time of the first step",
    "dataloader.stall_share": "GPU idle waiting for batches",
    "dataloader.stall_ns": "time waiting for batches",
    "dataloader.host_share": "host time in the data loader",
    "dataloader.iterator": "data loader",
    "idle.host_wait_share": "GPU waiting for the host",
    "idle.busy_share": "GPU busy",
    "idle.host_wait_culprit": "host operator while the GPU waits",
    "idle.host_wait_culprit_share": "GPU idle in that operator",
    "idle.host_wait_culprit_ns": "GPU idle time in that operator",
    "idle.host_wait_culprit_mean_ns": "mean call of that operator",
    "idle.host_wait_per_shape_op": "host operator for new shapes",
    "idle.host_wait_per_shape_share": "GPU idle in it",
    "idle.long_gap_count": "long GPU gaps",
    "idle.long_gap_ns": "time in long gaps",
    "idle.long_gap_max_ns": "longest gap",
    "idle.long_gap_share": "step time in long gaps",
    "launch.launches_per_step": "kernel launches per step",
    "launch.kernel_median_ns": "median kernel",
    "launch.launch_api_median_ns": "median launch call",
    "launch.tiny_kernel_share": "kernels under 10 µs",
    "launch.tiny_kernels_per_step": "tiny kernels per step",
    "host_sync.item_calls_per_step": ".item() calls per step",
    "host_sync.blocked_share": "host blocked in syncs",
    "host_sync.idle_after_sync_share": "GPU idle after syncs",
    "host_sync.longest_ns": "longest sync",
    "host_sync.longest_call": "longest sync call",
    "host_sync.longest_call_kind": "kind of the longest sync",
    "sync_storm.saving_share": "saving if the syncs went",
    "memcpy.htod_pageable_count": "pageable host-to-device copies",
    "memcpy.htod_pageable_per_step": "pageable copies per step",
    "memcpy.htod_pageable_bytes": "bytes copied from pageable memory",
    "memcpy.htod_pageable_host_ns": "host blocked by pageable copies",
    "memcpy.pageable_htod_share": "step time in pageable copies",
    "kernels.copy_share": "copies and casts, share of GPU time",
    "kernels.gemm_share": "GEMMs and attention, share of GPU time",
    "kernels.copy_vs_gemm_ratio": "copy time per GEMM time",
    "kernels.copy_ns": "copy and cast time",
    "kernels.gemm_ns": "GEMM time",
    "memory.peak_used_share": "peak memory used",
    "memory.peak_used_bytes": "peak memory",
    "memory.headroom_bytes": "free memory",
    "memory.total_bytes": "device memory",
    "compile.compiled_ids": "compile ids",
    "optimizer.implementation": "optimizer implementation",
    "checkpointing.recompute_ops_per_step": "recomputed operators per step",
    "checkpointing.recompute_share": "step time recomputing",
    "attribution.top_share": "GPU idle in the top host activity",
    "attribution.top_ns": "GPU idle time in the top host activity",
    "attribution.top_calls_per_step": "its calls per step",
    "attribution.top_mean_call_ns": "its mean call",
    "attribution.top_steps_hit": "steps it runs in",
    "attribution.top_launches_per_step": "kernel launches inside it per step",
    "attribution.sync_idle_share": "GPU idle in syncs",
    "attribution.allocator_idle_share": "GPU idle in allocator calls",
    "attribution.allocator_idle_ns": "time in allocator calls",
    "attribution.allocator_calls_per_step": "allocator calls per step",
    "attribution.unrecorded_share": "GPU idle in unrecorded host code",
    "attribution.unrecorded_ns": "time in unrecorded host code",
    "communication.exposed_share": "collectives no compute hides",
    "communication.collective_share": "time in collectives",
    "communication.overlap_share": "collective time hidden under compute",
    "xla.recompile_in_loop_count": "recompiles in the loop",
    "xla.recompile_in_loop_time_ns": "recompile time in the loop",
    "xla.recompile_steps": "steps that recompile",
    "xla.recompile_graph_hashes": "recompiled graph hashes",
    "xla.recompile_modules": "recompiled modules",
    "xla.recompile_program_ids": "recompiled program ids",
    "xla.recompile_in_loop_share": "step time recompiling",
    "xla.steady_step_median_ns": "median step without compiles",
    "xla.transfer_from_device_in_loop_count": "reads back to the host in the loop",
    "xla.transfer_from_device_in_loop_time_ns": "time copying back to the host",
    "xla.transfer_from_device_steps": "steps that read back",
    "xla.transfer_from_device_per_step": "reads back per step",
    "xla.step_count": "profiled steps",
    "xla.transfer_stall_ns": "stall from reading back",
    "xla.transfer_to_device_in_steps_time_ns": "host-to-device copies inside steps",
    "xla.host_transfer_share": "step time in transfers",
    "xla.warmup_compile_in_steps_time_ns": "compile time inside the steps",
    "xla.step_max_ns": "slowest step",
    "xla.steady_step_cv": "variation of steps without compiles (CV)",
    "xla.clean_step_cv": "variation without the read-back steps (CV)",
    "xla.steady_step_max_ns": "slowest step without compiles",
    "xla.steady_step_count": "steps without compiles",
    "xla.movement_share": "data movement, share of device time",
    "xla.data_formatting_share": "data formatting, share of device time",
    "xla.copy_share": "copies, share of device time",
    "xla.matmul_share": "matmuls, share of device time",
    "xla.steady_device_duty_cycle_share": "device busy outside compiles",
    "xla.device_idle_in_steps_ns": "device idle in steps",
    "job.straggler_rank": "straggler rank",
    "job.straggler_others_wait_ns_per_step": "the others wait per step",
    "job.straggler_others_wait_share": "the others wait, share of the step",
    "job.straggler_consistency_share": "collectives it arrives last in",
    "job.straggler_last_arrivals": "last arrivals",
    "job.straggler_others_wait_low_ns_per_step": "the others wait, 95 % lower bound",
    "job.straggler_others_wait_low_share": "the others wait, 95 % lower bound share",
    "job.straggler_profiler_excess_ns_per_step": "profiler's extra cost on the straggler",
    "job.straggler_profiler_basis": "how the profiler's cost was estimated",
    "job.straggler_others_wait_beyond_profiler_ns_per_step": "wait beyond the profiler, 95 % lower bound",
    "job.straggler_others_wait_beyond_profiler_share": "wait beyond the profiler, 95 % lower bound share",
    "job.straggler_significance": "verdict",
    "job.straggler_cause": "cause",
    "job.straggler_cause_evidence.cause": "largest difference",
    "job.straggler_cause_evidence.quantity": "compared",
    "job.straggler_cause_evidence.straggler_ns_per_step": "straggler per step",
    "job.straggler_cause_evidence.median_rank_ns_per_step": "median rank per step",
    "job.straggler_cause_evidence.difference_ns_per_step": "difference per step",
    "job.straggler_cause_evidence.activity": "what only it does",
    "job.straggler_cause_evidence.activity_kind": "where",
    "job.straggler_cause_evidence.activity_ns_per_step": "its time per step",
    "job.straggler_cause_evidence.activity_difference_ns_per_step": "longer than the median rank by",
    "job.straggler_tokens.straggler_tokens_per_step": "straggler tokens per step",
    "job.straggler_tokens.median_rank_tokens_per_step": "median rank tokens per step",
    "job.straggler_tokens.excess_share": "extra tokens",
    "job.top_collective_kind": "leading collective",
    "job.exposed_transfer_ns_per_step": "exposed transfer per step",
    "job.exposed_share": "collectives no compute hides",
    "job.overlap_share": "collective time hidden under compute",
    "job.waiting_known": "waiting split from transfer",
    "job.collective_by_kind[].kind": "collective",
}

#: evidence key -> label, for the values rules compute with a named function (no registry key to label them)
EVIDENCE_KEY_LABELS: dict[str, str] = {
    "host_is": "what the host does",
    "where": "where",
    "top_activity": "top host activity",
    "see_more": "to see more",
    "top_kind": "leading collective",
    "recompiled": "recompiled",
    "first_step_holds": "what the first step holds",
}

#: a fix's placeholder -> its words where no finding fills it (the rule catalogue, ``llmdiag rules``)
PLACEHOLDER_WORDS: dict[str, str] = {
    "where": "the code the finding names",
    "host_op": "the operator the finding names",
    "host_is": "doing what the finding names",
    "see_more": "record Python stacks in the capture or wrap the code in record_function ranges",
}


def unfilled(text: str) -> str:
    """A fix's text with its placeholders in ``PLACEHOLDER_WORDS`` (the text of a rule, not of a finding)."""

    class _Words(dict[str, str]):
        def __missing__(self, key: str) -> str:
            return "what the finding names"

    try:
        return text.format_map(_Words(PLACEHOLDER_WORDS))
    except (ValueError, IndexError, AttributeError):
        return text


#: a named value of the report -> its words (the tab reads them as ``value_labels`` of ``./metric_registry``); a
#: value that is also a rule id (the straggler cause ``host_sync``) is not keyed here (rules are keyed only in their
#: declarations): a surface writes such a value's words with spaces for underscores
VALUE_WORDS: dict[str, str] = {
    # straggler causes and the parts compared
    "more_tokens": "more tokens per step",
    "longer_gpu_compute": "longer GPU compute",
    "data_loader_stall": "data loader stalls",
    "host_bound_launching": "slow host launches",
    "late_step_start": "late step starts",
    "unexplained": "unexplained",
    "compute_ns": "GPU compute time",
    "start_offset_ns": "step start time",
    "host_idle_ns": "GPU idle waiting for launches",
    "data_loader_ns": "data loader time",
    "sync_ns": "sync time",
    "busy": "GPU work",
    "idle": "GPU idle time",
    # verdicts of the straggler rule
    "significant": "significant",
    "noise_unknown": "significance unknown (fewer than two common steps)",
    "intermittent": "intermittent",
    "below_threshold": "below the threshold",
    "not_most_steps": "not in most steps",
    "within_noise": "within the step-to-step noise",
    "within_profiler_cost": "within the profiler's own cost",
    "unprofiled_steps": "measured against unprofiled steps",
    "model": "modelled",
    "mixed": "measured on some ranks, modelled on others",
    # collective kinds
    "all_reduce": "all-reduce",
    "all_gather": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "all_to_all": "all-to-all",
    "send_recv": "send/receive",
    "broadcast": "broadcast",
    # what a collective is for (metrics.comm.purpose)
    "data_parallel": "data-parallel",
    "fsdp": "FSDP",
    "tensor_parallel": "tensor-parallel",
    "pipeline": "pipeline",
    "expert": "expert-parallel",
    # data loader, optimizer, step causes, activity kinds
    "multi_process": "in worker processes",
    "single_process": "in the training process",
    "for_loop": "for-loop",
    "foreach": "foreach",
    "fused": "fused",
    "host_wait": "waiting for the host",
    "data_loader": "the data loader",
    "gpu_work": "GPU work",
    "launch": "launching operators",
    "allocator": "allocator calls",
    "sync": "syncs",
    "dataloader": "fetching batches",
    "compile": "compiling",
    "outside": "code no operator records",
    "cpu_work": "operators that launch no GPU work",
    "cpu_op": "operator",
    # where steps come from
    "profiler_step": "ProfilerStep markers",
    "xplane_step": "XPlane steps",
    # the model's parts (``anatomy.parts``; ``part_words``) and how a part was identified (``identified_by``)
    "mlp": "MLP",
    "lora": "LoRA adapters",
    "moe": "MoE experts",
    "lm_head": "LM head",
    "data_movement": "data movement",
    "compiled_graph": "compiled graph",
    "backward_link": "backward link",
}

#: operator or autograd node -> its words, first match wins; a name no pattern matches keeps its own name (a plain
#: aten op such as ``aten::add_`` reads as itself: words would say less than its name)
OP_WORDS: tuple[tuple[str, str], ...] = (
    (r"autograd::engine::evaluate_function: ScaledDotProduct(Cudnn)?AttentionBackward\d*", "attention backward{cudnn}"),
    (r"autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward\d*", "attention backward (flash)"),
    (r"autograd::engine::evaluate_function: ScaledDotProductEfficientAttentionBackward\d*",
     "attention backward (memory-efficient)"),
    (r"aten::_scaled_dot_product_cudnn_attention_backward|aten::_cudnn_attention_backward",
     "attention backward (cuDNN)"),
    (r"aten::_scaled_dot_product_flash_attention_backward|aten::_flash_attention_backward",
     "attention backward (flash)"),
    (r"aten::_scaled_dot_product_efficient_attention_backward|aten::_efficient_attention_backward",
     "attention backward (memory-efficient)"),
    (r"aten::_scaled_dot_product_cudnn_attention|aten::_cudnn_attention_forward", "attention (cuDNN)"),
    (r"aten::_scaled_dot_product_flash_attention|aten::_flash_attention_forward", "attention (flash)"),
    (r"aten::_scaled_dot_product_efficient_attention|aten::_efficient_attention_forward",
     "attention (memory-efficient)"),
    (r"aten::scaled_dot_product_attention", "attention"),
    (r"autograd::engine::evaluate_function: CompiledFunctionBackward\d*", "compiled graph backward"),
    (r"autograd::engine::evaluate_function: (Mm|Addmm|Bmm|Linear)Backward\d*", "matmul backward"),
    (r"autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "gradient accumulation"),
    (r"autograd::engine::evaluate_function: (\w+?)Backward\d*", "{node} backward"),
    (r"(Mm|Addmm|Bmm|Linear)Backward\d*", "matmul backward"),
    (r"([A-Z]\w*?)Backward\d*", "{node} backward"),
    (r"aten::linear", "linear layer"),
    (r"aten::(mm|addmm|bmm|matmul)", "matmul"),
    (r"aten::(is_nonzero|_is_all_true|_is_any_true)", "a Python truth test on a tensor"),
    (r"aten::(_local_scalar_dense|item)", "reading a value back to the host (.item())"),
    (r"aten::index", "tensor indexing"),
    (r"aten::nonzero", "nonzero (data-dependent shape)"),
    (r"aten::masked_select", "masked select (data-dependent shape)"),
    (r"Optimizer\.step#(\w+)\.step", "optimizer step ({opt})"),
    (r"Optimizer\.zero_grad#(\w+)\.zero_grad", "zeroing gradients ({opt})"),
    (r"FSDP::pre_forward", "FSDP pre-forward"),
    (r"FSDP::post_forward", "FSDP post-forward"),
    (r"FSDP::pre_backward", "FSDP pre-backward"),
    (r"FSDP::post_backward\w*", "FSDP post-backward"),
    (r"record_param_comms", "collective launch"),
)
# fmt: on

_OPS = tuple((re.compile(r"\A(?:" + p + r")\Z"), w) for p, w in OP_WORDS)


def _camel_words(name: str) -> str:
    """``ScaledDotProduct`` -> "scaled dot product"."""
    return " ".join(w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z][a-z0-9]*|[a-z0-9]+", name))


def op_words(name: str) -> str:
    """One operator or autograd node in words (``OP_WORDS``); a name the table does not know keeps its name."""
    for pattern, words in _OPS:
        m = pattern.match(name)
        if m is None:
            continue
        groups = [g for g in m.groups() if g]
        return words.format(
            cudnn=" (cuDNN)" if "Cudnn" in name else "",
            node=_camel_words(groups[-1]) if groups else name,
            opt=groups[-1] if groups else "",
        )
    return name


def chain_words(chain: str) -> str:
    """An op chain (``outer > inner``) in words: each op in words, an op whose words repeat or are inside the
    words of the op that holds it dropped ("attention backward (cuDNN)" for the autograd node and the aten op it
    runs)."""
    out: list[str] = []
    for part in chain.split(" > "):
        w = op_words(part.strip())
        if out and (w == out[-1] or _inside(w, out[-1])):
            continue
        out.append(w)
    return " > ".join(out)


def _inside(inner: str, outer: str) -> bool:
    """The inner op's words say nothing the outer's do not ("matmul" inside "matmul backward")."""
    return bool(re.search(r"(?<![\w])" + re.escape(inner) + r"(?![\w])", outer))


_ELEM = r"(?:autograd::engine::evaluate_function: [\w:]+|[A-Za-z_][\w.#]*(?:::[\w.#]+)*)"
_CHAIN = re.compile(_ELEM + r"(?: > " + _ELEM + r")*")


def _chain_or_word(m: re.Match[str]) -> str:
    s = m.group(0)
    return chain_words(s) if "::" in s or " > " in s or "#" in s else s


def text_words(text: str) -> str:
    """Free text with every op chain it quotes (``aten::linear > aten::mm``) in words; other words as they are."""
    return _CHAIN.sub(_chain_or_word, text)


def part_words(name: str) -> str:
    """A model part's name in words (``anatomy.parts`` keys): ``lm_head`` -> "LM head", ``compiled_graph:0/1`` ->
    "compiled graph 0/1"; ``frontend/registry.js`` ``partLabel`` says the same from ``value_labels``."""
    kind, sep, rest = name.partition(":")
    words = VALUE_WORDS.get(kind, kind)
    return f"{words} {rest}" if sep else words


def words_of(value: object) -> object:
    """A value shown as text, in words: a named value (``VALUE_WORDS``), an op or op chain (``chain_words``),
    the op chains of a sentence (``text_words``); anything else as it is."""
    if not isinstance(value, str):
        return value
    if value in VALUE_WORDS:
        return VALUE_WORDS[value]
    if _CHAIN.fullmatch(value):  # an op or an op chain
        return chain_words(value)
    return text_words(value)
