#!/usr/bin/env python3
"""One anatomy capture (#37): a planted cause in one model part, or its fixed twin, timed unprofiled then captured.

One process per capture, three parts in order:

1. the model is built from a config (random weights, no download) and run `--warmup-steps` steps (cuBLAS, allocator,
   optimizer state, torch.compile);
2. the pristine truth: `--pristine-blocks` blocks, each one settling step then `--block` steps between two
   `torch.cuda.synchronize()`, timed before any profiler exists in the process (a profiler slows the later host-bound
   steps of its process by 10-45 %: docs/captures_5.md);
3. the capture, with the capture helper's defaults (`profile_steps`: 10 steps skipped and timed, 1 warm-up,
   `--active` recorded, 3 timed after), written as `<out>/<name>/rank0.*.pt.trace.json.gz`.

`truth.json` beside the trace says what was planted, the fix, the part and cause a report should name, the pristine
and profiled step times, tokens a step, peak memory, the model config, dtype and device, and the twin's name.
The fixed twin is the same scenario with `--fixed`, named `<scenario>_fixed`: the measured saving of the fix is the
planted capture's `pristine.median_step_ms` less the twin's (per token where the twin changes the batch).

Usage: anatomy_run.py --out LOGDIR --scenario NAME [--fixed] [--name CAPTURE] [--cpus 0-7] [--tiny ...]

Scenarios (device shapes; `--tiny`: hidden 64, 2 layers, sequence 32, for CPU dry runs):
  attn_math        Qwen2.5-1.5B-shaped, 4 layers, bf16 full fine-tune, 1 x 4096 tokens, SDPA forced onto the math
                   backend (`sdpa_kernel(SDPBackend.MATH)`); fixed: the line removed (torch picks flash)
  lora_small_batch Qwen2.5-0.5B (24 layers), bf16, peft LoRA r16 on every linear, batch 1 x 256 (host-bound, tiny
                   kernels); fixed: batch 8 x 256 (compare per token)
  moe_uneven       Mixtral-style MoE, 4 layers, 8 experts top-2, dropless capacity dispatch (every expert padded to the
                   busiest one's load, one bmm per projection), router biased onto experts 0 and 1; fixed: no bias
  big_vocab_loss   Qwen2.5-1.5B-shaped, 2 layers, vocab 151,936, 4 x 1024 tokens, the transformers loss (logits upcast
                   to fp32, cross-entropy over every position); fixed: a fused chunked linear + cross-entropy
  fp32_part        Qwen2.5-1.5B-shaped, 4 layers, bf16 full fine-tune, every MLP kept in fp32 (casts around it, TF32
                   off as torch's default); fixed: all bf16
  autocast_casts   Llama-70B-shaped layers (hidden 8192), 4 layers, peft LoRA, base weights stored in fp32 under bf16
                   autocast (every weight cast to bf16 each forward: copies/casts about a quarter of a GPU-bound step);
                   fixed: base weights stored in bf16
  decode           Qwen2.5-0.5B (24 layers) inference, batch 1, a 512-token prompt, one step = one decoded token with
                   a KV cache (DynamicCache), eager; fixed: StaticCache + torch.compile(mode="reduce-overhead") (CUDA
                   graphs); `--decode-fix batch`: batch 16 eager instead
  compile_breaks   Qwen2.5-0.5B-shaped, 12 layers, bf16 full fine-tune, torch.compile(model), a NaN watchdog hook on
                   every decoder layer calling `.item()` (a graph break and a device sync per layer); fixed: no hook
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import inspect
import json
import os
import platform
import socket
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from capture_run import SHAPES  # noqa: E402
from overhead_run import cpu_list, median_ms, share  # noqa: E402

from tb_llmdiag.capture import profile_steps  # noqa: E402

LLAMA70_LAYER = dict(hidden_size=8192, intermediate_size=28672, num_attention_heads=64, num_key_value_heads=8)
TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ORDER = [
    "attn_math",
    "lora_small_batch",
    "moe_uneven",
    "big_vocab_loss",
    "fp32_part",
    "autocast_casts",
    "decode",
    "compile_breaks",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--scenario", choices=ORDER, required=True)
    p.add_argument("--fixed", action="store_true", help="the fixed twin")
    p.add_argument("--name", default=None, help="capture folder (default <scenario> or <scenario>_fixed)")
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--pristine-blocks", type=int, default=6)
    p.add_argument("--block", type=int, default=5)
    p.add_argument("--active", type=int, default=3, help="the helper's recorded steps")
    p.add_argument("--skip-first", type=int, default=None, help="the helper's skip_first (default: its own, 10)")
    p.add_argument("--time-after", type=int, default=3, help="the helper's time_steps_after")
    p.add_argument("--with-stack", action=argparse.BooleanOptionalAction, default=None, help="default: per scenario")
    p.add_argument("--cpus", default=None, help="pin the process to these CPUs (e.g. 0-7)")
    p.add_argument("--decode-fix", choices=("graphs", "batch"), default="graphs")
    p.add_argument("--compile-backend", default="inductor", help="torch.compile backend (CPU dry runs: aot_eager)")
    p.add_argument("--tiny", action="store_true", help="hidden 64, 2 layers, sequence 32 (CPU dry runs)")
    p.add_argument("--layers", type=int, default=None, help="override the scenario's number of decoder layers")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


@dataclasses.dataclass
class Job:
    """What a scenario hands the runner: one step, what it plants or fixes, and what a report should name."""

    step: Callable[[], None]
    tokens_per_step: int
    model: nn.Module
    planted: str
    fix: str
    part: str
    cause: str
    step_is: str = "one optimizer step: forward, loss, backward, grad clip 1.0, AdamW (foreach)"
    context: Callable[[], Any] = contextlib.nullcontext
    detail: Callable[[], dict[str, Any]] = dict
    with_stack: bool = False
    compare: str = "per step"
    extra_warmup: int = 0  # steps added to --warmup-steps (torch.compile, CUDA graph recording)


# --- models --------------------------------------------------------------------------------------


def qwen2_config(args: argparse.Namespace, shape: dict[str, Any], layers: int, **over: Any) -> Any:
    from transformers import Qwen2Config

    cfg = dict(shape)
    cfg.update(num_hidden_layers=layers, **over)
    if args.tiny:
        cfg.update(TINY, num_hidden_layers=2, vocab_size=min(cfg["vocab_size"], 4096), max_position_embeddings=4096)
    if args.layers:
        cfg["num_hidden_layers"] = args.layers
    config = Qwen2Config(attn_implementation="sdpa", **cfg)
    config.use_cache = False
    return config


def build(cls: Any, config: Any, device: torch.device, dtype: torch.dtype) -> nn.Module:
    """A model from its config, made on the device in `dtype` (random weights)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = cls(config)
    finally:
        torch.set_default_dtype(old)
    return model.to(device=device, dtype=dtype)


def token_batches(vocab: int, batch: int, length: int, device: torch.device, seed: int, n: int = 4) -> list[Any]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randint(0, vocab, (batch, length), generator=g).to(device) for _ in range(n)]


def add_peft_lora(model: nn.Module) -> tuple[nn.Module, str]:
    """peft LoRA r16, alpha 32, dropout 0.05 on every linear of the decoder (the repo's own LoRA if peft is missing)."""
    try:
        import peft
        from peft import LoraConfig, get_peft_model
    except ImportError:
        from lora_finetune import add_lora

        add_lora(model, 16, 32.0, 0.05)
        return model, "examples/lora_finetune.py LoRALinear (peft not installed)"
    cfg = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=LORA_TARGETS, task_type="CAUSAL_LM")
    return get_peft_model(model, cfg), f"peft {peft.__version__}"


def trainer(model: nn.Module, params: list[nn.Parameter], loss_of: Callable[[Any], Any], batches: list[Any]) -> Any:
    """The training step: loss, backward, clip 1.0, AdamW (foreach, torch's default), zero_grad."""
    opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.0)
    n = [0]

    def step() -> None:
        ids = batches[n[0] % len(batches)]
        n[0] += 1
        loss = loss_of(ids)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def hf_loss(model: nn.Module) -> Callable[[Any], Any]:
    return lambda ids: model(input_ids=ids, labels=ids).loss


def config_dict(config: Any) -> dict[str, Any]:
    keep = [
        "model_type",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "vocab_size",
        "tie_word_embeddings",
        "num_local_experts",
        "num_experts_per_tok",
        "_attn_implementation",
    ]
    return {k: getattr(config, k) for k in keep if getattr(config, k, None) is not None}


# --- 1. attention on the math backend ------------------------------------------------------------


def attn_math(args: argparse.Namespace, device: torch.device) -> Job:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import Qwen2ForCausalLM

    seq = 32 if args.tiny else 4096
    config = qwen2_config(args, SHAPES["1.5b"], 4, vocab_size=32000)
    model = build(Qwen2ForCausalLM, config, device, torch.bfloat16)
    model.train()
    step = trainer(
        model, list(model.parameters()), hf_loss(model), token_batches(config.vocab_size, 1, seq, device, args.seed)
    )
    return Job(
        step=step,
        tokens_per_step=seq,
        model=model,
        planted=f"the training loop runs under torch.nn.attention.sdpa_kernel(SDPBackend.MATH): scaled_dot_product_attention "
        f"on the math backend (the {seq} x {seq} score matrix materialised per head, softmax, then a matmul; "
        "the same again in backward)",
        fix="the sdpa_kernel(SDPBackend.MATH) context removed: torch's default backend choice, a fused kernel (flash "
        "attention, or cuDNN attention where torch prefers it on Hopper) for bf16 causal attention without a mask",
        part="attention.core (scaled_dot_product_attention, forward and backward)",
        cause="SDPA on the math backend (unfused attention) at 4,096 tokens",
        context=(lambda: contextlib.nullcontext()) if args.fixed else (lambda: sdpa_kernel(SDPBackend.MATH)),
    )


# --- 2. LoRA with a small batch ------------------------------------------------------------------


def lora_small_batch(args: argparse.Namespace, device: torch.device) -> Job:
    from transformers import Qwen2ForCausalLM

    seq = 32 if args.tiny else 256
    batch = 8 if args.fixed else 1
    config = qwen2_config(args, SHAPES["0.5b"], SHAPES["0.5b"]["num_hidden_layers"])
    model = build(Qwen2ForCausalLM, config, device, torch.bfloat16)
    model, lora = add_peft_lora(model)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    step = trainer(model, params, hf_loss(model), token_batches(config.vocab_size, batch, seq, device, args.seed))
    return Job(
        step=step,
        tokens_per_step=batch * seq,
        model=model,
        planted=f"LoRA ({lora}) fine-tune of Qwen2.5-0.5B's shape ({config.num_hidden_layers} layers, bf16 base, adapters on q,k,v,o,gate,up,"
        f"down) at batch 1 x {seq}: the host launches hundreds of tiny kernels a step and the GPU waits on it",
        fix=f"batch 8 x {seq} (8 times the tokens a step): the same launches carry 8 times the work; compare the time "
        "per token (`pristine.median_per_token_us`). Chosen over merged adapters (inference only) and CUDA graphs "
        "(not a training-loop change a LoRA user makes) because a larger batch is the usual fix",
        part="the whole step: host-side launch overhead (LoRA adapters' tiny kernels, optimizer)",
        cause="host-bound: batch too small for the GPU (launch overhead, tiny kernels)",
        compare="per token",
    )


# --- 3. MoE with uneven expert load --------------------------------------------------------------


class CapacityMoE(nn.Module):
    """A top-k MoE block with dropless capacity dispatch: each expert's tokens are scattered into an [E, C, H] buffer,
    C the busiest expert's load (read on the host: one sync), and every projection is one bmm over all experts
    (DeepSpeed-MoE's drop_tokens=False, GShard-style dispatch). An uneven load makes C, and the padded work, grow.
    `bias` is added to the router logits (the planted imbalance; zeros in the twin)."""

    def __init__(self, hidden: int, inter: int, experts: int, top_k: int, bias: list[float], std: float) -> None:
        super().__init__()
        self.e, self.k = experts, top_k
        self.router = nn.Linear(hidden, experts, bias=False)
        self.register_buffer("bias", torch.tensor(bias, dtype=torch.float32))
        self.gate_up = nn.Parameter(torch.randn(experts, hidden, 2 * inter) * std)
        self.down = nn.Parameter(torch.randn(experts, inter, hidden) * std)
        nn.init.normal_(self.router.weight, std=std)
        self.last_counts: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        h = x.reshape(-1, shape[-1])
        probs = torch.softmax(self.router(h).float() + self.bias, dim=-1)
        w, idx = torch.topk(probs, self.k, dim=-1)
        w = (w / w.sum(-1, keepdim=True)).to(h.dtype)
        flat = idx.reshape(-1)
        counts = torch.bincount(flat, minlength=self.e)
        self.last_counts = counts.tolist()  # the capacity is a shape: read on the host
        cap = max(self.last_counts)
        order = torch.argsort(flat, stable=True)
        starts = torch.cumsum(counts, 0) - counts
        rank = torch.arange(flat.numel(), device=h.device) - starts[flat[order]]
        slot = torch.empty_like(flat)
        slot[order] = flat[order] * cap + rank
        token = torch.arange(flat.numel(), device=h.device) // self.k
        buf = h.new_zeros(self.e * cap, h.shape[-1]).index_copy(0, slot, h[token]).view(self.e, cap, -1)
        gate, up = torch.bmm(buf, self.gate_up).chunk(2, dim=-1)
        out = torch.bmm(F.silu(gate) * up, self.down).reshape(self.e * cap, -1)[slot] * w.reshape(-1, 1)
        return torch.zeros_like(h).index_add(0, token, out).reshape(shape)


def moe_uneven(args: argparse.Namespace, device: torch.device) -> Job:
    from transformers import MixtralConfig, MixtralForCausalLM

    seq, batch = (32, 2) if args.tiny else (1024, 8)
    dims = (
        TINY
        if args.tiny
        else dict(hidden_size=1024, intermediate_size=3584, num_attention_heads=16, num_key_value_heads=8)
    )
    experts, top_k = 8, 2
    config = MixtralConfig(
        **dims,
        num_hidden_layers=args.layers or (2 if args.tiny else 4),
        vocab_size=1000 if args.tiny else 32000,
        num_local_experts=experts,
        num_experts_per_tok=top_k,
        max_position_embeddings=4096,
        attn_implementation="sdpa",
    )
    config.use_cache = False
    model = build(MixtralForCausalLM, config, device, torch.bfloat16)
    bias = [0.0] * experts if args.fixed else [3.0, 2.0] + [0.0] * (experts - 2)
    for layer in model.model.layers:
        with torch.device(device):
            layer.mlp = CapacityMoE(config.hidden_size, config.intermediate_size, experts, top_k, bias, 0.02)
        layer.mlp.to(device=device, dtype=torch.bfloat16)
    model.train()
    tokens = batch * seq
    step = trainer(
        model, list(model.parameters()), hf_loss(model), token_batches(config.vocab_size, batch, seq, device, args.seed)
    )

    def detail() -> dict[str, Any]:
        counts = [layer.mlp.last_counts for layer in model.model.layers]
        return {
            "experts": experts,
            "top_k": top_k,
            "router_logit_bias": bias,
            "tokens_per_expert_last_step": counts,
            "assignments_per_layer": tokens * top_k,
            "capacity_per_layer": [max(c) for c in counts],
            "padded_rows_per_layer": [experts * max(c) for c in counts],
            "padded_share_per_layer": [round(1 - tokens * top_k / (experts * max(c)), 4) for c in counts],
            "dispatch": "dropless capacity dispatch: every expert padded to the busiest expert's load (C), one bmm "
            "[E, C, H] x [E, H, 2I] and one [E, C, I] x [E, I, H] per layer",
        }

    return Job(
        step=step,
        tokens_per_step=tokens,
        model=model,
        planted="router logits biased by +3 and +2 on experts 0 and 1 (a collapsed router): nearly every token picks "
        "them, so the capacity (the busiest expert's load) is about the whole batch and the other six experts' "
        "rows of the [8, C, H] buffers are padding; the expert bmm's work is about 4 times the balanced one",
        fix="no router bias (a balanced router: random init, each expert about 1/8 of the assignments)",
        part="moe experts (the expert bmm's over the padded [E, C, H] dispatch buffers, forward and backward)",
        cause="uneven expert load: two experts take most tokens and every expert is padded to their load",
        detail=detail,
    )


# --- 4. a large-vocabulary loss ------------------------------------------------------------------


class FusedLinearCE(torch.autograd.Function):
    """Linear + cross-entropy over chunks of tokens, the gradients computed in the forward chunk by chunk (as Liger's
    fused linear cross-entropy does): the full [N, V] logits never exist, no fp32 copy of them, one softmax pass."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, chunk: int) -> torch.Tensor:
        valid = labels != -100
        n = valid.sum().clamp(min=1).to(torch.float32)
        loss = torch.zeros((), device=h.device, dtype=torch.float32)
        grad_h = torch.empty_like(h)
        grad_w = torch.zeros_like(weight, dtype=torch.float32) if weight.requires_grad else None
        for s in range(0, h.shape[0], chunk):
            hc, yc = h[s : s + chunk], labels[s : s + chunk]
            ok = (yc != -100).unsqueeze(1)
            target = torch.where(ok[:, 0], yc, 0).unsqueeze(1)
            logp = F.log_softmax(hc @ weight.t(), dim=-1)  # bf16 out, fp32 inside the kernel
            loss -= (logp.gather(1, target) * ok).sum(dtype=torch.float32)
            grad = logp.exp_()  # d loss / d logits = softmax - one_hot(target), in place: no second [c, V] tensor
            grad.scatter_add_(1, target, -ok.to(grad.dtype))
            grad_h[s : s + chunk] = (grad @ weight) * ok  # rows without a label give nothing
            if grad_w is not None:
                grad_w += (grad.t() @ (hc * ok)).float()
        ctx.save_for_backward(grad_h / n.to(h.dtype), None if grad_w is None else (grad_w / n).to(weight.dtype))
        return loss / n

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> Any:
        grad_h, grad_w = ctx.saved_tensors
        g = grad_out.to(grad_h.dtype)
        return grad_h * g, None if grad_w is None else grad_w * g, None, None


def big_vocab_loss(args: argparse.Namespace, device: torch.device) -> Job:
    from transformers import Qwen2ForCausalLM

    seq, batch = (32, 2) if args.tiny else (1024, 4)
    config = qwen2_config(args, SHAPES["1.5b"], 2)
    model = build(Qwen2ForCausalLM, config, device, torch.bfloat16)
    model.train()
    for name, p in model.named_parameters():  # decoder layers and final norm trained; the tied embedding frozen
        p.requires_grad_(not (name.startswith("model.embed_tokens") or name.startswith("lm_head")))
    params = [p for p in model.parameters() if p.requires_grad]
    chunk = 8 if args.tiny else 1024

    def fused_loss(ids: torch.Tensor) -> torch.Tensor:
        h = model.model(input_ids=ids).last_hidden_state
        labels = F.pad(ids, (0, 1), value=-100)[:, 1:].reshape(-1)  # shifted as transformers' ForCausalLMLoss does
        return FusedLinearCE.apply(h.reshape(-1, h.shape[-1]), model.lm_head.weight, labels, chunk)

    loss = fused_loss if args.fixed else hf_loss(model)
    step = trainer(model, params, loss, token_batches(config.vocab_size, batch, seq, device, args.seed))
    v = config.vocab_size
    return Job(
        step=step,
        tokens_per_step=batch * seq,
        model=model,
        planted=f"transformers' causal-LM loss over a {v:,}-token vocabulary: the [{batch * seq}, {v}] bf16 logits upcast "
        "to fp32 (ForCausalLMLoss's logits.float()), log-softmax and NLL over every position, and the same size "
        "tensors again in backward (2 decoder layers trained, the tied embedding frozen)",
        fix=f"a fused chunked linear + cross-entropy ({chunk} tokens a chunk, gradients computed in the forward as "
        "Liger's FusedLinearCrossEntropy does): no fp32 logits, no full-size logits tensor; the lm_head matmuls stay",
        part="loss (lm_head logits, fp32 upcast, log_softmax / nll_loss and their backward)",
        cause=f"cross-entropy over a {v:,}-token vocabulary on fp32-upcast full logits",
    )


# --- 5. an fp32 part in a bf16 model -------------------------------------------------------------


class FP32Island(nn.Module):
    """Runs the wrapped module in fp32: the input cast up, the output cast back (a kept-in-fp32 module)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner.float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x.float()).to(x.dtype)


def fp32_part(args: argparse.Namespace, device: torch.device) -> Job:
    from transformers import Qwen2ForCausalLM

    seq, batch = (32, 2) if args.tiny else (512, 4)
    config = qwen2_config(args, SHAPES["1.5b"], 4, vocab_size=32000)
    model = build(Qwen2ForCausalLM, config, device, torch.bfloat16)
    if not args.fixed:
        for layer in model.model.layers:
            layer.mlp = FP32Island(layer.mlp)
    model.train()
    step = trainer(
        model, list(model.parameters()), hf_loss(model), token_batches(config.vocab_size, batch, seq, device, args.seed)
    )
    tf32 = torch.backends.cuda.matmul.allow_tf32
    return Job(
        step=step,
        tokens_per_step=batch * seq,
        model=model,
        planted="every decoder layer's MLP (gate, up, down projections) kept in fp32 inside a bf16 model, its input cast "
        f"to fp32 and its output back to bf16 (as a keep-in-fp32 module list does); TF32 matmuls {'on' if tf32 else 'off (torch default)'}",
        fix="the whole model in bf16 (no fp32 island)",
        part="mlp (gate_proj, up_proj, down_proj matmuls in fp32, forward and backward)",
        cause="an fp32 part in a bf16 model: fp32 matmuls without tensor-core bf16 throughput",
        detail=lambda: {"fp32_modules": "model.layers.*.mlp", "allow_tf32": tf32},
    )


# --- 6. casts a quarter of a GPU-bound step ------------------------------------------------------


def autocast_casts(args: argparse.Namespace, device: torch.device) -> Job:
    from transformers import Qwen2ForCausalLM

    seq, batch = (32, 2) if args.tiny else (768, 1)
    shape = dict(SHAPES["1.5b"], **LLAMA70_LAYER)
    config = qwen2_config(args, shape, 4, vocab_size=32000, tie_word_embeddings=False)
    model = build(Qwen2ForCausalLM, config, device, torch.bfloat16 if args.fixed else torch.float32)
    model, lora = add_peft_lora(model)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]

    def loss_of(ids: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            return model(input_ids=ids, labels=ids).loss

    step = trainer(model, params, loss_of, token_batches(config.vocab_size, batch, seq, device, args.seed))
    n_base = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    return Job(
        step=step,
        tokens_per_step=batch * seq,
        model=model,
        planted=f"LoRA ({lora}) on 4 Llama-70B-shaped layers (hidden 8192, FFN 28672) whose frozen base weights are "
        f"stored in fp32 and trained under torch.autocast(bfloat16): every forward casts each base weight to bf16 "
        f"({n_base * 6 / 1e9:.1f} GB read and written a step), at {batch * seq} tokens a step the matmuls are short "
        "and the casts are about a quarter of the GPU's time; the GPU is busy most of the step",
        fix="the base weights stored in bf16 (the model loaded with torch_dtype=bfloat16), the same autocast: no casts",
        part="casts and copies (aten::to / aten::_to_copy of the fp32 base weights, in every forward)",
        cause="fp32 weights under bf16 autocast: a cast of every weight every step",
        detail=lambda: {
            "base_params": n_base,
            "base_dtype": "bfloat16" if args.fixed else "float32",
            "autocast": "bfloat16",
        },
    )


# --- 7. an inference decode loop ------------------------------------------------------------------


def decode(args: argparse.Namespace, device: torch.device) -> Job:
    from transformers import DynamicCache, Qwen2ForCausalLM, StaticCache

    graphs = args.fixed and args.decode_fix == "graphs"
    batch = 16 if args.fixed and args.decode_fix == "batch" else 1
    prompt_len = 16 if args.tiny else 512
    config = qwen2_config(args, SHAPES["0.5b"], SHAPES["0.5b"]["num_hidden_layers"])
    config.use_cache = True
    model = build(Qwen2ForCausalLM, config, device, torch.bfloat16)
    model.eval()
    kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    room = 300  # decoded tokens the run can take (warm-up, pristine blocks, the helper's steps)
    cache = StaticCache(config=config, max_cache_len=prompt_len + room) if graphs else DynamicCache(config=config)
    prompt = token_batches(config.vocab_size, batch, prompt_len, device, args.seed, n=1)[0]
    with torch.no_grad():
        pos = torch.arange(prompt_len, device=device).unsqueeze(0).expand(batch, -1)
        out = model(input_ids=prompt, position_ids=pos, use_cache=True, logits_to_keep=1, **{kw: cache})
    state = {"tok": out.logits[:, -1:].argmax(-1), "pos": torch.tensor([prompt_len], device=device), "n": 0}
    forward = model
    if graphs:
        how = {"mode": "reduce-overhead"} if args.compile_backend == "inductor" else {"backend": args.compile_backend}
        forward = torch.compile(model, fullgraph=True, **how)

    def step() -> None:
        if state["n"] >= room:
            raise RuntimeError("decode ran past the cache room")
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad():
            pos = state["pos"].view(1, 1).expand(batch, 1)
            logits = forward(input_ids=state["tok"], position_ids=pos, use_cache=True, **{kw: cache}).logits
        state["tok"] = logits[:, -1:].argmax(-1)
        state["pos"] = state["pos"] + 1
        state["n"] += 1

    fix = (
        "StaticCache + torch.compile(model, mode='reduce-overhead', fullgraph=True): each decode step one CUDA graph replay"
        if args.decode_fix == "graphs"
        else "batch 16 instead of 1 (compare per token): the same launches decode 16 sequences"
    )
    return Job(
        step=step,
        tokens_per_step=batch,
        model=model,
        planted=f"greedy decoding with Qwen2.5-0.5B's shape ({config.num_hidden_layers} layers, bf16, random weights), batch 1, a "
        f"{prompt_len}-token prompt prefilled first, a DynamicCache, eager: one step is one forward of one token "
        "(hundreds of small kernels launched by Python, about 1 GB of weights read)",
        fix=fix,
        part="the whole decode step: host-side launch overhead of every layer's small kernels",
        cause="host-bound inference decode: per-token kernel launches (no CUDA graphs), batch 1",
        step_is="one decoded token: model forward of 1 token with the KV cache, argmax on the device (no sync)",
        compare="per token" if batch > 1 else "per step",
        extra_warmup=3 if graphs else 0,
        detail=lambda: {
            "prompt_tokens": prompt_len,
            "batch": batch,
            "decoded_tokens": state["n"],
            "cache": type(cache).__name__,
        },
    )


# --- 8. graph breaks under torch.compile ----------------------------------------------------------


def compile_breaks(args: argparse.Namespace, device: torch.device) -> Job:
    from transformers import Qwen2ForCausalLM

    seq, batch = (32, 2) if args.tiny else (1024, 4)
    layers = 12
    config = qwen2_config(args, SHAPES["0.5b"], layers, vocab_size=32000)
    model = build(Qwen2ForCausalLM, config, device, torch.bfloat16)
    model.train()

    def nan_watchdog(module: nn.Module, inputs: Any, output: Any) -> None:
        h = output[0] if isinstance(output, tuple) else output
        if not torch.isfinite(h).all().item():  # a graph break and a device sync, once per layer
            raise FloatingPointError("non-finite activations in a decoder layer")

    if not args.fixed:
        for layer in model.model.layers:
            layer.register_forward_hook(nan_watchdog)
    compiled = torch.compile(model, backend=args.compile_backend)
    step = trainer(
        compiled,
        list(model.parameters()),
        hf_loss(compiled),
        token_batches(config.vocab_size, batch, seq, device, args.seed),
    )

    def detail() -> dict[str, Any]:
        from torch._dynamo.utils import counters

        return {
            "compile_backend": args.compile_backend,
            "unique_graphs": counters["stats"].get("unique_graphs", 0),
            "graph_breaks": sum(counters["graph_break"].values()),
            "frames_compiled": counters["frames"].get("ok", 0),
        }

    return Job(
        step=step,
        tokens_per_step=batch * seq,
        model=model,
        planted=f"torch.compile(model) of a {config.num_hidden_layers}-layer Qwen2.5-0.5B-shaped model with a NaN watchdog "
        "forward hook on every decoder layer: `torch.isfinite(h).all().item()` is a graph break (and a device sync) "
        "in every layer, so the forward runs as one compiled graph per layer with the host waiting between them",
        fix="the watchdog removed (one graph for the forward, one for the backward)",
        part="the compiled forward: the decoder layers split at each layer's graph break",
        cause="graph breaks under torch.compile: an .item() (device sync) in every decoder layer",
        detail=detail,
        with_stack=True,
        extra_warmup=2,
    )


SCENARIOS: dict[str, Callable[[argparse.Namespace, torch.device], Job]] = {
    "attn_math": attn_math,
    "lora_small_batch": lora_small_batch,
    "moe_uneven": moe_uneven,
    "big_vocab_loss": big_vocab_loss,
    "fp32_part": fp32_part,
    "autocast_casts": autocast_casts,
    "decode": decode,
    "compile_breaks": compile_breaks,
}


# --- the runner ----------------------------------------------------------------------------------


def sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def pristine_blocks(job: Job, args: argparse.Namespace, cuda: bool) -> tuple[list[float], list[list[float]]]:
    """`--pristine-blocks` blocks, each one settling step then `--block` steps between two synchronizes; a block's step
    is its wall time over its steps (each step's host time kept too)."""
    means, steps = [], []
    for _ in range(args.pristine_blocks):
        job.step()
        sync(cuda)
        t = [time.perf_counter()]
        for _ in range(args.block):
            job.step()
            t.append(time.perf_counter())
        sync(cuda)
        t[-1] = time.perf_counter()
        means.append(round(1000 * (t[-1] - t[0]) / args.block, 4))
        steps.append([round(1000 * (b - a), 4) for a, b in zip(t, t[1:])])
    return means, steps


def capture(job: Job, args: argparse.Namespace, name: str, with_stack: bool, cuda: bool) -> dict[str, Any]:
    """The capture helper as a user runs it (its defaults), each step timed on the host clock."""
    kw = {} if args.skip_first is None else {"skip_first": args.skip_first}
    prof = profile_steps(
        args.out, name, active=args.active, time_steps_after=args.time_after, with_stack=with_stack, **kw
    )
    n = prof.total_steps
    host_t = [0.0] * (n + 1)
    prof.start()
    host_t[0] = time.perf_counter()
    for k in range(n):
        job.step()
        host_t[k + 1] = time.perf_counter()
        prof.step()
    prof.stop()
    sync(cuda)
    host_ms = [round(1000 * (host_t[k + 1] - host_t[k]), 4) for k in range(n)]
    active = list(prof.schedule.active_steps())
    timed = list(zip(prof.unprofiled_steps, prof.unprofiled_step_ns))
    return {
        "options": {**prof.options},
        "skip_first": prof.schedule.skip_first,
        "active_steps": active,
        "time_steps_after": args.time_after,
        "phases": [prof.schedule.phase(s) if s < prof.schedule.total_steps else "after" for s in range(n)],
        "helper_host_ms": host_ms,
        "window_median_ms": median_ms([host_ms[s] for s in active]),
        "helper_unprofiled": {
            "steps": [s for s, _ in timed if s < active[0]],
            "step_ns": [t for s, t in timed if s < active[0]],
            "after_steps": [s for s, _ in timed if s > active[-1]],
            "after_step_ns": [t for s, t in timed if s > active[-1]],
        },
        "trace_files": [os.path.basename(f) for f in prof.trace_files()],
    }


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version()}
    for mod in ("transformers", "peft"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            out[mod] = None
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cpus:
        os.sched_setaffinity(0, cpu_list(args.cpus))
    t0 = time.perf_counter()
    name = args.name or (f"{args.scenario}_fixed" if args.fixed else args.scenario)
    twin = args.scenario if args.fixed else f"{args.scenario}_fixed"
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    torch.manual_seed(args.seed)
    job = SCENARIOS[args.scenario](args, device)
    with_stack = job.with_stack if args.with_stack is None else args.with_stack
    t_build = time.perf_counter()
    with contextlib.ExitStack() as stack:
        stack.enter_context(job.context())
        for _ in range(args.warmup_steps + job.extra_warmup):
            job.step()
        sync(cuda)
        gc.collect()
        gc.freeze()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t_warm = time.perf_counter()
        means, steps = pristine_blocks(job, args, cuda)  # before any profiler exists in the process
        peak = (torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()) if cuda else (None, None)
        t_pristine = time.perf_counter()
        prof = capture(job, args, name, with_stack, cuda)
    t_end = time.perf_counter()
    U0 = median_ms(means)
    per_token_us = round(1000 * U0 / job.tokens_per_step, 4)
    truth = {
        "capture": name,
        "scenario": args.scenario,
        "variant": "fixed" if args.fixed else "planted",
        "twin": twin,
        "planted": job.planted,
        "fix": job.fix,
        "expected_part": job.part,
        "expected_cause": job.cause,
        "compare": job.compare,
        "step_is": job.step_is,
        "tokens_per_step": job.tokens_per_step,
        "argv": sys.argv[1:] if argv is None else argv,
        "pristine": {
            "how": "blocks of one settling step then `block_steps` steps between two synchronizes, timed before any "
            "profiler existed in the process; a block's step is its wall time over its steps",
            "blocks": args.pristine_blocks,
            "block_steps": args.block,
            "block_ms": means,
            "step_ms": steps,
            "median_step_ms": U0,
            "median_per_token_us": per_token_us,
            "tokens_per_s": round(1000 * job.tokens_per_step / U0, 1),
        },
        "profiled": {k: v for k, v in prof.items() if k not in ("helper_unprofiled", "trace_files")},
        "helper_unprofiled": prof["helper_unprofiled"],
        "measured_profiler_overhead_share": round(share(prof["window_median_ms"], U0), 4),
        "peak_memory_allocated_bytes": peak[0],
        "peak_memory_reserved_bytes": peak[1],
        "peak_memory_basis": "torch.cuda max_memory_allocated/reserved over the pristine blocks (reset after warm-up)",
        "model": {"class": type(job.model).__name__, "config": config_dict(getattr(job.model, "config", None))},
        "dtype": str(next(job.model.parameters()).dtype).replace("torch.", ""),
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "host": socket.gethostname(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "versions": versions(),
        "detail": job.detail(),
        "seconds": {
            "build": round(t_build - t0, 2),
            "warmup": round(t_warm - t_build, 2),
            "pristine": round(t_pristine - t_warm, 2),
            "capture": round(t_end - t_pristine, 2),
            "total": round(t_end - t0, 2),
        },
        "ranks": [  # the fields scripts/trust_check.py reads
            {
                "rank": 0,
                "profiled": {
                    "active_median_host_ms": prof["window_median_ms"],
                    "basis": "the trace's window, host clock",
                },
                "reference": {"median_wall_ms": U0, "wall_ms": means, "basis": "pristine blocks"},
                "trace_files": prof["trace_files"],
            }
        ],
    }
    path = os.path.join(args.out, name, "truth.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(truth, f, indent=1, allow_nan=False)
    spread = round(statistics.pstdev(means) / U0, 4) if len(means) > 1 else 0.0
    print(
        f"TRUTH {name}: pristine {U0:.3f} ms/step (spread {spread:.3f}) {per_token_us:.2f} us/token, "
        f"{job.tokens_per_step} tokens; window {prof['window_median_ms']:.3f} ms "
        f"(profiler share {truth['measured_profiler_overhead_share']:+.3f}); peak "
        f"{(peak[0] or 0) / 2**30:.2f} GiB; {truth['seconds']}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
