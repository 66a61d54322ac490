#!/usr/bin/env python3
"""LoRA fine-tune of a Qwen2.5-1.5B-Instruct-shaped model (random weights), profiled with tb_llmdiag.capture.

The defaults reproduce the seed article's setup: bf16, batch 4, max length 512, pad to the longest
sample in the batch, pageable host memory, num_workers 0, AdamW 2e-4 with a cosine schedule, LoRA
r=16 alpha=32 dropout 0.05 on q,k,v,o,gate,up,down (~18.5 M trainable of ~1.56 B). Sample lengths are
Dolly-15k-like: lognormal, median 172 tokens, mean 230 before truncation to 512 (~211 after); token
ids are random; everything is seeded. No hub access and no peft needed.

Switches that plant (or remove) the article's findings:
  --pin-memory / --no-pin-memory    pinned vs pageable host batches (.to(device, non_blocking=True))
  --packing                         pack samples into full 512-token rows instead of padding
  --num-workers N, --batch-size N   input pipeline and batch size
  --compile                         torch.compile the model
  --profile-from-step0              record steps 0.. (warm-up inside the window) instead of steady state
  --slow-collate-ms MS              CPU work in the collate fn (a data-loader stall when num_workers=0)
  --log-item                        per-step logging through .item() (host syncs)

Example (one GPU):
  python examples/lora_finetune.py --out demo_logs --run seed_lora_qwen1.5b --profile-from-step0 --active-steps 4
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tb_llmdiag.capture import profile_steps  # noqa: E402

QWEN25_15B = dict(
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=32768,
    rope_theta=1e6,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
EOS_ID = 151645  # <|im_end|>
PAD_ID = 151643  # <|endoftext|>
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
DOLLY_SAMPLES = 15011
LENGTH_MEDIAN = 172.0
LENGTH_SIGMA = 0.762  # lognormal sigma giving mean 230 (before truncation) with median 172


# --- LoRA, by hand ---------------------------------------------------------------------------


class LoRALinear(nn.Module):
    """y = base(x) + B(A(dropout(x))) * alpha / r, with base frozen, A kaiming-uniform, B zero (as peft)."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float) -> None:
        super().__init__()
        self.base = base
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        dev, dt = base.weight.device, base.weight.dtype
        self.lora_A = nn.Linear(base.in_features, r, bias=False, device=dev, dtype=dt)
        self.lora_B = nn.Linear(r, base.out_features, bias=False, device=dev, dtype=dt)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)
        self.scaling = alpha / r

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling


def add_lora(model: nn.Module, r: int, alpha: float, dropout: float) -> list[nn.Parameter]:
    for p in model.parameters():
        p.requires_grad_(False)
    targets = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if name in LORA_TARGETS and isinstance(child, nn.Linear)
    ]
    for parent, name, child in targets:
        setattr(parent, name, LoRALinear(child, r, alpha, dropout))
    return [p for n, p in model.named_parameters() if "lora_" in n]


# --- data: Dolly-like lengths, random ids ------------------------------------------------------


def sample_lengths(n: int, max_length: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(math.log(LENGTH_MEDIAN), LENGTH_SIGMA, n)
    return np.clip(np.rint(raw), 8, max_length).astype(np.int64)


def sample_tokens(idx: int, length: int, vocab: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, int(idx)])
    ids = rng.integers(0, min(vocab, 151643), size=int(length), dtype=np.int64)
    ids[-1] = EOS_ID if vocab > EOS_ID else vocab - 1
    return ids


class SampleDataset(Dataset):
    """One instruction-response sample per item (variable length)."""

    def __init__(self, lengths: np.ndarray, vocab: int, seed: int) -> None:
        self.lengths, self.vocab, self.seed = lengths, vocab, seed

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.from_numpy(sample_tokens(i, self.lengths[i], self.vocab, self.seed))


class PackedDataset(Dataset):
    """Samples (shuffled once) concatenated and cut into full rows of `seq_len` tokens (TRL-style packing).

    Rows attend causally across sample boundaries (no per-document mask), like TRL's classic packing.
    """

    def __init__(self, lengths: np.ndarray, vocab: int, seed: int, seq_len: int) -> None:
        self.vocab, self.seed, self.seq_len = vocab, seed, seq_len
        self.order = np.random.default_rng(seed + 1).permutation(len(lengths))
        self.lengths = lengths[self.order]
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)])
        self.rows = int(self.starts[-1] // seq_len)

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, row: int) -> torch.Tensor:
        lo, hi = row * self.seq_len, (row + 1) * self.seq_len
        first = int(np.searchsorted(self.starts, lo, side="right") - 1)
        parts, k = [], first
        while k < len(self.lengths) and self.starts[k] < hi:
            ids = sample_tokens(int(self.order[k]), self.lengths[k], self.vocab, self.seed)
            a, b = max(lo, self.starts[k]) - self.starts[k], min(hi, self.starts[k + 1]) - self.starts[k]
            parts.append(ids[a:b])
            k += 1
        return torch.from_numpy(np.concatenate(parts))


def busy_wait_ms(ms: float) -> None:
    """CPU work standing in for tokenization/augmentation in the collate fn (holds the GIL)."""
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        x += 1


class PadCollate:
    """Pad to the longest sample in the batch (right padding), labels -100 on pads."""

    def __init__(self, slow_ms: float = 0.0) -> None:
        self.slow_ms = slow_ms

    def __call__(self, samples: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        if self.slow_ms:
            busy_wait_ms(self.slow_ms)
        longest = max(len(s) for s in samples)
        ids = torch.full((len(samples), longest), PAD_ID, dtype=torch.long)
        mask = torch.zeros((len(samples), longest), dtype=torch.long)
        for i, s in enumerate(samples):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1
        labels = ids.masked_fill(mask == 0, -100)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class PackCollate:
    """Stack full packed rows: no padding, no attention mask (pure causal)."""

    def __init__(self, slow_ms: float = 0.0) -> None:
        self.slow_ms = slow_ms

    def __call__(self, rows: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        if self.slow_ms:
            busy_wait_ms(self.slow_ms)
        ids = torch.stack(rows)
        return {"input_ids": ids, "labels": ids.clone()}


# --- the run -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="demo_logs", help="logdir (default: demo_logs)")
    p.add_argument("--run", default="lora_qwen1.5b", help="run folder under --out")
    p.add_argument("--layers", type=int, default=None, help="override num_hidden_layers (28) for small fixtures")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--pin-memory", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--packing", action="store_true", help="pack samples into full --max-length rows")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--slow-collate-ms", type=float, default=0.0, help="CPU ms spent in the collate fn per batch")
    p.add_argument("--log-item", action="store_true", help="per-step logging with .item() (host syncs)")
    p.add_argument("--steps", type=int, default=None, help="steps to run (default: just enough to profile)")
    p.add_argument("--active-steps", type=int, default=3, help="profiled steps")
    p.add_argument("--profile-from-step0", action="store_true", help="profile from step 0 (warm-up included)")
    p.add_argument("--skip-first", type=int, default=None, help="steps skipped before profiling (steady state)")
    p.add_argument("--no-profile", action="store_true", help="run without the profiler")
    p.add_argument("--record-shapes", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--profile-memory", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--with-stack", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-alpha", type=float, default=32.0)
    p.add_argument("--lora-dropout", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16", help="fp32 only for CPU dry runs")
    return p.parse_args(argv)


def build_model(args: argparse.Namespace, device: torch.device) -> tuple[nn.Module, list[nn.Parameter], int]:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = dict(QWEN25_15B)
    if args.layers is not None:
        cfg["num_hidden_layers"] = args.layers
    config = Qwen2Config(**cfg)
    config.use_cache = False
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(old)
    model.to(device=device, dtype=dtype)
    lora = add_lora(model, args.lora_r, args.lora_alpha, args.lora_dropout)
    model.train()
    total = sum(p.numel() for p in model.parameters())
    return model, lora, total


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    import transformers

    model, lora, total = build_model(args, device)
    trainable = sum(p.numel() for p in lora)
    layers = args.layers or QWEN25_15B["num_hidden_layers"]
    expect = layers * args.lora_r * sum(
        a + b for a, b in [(1536, 1536), (1536, 256), (1536, 256), (1536, 1536), (1536, 8960), (1536, 8960), (8960, 1536)]
    )
    print(
        f"model: Qwen2 {layers} layers, {total / 1e9:.3f} B params, LoRA trainable {trainable:,} "
        f"({trainable / 1e6:.2f} M, {100 * trainable / total:.2f}%)"
        + ("" if trainable == expect else f"  [expected {expect:,}]"),
        flush=True,
    )
    if args.compile:
        model = torch.compile(model)

    lengths = sample_lengths(DOLLY_SAMPLES, args.max_length, args.seed)
    print(
        f"data: {len(lengths)} samples, length median {np.median(lengths):.0f} mean {lengths.mean():.1f} "
        f"max {lengths.max()} (truncated at {args.max_length})",
        flush=True,
    )
    vocab = QWEN25_15B["vocab_size"]
    if args.packing:
        dataset: Dataset = PackedDataset(lengths, vocab, args.seed, args.max_length)
        collate = PackCollate(args.slow_collate_ms)
    else:
        dataset = SampleDataset(lengths, vocab, args.seed)
        collate = PadCollate(args.slow_collate_ms)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(args.seed),
        num_workers=args.num_workers,
        pin_memory=args.pin_memory and cuda,
        collate_fn=collate,
        drop_last=True,
        persistent_workers=args.num_workers > 0,
    )

    opt = torch.optim.AdamW(lora, lr=args.lr, weight_decay=0.0)
    prof = profile_steps(
        args.out,
        args.run,
        from_step0=args.profile_from_step0,
        skip_first=args.skip_first,
        active=args.active_steps,
        record_shapes=args.record_shapes,
        profile_memory=args.profile_memory,
        with_stack=args.with_stack,
    )
    steps = args.steps or prof.total_steps  # the steps the helper times after the window included
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    print(
        f"run: {args.run} steps {steps}, profiled steps {list(prof.schedule.active_steps())} -> {prof.output_dir}; "
        f"bs {args.batch_size} packing {args.packing} pin_memory {args.pin_memory} workers {args.num_workers} "
        f"compile {args.compile} slow_collate_ms {args.slow_collate_ms} log_item {args.log_item}",
        flush=True,
    )

    host_t = [0.0] * (steps + 1)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)] if cuda else []
    tokens_real, tokens_slots, logged = [], [], []
    if not args.no_profile:
        prof.start()
    it = iter(loader)
    host_t[0] = time.perf_counter()
    if cuda:
        events[0].record()
    for step in range(steps):
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            batch = next(it)
        mask = batch.get("attention_mask")
        tokens_real.append(int(mask.sum()) if mask is not None else batch["input_ids"].numel())
        tokens_slots.append(batch["input_ids"].numel())
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        if args.log_item:  # tokens-per-second logging (like transformers#36861's num_items_in_batch)
            n_tok = (batch["labels"] != -100).sum().item()
        loss = model(**batch).loss
        if args.log_item:  # NaN/inf guard on the loss (like Trainer's isnan(tr_loss_step) check)
            loss_val = loss.item()
            if not math.isfinite(loss_val):
                raise FloatingPointError(f"loss is {loss_val} at step {step}")
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(lora, 1.0)
        if args.log_item:
            grad_norm_val = grad_norm.item()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if args.log_item:  # "log the update size" after the optimizer step
            lora_b_norm = torch.linalg.vector_norm(lora[1]).item()
            logged.append((n_tok, loss_val, grad_norm_val, lora_b_norm))
        if cuda:
            events[step + 1].record()
        host_t[step + 1] = time.perf_counter()
        if not args.no_profile:
            prof.step()
    if cuda:
        torch.cuda.synchronize()
    prof.stop()
    final_loss = float(loss.detach().float())

    active = set(prof.schedule.active_steps()) if not args.no_profile else set()
    host_ms = [1000 * (host_t[i + 1] - host_t[i]) for i in range(steps)]
    gpu_ms = [events[i].elapsed_time(events[i + 1]) for i in range(steps)] if cuda else [None] * steps
    print("step  phase   host_ms   gpu_ms  tokens  slots  pad_share", flush=True)
    for i in range(steps):
        phase = prof.schedule.phase(i) if not args.no_profile else "-"
        pad = 1 - tokens_real[i] / tokens_slots[i]
        g = f"{gpu_ms[i]:8.1f}" if gpu_ms[i] is not None else "       -"
        print(f"{i:4d}  {phase:6s} {host_ms[i]:8.1f} {g} {tokens_real[i]:7d} {tokens_slots[i]:6d} {pad:9.3f}")
    files = prof.trace_files()
    act = sorted(active)
    summary = {
        "run": args.run,
        "gpu": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "layers": layers,
        "params": total,
        "trainable": trainable,
        "argv": sys.argv[1:] if argv is None else argv,
        "steps": steps,
        "active_steps": act,
        "host_ms": [round(x, 2) for x in host_ms],
        "gpu_ms": [None if x is None else round(x, 2) for x in gpu_ms],
        "active_median_host_ms": round(float(np.median([host_ms[i] for i in act])), 2) if act else None,
        "tokens_real": tokens_real,
        "tokens_slots": tokens_slots,
        "final_loss": round(final_loss, 4),
        "peak_mem_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
        "trace_files": files,
        "trace_bytes": [os.path.getsize(f) for f in files],
    }
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
