"""Which rules a kind of run gets, and their inference wording: declared here, applied to the tables in
``findings/table.py`` (``by_run_kind``) through the engine's one mechanism (``Rule.skip_on`` against
``engine.run_traits``, ``Rule.flavours`` keyed by a trait).

- ``TRAINING_ONLY``: advice that only means something while training (data loader, gradient accumulation and
  checkpointing, optimizer, packing the training set, steady-state training steps). Never on inference runs.
- ``WHOLE_FILE``: claims about the whole run, an absence or a maximum ("no device activity", "peak memory"),
  which the read part of a cut file cannot support. Never on a partial read.
- ``INFERENCE_RULES``: inference's own rules over the same metrics (``gemm_bound_forward``: prefill-heavy
  forward passes spend the device's time in GEMMs), skipped on training runs.
- ``INFERENCE``: the same metrics seen from an inference server or ``generate`` loop: a launch-bound decode,
  host stalls between forward calls (a blocking copy of sampled tokens), pinned input buffers, weights in the
  serving dtype. Each replaces the rule's wording on inference runs.
"""

from __future__ import annotations

import dataclasses

from tb_llmdiag.findings.engine import Fix, Flavour, Metrics, Rule, lookup

TRAINING_ONLY: frozenset[str] = frozenset(
    {
        "dataloader_stall",
        "warmup_in_window",
        "step_variance",
        "variable_shapes",
        "memory_headroom",
        "unfused_optimizer",
        "activation_checkpointing",
        "per_tensor_collectives",
        "accumulation_without_no_sync",
        "fsdp_without_prefetch",
    }
)

WHOLE_FILE: frozenset[str] = frozenset({"no_device_activity", "memory_headroom"})

_VLLM = "https://docs.vllm.ai/en/latest/configuration/optimization.html"

INFERENCE: dict[str, Flavour] = {
    "no_device_activity": Flavour(
        fix=Fix(
            text="Profile the device too: add ProfilerActivity.CUDA to the profiler's activities.",
            pytorch="from torch.profiler import profile, ProfilerActivity\n"
            "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:\n"
            "    out = model(**inputs)",
            hf_trainer="with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):\n"
            "    model.generate(**inputs, max_new_tokens=32)",
        )
    ),
    "host_bound": Flavour(
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
    ),
    "host_sync": Flavour(
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
    ),
    "recompilation": Flavour(
        title="torch.compile compiles between forward calls",
        fix=Fix(
            text="Stop recompiling for every new shape: compile with dynamic shapes (dynamic=True, or "
            "torch._dynamo.mark_dynamic on the sequence dimension), or pad requests to a few bucket lengths "
            "(vLLM/SGLang capture graphs per batch size). Raising torch._dynamo.config.cache_size_limit only "
            "hides the limit being hit.",
            pytorch="model = torch.compile(model, dynamic=True)\n"
            "# or: torch._dynamo.mark_dynamic(input_ids, 1)  before each call",
            hf_trainer="model.forward = torch.compile(model.forward, dynamic=True)\n"
            "tok(prompts, padding=True, pad_to_multiple_of=128, return_tensors='pt')  # few shapes",
        ),
    ),
    "fp32_math": Flavour(
        fix=Fix(
            text="Run the matmuls on tensor cores: load the weights in bf16 (or a quantised format), or at least "
            "allow TF32 for fp32 matmuls (Ampere and later).",
            pytorch="model = model.to(torch.bfloat16)\n"
            "# at least: torch.backends.cuda.matmul.allow_tf32 = True; torch.set_float32_matmul_precision('high')",
            hf_trainer="AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)",
        )
    ),
    "exposed_communication": Flavour(
        fix=Fix(
            text="Load every rank's trace of this run together (one folder: the job view) to see whether a "
            "straggler or the transfer costs the time; to hide it: overlap the tensor-parallel all-reduce "
            "with compute (fused all-reduce + norm kernels, custom all-reduce), or use fewer "
            "tensor-parallel ranks when the model fits.",
            pytorch="# vLLM: LLM(model, tensor_parallel_size=N)  (fewer ranks if the model fits)\n"
            "# SGLang: --tp N --enable-custom-all-reduce",
            hf_trainer="# serve with vLLM/SGLang: HF generate() has no tensor-parallel overlap",
        )
    ),
    "pageable_memcpy": Flavour(
        fix=Fix(
            text="Copy request inputs from pinned host buffers, asynchronously: allocate the input buffers "
            "once with pin_memory=True and reuse them.",
            pytorch="buf = torch.empty(max_tokens, dtype=torch.long, pin_memory=True)\n"
            "buf[:n].copy_(ids); ids_gpu = buf[:n].to(dev, non_blocking=True)",
            hf_trainer="inputs = {k: v.pin_memory().to(dev, non_blocking=True) for k, v in inputs.items()}",
        )
    ),
    "copy_heavy": Flavour(
        fix=Fix(
            text="Find the casts: load the weights in the serving dtype (bf16, or a quantised format the "
            "kernels read directly) instead of casting per forward pass, avoid .contiguous()/cat in the "
            "decode loop, and let torch.compile fuse the remaining casts.",
            pytorch="model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)\n"
            "model = torch.compile(model)",
            hf_trainer="AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)",
        )
    ),
    "tiny_kernels": Flavour(
        fix=Fix(
            text="Fuse small ops and replay them: torch.compile, CUDA graphs for the decode step, fused "
            "norm/rotary/activation kernels; a larger decode batch makes each kernel longer.",
            pytorch="model = torch.compile(model, mode='reduce-overhead')",
            hf_trainer="model.forward = torch.compile(model.forward, mode='reduce-overhead')",
        )
    ),
    "gpu_gaps": Flavour(
        summary="{long_gaps} GPU idle gaps of 500 ms or more ({long_gap_ns} in all, longest {longest_gap_ns}) "
        "between forward calls.",
        fix=Fix(
            text="Look at what the host does in the gap (timeline): request scheduling, tokenization, "
            "detokenization or a blocking copy. Overlap it with the next forward pass or move it to "
            "another process.",
            pytorch="# keep tokenization / detokenization off the thread that launches the model",
            hf_trainer="# batch requests (pipeline(..., batch_size=N)) rather than one generate() per prompt",
        ),
    ),
}


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
        ),
        summary="GEMMs and attention take {gemm_share} of device time ({gemm_ns}) and the GPU is busy {busy_share}: "
        "prefill-heavy forward passes are compute-bound, so the time is in the math itself.",
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


def by_run_kind(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """The rules with this module's declarations applied: ``skip_on`` for training-only and whole-file
    rules, and the inference wording as a flavour keyed ``"inference"``."""
    out = []
    for r in rules:
        skip = (("inference",) if r.id in TRAINING_ONLY else ()) + (("partial",) if r.id in WHOLE_FILE else ())
        flavours = r.flavours + ((("inference", INFERENCE[r.id]),) if r.id in INFERENCE and r.platform != "xla" else ())
        out.append(dataclasses.replace(r, skip_on=tuple(dict.fromkeys(r.skip_on + skip)), flavours=flavours))
    return tuple(out)
