"""Causes named at a model part (#37): ``PART_RULES``, rules that read the ``anatomy`` topic (``metrics/anatomy/topic.py``,
``metrics/anatomy/causes.py``), and the named predicates and wordings the existing rules use to name the part that
holds their time (``names_part``).

- ``attention_backend``: the core attention (scaled dot-product attention) runs on the math backend (or eagerly, as
  softmax and batched GEMMs): its saving is the core's time less what a fused kernel doing the same score GEMMs would
  take at this trace's own GEMM speed (``anatomy.parts.attention.core_saving_share``).
- ``fp32_part``: one part runs its GEMMs in fp32 while the model's other GEMMs run on tensor cores (a part kept in
  fp32 in a bf16 model); its saving is the efficiency what-if of that part (its FLOPs at the trace's GEMM speed).
- ``weight_casts``: casts launched inside GEMM operators (weights stored in another dtype, cast on every call: autocast
  over fp32 weights), named at the part whose GEMMs launch them; its saving is their time.
- ``lora_adapters``: the LoRA adapters' share of GPU time far above their share of the FLOPs (small GEMMs, many
  launches): no saving of its own (the host-bound finding holds the idle time their launches cause).
Kineto runs on CUDA only (``platform="cuda"``): the anatomy topic reads host call chains.
"""

from __future__ import annotations

from collections.abc import Callable

from tb_llmdiag.findings.engine import Fix, Flavour, Metrics, Rule, lookup

#: ``lora_adapters`` fires when the adapters hold at least this share of GPU time (a fifth)
LORA_ABOVE = 0.2
#: a part's time is "far above" its FLOP share at this ratio
LORA_TIME_OVER_FLOPS = 3.0
#: ``weight_casts`` fires at this share of the profiled time
WEIGHT_CASTS_ABOVE = 0.03
#: backends whose core attention materialises the score matrix
SLOW_BACKENDS = ("math", "eager")


def slow_attention(m: Metrics) -> bool:
    """The attention part's leading backend is a slow one (``SLOW_BACKENDS``)."""
    return lookup(m, "anatomy.parts.attention.backend") in SLOW_BACKENDS


def eager_attention(m: Metrics) -> bool:
    return bool(lookup(m, "anatomy.parts.attention.backend") == "eager")


def fp32_in_slow_attention(m: Metrics) -> bool:
    """Most fp32 GEMM time is the attention's, on a slow backend: the math path's upcast, not the model's dtype."""
    return lookup(m, "anatomy.fp32_gemm_part") == "attention" and slow_attention(m)


def one_fp32_part(m: Metrics) -> bool:
    """The part with the most fp32 GEMM time runs in fp32 while another part's GEMMs run faster in a lower precision
    (``anatomy.reference_part``): a part kept in fp32 in a lower-precision model; attention on a slow backend is
    ``attention_backend``'s."""
    part = lookup(m, "anatomy.fp32_gemm_part")
    ref = lookup(m, "anatomy.reference_part")
    fp32 = lookup(m, "anatomy.fp32_gemm_part_dtype") == "fp32"
    return part is not None and fp32 and ref is not None and ref != part and not fp32_in_slow_attention(m)


def fp32_elsewhere(m: Metrics) -> bool:
    """fp32 GEMMs that no part rule explains: neither a slow attention backend's upcast nor one fp32 part."""
    return not fp32_in_slow_attention(m) and not one_fp32_part(m)


def lora_far_over_flops(m: Metrics) -> bool:
    """The LoRA adapters' share of GPU time is at least ``LORA_TIME_OVER_FLOPS`` x their share of the FLOPs."""
    t, f = lookup(m, "anatomy.parts.lora.share"), lookup(m, "anatomy.parts.lora.flop_share")
    return isinstance(t, float) and isinstance(f, (int, float)) and t >= LORA_TIME_OVER_FLOPS * f


def casts_not_weights(m: Metrics) -> bool:
    """Copies that are not mostly the weight casts ``weight_casts`` reports (when they are, that finding owns them)."""
    casts, copies = lookup(m, "anatomy.weight_casts_ns"), lookup(m, "kernels.copy_ns")
    weights = isinstance(casts, int) and isinstance(copies, (int, float)) and copies > 0 and casts >= 0.5 * copies
    return not (weights and (lookup(m, "anatomy.weight_casts_share") or 0.0) >= WEIGHT_CASTS_ABOVE)


def knows(kind: str) -> Callable[[Metrics], bool]:
    """A predicate: the anatomy names the part leading ``kind`` (``anatomy.<kind>_part``)."""

    def pred(m: Metrics) -> bool:
        return lookup(m, f"anatomy.{kind}_part") is not None

    pred.__name__ = f"knows_{kind}_part"
    return pred


def knows_launches_and_tokens(m: Metrics) -> bool:
    """The anatomy names the part making the most launches, and the steps' token count is known."""
    return knows("launches")(m) and lookup(m, "steps.tokens_per_step_median") is not None


def part_evidence(kind: str) -> tuple[tuple[str, str], ...]:
    """The evidence a rule adds to name the part leading ``kind``: ``{kind}_part`` and ``{kind}_part_share``."""
    return (
        (f"{kind}_part", f"anatomy.{kind}_part_words"),
        (f"{kind}_part_share", f"anatomy.{kind}_part_share"),
    )


_SDPA_DOCS = "https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html"
_ATTENTION_FIX = Fix(
    text="Let scaled_dot_product_attention run a fused kernel (flash or cuDNN): remove the sdpa_kernel(SDPBackend.MATH) "
    "context or enable_flash_sdp(False), call it with q/k/v in bf16/fp16, head dim <= 256 and is_causal=True rather "
    "than an explicit causal mask. Why the recorded call did not: {fallback}.",
    pytorch="# drop: with sdpa_kernel(SDPBackend.MATH): ...\n"
    "out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # q, k, v in bf16",
    hf_trainer="AutoModelForCausalLM.from_pretrained(name, attn_implementation='sdpa')  # or 'flash_attention_2'",
)
_EAGER_ATTENTION = Flavour(
    summary="The core attention runs eagerly (softmax and batched GEMMs in the attention module, the score matrix "
    "materialised): {core_per_step_ns} a step, {core_share} of GPU time. In the profiled steps it took {core_ns}, "
    "where a fused kernel doing the same GEMMs at this trace's GEMM speed ({reference_tflops}) would take about "
    "{fused_ns}.",
    fix=Fix(
        text="Use a fused attention implementation: scaled_dot_product_attention (flash / cuDNN kernels) instead of "
        "the model's eager attention.",
        pytorch="out = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
        hf_trainer="AutoModelForCausalLM.from_pretrained(name, attn_implementation='sdpa')  # or 'flash_attention_2'",
    ),
)

# their wording on inference runs (a flavour keyed ``"inference"``): forward passes only, no training loop
_ATTENTION_INFERENCE = Flavour(
    summary="The core attention (scaled dot-product attention) runs on the {backend} backend, the score matrix "
    "materialised: {core_per_step_ns} a step, {core_share} of GPU time. In the profiled steps it took {core_ns} "
    "({attention_fp32_gemm_ns} of it in fp32 GEMMs), where a fused kernel doing the same GEMMs at this trace's GEMM "
    "speed ({reference_tflops}) would take about {fused_ns}.",
)
_FP32_PART_INFERENCE = Flavour(
    fix=Fix(
        text="Serve {part} in the model's dtype: drop the .float() / fp32 keep-list for it (the casts around it go "
        "too); if it must stay fp32 for accuracy, allow TF32 for its matmuls at least.",
        pytorch="model.to(torch.bfloat16)  # or remove the module's .float() and the casts around it\n"
        "# at least: torch.backends.cuda.matmul.allow_tf32 = True",
        hf_trainer="AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)\n"
        "# and drop the module from _keep_in_fp32_modules",
    )
)
_LORA_INFERENCE = Flavour(
    summary="The LoRA adapters take {lora_share} of GPU time for {lora_flop_share} of the FLOPs: "
    "{lora_launches_per_step} launches per forward pass of small rank-sized GEMMs at {lora_tflops}.",
    fix=Fix(
        text="Merge the adapters into the base weights for serving (one GEMM per layer instead of three), or serve "
        "them with batched LoRA kernels (vLLM's enable_lora, S-LoRA / Punica).",
        pytorch="model = model.merge_and_unload()  # peft: the adapters folded into the base weights",
        hf_trainer="model = PeftModel.from_pretrained(base, adapter).merge_and_unload()\n"
        "# vLLM: LLM(model, enable_lora=True) with LoRARequest per request",
    ),
)

# a declared table, one entry per row: left as laid out
# fmt: off
PART_RULES: tuple[Rule, ...] = (
    Rule(
        id="attention_backend", claims="device", platform="cuda",
        title="Attention runs on a slow backend, not a fused kernel",
        metric="anatomy.parts.attention.core_saving_share", above=0.02, when=slow_attention,
        saving="anatomy.parts.attention.core_saving_share",
        evidence=(("backend", "anatomy.parts.attention.backend"),
                  ("core_per_step_ns", "anatomy.parts.attention.core_per_step_ns"),
                  ("core_share", "anatomy.parts.attention.core_share"),
                  ("core_ns", "anatomy.parts.attention.core_ns"),
                  ("fused_ns", "anatomy.parts.attention.core_fused_ns"),
                  ("attention_fp32_gemm_ns", "anatomy.parts.attention.fp32_gemm_ns"),
                  ("reference_tflops", "anatomy.reference_tflops"),
                  ("fallback", "anatomy.parts.attention.fallback"),
                  ("saving_share", "anatomy.parts.attention.core_saving_share")),
        summary="The core attention (scaled dot-product attention, forward and backward) runs on the {backend} "
                "backend, the score matrix materialised: {core_per_step_ns} a step, {core_share} of GPU time. In the "
                "profiled steps it took {core_ns} ({attention_fp32_gemm_ns} of it in fp32 GEMMs), where a fused "
                "kernel doing the same GEMMs at this trace's GEMM speed ({reference_tflops}) would take about "
                "{fused_ns}.",
        variants=((eager_attention, _EAGER_ATTENTION),), flavours=(("inference", _ATTENTION_INFERENCE),),
        fix=_ATTENTION_FIX,
        docs=_SDPA_DOCS,
    ),
    Rule(
        id="fp32_part", claims="device", platform="cuda",
        title="One part of a lower-precision model runs its GEMMs in fp32", flavours=(("inference", _FP32_PART_INFERENCE),),
        metric="anatomy.fp32_gemm_part_busy_share", above=0.10, when=one_fp32_part,
        saving="anatomy.fp32_gemm_part_saving_share",
        evidence=(("part", "anatomy.fp32_gemm_part_words"),
                  ("fp32_gemm_share", "anatomy.fp32_gemm_part_busy_share"),
                  ("of_fp32_share", "anatomy.fp32_gemm_part_share"),
                  ("part_tflops", "anatomy.fp32_gemm_part_tflops"),
                  ("reference_tflops", "anatomy.reference_tflops"),
                  ("reference_part", "anatomy.reference_part_words"),
                  ("saving_share", "anatomy.fp32_gemm_part_saving_share")),
        summary="GEMMs in fp32 without tensor cores take {fp32_gemm_share} of GPU time in {part} ({of_fp32_share} of "
                "the fp32 GEMM time), at {part_tflops}, while the GEMMs of {reference_part} in the same step reach "
                "{reference_tflops}: a part kept in fp32 in a lower-precision model.",
        fix=Fix(text="Run {part} in the model's dtype: drop the .float() / fp32 keep-list for it (the casts around it "
                     "go too); if it must stay fp32 for accuracy, allow TF32 for its matmuls at least.",
                pytorch="model.to(torch.bfloat16)  # or remove the module's .float() and the casts around it\n"
                        "# at least: torch.backends.cuda.matmul.allow_tf32 = True",
                hf_trainer="# drop the module from _keep_in_fp32_modules / the fp32 cast in your model code\n"
                           "TrainingArguments(..., bf16=True, tf32=True)"),
        docs="https://pytorch.org/docs/stable/notes/cuda.html#tf32-on-ampere",
    ),
    Rule(
        id="weight_casts", claims="device", platform="cuda",
        title="Weights are cast to the compute dtype on every call",
        metric="anatomy.weight_casts_share", above=WEIGHT_CASTS_ABOVE,
        saving="anatomy.weight_casts_share",
        evidence=(("weight_casts_ns", "anatomy.weight_casts_ns"), ("weight_casts_share", "anatomy.weight_casts_share"),
                  *part_evidence("casts")),
        summary="Casts launched inside the linear layers' matmuls (a weight stored in another dtype, cast on every "
                "call, as autocast does over fp32 weights) take {weight_casts_ns} in the profiled steps "
                "({weight_casts_share} of their time), most in {casts_part} ({casts_part_share} of cast time).",
        fix=Fix(text="Store the frozen weights in the compute dtype so autocast has nothing to cast: load the base model "
                     "in bf16 and keep only trainable parameters (LoRA adapters) in fp32.",
                pytorch="model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)\n"
                        "# or: for p in frozen_params: p.data = p.data.to(torch.bfloat16)",
                hf_trainer="AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)  # then get_peft_model"),
        docs="https://pytorch.org/docs/stable/amp.html",
    ),
    Rule(
        id="lora_adapters", severity="medium", platform="cuda",
        title="The LoRA adapters take far more GPU time than their share of the work",
        flavours=(("inference", _LORA_INFERENCE),),
        metric="anatomy.parts.lora.share", above=LORA_ABOVE, when=lora_far_over_flops,
        evidence=(("lora_share", "anatomy.parts.lora.share"), ("lora_flop_share", "anatomy.parts.lora.flop_share"),
                  ("lora_launches_per_step", "anatomy.parts.lora.launches_per_step"),
                  ("lora_tflops", "anatomy.parts.lora.achieved_tflops"),
                  ("lora_dtype", "anatomy.parts.lora.dtype"),
                  ("tokens_per_step", "steps.tokens_per_step_median")),
        summary="The LoRA adapters take {lora_share} of GPU time for {lora_flop_share} of the FLOPs: "
                "{lora_launches_per_step} launches per step of small rank-sized GEMMs at {lora_tflops}, over "
                "{tokens_per_step} tokens a step.",
        fix=Fix(text="Give each adapter GEMM more work and launch fewer: a larger batch (more tokens per step), fused "
                     "LoRA kernels, torch.compile around the adapted layers; keep the adapters in the compute dtype "
                     "(peft's autocast_adapter_dtype=False) where accuracy allows.",
                pytorch="model = torch.compile(model)\n# and raise the batch size while memory allows",
                hf_trainer="TrainingArguments(..., per_device_train_batch_size=2 * bs, gradient_accumulation_steps=ga // 2,\n"
                           "                  torch_compile=True)"),
        docs="https://huggingface.co/docs/peft/developer_guides/lora",
    ),
)
# fmt: on
