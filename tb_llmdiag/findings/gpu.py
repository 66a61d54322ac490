"""The GPU rule table: ``GPU_RULES`` and the named predicates / savings functions its rules use; and
``INFERENCE_RULES``, inference's own rules over the same metrics (``gemm_bound_forward``: prefill-heavy forward
passes spend the device's time in GEMMs), skipped on training runs.

Kineto (torch.profiler) runs on CUDA/ROCm or CPU only; mechanics in ``findings/engine.py``. Rules marked
``platform="cuda"`` never apply to XPlane runs; the others apply to every run unless an XLA rule owns
their id (``findings/xla.py``). Which kind of run a rule skips is its ``skip_on``: training-only advice (data
loader, gradient accumulation and checkpointing, optimizer, packing the training set, steady-state training steps)
``("inference",)``; claims about the whole run, an absence or a maximum ("no device activity", "peak memory"),
``("partial",)``. Its wording on inference runs (a launch-bound decode, host stalls between forward calls, pinned
input buffers, weights in the serving dtype) is its flavour keyed ``"inference"``. docs/findings.md lists every rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tb_llmdiag.findings.attribution_rules import (
    ATTRIBUTION_RULES,
    HOST_BOUND_NOT_LAUNCH,
    HOST_SYNC_DATA_DEPENDENT,
    data_dependent_sync,
    host_spread,
    how_to_see_more,
    sync_where,
    top_is_launch,
)
from tb_llmdiag.findings.engine import Fix, Flavour, Locate, Metrics, ProfilerCost, Rule, lookup
from tb_llmdiag.findings.gpu_causes import CAUSE_RULES
from tb_llmdiag.findings.parts import casts_not_weights, knows, knows_launches_and_tokens, part_evidence
from tb_llmdiag.metrics.steps.idle import HOST_COPY_HINT, PER_SHAPE_HINTS, RECOMPILE_HINT

# Named predicates (a rule that needs more than one comparison)


def no_device(m: Metrics) -> bool:
    k = m.get("kernels") or {}
    return k.get("available") is False and "no device activity" in str(k.get("reason", ""))


def host_waits(m: Metrics) -> bool:
    return (lookup(m, "idle.host_wait_share") or 0.0) >= 0.05


def not_launch_bound(m: Metrics) -> bool:
    """What holds the GPU's idle time is an activity other than launching (the attribution's top activity)."""
    return lookup(m, "attribution.dominant") is True and not top_is_launch(m)


def syncs_every_step(m: Metrics) -> bool:
    """At least one sync per step; without steps (inference servers record none), the GPU idles >= 5 % of the
    window right after syncs (``host_sync.idle_after_sync_share``, step-independent)."""
    per_step = lookup(m, "host_sync.syncs_per_step")
    if per_step is None:
        return (lookup(m, "host_sync.idle_after_sync_share") or 0.0) >= 0.05
    return bool(per_step >= 1.0)


def follows_tokens(m: Metrics) -> bool:
    """Step time tracks tokens per step: correlation >= 0.7 over at least 5 steps (fewer say little)."""
    return (lookup(m, "steps.tokens_corr") or 0.0) >= 0.7 and (lookup(m, "steps.count") or 0) >= 5


def per_shape_work(m: Metrics) -> bool:
    """The GPU idles >= 5 % of step time while the host builds plans / compiles for new shapes."""
    return (lookup(m, "idle.host_wait_per_shape_share") or 0.0) >= 0.05


def follows_tokens_only(m: Metrics) -> bool:
    return follows_tokens(m) and not per_shape_work(m)


def shapes_cost_time(m: Metrics) -> bool:
    """Changing batch shapes cost time: per-shape host work (the evidence that leads), or step time tracking
    tokens per step."""
    return per_shape_work(m) or follows_tokens(m)


def sync_storm(m: Metrics) -> bool:
    return lookup(m, "sync_storm.storm") is True


def per_shape_saving(m: Metrics) -> float | None:
    """The per-shape host work's share of step time; not estimable (None) when there is none to remove."""
    return lookup(m, "idle.host_wait_per_shape_share") or None


def slow_calls(m: Metrics) -> bool:
    """The culprit's calls are long (>= 1 ms each): one slow operation, not launch overhead of many small ones."""
    return (lookup(m, "idle.host_wait_culprit_mean_ns") or 0) >= 1_000_000


def hint_is(*hints: str) -> Callable[[Metrics], bool]:
    """A predicate: the slow host operation's hint is one of ``hints`` (given only when its events are in the trace:
    ``metrics.steps.idle.culprit_hint``)."""

    def pred(m: Metrics) -> bool:
        return lookup(m, "idle.host_wait_culprit_hint") in hints

    pred.__name__ = "hint_is_" + "_".join(h.split()[0].lower() for h in hints)
    return pred


_SLOW_WITH_HINT = (
    "The GPU sits idle for {host_op_share} of step time ({host_op_ns}) while the host is inside {host_op} (mean call "
    "{mean_call_ns}). Likely cause, from the events inside it ({hint_events}): {hint}."
)


def copy_claims(m: Metrics) -> str:
    """``excess`` when most of the copy time is made by outlier steps' holders (a checkpoint save's device-to-host
    copies: not in the median step), else ``device``."""
    copies, outlier = lookup(m, "kernels.copy_ns") or 0, lookup(m, "outliers.copy_ns") or 0
    return "excess" if copies and outlier >= 0.5 * copies else "device"


def has_device_memory(m: Metrics) -> bool:
    return lookup(m, "memory.total_bytes") is not None


def _per_step(m: Metrics) -> list[Any]:
    return [p for p in lookup(m, "steps.per_step") or () if isinstance(p, dict)]


def outlier_step_ranges(m: Metrics) -> list[Any]:
    """Where step-time variance shows: the outlier steps (``steps.outliers``), else the slowest step."""
    per = _per_step(m)
    want = set(lookup(m, "steps.outliers") or ())
    if not want and per:
        want = {max(per, key=lambda p: p.get("duration_ns") or 0).get("index")}
    return [p for p in per if p.get("index") in want]


def first_step_holds(m: Metrics) -> str:
    """What the trace shows the first step doing that the others do not: compiling when a compile range starts in
    it (``compile.steps_hit``), else one-time work the trace does not name (no guess at which)."""
    if lookup(m, "steps.first_index") in (lookup(m, "compile.steps_hit") or ()):
        return "torch.compile compiles in it"
    return "it does one-time work the later steps do not repeat (warm-up; no event of the trace names which)"


def first_step_range(m: Metrics) -> list[Any]:
    """The first profiled step (``steps.first_index``): where the warm-up is."""
    first = lookup(m, "steps.first_index")
    return [p for p in _per_step(m) if p.get("index") == first]


# ---------------------------------------------------------------------------------------------

_TORCH_PROFILER = "https://pytorch.org/docs/stable/profiler.html"
_VLLM = "https://docs.vllm.ai/en/latest/configuration/optimization.html"

# Each rule's wording on inference runs (a flavour keyed ``"inference"``, ``engine.run_traits``): the same metrics
# seen from an inference server or ``generate`` loop.
_NO_DEVICE_ACTIVITY_INFERENCE = Flavour(
    fix=Fix(
        text="Profile the device too: add ProfilerActivity.CUDA to the profiler's activities.",
        pytorch="from torch.profiler import profile, ProfilerActivity\n"
        "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:\n"
        "    out = model(**inputs)",
        hf_trainer="with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):\n"
        "    model.generate(**inputs, max_new_tokens=32)",
    )
)
_HOST_BOUND_INFERENCE = Flavour(
    title="The GPU waits for the host to launch work (launch-bound forward passes)",
    summary="For {host_wait_share} of the time the GPU has run out of queued work and waits for the host "
    "to launch more (GPU busy {gpu_busy_share}; median kernel {kernel_median_ns}, launch call "
    "{launch_api_median_ns}); the host is busiest in {host_op} ({host_op_share}). Small decode "
    "batches make every forward pass launch-bound.",
    fix=Fix(
        text="Capture the forward pass in CUDA/HIP graphs so one launch replays it (vLLM/SGLang do so "
        "unless eager mode is forced), compile the model, and batch more requests per forward pass.",
        pytorch="model = torch.compile(model, mode='reduce-overhead')  # CUDA graphs\n"
        "# vLLM: LLM(model, enforce_eager=False); SGLang: do not pass --disable-cuda-graph",
        hf_trainer="model.generation_config.cache_implementation = 'static'\n"
        "model.forward = torch.compile(model.forward, mode='reduce-overhead')",
    ),
    docs=_VLLM,
)
_HOST_SYNC_INFERENCE = Flavour(
    title="The host blocks between forward calls",
    summary="The host blocks in {longest_call} ({longest_call_kind}) for up to {longest_ns}: "
    "{blocked_share} of the time, while the GPU idles {idle_after_sync_share} after syncs; "
    "removing the wait could save up to {saving_share}.",
    fix=Fix(
        text="Do not read device values on the host between forward calls: keep sampled token ids on the "
        "GPU and copy them asynchronously (pinned buffer, non_blocking=True) one step behind, and "
        "check stop conditions on the device.",
        pytorch="out = torch.empty(n, dtype=torch.long, pin_memory=True)\n"
        "out.copy_(next_tokens, non_blocking=True); ev = torch.cuda.Event(); ev.record()\n"
        "# ... launch the next forward pass, then ev.synchronize() before reading out",
        hf_trainer="# generate(): avoid per-token stopping criteria that call .item();\n"
        "# serve with vLLM/SGLang, whose schedulers overlap the copy with the next step",
    ),
    docs="https://pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html",
)
_PAGEABLE_MEMCPY_INFERENCE = Flavour(
    fix=Fix(
        text="Copy request inputs from pinned host buffers, asynchronously: allocate the input buffers "
        "once with pin_memory=True and reuse them.",
        pytorch="buf = torch.empty(max_tokens, dtype=torch.long, pin_memory=True)\n"
        "buf[:n].copy_(ids); ids_gpu = buf[:n].to(dev, non_blocking=True)",
        hf_trainer="inputs = {k: v.pin_memory().to(dev, non_blocking=True) for k, v in inputs.items()}",
    )
)
_COPY_HEAVY_INFERENCE = Flavour(
    fix=Fix(
        text="Find the casts: load the weights in the serving dtype (bf16, or a quantised format the "
        "kernels read directly) instead of casting per forward pass, avoid .contiguous()/cat in the "
        "decode loop, and let torch.compile fuse the remaining casts.",
        pytorch="model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)\n"
        "model = torch.compile(model)",
        hf_trainer="AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)",
    )
)
_TINY_KERNELS_INFERENCE = Flavour(
    fix=Fix(
        text="Fuse small ops and replay them: torch.compile, CUDA graphs for the decode step, fused "
        "norm/rotary/activation kernels; a larger decode batch makes each kernel longer.",
        pytorch="model = torch.compile(model, mode='reduce-overhead')",
        hf_trainer="model.forward = torch.compile(model.forward, mode='reduce-overhead')",
    )
)
_GPU_GAPS_INFERENCE = Flavour(
    summary="{long_gaps} GPU idle gaps of 500 ms or more ({long_gap_ns} in all, longest {longest_gap_ns}) "
    "between forward calls.",
    fix=Fix(
        text="Look at what the host does in the gap (timeline): request scheduling, tokenization, "
        "detokenization or a blocking copy. Overlap it with the next forward pass or move it to "
        "another process.",
        pytorch="# keep tokenization / detokenization off the thread that launches the model",
        hf_trainer="# batch requests (pipeline(..., batch_size=N)) rather than one generate() per prompt",
    ),
)


# a declared table, one entry per row: left as laid out
# fmt: off
GPU_RULES: tuple[Rule, ...] = (
    Rule(
        id="no_device_activity", title="No GPU activity in the trace",
        metric=None, when=no_device, severity="high", skip_on=("partial",),
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
            docs="https://pytorch.org/xla/master/learn/pjrt.html")), ("inference", _NO_DEVICE_ACTIVITY_INFERENCE)),
    ),
    Rule(
        id="dataloader_stall", claims="idle", platform="cuda", title="The GPU waits for the data loader",
        skip_on=("inference",), locate=Locate("family", "dataloader"), step_part="data_loader_ns",
        metric="dataloader.stall_share", above=0.05, saving="dataloader.stall_share",
        evidence=(("stall_share", "dataloader.stall_share"), ("stall_ns", "dataloader.stall_ns"),
                  ("loader_host_share", "dataloader.host_share"), ("iterator", "dataloader.iterator")),
        summary="The GPU sits idle in the data loader for {stall_share} of step time "
                "({loader_host_share} of step time is spent fetching batches; batches built {iterator}).",
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
        id="host_bound", claims="idle", symptom=True, platform="cuda", title="The GPU waits for the host to launch work",
        source="attribution.top_source", host_floor="fraction", profiler=ProfilerCost(host_time=True),
        locate=Locate("chain", "attribution.top_chain"), step_part="host_wait_ns",
        flavours=(("inference", _HOST_BOUND_INFERENCE),),
        metric="idle.host_wait_share", above=0.10, saving="idle.host_wait_share",
        evidence=(("host_wait_share", "idle.host_wait_share"), ("gpu_busy_share", "idle.busy_share"),
                  ("launches_per_step", "launch.launches_per_step"), ("kernel_median_ns", "launch.kernel_median_ns"),
                  ("launch_api_median_ns", "launch.launch_api_median_ns"), ("host_is", host_spread),
                  ("top_share", "attribution.top_share"), ("launches_part", "anatomy.launches_part_words"),
                  ("tokens_per_step", "steps.tokens_per_step_median")),
        summary="For {host_wait_share} of step time the GPU has run out of queued work and waits for the host to "
                "launch more (GPU busy {gpu_busy_share}; {launches_per_step} launches per step, median kernel "
                "{kernel_median_ns}); while it waits the host is {host_is}.",
        variants=((not_launch_bound, HOST_BOUND_NOT_LAUNCH), (knows_launches_and_tokens, Flavour(
            summary="For {host_wait_share} of step time the GPU has run out of queued work and waits for the host to "
                    "launch more (GPU busy {gpu_busy_share}; {launches_per_step} launches per step, median kernel "
                    "{kernel_median_ns}, {tokens_per_step} tokens a step; most launches from {launches_part}); while it "
                    "waits the host is {host_is}.")), (knows("launches"), Flavour(
            summary="For {host_wait_share} of step time the GPU has run out of queued work and waits for the host to "
                    "launch more (GPU busy {gpu_busy_share}; {launches_per_step} launches per step, median kernel "
                    "{kernel_median_ns}; most launches from {launches_part}); while it waits the host is {host_is}."))),
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
        id="host_sync", claims="idle", platform="cuda", title="Host syncs drain the GPU queue every step",
        source="attribution.sync_source", profiler=ProfilerCost(spread_over_idle=True),
        locate=Locate("family", "sync_api"), step_part="sync_ns", flavours=(("inference", _HOST_SYNC_INFERENCE),),
        metric="sync_storm.saving_share", above=0.02, when=syncs_every_step,
        saving="sync_storm.saving_share",
        evidence=(("saving_share", "sync_storm.saving_share"), ("syncs_per_step", "host_sync.syncs_per_step"),
                  ("item_calls_per_step", "host_sync.item_calls_per_step"), ("blocked_share", "host_sync.blocked_share"),
                  ("idle_after_sync_share", "host_sync.idle_after_sync_share"), ("longest_ns", "host_sync.longest_ns"),
                  ("longest_call", "host_sync.longest_call"), ("longest_call_kind", "host_sync.longest_call_kind"),
                  ("edge_syncs", "sync_storm.edge_syncs"), ("loop_syncs_per_step", "sync_storm.loop_syncs_per_step"),
                  ("trigger_op", "sync_storm.trigger_op"), ("after_op", "sync_storm.after_op"),
                  ("loop_host_ns", "sync_storm.loop_host_ns"),
                  ("loop_idle_share", "sync_storm.loop_idle_share"),
                  ("where", sync_where), ("sync_share", "attribution.sync_idle_share")),
        summary="{syncs_per_step} host syncs per step ({item_calls_per_step} .item() calls on GPU tensors) block the "
                "host for {blocked_share} of step time (longest {longest_ns}) and drain the GPU queue; removing "
                "them could save up to {saving_share} ({edge_syncs} step-edge synchronize calls of a timing harness "
                "are not counted).",
        variants=((data_dependent_sync, HOST_SYNC_DATA_DEPENDENT), (sync_storm, Flavour(
            title="A loop of host syncs stalls every step",
            summary="A loop of {loop_syncs_per_step} syncs per step ({trigger_op} after {after_op}) holds the host "
                    "for {loop_host_ns} a step while the GPU idles {loop_idle_share} of step time inside it; "
                    "removing the per-item reads could save up to {saving_share}.",
            fix=Fix(text="Read values back once, not once per tensor: stack the per-parameter values on the device "
                         "(torch.stack / torch._foreach_norm) and call .item() / .tolist() once, every N steps.",
                    pytorch="norms = torch.stack(torch._foreach_norm([p.grad for p in params]))\n"
                            "if step % 50 == 0: log(norms.tolist())   # one sync instead of one per parameter",
                    hf_trainer="# in your callback: compute the norms as one tensor and log every logging_steps\n"
                               "TrainingArguments(..., logging_steps=50)"))),),
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
        id="slow_host_op", claims="idle", platform="cuda", title="One host operation keeps the GPU waiting",
        profiler=ProfilerCost(host_time=True), locate=Locate("op", "idle.host_wait_culprit"), step_part="host_wait_ns",
        source="idle.host_wait_culprit_source",
        metric="idle.host_wait_culprit_share", above=0.10, when=slow_calls, saving="idle.host_wait_culprit_share",
        evidence=(("host_op", "idle.host_wait_culprit"), ("host_op_share", "idle.host_wait_culprit_share"),
                  ("host_op_ns", "idle.host_wait_culprit_ns"), ("mean_call_ns", "idle.host_wait_culprit_mean_ns"),
                  ("hint", "idle.host_wait_culprit_hint"), ("hint_events", "idle.host_wait_culprit_hint_events"),
                  ("see_more", how_to_see_more)),
        summary="The GPU sits idle for {host_op_share} of step time ({host_op_ns}) while the host is inside {host_op} "
                "(mean call {mean_call_ns}). No event inside its calls says why it is slow (no compile range, no new "
                "input shape, no host-to-device copy): {see_more}.",
        variants=((hint_is(*PER_SHAPE_HINTS), Flavour(summary=_SLOW_WITH_HINT, fix=Fix(
                       text="Give {host_op} fixed input shapes: pad batches (or prompts) to a fixed length or a few "
                            "bucket lengths, a multiple of 64/128, or pack sequences; each new shape costs it a plan "
                            "build or autotuning on the host.",
                       pytorch="# fixed shapes: tok(..., padding='max_length', max_length=L)  or  pad_to_multiple_of=128\n"
                               "torch.backends.cuda.enable_cudnn_sdp(False)  # if the culprit is cuDNN attention",
                       hf_trainer="DataCollatorForSeq2Seq(tok, pad_to_multiple_of=128)  # or SFTConfig(packing=True)"),
                       docs="https://pytorch.org/docs/stable/backends.html#torch.backends.cuda.enable_cudnn_sdp")),
                  (hint_is(RECOMPILE_HINT), Flavour(summary=_SLOW_WITH_HINT, fix=Fix(
                       text="Stop torch.compile recompiling inside {host_op}: keep input shapes static (pad to a few "
                            "bucket lengths) or compile with dynamic shapes.",
                       pytorch="model = torch.compile(model, dynamic=True)\n"
                               "# or: torch._dynamo.mark_dynamic(batch['input_ids'], 1)  before each call",
                       hf_trainer="DataCollatorWithPadding(tok, pad_to_multiple_of=128)  # few distinct shapes"),
                       docs="https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html")),
                  (hint_is(HOST_COPY_HINT), Flavour(summary=_SLOW_WITH_HINT, fix=Fix(
                       text="Copy to the GPU from pinned host memory, asynchronously, so {host_op} does not block "
                            "the host: pinned batches from the DataLoader and .to(device, non_blocking=True).",
                       pytorch="loader = DataLoader(ds, ..., pin_memory=True)\n"
                               "batch = {k: v.to(dev, non_blocking=True) for k, v in batch.items()}",
                       hf_trainer="TrainingArguments(..., dataloader_pin_memory=True)  # the default; keep it on"),
                       docs="https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html"))),
        fix=Fix(text="Find out what {host_op} does on the host: {see_more}; then take that work off the step's "
                     "critical path.",
                pytorch="torch.profiler.profile(..., with_stack=True, record_shapes=True)\n"
                        "# or: with torch.profiler.record_function('suspect'): ...",
                hf_trainer="# in your profiling callback: torch.profiler.profile(..., with_stack=True)"),
        docs=_TORCH_PROFILER,
    ),
    Rule(
        id="pageable_memcpy", claims="idle", platform="cuda", title="Host-to-device copies use pageable memory",
        locate=Locate("pageable_htod"), flavours=(("inference", _PAGEABLE_MEMCPY_INFERENCE),),
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
        id="copy_heavy", claims=copy_claims, title="Copies and dtype casts take a large share of GPU time",
        flavours=(("inference", _COPY_HEAVY_INFERENCE),),
        metric="kernels.copy_share", above=0.10, saving="kernels.copy_step_share", when=casts_not_weights,
        evidence=(("copy_share", "kernels.copy_share"), ("gemm_share", "kernels.gemm_share"),
                  ("copy_vs_gemm_ratio", "kernels.copy_vs_gemm_ratio"), ("copy_ns", "kernels.copy_ns"),
                  *part_evidence("copy")),
        summary="Copy/convert kernels and memcpys take {copy_share} of device time against {gemm_share} for "
                "GEMMs and attention (ratio {copy_vs_gemm_ratio}).",
        variants=((knows("copy"), Flavour(
            summary="Copy/convert kernels and memcpys take {copy_share} of device time against {gemm_share} for "
                    "GEMMs and attention (ratio {copy_vs_gemm_ratio}), most in {copy_part} ({copy_part_share} of "
                    "it).")),),
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
        id="tiny_kernels", claims="idle", symptom=True, platform="cuda", title="Most kernels are too small to keep the GPU busy",
        host_floor="fraction", profiler=ProfilerCost(host_time=True), flavours=(("inference", _TINY_KERNELS_INFERENCE),),
        metric="launch.tiny_kernel_share", above=0.5, when=host_waits, saving="launch.tiny_kernel_saving_share",
        evidence=(("tiny_kernel_share", "launch.tiny_kernel_share"), ("tiny_kernels_per_step", "launch.tiny_kernels_per_step"),
                  ("kernel_median_ns", "launch.kernel_median_ns"), ("launch_api_median_ns", "launch.launch_api_median_ns")),
        # the part making the most launches is named by host_bound, which this symptom accompanies (host_waits): the
        # diagnosis an agent reads stays within its budget without saying it twice
        summary="{tiny_kernel_share} of kernels run under 10 µs ({tiny_kernels_per_step} per step, median "
                "{kernel_median_ns}), about as long as launching them ({launch_api_median_ns} per launch call).",
        fix=Fix(text="Fuse small ops: torch.compile, fused optimizers (foreach/fused AdamW), fused LoRA/Liger "
                     "kernels; a bigger batch makes each kernel longer.",
                pytorch="model = torch.compile(model)\nopt = torch.optim.AdamW(params, fused=True)",
                hf_trainer="TrainingArguments(..., torch_compile=True, optim=\"adamw_torch_fused\", use_liger_kernel=True)"),
        docs="https://pytorch.org/docs/stable/torch.compiler.html",
    ),
    Rule(
        id="gpu_gaps", claims="excess", symptom=True, title="The GPU sits idle for long stretches",
        locate=Locate("long_gaps"), flavours=(("inference", _GPU_GAPS_INFERENCE),),
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
        id="step_variance", claims="excess", symptom=True, title="Step time varies from step to step",
        skip_on=("inference",),
        metric="steps.cv_excluding_first", above=0.15, saving="steps.mean_excess_share",
        ranges=outlier_step_ranges,
        evidence=(("cv", "steps.cv_excluding_first"), ("median_ns", "steps.median_ns"), ("max_ns", "steps.max_ns"),
                  ("outliers", "steps.outlier_count"), ("outlier_cause", "steps.outlier_main_cause"),
                  ("mean_excess_share", "steps.mean_excess_share"),
                  ("slowest", "outliers.summary")),
        summary="Step time varies by {cv} (coefficient of variation; median {median_ns}, max {max_ns}, "
                "{outliers} outlier steps; main outlier cause: {outlier_cause}): throughput and ETAs are unreliable. "
                "{slowest}.",
        fix=Fix(text="Find what differs in the slow steps (timeline): sequence length (pad to a fixed multiple or "
                     "pack), periodic logging/eval/checkpoint saves, recompiles, or a data-loader hiccup.",
                pytorch="tok(batch, padding='max_length', max_length=L, pad_to_multiple_of=64)",
                hf_trainer="DataCollatorWithPadding(tok, pad_to_multiple_of=64)  # or SFTConfig(packing=True)"),
        docs=None,
    ),
    Rule(
        id="variable_shapes", claims="idle", title="Every new batch shape costs host work while the GPU waits",
        skip_on=("inference",), profiler=ProfilerCost(host_time=True),
        locate=Locate("op", "idle.host_wait_per_shape_op"), step_part="host_wait_ns",
        source="idle.host_wait_per_shape_source", metric="steps.tokens_cv", above=0.1, when=shapes_cost_time,
        saving=per_shape_saving,
        severity="medium",
        evidence=(("tokens_cv", "steps.tokens_cv"), ("tokens_corr", "steps.tokens_corr"), ("steps", "steps.count"),
                  ("tokens_per_step_median", "steps.tokens_per_step_median"),
                  ("per_shape_op", "idle.host_wait_per_shape_op"),
                  ("per_shape_share", "idle.host_wait_per_shape_share")),
        summary="The GPU idles {per_shape_share} of step time while the host is in {per_shape_op} for batch shapes it "
                "has not seen before (tokens per step vary by {tokens_cv}; correlation of step time with tokens "
                "{tokens_corr} over {steps} steps).",
        variants=((follows_tokens_only, Flavour(
            title="Step time follows the padded sequence length",
            summary="Tokens per step (batch x padded length) vary by {tokens_cv} and step time follows them "
                    "(correlation {tokens_corr} over {steps} steps): padding and uneven lengths set the step time.")),),
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
        id="warmup_in_window", title="The profiled window includes warm-up", skip_on=("inference",),
        metric="steps.first_over_rest", above=1.5, severity="low", ranges=first_step_range,
        evidence=(("first_over_rest", "steps.first_over_rest"), ("first_step", "steps.first_index"),
                  ("warmup_excess_share", "steps.warmup_excess_share"), ("first_step_holds", first_step_holds)),
        summary="The first profiled step (#{first_step}) takes {first_over_rest}x the median of the others: "
                "{first_step_holds}, and it skews averages.",
        fix=Fix(text="Skip the first steps with the profiler's schedule (wait/warmup) so only steady-state steps "
                     "are recorded; read the median, not the mean, meanwhile.",
                pytorch="torch.profiler.profile(schedule=torch.profiler.schedule(wait=5, warmup=2, active=3), ...)",
                hf_trainer="# in your profiling TrainerCallback:\n"
                           "schedule=torch.profiler.schedule(wait=5, warmup=2, active=3)  # prof.step() in on_step_end"),
        docs=_TORCH_PROFILER,
    ),
    Rule(
        id="memory_headroom", title="GPU memory is mostly unused", skip_on=("inference", "partial"),
        metric="memory.peak_used_share", below=0.5, when=has_device_memory, severity="low",
        evidence=(("peak_used_share", "memory.peak_used_share"), ("peak_used_bytes", "memory.peak_used_bytes"),
                  ("headroom_bytes", "memory.headroom_bytes"), ("total_bytes", "memory.total_bytes")),
        summary="Peak memory use is {peak_used_bytes} of {total_bytes} ({peak_used_share}): "
                "{headroom_bytes} is free.",
        fix=Fix(text="Spend the free memory on speed: a larger micro-batch with fewer gradient-accumulation steps "
                     "(the same tokens per optimizer step, fewer and longer kernels).",
                pytorch="# raise batch_size, lower the accumulation steps by the same factor",
                hf_trainer="TrainingArguments(..., per_device_train_batch_size=2 * bs, gradient_accumulation_steps=ga // 2)"),
        docs="https://huggingface.co/docs/transformers/perf_train_gpu_one",
    ),
) + CAUSE_RULES + ATTRIBUTION_RULES
# fmt: on


def busy_device(m: Metrics) -> bool:
    """The device is busy >= 80 % of the window: the forward passes, not the host, set the pace."""
    return (lookup(m, "idle.busy_share") or 0.0) >= 0.8


#: Inference's own view of the same metrics: rules only inference runs get (``skip_on`` training).
INFERENCE_RULES: tuple[Rule, ...] = (
    Rule(
        id="gemm_bound_forward",
        platform="cuda",
        skip_on=("training",),
        severity="low",
        title="The forward passes are GEMM-bound",
        metric="kernels.gemm_share",
        above=0.6,
        when=busy_device,
        evidence=(
            ("gemm_share", "kernels.gemm_share"),
            ("busy_share", "idle.busy_share"),
            ("gemm_ns", "kernels.gemm_ns"),
            *part_evidence("gemm"),
        ),
        summary="GEMMs and attention take {gemm_share} of device time ({gemm_ns}) and the GPU is busy {busy_share}: "
        "prefill-heavy forward passes are compute-bound, so the time is in the math itself.",
        variants=(
            (
                knows("gemm"),
                Flavour(
                    summary="GEMMs and attention take {gemm_share} of device time ({gemm_ns}), most in {gemm_part} "
                    "({gemm_part_share} of GEMM time), and the GPU is busy {busy_share}: prefill-heavy forward passes "
                    "are compute-bound, so the time is in the math itself."
                ),
            ),
        ),
        fix=Fix(
            text="Make each GEMM cheaper: FP8 (H100, MI300) or INT8/INT4 weight quantisation with kernels that read "
            "it directly, FP8 KV cache for long contexts, or more tensor-parallel GPUs; check that the GEMMs "
            "run the tuned library kernels (hipBLASLt / cuBLASLt), not a fallback.",
            pytorch="# vLLM: LLM(model, quantization='fp8', kv_cache_dtype='fp8')\n"
            "# SGLang: --quantization fp8 --kv-cache-dtype fp8_e5m2",
            hf_trainer="from transformers import BitsAndBytesConfig\n"
            "AutoModelForCausalLM.from_pretrained(name, quantization_config=BitsAndBytesConfig(load_in_8bit=True))",
        ),
        docs="https://docs.vllm.ai/en/latest/features/quantization/fp8.html",
    ),
)
