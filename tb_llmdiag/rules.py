"""Findings as a declared rule table: ``RULES`` + ``evaluate(metrics) -> list[finding dict]``.

Contract:
- A ``Rule`` reads one observed value from the metrics by a dotted path (``"dataloader.stall_share"``) and
  fires when it is >= ``above`` or < ``below``, and the rule's named predicate ``when`` (if any) holds.
- Its saving is another dotted path holding a share of step time, or a named function of the metrics
  returning one (``None``: not estimable); saving ns = share x mean step. Evidence values are dotted paths
  or named functions too. Severity: the rule's fixed ``severity``, else from the saving share
  (>= 0.20 high, >= 0.05 medium, else low: traceml's 5/20 % bands).
- Platforms: a run is ``"xla"`` when its metrics hold the ``xla`` topic (XPlane traces: TPU, torch_xla, JAX),
  else ``"cuda"`` (Kineto: PyTorch eager on CUDA/ROCm, or CPU only). A rule with ``platform`` set applies
  only to runs of that platform (the CUDA-launch rules are ``"cuda"``, ``XLA_RULES`` are ``"xla"``); a rule
  for the run's platform owns its id, so a platform-neutral rule with the same id is not evaluated there,
  whether or not the platform's rule fires.
- Every finding repeats the rule's id, metric, observed value and threshold, its evidence (label ->
  value; empty lists are left out: the trace does not record them), a one-sentence summary from ``summary`` (a ``str.format`` template over the evidence labels),
  and the fix (text + PyTorch and HF Trainer snippets). Wording follows the run: a rule's ``flavours`` entry
  for the run's platform replaces its title, summary, fix and docs; ``stack_fix`` adds advice in the
  user's stack's words when the trace reveals it (``annotations.stack``).
- ``RULES`` = ``GPU_RULES`` + ``XLA_RULES`` (from ``tb_llmdiag/rules_xla.py``, imported lazily so that
  module can import ``Rule`` from here). docs/findings.md lists every rule; tests iterate ``RULES``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from tb_llmdiag.units import fmt_value

Metrics = Mapping[str, Any]


@dataclass(frozen=True)
class Fix:
    text: str
    pytorch: str
    hf_trainer: str


@dataclass(frozen=True)
class Flavour:
    """A rule's wording on one platform: each field given replaces the rule's own."""

    title: str | None = None
    summary: str | None = None
    fix: Fix | None = None
    docs: str | None = None


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    metric: str | None                   # dotted path of the observed value (None: predicate only)
    fix: Fix
    above: float | None = None           # fires when value >= above
    below: float | None = None           # fires when value < below
    when: Callable[[Metrics], bool] | None = None  # extra condition, a named function beside the table
    saving: Any = None                   # dotted path (or named function) of a share of step time saved if fixed
    severity: str | None = None          # fixed severity; else derived from the saving share
    evidence: tuple[tuple[str, Any], ...] = ()  # (label, dotted path or named function)
    summary: str = ""                    # str.format template over evidence labels (formatted values)
    docs: str | None = None
    stack_fix: tuple[tuple[str, str], ...] = field(default=())  # (stack, fix text in that stack's words)
    platform: str | None = None          # "cuda" | "xla": only runs of that platform; None: every run
    flavours: tuple[tuple[str, Flavour], ...] = field(default=())  # (platform, wording on that platform)


def lookup(metrics: Metrics, path: Any) -> Any:
    """The value at a dotted path (or of a named function of the metrics), or None when any part is missing."""
    if path is None:
        return None
    if callable(path):
        return path(metrics)
    cur: Any = metrics
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


# ---------------------------------------------------------------------------------------------
# Named predicates (a rule that needs more than one comparison)


def run_platform(m: Metrics) -> str:
    """``"xla"`` when the metrics hold the ``xla`` topic (an XPlane trace), else ``"cuda"``."""
    return "xla" if "xla" in m else "cuda"


def no_device(m: Metrics) -> bool:
    k = m.get("kernels") or {}
    return k.get("available") is False and "no device activity" in str(k.get("reason", ""))


def host_waits(m: Metrics) -> bool:
    return (lookup(m, "idle.host_wait_share") or 0.0) >= 0.05


def syncs_every_step(m: Metrics) -> bool:
    return (lookup(m, "host_sync.syncs_per_step") or 0.0) >= 1.0


def shapes_cost_time(m: Metrics) -> bool:
    """Changing batch shapes cost time: step time tracks tokens per step, or the GPU idles >= 5 % of step
    time while the host builds plans / compiles for new shapes (``idle.host_wait_per_shape_share``)."""
    return ((lookup(m, "steps.tokens_corr") or 0.0) >= 0.7
            or (lookup(m, "idle.host_wait_per_shape_share") or 0.0) >= 0.05)


def per_shape_saving(m: Metrics) -> float | None:
    """The per-shape host work's share of step time; not estimable (None) when there is none to remove."""
    return lookup(m, "idle.host_wait_per_shape_share") or None


def slow_calls(m: Metrics) -> bool:
    """The culprit's calls are long (>= 1 ms each): one slow operation, not launch overhead of many small ones."""
    return (lookup(m, "idle.host_wait_culprit_mean_ns") or 0) >= 1_000_000


def has_device_memory(m: Metrics) -> bool:
    return lookup(m, "memory.total_bytes") is not None


# ---------------------------------------------------------------------------------------------

_TORCH_PROFILER = "https://pytorch.org/docs/stable/profiler.html"

GPU_RULES: tuple[Rule, ...] = (
    Rule(
        id="no_device_activity", title="No GPU activity in the trace",
        metric=None, when=no_device, severity="high",
        evidence=(("device_events", "kernels.device_events"), ("steps", "steps.count")),
        summary="The trace holds no kernels, copies or memsets: it is CPU-only or CUDA activity was not recorded.",
        fix=Fix(text="Profile the device too: add ProfilerActivity.CUDA to the profiler's activities.",
                pytorch="from torch.profiler import profile, ProfilerActivity\n"
                        "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], ...) as prof: ...",
                hf_trainer="# in your profiling TrainerCallback:\n"
                           "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], ...)"),
        docs=_TORCH_PROFILER,
        flavours=(("xla", Flavour(
            title="No TPU/GPU activity: XLA ran on the CPU",
            summary="The capture has no device plane: XLA compiled and ran the step on the host CPU, so device "
                    "time, idle time and FLOPs cannot be measured.",
            fix=Fix(text="Run on the accelerator: torch_xla picks its device from PJRT_DEVICE (TPU or CUDA; it "
                         "falls back to CPU when none is set or found), JAX from the installed plugin (jax[tpu], "
                         "jax[cuda12] / jax[cuda13]): check which device the program sees before profiling.",
                    pytorch="# torch_xla\n"
                            "import os; os.environ.setdefault('PJRT_DEVICE', 'TPU')  # or 'CUDA'; before importing torch_xla\n"
                            "import torch_xla.core.xla_model as xm; print(xm.xla_device_hw(xm.xla_device()))\n"
                            "# JAX\n"
                            "import jax; print(jax.devices())  # [CpuDevice(id=0)] means no accelerator",
                    hf_trainer="# launch with the accelerator selected: PJRT_DEVICE=TPU python train.py ...\n"
                               "# Trainer on TPU picks the XLA device; print(trainer.args.device) to check"),
            docs="https://pytorch.org/xla/master/learn/pjrt.html")),),
    ),
    Rule(
        id="dataloader_stall", platform="cuda", title="The GPU waits for the data loader",
        metric="dataloader.stall_share", above=0.05, saving="dataloader.stall_share",
        evidence=(("stall_share", "dataloader.stall_share"), ("stall_ns", "dataloader.stall_ns"),
                  ("loader_host_share", "dataloader.host_share"), ("iterator", "dataloader.iterator")),
        summary="The GPU sits idle in the data loader for {stall_share} of step time "
                "({loader_host_share} of step time is spent fetching batches; iterator: {iterator}).",
        fix=Fix(text="Build batches in worker processes and overlap them with compute: raise num_workers, keep "
                     "workers alive, pin memory; move tokenization/augmentation out of the training loop "
                     "(pre-tokenize the dataset).",
                pytorch="DataLoader(ds, batch_size=bs, num_workers=4, pin_memory=True,\n"
                        "           persistent_workers=True, prefetch_factor=2)",
                hf_trainer="TrainingArguments(..., dataloader_num_workers=4, dataloader_pin_memory=True,\n"
                           "                  dataloader_persistent_workers=True, dataloader_prefetch_factor=2)"),
        docs="https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
        stack_fix=(("lightning", "Pass num_workers=4, pin_memory=True, persistent_workers=True to the DataLoader your "
                                 "LightningDataModule.train_dataloader() returns."),
                   ("torchtune", "Set num_workers in the recipe config's dataloader section and pre-tokenize the dataset.")),
    ),
    Rule(
        id="host_bound", platform="cuda", title="The GPU waits for the host to launch work",
        metric="idle.host_wait_share", above=0.10, saving="idle.host_wait_share",
        evidence=(("host_wait_share", "idle.host_wait_share"), ("gpu_busy_share", "idle.busy_share"),
                  ("launches_per_step", "launch.launches_per_step"), ("kernel_median_ns", "launch.kernel_median_ns"),
                  ("launch_api_median_ns", "launch.launch_api_median_ns"), ("host_op", "idle.host_wait_culprit"),
                  ("host_op_share", "idle.host_wait_culprit_share")),
        summary="For {host_wait_share} of step time the GPU has run out of queued work and waits for the host to "
                "launch more (GPU busy {gpu_busy_share}; {launches_per_step} launches per step, median kernel "
                "{kernel_median_ns}); the host is busiest in {host_op} ({host_op_share} of step time).",
        fix=Fix(text="Give the GPU more work per launch and fewer launches: a larger micro-batch (with fewer "
                     "gradient-accumulation steps), torch.compile to fuse small ops, fused kernels (Liger, fused "
                     "AdamW), CUDA graphs when shapes are static.",
                pytorch="model = torch.compile(model)\n"
                        "opt = torch.optim.AdamW(params, lr=lr, fused=True)\n"
                        "# and raise the batch size while memory allows",
                hf_trainer="TrainingArguments(..., per_device_train_batch_size=2 * bs, gradient_accumulation_steps=ga // 2,\n"
                           "                  torch_compile=True, optim=\"adamw_torch_fused\", use_liger_kernel=True)"),
        docs="https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
        stack_fix=(("lightning", "Raise the batch size in your DataModule, wrap the model with torch.compile in "
                                 "configure_model(), and use a fused optimizer in configure_optimizers()."),
                   ("torchtune", "Set compile=True and raise batch_size in the recipe config.")),
    ),
    Rule(
        id="host_sync", platform="cuda", title="Host syncs drain the GPU queue every step",
        metric="host_sync.saving_share", above=0.02, when=syncs_every_step,
        saving="host_sync.saving_share",
        evidence=(("saving_share", "host_sync.saving_share"), ("syncs_per_step", "host_sync.syncs_per_step"),
                  ("item_calls_per_step", "host_sync.item_calls_per_step"), ("blocked_share", "host_sync.blocked_share"),
                  ("idle_after_sync_share", "host_sync.idle_after_sync_share"), ("longest_ns", "host_sync.longest_ns")),
        summary="{syncs_per_step} host syncs per step ({item_calls_per_step} .item() calls on GPU tensors) block the "
                "host for {blocked_share} of step time (longest {longest_ns}) and drain the GPU queue; removing "
                "them could save up to {saving_share}.",
        fix=Fix(text="Keep values on the device inside the step: accumulate losses/metrics as tensors and read "
                     "them (.item(), float(), print) only every N steps; avoid data-dependent shapes (nonzero, "
                     "boolean masks) in the hot loop.",
                pytorch="running = torch.zeros((), device=dev)\n"
                        "running += loss.detach()          # no .item() per step\n"
                        "if step % 50 == 0: log(running.item() / 50); running.zero_()",
                hf_trainer="TrainingArguments(..., logging_steps=50, logging_nan_inf_filter=False)\n"
                           "# and no .item() in custom compute_loss / callbacks on every step"),
        docs="https://pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html",
        stack_fix=(("lightning", "Log with self.log(..., on_step=False, on_epoch=True) or a larger log_every_n_steps; "
                                 "avoid .item() in training_step."),),
    ),
    Rule(
        id="slow_host_op", platform="cuda", title="One host operation keeps the GPU waiting",
        metric="idle.host_wait_culprit_share", above=0.10, when=slow_calls, saving="idle.host_wait_culprit_share",
        evidence=(("host_op", "idle.host_wait_culprit"), ("host_op_share", "idle.host_wait_culprit_share"),
                  ("host_op_ns", "idle.host_wait_culprit_ns"), ("mean_call_ns", "idle.host_wait_culprit_mean_ns"),
                  ("hint", "idle.host_wait_culprit_hint")),
        summary="The GPU sits idle for {host_op_share} of step time ({host_op_ns}) while the host is inside {host_op} "
                "(mean call {mean_call_ns}). Likely cause: {hint}.",
        fix=Fix(text="Find out why that operation is slow on the host (see the likely cause): per-shape plan builds, "
                     "autotuning and compilation go away with fixed shapes (pad to a multiple of 64/128, or pack); "
                     "host-side data work belongs in the DataLoader's workers.",
                pytorch="# fixed shapes: tok(..., padding='max_length', max_length=L)  or  pad_to_multiple_of=128\n"
                        "torch.backends.cuda.enable_cudnn_sdp(False)  # if the culprit is cuDNN attention",
                hf_trainer="DataCollatorForSeq2Seq(tok, pad_to_multiple_of=128)  # or SFTConfig(packing=True)"),
        docs="https://pytorch.org/docs/stable/backends.html#torch.backends.cuda.enable_cudnn_sdp",
    ),
    Rule(
        id="pageable_memcpy", platform="cuda", title="Host-to-device copies use pageable memory",
        metric="memcpy.htod_pageable_count", above=1, saving="memcpy.pageable_htod_share",
        evidence=(("pageable_copies", "memcpy.htod_pageable_count"), ("pageable_per_step", "memcpy.htod_pageable_per_step"),
                  ("pageable_bytes", "memcpy.htod_pageable_bytes"), ("pageable_host_ns", "memcpy.htod_pageable_host_ns"),
                  ("pageable_share", "memcpy.pageable_htod_share")),
        summary="{pageable_copies} host-to-device copies ({pageable_bytes}) come from pageable memory: each blocks "
                "the host ({pageable_host_ns} in all, {pageable_share} of step time) and non_blocking=True is ignored.",
        fix=Fix(text="Let the DataLoader return pinned batches and copy them asynchronously. Do not call "
                     ".pin_memory() per tensor in the loop (it can be twice as slow).",
                pytorch="loader = DataLoader(ds, ..., pin_memory=True)\n"
                        "batch = {k: v.to(dev, non_blocking=True) for k, v in batch.items()}",
                hf_trainer="TrainingArguments(..., dataloader_pin_memory=True)  # the default; don't turn it off"),
        docs="https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
    ),
    Rule(
        id="copy_heavy", title="Copies and dtype casts take a large share of GPU time",
        metric="kernels.copy_share", above=0.10, saving="kernels.copy_step_share",
        evidence=(("copy_share", "kernels.copy_share"), ("gemm_share", "kernels.gemm_share"),
                  ("copy_vs_gemm_ratio", "kernels.copy_vs_gemm_ratio"), ("copy_ns", "kernels.copy_ns")),
        summary="Copy/convert kernels and memcpys take {copy_share} of device time against {gemm_share} for "
                "GEMMs and attention (ratio {copy_vs_gemm_ratio}).",
        fix=Fix(text="Find the casts: load the model in the training dtype (bf16) instead of casting per step, "
                     "use autocast rather than manual .to(dtype), avoid .contiguous()/cat in the hot loop, and let "
                     "torch.compile fuse the remaining casts into neighbouring kernels.",
                pytorch="model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)\n"
                        "with torch.autocast('cuda', dtype=torch.bfloat16): loss = model(**batch).loss",
                hf_trainer="AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)\n"
                           "TrainingArguments(..., bf16=True, torch_compile=True)"),
        docs="https://pytorch.org/docs/stable/amp.html",
    ),
    Rule(
        id="tiny_kernels", platform="cuda", title="Most kernels are too small to keep the GPU busy",
        metric="launch.tiny_kernel_share", above=0.5, when=host_waits, saving="launch.tiny_kernel_saving_share",
        evidence=(("tiny_kernel_share", "launch.tiny_kernel_share"), ("tiny_kernels_per_step", "launch.tiny_kernels_per_step"),
                  ("kernel_median_ns", "launch.kernel_median_ns"), ("launch_api_median_ns", "launch.launch_api_median_ns")),
        summary="{tiny_kernel_share} of kernels run under 10 us ({tiny_kernels_per_step} per step, median "
                "{kernel_median_ns}), about as long as launching them ({launch_api_median_ns} per launch call).",
        fix=Fix(text="Fuse small ops: torch.compile, fused optimizers (foreach/fused AdamW), fused LoRA/Liger "
                     "kernels; a bigger batch makes each kernel longer.",
                pytorch="model = torch.compile(model)\nopt = torch.optim.AdamW(params, fused=True)",
                hf_trainer="TrainingArguments(..., torch_compile=True, optim=\"adamw_torch_fused\", use_liger_kernel=True)"),
        docs="https://pytorch.org/docs/stable/torch.compiler.html",
    ),
    Rule(
        id="gpu_gaps", title="The GPU sits idle for long stretches",
        metric="idle.long_gap_count", above=1, saving="idle.long_gap_share",
        evidence=(("long_gaps", "idle.long_gap_count"), ("long_gap_ns", "idle.long_gap_ns"),
                  ("longest_gap_ns", "idle.long_gap_max_ns"), ("long_gap_share", "idle.long_gap_share")),
        summary="{long_gaps} GPU idle gaps of 500 ms or more ({long_gap_ns} in all, longest {longest_gap_ns}).",
        fix=Fix(text="Look at what the host does in the gap (timeline): evaluation, checkpoint saving, logging, "
                     "or data preparation inside the step. Move it out of the step or make it asynchronous.",
                pytorch="# e.g. save checkpoints every N steps, asynchronously:\n"
                        "torch.distributed.checkpoint.async_save(state_dict, checkpoint_id=path)",
                hf_trainer="TrainingArguments(..., save_steps=500, eval_steps=500, logging_steps=50)"),
        docs=None,
    ),
    Rule(
        id="step_variance", title="Step time varies from step to step",
        metric="steps.cv_excluding_first", above=0.15, saving="steps.mean_excess_share",
        evidence=(("cv", "steps.cv_excluding_first"), ("median_ns", "steps.median_ns"), ("max_ns", "steps.max_ns"),
                  ("outliers", "steps.outlier_count"), ("outlier_cause", "steps.outlier_main_cause"),
                  ("mean_excess_share", "steps.mean_excess_share")),
        summary="Step time varies by {cv} (coefficient of variation; median {median_ns}, max {max_ns}, "
                "{outliers} outlier steps; main outlier cause: {outlier_cause}): throughput and ETAs are unreliable.",
        fix=Fix(text="Find what differs in the slow steps (timeline): sequence length (pad to a fixed multiple or "
                     "pack), periodic logging/eval/checkpointing, recompiles, or a data-loader hiccup.",
                pytorch="tok(batch, padding='max_length', max_length=L, pad_to_multiple_of=64)",
                hf_trainer="DataCollatorWithPadding(tok, pad_to_multiple_of=64)  # or SFTConfig(packing=True)"),
        docs=None,
    ),
    Rule(
        id="variable_shapes", title="Step time follows the padded sequence length",
        metric="steps.tokens_cv", above=0.1, when=shapes_cost_time,
        saving=per_shape_saving,
        severity="medium",
        evidence=(("tokens_cv", "steps.tokens_cv"), ("tokens_corr", "steps.tokens_corr"),
                  ("tokens_per_step_median", "steps.tokens_per_step_median"),
                  ("per_shape_op", "idle.host_wait_per_shape_op"),
                  ("per_shape_share", "idle.host_wait_per_shape_share")),
        summary="Tokens per step (batch x padded length) vary by {tokens_cv} (correlation with step time "
                "{tokens_corr}), and every new batch shape costs host work: the GPU idles {per_shape_share} of "
                "step time while the host is in {per_shape_op}. Padding and uneven lengths set the step time.",
        fix=Fix(text="Pack sequences or go padding-free (varlen FlashAttention), or at least pad to a multiple of "
                     "64/128 and group samples of similar length: every new batch shape costs padding compute and, "
                     "with cuDNN attention or torch.compile, a new plan or compile on the host.",
                pytorch="from transformers import DataCollatorWithFlattening\n"
                        "collate = DataCollatorWithFlattening()  # with attn_implementation='flash_attention_2'",
                hf_trainer="SFTConfig(..., packing=True)  # or padding_free=True\n"
                           "TrainingArguments(..., group_by_length=True)  # plain Trainer"),
        docs="https://huggingface.co/blog/packing-with-FA2",
        stack_fix=(("torchtune", "Set dataset.packed=True in the recipe config."),
                   ("lightning", "Pack or bucket sequences in your DataModule's collate_fn.")),
    ),
    Rule(
        id="warmup_in_window", title="The profiled window includes warm-up",
        metric="steps.first_over_rest", above=1.5, severity="low",
        evidence=(("first_over_rest", "steps.first_over_rest"), ("first_step", "steps.first_index"),
                  ("warmup_excess_share", "steps.warmup_excess_share")),
        summary="The first profiled step (#{first_step}) takes {first_over_rest}x the median of the others: "
                "allocator growth, cuBLAS/cuDNN autotuning or compilation are in the window and skew averages.",
        fix=Fix(text="Skip the first steps with the profiler's schedule (wait/warmup) so only steady-state steps "
                     "are recorded; read the median, not the mean, meanwhile.",
                pytorch="torch.profiler.profile(schedule=torch.profiler.schedule(wait=5, warmup=2, active=3), ...)",
                hf_trainer="# in your profiling TrainerCallback:\n"
                           "schedule=torch.profiler.schedule(wait=5, warmup=2, active=3)  # prof.step() in on_step_end"),
        docs=_TORCH_PROFILER,
    ),
    Rule(
        id="memory_headroom", title="GPU memory is mostly unused",
        metric="memory.peak_used_share", below=0.5, when=has_device_memory, severity="low",
        evidence=(("peak_used_share", "memory.peak_used_share"), ("peak_used_bytes", "memory.peak_used_bytes"),
                  ("headroom_bytes", "memory.headroom_bytes"), ("total_bytes", "memory.total_bytes")),
        summary="Peak memory use is {peak_used_bytes} of {total_bytes} ({peak_used_share}): "
                "{headroom_bytes} is free.",
        fix=Fix(text="Spend the free memory on speed: a larger micro-batch (fewer accumulation steps), or turn "
                     "off gradient checkpointing (~20 % faster).",
                pytorch="# raise batch_size; model.gradient_checkpointing_disable()",
                hf_trainer="TrainingArguments(..., per_device_train_batch_size=2 * bs, gradient_accumulation_steps=ga // 2,\n"
                           "                  gradient_checkpointing=False)"),
        docs="https://huggingface.co/docs/transformers/perf_train_gpu_one",
    ),
)


def _xla_rules() -> tuple[Rule, ...]:
    try:
        from tb_llmdiag.rules_xla import XLA_RULES
    except ImportError:
        return ()
    return tuple(XLA_RULES)


def all_rules() -> tuple[Rule, ...]:
    """GPU_RULES + XLA_RULES (resolved at call time)."""
    return GPU_RULES + _xla_rules()


def __getattr__(name: str) -> Any:  # PEP 562: RULES resolves rules_xla lazily (no import cycle)
    if name == "RULES":
        return all_rules()
    raise AttributeError(name)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def fires(rule: Rule, metrics: Metrics) -> bool:
    if rule.metric is not None:
        v = lookup(metrics, rule.metric)
        if not _finite(v):
            return False
        if rule.above is not None and not v >= rule.above:
            return False
        if rule.below is not None and not v < rule.below:
            return False
    if rule.when is not None and not rule.when(metrics):
        return False
    return rule.metric is not None or rule.when is not None


def severity_of(share: float | None, fixed: str | None) -> str:
    if fixed is not None:
        return fixed
    if share is None:
        return "low"
    return "high" if share >= 0.20 else "medium" if share >= 0.05 else "low"


def finding(rule: Rule, metrics: Metrics) -> dict[str, Any]:
    """The finding dict (docs/report_schema.md Finding) of a rule that fired, worded for the run's platform."""
    flavour = dict(rule.flavours).get(run_platform(metrics)) or Flavour()
    title = flavour.title or rule.title
    fix_ = flavour.fix or rule.fix
    evidence = {label: lookup(metrics, path) for label, path in rule.evidence}
    # the summary may name any evidence; the finding keeps the lists that hold something (an empty list
    # means the trace does not record it: torch_xla graph hashes on a JAX run)
    shown = {k: v for k, v in evidence.items() if not (isinstance(v, (list, tuple)) and not v)}
    share = lookup(metrics, rule.saving)
    # savings are shares of the summed step time, so in ns they are per average (mean) step
    step = lookup(metrics, "steps.mean_ns")
    saving = None
    if _finite(share):
        share = min(max(float(share), 0.0), 1.0)
        saving = {"share": share, "ns": int(round(share * step)) if _finite(step) else None}
    else:
        share = None
    try:
        summary = (flavour.summary or rule.summary).format(**{k: fmt_value(k, v) for k, v in evidence.items()})
    except (KeyError, IndexError, ValueError):
        summary = title
    stack = lookup(metrics, "annotations.stack")
    fix: dict[str, Any] = {"text": fix_.text, "pytorch": fix_.pytorch, "hf_trainer": fix_.hf_trainer}
    stack_text = dict(rule.stack_fix).get(stack) if stack else None
    if stack_text:
        fix["stack"] = stack
        fix["stack_text"] = stack_text
    threshold = {k: v for k, v in (("above", rule.above), ("below", rule.below)) if v is not None}
    return {
        "id": rule.id,
        "severity": severity_of(share, rule.severity),
        "title": title,
        "summary": summary,
        "evidence": shown,
        "saving": saving,
        "fix": fix,
        "docs": flavour.docs or rule.docs,
        "metric": rule.metric,
        "value": lookup(metrics, rule.metric),
        "threshold": threshold or None,
    }


def applicable(metrics: Metrics, rules: Sequence[Rule]) -> list[Rule]:
    """The rules that apply to the run's platform (module docstring): rules of another platform are out, and
    a platform-neutral rule is out when a rule of the run's platform has its id (that rule owns the id)."""
    platform = run_platform(metrics)
    mine = [r for r in rules if r.platform in (None, platform)]
    owned = {r.id for r in mine if r.platform == platform}
    return [r for r in mine if r.platform == platform or r.id not in owned]


def evaluate(metrics: Metrics, rules: Sequence[Rule] | None = None) -> list[dict[str, Any]]:
    """Findings of every applicable rule that fires, in table order (``diagnosis.rank`` orders them).

    Ids are unique in the result: when two applicable rules with one id fire, the later rule's finding
    replaces the earlier one, in the earlier one's place.
    """
    out: dict[str, dict[str, Any]] = {}
    for r in applicable(metrics, all_rules() if rules is None else rules):
        if fires(r, metrics):
            out[r.id] = finding(r, metrics)
    return list(out.values())
