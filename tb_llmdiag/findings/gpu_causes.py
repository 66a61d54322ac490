"""The cause rules of issue #14 (Kineto runs): ``CAUSE_RULES`` = recompilation, fp32_math, unfused_optimizer,
activation_checkpointing, with their named predicates. ``findings/gpu.py`` appends them to ``GPU_RULES``; they
read the Kineto-only cause topics (``metrics/topics.py``: ``compile``, ``precision``, ``optimizer``,
``checkpointing``).
docs/findings.md lists them.
"""

from __future__ import annotations

from tb_llmdiag.findings.engine import Fix, Flavour, Metrics, ProfilerCost, Rule, lookup
from tb_llmdiag.findings.parts import fp32_elsewhere, knows, part_evidence


def compiles_in_loop(m: Metrics) -> bool:
    """A recompile: a compile id C > 0, or a compile in a profiled step other than the first one (a first compile
    in the first profiled step is warm-up)."""
    hit = lookup(m, "compile.steps_hit") or []
    first = lookup(m, "steps.first_index")
    return (
        (lookup(m, "compile.max_recompile_index") or 0) >= 1
        or bool([i for i in hit if i != first])
        or (not hit and (lookup(m, "compile.count") or 0) >= 1)
    )


def compile_claims(m: Metrics) -> str:
    """``idle`` when the median step compiles (half the steps or more), else ``excess``."""
    return str(lookup(m, "compile.claims") or "excess")


def recompute_claims(m: Metrics) -> str:
    """``idle`` when the recompute costs more host time than GPU time (a launch-bound step), else ``device``."""
    return str(lookup(m, "checkpointing.claims") or "device")


def mostly_fp32(m: Metrics) -> bool:
    """Most matmul time is fp32, and no part rule explains it (a slow attention backend's upcast, one fp32 part:
    ``findings/parts.py``)."""
    return (lookup(m, "precision.fp32_of_matmul_share") or 0.0) >= 0.5 and fp32_elsewhere(m)


def for_loop_optimizer(m: Metrics) -> bool:
    return (
        lookup(m, "optimizer.implementation") == "for_loop" and (lookup(m, "optimizer.launches_per_step") or 0) >= 100
    )


def checkpointing_on(m: Metrics) -> bool:
    return lookup(m, "checkpointing.on") is True


def ample_memory(m: Metrics) -> bool:
    return (lookup(m, "memory.peak_used_share") or 1.0) < 0.5


# their wording on inference runs (a flavour keyed ``"inference"``)
_RECOMPILATION_INFERENCE = Flavour(
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
)
_FP32_MATH_INFERENCE = Flavour(
    fix=Fix(
        text="Run the matmuls on tensor cores: load the weights in bf16 (or a quantised format), or at least "
        "allow TF32 for fp32 matmuls (Ampere and later).",
        pytorch="model = model.to(torch.bfloat16)\n"
        "# at least: torch.backends.cuda.matmul.allow_tf32 = True; torch.set_float32_matmul_precision('high')",
        hf_trainer="AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)",
    )
)


CAUSE_RULES: tuple[Rule, ...] = (
    Rule(
        id="recompilation",
        platform="cuda",
        claims=compile_claims,
        flavours=(("inference", _RECOMPILATION_INFERENCE),),
        title="torch.compile compiles inside the training loop",
        metric="compile.share",
        above=0.02,
        when=compiles_in_loop,
        saving="compile.share",
        evidence=(
            ("compiles", "compile.count"),
            ("compiled_ids", "compile.compiled_ids"),
            ("compile_ns", "compile.time_ns"),
            ("compile_share", "compile.share"),
            ("steps_hit", "compile.steps_hit"),
            ("cause", "compile.cause"),
            ("new_shape_steps", "compile.new_shape_steps"),
            ("max_recompile_index", "compile.max_recompile_index"),
            ("longest_ns", "compile.longest_ns"),
        ),
        summary="torch.compile compiles {compiles} time(s) inside the profiled steps (compile ids {compiled_ids}; F/C "
        "with C > 0 is a recompile of frame F): {compile_ns}, {compile_share} of step time (longest "
        "{longest_ns}) in steps {steps_hit}. Why: {cause}.",
        fix=Fix(
            text="Stop recompiling for every new shape: compile with dynamic shapes (dynamic=True, or "
            "torch._dynamo.mark_dynamic on the sequence dimension), or pad batches to a few fixed lengths "
            "(buckets, pad_to_multiple_of). Raising torch._dynamo.config.cache_size_limit only hides the "
            "limit being hit: it is a stopgap, the compiles still cost their time.",
            pytorch="model = torch.compile(model, dynamic=True)\n"
            "# or: torch._dynamo.mark_dynamic(batch['input_ids'], 1)  before each call\n"
            "# or pad: tok(..., padding='longest', pad_to_multiple_of=128)",
            hf_trainer="TrainingArguments(..., torch_compile=True)\n"
            "DataCollatorWithPadding(tok, pad_to_multiple_of=128)  # few distinct shapes\n"
            "# stopgap only: torch._dynamo.config.cache_size_limit = 64",
        ),
        docs="https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html",
    ),
    Rule(
        id="fp32_math",
        platform="cuda",
        claims="device",
        flavours=(("inference", _FP32_MATH_INFERENCE),),
        title="GEMMs run in plain fp32 (no TF32, no bf16)",
        metric="precision.fp32_matmul_share",
        above=0.10,
        when=mostly_fp32,
        saving="precision.saving_share",
        evidence=(
            ("fp32_share", "precision.fp32_matmul_share"),
            ("fp32_of_matmul_share", "precision.fp32_of_matmul_share"),
            ("fp32_ns", "precision.fp32_matmul_ns"),
            ("top_kernel", "precision.top_kernel"),
            ("device", "precision.device"),
            ("speedup_ratio", "precision.speedup_ratio"),
            ("saving_share", "precision.saving_share"),
            *part_evidence("fp32_gemm"),
        ),
        summary="{fp32_share} of GPU time is GEMMs / convolutions in fp32 without tensor cores ({fp32_of_matmul_share} "
        "of matmul time; top kernel {top_kernel}); on {device} bf16 tensor cores have {speedup_ratio}x the "
        "fp32 peak, so mixed precision could save up to {saving_share} of step time.",
        variants=(
            (
                knows("fp32_gemm"),
                Flavour(
                    summary="{fp32_share} of GPU time is GEMMs / convolutions in fp32 without tensor cores "
                    "({fp32_of_matmul_share} of matmul time), most in {fp32_gemm_part} ({fp32_gemm_part_share} of "
                    "it; top kernel {top_kernel}); on {device} bf16 tensor cores have {speedup_ratio}x the fp32 "
                    "peak, so mixed precision could save up to {saving_share} of step time.",
                    fix=Fix(
                        text="Run the matmuls on tensor cores, {fp32_gemm_part}'s first: bf16 autocast (or load the "
                        "model in bf16), or at least allow TF32 for fp32 matmuls (Ampere and later).",
                        pytorch="with torch.autocast('cuda', dtype=torch.bfloat16):\n    loss = model(**batch).loss\n"
                        "# at least: torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True\n"
                        "# or: torch.set_float32_matmul_precision('high')",
                        hf_trainer="TrainingArguments(..., bf16=True)  # fp16=True before Ampere\n"
                        "TrainingArguments(..., tf32=True)   # at least",
                    ),
                ),
            ),
        ),
        fix=Fix(
            text="Run the matmuls on tensor cores: bf16 autocast (or load the model in bf16), or at least allow "
            "TF32 for fp32 matmuls (Ampere and later).",
            pytorch="with torch.autocast('cuda', dtype=torch.bfloat16):\n    loss = model(**batch).loss\n"
            "# at least: torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True\n"
            "# or: torch.set_float32_matmul_precision('high')",
            hf_trainer="TrainingArguments(..., bf16=True)  # fp16=True before Ampere\n"
            "TrainingArguments(..., tf32=True)   # at least",
        ),
        docs="https://pytorch.org/docs/stable/amp.html",
    ),
    Rule(
        id="unfused_optimizer",
        platform="cuda",
        claims="idle",
        skip_on=("inference",),
        profiler=ProfilerCost(host_time=True),
        title="The optimizer updates one parameter at a time (for-loop)",
        metric="optimizer.saving_share",
        above=0.02,
        when=for_loop_optimizer,
        saving="optimizer.saving_share",
        evidence=(
            ("optimizer", "optimizer.optimizer"),
            ("implementation", "optimizer.implementation"),
            ("launches_per_step", "optimizer.launches_per_step"),
            ("host_ns", "optimizer.host_ns"),
            ("host_share", "optimizer.host_share"),
            ("device_ns", "optimizer.device_ns"),
            ("saving_share", "optimizer.saving_share"),
        ),
        summary="{optimizer}.step runs as a for-loop over parameters: {launches_per_step} kernel launches per step and "
        "{host_share} of step time on the host ({host_ns}) against {device_ns} of GPU work; a fused or "
        "foreach step could save up to {saving_share}.",
        fix=Fix(
            text="Use the fused (one kernel per parameter group) or foreach implementation of the optimizer.",
            pytorch="opt = torch.optim.AdamW(params, lr=lr, fused=True)   # or foreach=True",
            hf_trainer='TrainingArguments(..., optim="adamw_torch_fused")',
        ),
        docs="https://pytorch.org/docs/stable/optim.html#algorithms",
    ),
    Rule(
        id="activation_checkpointing",
        platform="cuda",
        claims=recompute_claims,
        skip_on=("inference",),
        title="Activation checkpointing recomputes the forward pass in backward",
        metric="checkpointing.recompute_share",
        above=0.0,
        when=checkpointing_on,
        saving="checkpointing.recompute_share",
        evidence=(
            ("recompute_ops_per_step", "checkpointing.recompute_ops_per_step"),
            ("recompute_share", "checkpointing.recompute_share"),
            ("recompute_host_ns", "checkpointing.recompute_host_ns"),
            ("recompute_device_ns", "checkpointing.recompute_device_ns"),
            ("checkpoint_frames", "checkpointing.checkpoint_frames"),
            ("peak_used_share", "memory.peak_used_share"),
            ("headroom_bytes", "memory.headroom_bytes"),
        ),
        summary="{recompute_ops_per_step} forward operators per step run again inside backward ({recompute_host_ns} "
        "on the host, {recompute_device_ns} of GPU work: up to {recompute_share} of step time); peak memory "
        "use is {peak_used_share} of the device ({headroom_bytes} free).",
        fix=Fix(
            text="Checkpointing trades compute for memory. Memory is tight here: checkpoint only some layers "
            "(selective checkpointing: every other block, or only attention) rather than all of them.",
            pytorch="# checkpoint every other block only:\n"
            "for i, blk in enumerate(model.layers): blk.use_checkpoint = (i % 2 == 0)",
            hf_trainer="TrainingArguments(..., gradient_checkpointing=True,\n"
            '                  gradient_checkpointing_kwargs={"use_reentrant": False})  # fewer layers if the model allows',
        ),
        docs="https://pytorch.org/docs/stable/checkpoint.html",
        variants=(
            (
                ample_memory,
                Flavour(
                    title="Activation checkpointing recomputes the forward pass though memory is free",
                    fix=Fix(
                        text="Peak memory leaves room: turn activation checkpointing off (the recompute goes away), or "
                        "checkpoint only some layers (selective checkpointing) if the larger activations do not fit.",
                        pytorch="model.gradient_checkpointing_disable()  # HF models\n"
                        "# plain PyTorch: call blocks directly instead of torch.utils.checkpoint.checkpoint(blk, x)",
                        hf_trainer="TrainingArguments(..., gradient_checkpointing=False)",
                    ),
                ),
            ),
        ),
    ),
)
