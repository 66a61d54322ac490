#!/usr/bin/env python3
"""One planted-cause capture: a small Qwen2.5-shaped model (random weights) trained a few steps under
`tb_llmdiag.capture.profile_steps`, then timed again without the profiler; writes `truth.json` beside
the trace(s).

Used by `examples/captures/single_gpu.sh` (issues #12, #14) and `examples/captures/two_gpu.sh`
(issue #11, under torchrun). Every switch plants one cause; the baseline is:
2 layers of Qwen2.5-1.5B's shape, LoRA r16 on q,k,v,o,gate,up,down, bf16, samples packed into
512-token rows, batch 8, DataLoader num_workers 2, pageable memory, AdamW (foreach), clip 1.0;
3 steps skipped, 1 profiler warm-up, 6 recorded, `--time-after` (3) steps timed unprofiled by the helper after the
window (it writes the trace then), then `--ref-steps` unprofiled steps timed with a synchronize at every step edge.

Usage: capture_run.py --out LOGDIR --name CAPTURE [switches]   (writes LOGDIR/CAPTURE/rank<R>.*.pt.trace.json.gz
and LOGDIR/CAPTURE/truth.json; `--name`, not `--run`, because torchrun would take `--run` as its own option)

Switches:
  --pin-memory                 pinned host batches
  --compile                    torch.compile(model)
  --pad-lengths L0,L1,...      step s gets a batch padded to L[s] (right padding, labels -100, no mask)
  --compile-dynamic-false      with --compile: torch.compile(model, dynamic=False) (recompiles per new length)
  --dtype fp32 --no-tf32       fp32 weights and math, no autocast, TF32 off
  --train full|layers|lora     what is trained (full: every parameter; layers: decoder layers only)
  --optim-foreach/--optim-fused  AdamW implementation (default foreach=None, fused=None: torch's choice)
  --grad-ckpt                  model.gradient_checkpointing_enable(use_reentrant=False)
  --save-at-step N             torch.save(model.state_dict()) inside record_function("save_checkpoint") at step N
  --item-loop                  per-parameter norm logging with .item() every step
  --ddp / --fsdp               distributed (torchrun): DDP or FSDP2 fully_shard per decoder layer + root
  --rank-max-length A,B,...    packed row length per rank (uneven tokens per rank: a straggler)

Causes outside the rule catalogue (issue #23; docs/captures_3.md). Each is also timed unprofiled with the cause
switched off in the same process (`reference_without_cause`), except where a process-wide setting plants it
(`--without-cause-json`, from a `--ref-only-json` run of the same job without that setting):
  --release-memory             gc.collect() + torch.cuda.empty_cache() inside record_function("release_memory")
                               after every step
  --host-python                build_masks(): a pure-Python loop over the batch's tokens inside the step
  --host-pause-ms MS           log_metrics(): a line written + fsync, then time.sleep(MS), after every step,
                               with nothing recorded around it
  --masked-loss                the loss on logits[labels != -100] (boolean indexing: a nonzero sync and a new
                               shape every step); without the cause: cross_entropy(ignore_index=-100)
  --module-hooks               forward hooks on every module computing activation_stats (mean, std, abs-max)
  --with-stack                 profiler option with_stack=True (Python frames: file:line)
  --delay-ms A,B,... --delay-steps S,T   rank r spends A/B/.. ms in tokenise_batch() (pure Python) in the
                               listed steps only (an intermittent straggler under --ddp); the reference plants
                               it at the same offsets from its first step
  --infer                      forward-only under no_grad (model.eval()); with --compile-mode reduce-overhead:
                               CUDA graph replays
  --ref-only-json PATH         no profiler: run the same steps, time --ref-steps, write their times to PATH
  --without-cause-json PATH    take reference_without_cause from such a file
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import gzip
import json
import os
import socket
import statistics
import sys
import time
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from lora_finetune import (  # noqa: E402
    DOLLY_SAMPLES,
    EOS_ID,
    PAD_ID,
    QWEN25_15B,
    PackCollate,
    PackedDataset,
    add_lora,
    sample_lengths,
    sample_tokens,
)

from tb_llmdiag.capture import plan_schedule, profile_steps  # noqa: E402

QWEN25_05B = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=32768,
    rope_theta=1e6,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
SHAPES = {"1.5b": QWEN25_15B, "0.5b": QWEN25_05B}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--name", required=True, help="run folder under --out (the capture name)")
    p.add_argument("--what", default="", help="one line for truth.json: what was planted")
    p.add_argument("--shape", choices=sorted(SHAPES), default="1.5b")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=None, help="override vocab (CPU dry runs only)")
    p.add_argument("--tiny", action="store_true", help="hidden 128, FFN 256, 4/2 heads (CPU dry runs only)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-length", type=int, default=512, help="packed row length")
    p.add_argument("--rank-max-length", default=None, help="comma list: packed row length per rank")
    p.add_argument("--pad-lengths", default=None, help="comma list: padded length of step s's batch")
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--pin-memory", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-dynamic-false", action="store_true")
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--no-tf32", action="store_true")
    p.add_argument("--train", choices=("lora", "full", "layers"), default="lora")
    p.add_argument("--optim-foreach", choices=("none", "true", "false"), default="none")
    p.add_argument("--optim-fused", choices=("none", "true", "false"), default="none")
    p.add_argument("--grad-ckpt", action="store_true")
    p.add_argument("--save-at-step", type=int, default=None)
    p.add_argument("--item-loop", action="store_true")
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--fsdp", action="store_true")
    p.add_argument("--skip-first", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--active", type=int, default=6)
    p.add_argument("--ref-steps", type=int, default=6)
    p.add_argument("--time-after", type=int, default=3, help="steps the helper times after the window (time_steps_after)")
    p.add_argument("--release-memory", action="store_true")
    p.add_argument("--host-python", action="store_true")
    p.add_argument("--host-pause-ms", type=float, default=0.0)
    p.add_argument("--masked-loss", action="store_true")
    p.add_argument("--module-hooks", action="store_true")
    p.add_argument("--with-stack", action="store_true")
    p.add_argument("--delay-ms", default=None, help="comma list: ms of tokenise_batch() per rank")
    p.add_argument("--delay-steps", default=None, help="comma list: the (profiled-phase) steps that get the delay")
    p.add_argument("--infer", action="store_true")
    p.add_argument("--compile-mode", default=None, help="torch.compile mode (e.g. reduce-overhead)")
    p.add_argument("--ref-only-json", default=None)
    p.add_argument("--without-cause-json", default=None)
    p.add_argument("--record-shapes", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--profile-memory", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def tri(v: str) -> bool | None:
    return None if v == "none" else v == "true"


# --- data ----------------------------------------------------------------------------------------


class FixedLengthBatches:
    """Step s: `bs` samples, the longest exactly L[s] tokens, right-padded to L[s]; labels -100 on pads.

    No attention mask (causal attention keeps real tokens exact under right padding).
    """

    def __init__(self, lengths: list[int], bs: int, vocab: int, seed: int) -> None:
        self.lengths, self.bs, self.vocab, self.seed = lengths, bs, vocab, seed

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        L = self.lengths[step % len(self.lengths)]
        rng = np.random.default_rng([self.seed, step])
        lens = rng.integers(L // 2, L + 1, size=self.bs)
        lens[0] = L
        ids = torch.full((self.bs, L), min(PAD_ID, self.vocab - 1), dtype=torch.long)
        for i, n in enumerate(lens):
            ids[i, :n] = torch.from_numpy(sample_tokens(step * 1000 + i, int(n), self.vocab, self.seed))
        labels = ids.clone()
        for i, n in enumerate(lens):
            labels[i, n:] = -100
        return {"input_ids": ids, "labels": labels}


# --- model ---------------------------------------------------------------------------------------


def build_model(args: argparse.Namespace, device: torch.device) -> nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = dict(SHAPES[args.shape])
    cfg["num_hidden_layers"] = args.layers
    if args.vocab:
        cfg["vocab_size"] = args.vocab
    if args.tiny:
        cfg.update(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2)
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
    return model


def trainable_params(model: nn.Module, args: argparse.Namespace) -> list[nn.Parameter]:
    if args.train == "lora":
        return add_lora(model, 16, 32.0, 0.05)
    if args.train == "layers":
        for n, p in model.named_parameters():
            p.requires_grad_(".layers." in f".{n}")
    return [p for p in model.parameters() if p.requires_grad]


# --- helpers -------------------------------------------------------------------------------------


def sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def median(xs: list[float]) -> float | None:
    return round(float(statistics.median(xs)), 3) if xs else None


def r3(xs: list[float | None]) -> list[float | None]:
    return [None if x is None else round(float(x), 3) for x in xs]


def item_loop(model: nn.Module) -> int:
    """Per-parameter logging as many training scripts do it: norms read back one `.item()` at a time."""
    logged: dict[str, float] = {}
    n = 0
    for name, p in model.named_parameters():
        logged[f"weight_norm/{name}"] = p.detach().float().norm().item()
        n += 1
        if p.grad is not None:
            g = p.grad.detach().float()
            logged[f"grad_norm/{name}"] = g.norm().item()
            logged[f"grad_absmax/{name}"] = g.abs().max().item()
            logged[f"weight_absmax/{name}"] = p.detach().float().abs().max().item()
            if not torch.isfinite(g).all().item():
                logged[f"nonfinite/{name}"] = 1.0
            n += 4
    return n


def build_masks(input_ids: torch.Tensor) -> list[int]:
    """Per-document causal masks built in pure Python, one query token at a time (the planted CPU work).

    For each row, every token's document (split at EOS) is found, then each query is compared with every
    earlier key; the result (keys attended per query) is what a user would turn into a mask.
    """
    attended: list[int] = []
    for row in input_ids.tolist():
        doc, docs = 0, []
        for tok in row:
            docs.append(doc)
            if tok == EOS_ID:
                doc += 1
        for i in range(len(row)):
            n = 0
            for j in range(i + 1):
                if docs[j] == docs[i]:
                    n += 1
            attended.append(n)
    return attended


def log_metrics(path: str, step: int, pause_s: float) -> None:
    """A blocking logger: one line appended and fsync'ed, then a pause (a slow sink), nothing recorded."""
    with open(path, "a") as f:
        f.write(json.dumps({"step": step, "t": time.time()}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    time.sleep(pause_s)


def tokenise_batch(ms: float, seed: int) -> int:
    """Slow tokenisation in pure Python for `ms` milliseconds (holds the GIL, no sleep)."""
    end = time.perf_counter() + ms / 1000.0
    text = " ".join(f"w{(seed * 7919 + k) % 50000}" for k in range(2000))
    n = 0
    while time.perf_counter() < end:
        n += len([w[1:] for w in text.split(" ") if w])
    return n


def add_activation_stats(model: nn.Module, store: dict[str, torch.Tensor]) -> list[Any]:
    """Forward hooks on every module: mean, std and abs-max of its output, kept on the device (no sync)."""

    def activation_stats(name: str):  # noqa: ANN202
        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            out = output[0] if isinstance(output, (tuple, list)) else output
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                x = out.detach().float()
                store[name] = torch.stack([x.mean(), x.std(), x.abs().max()])

        return hook

    return [m.register_forward_hook(activation_stats(n)) for n, m in model.named_modules() if n]


def trace_facts(paths: list[str]) -> dict[str, Any]:
    """What the written traces hold that truth.json should state (read back, plain json)."""
    facts: dict[str, Any] = {"kernels_with_graph_id": 0, "kernels": 0, "python_function_events": 0, "gz_bytes": 0}
    for path in paths:
        facts["gz_bytes"] += os.path.getsize(path)
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            trace = json.load(f)
        for e in trace.get("traceEvents", []):
            cat = e.get("cat")
            if cat == "kernel":
                facts["kernels"] += 1
                if "graph id" in (e.get("args") or {}):
                    facts["kernels_with_graph_id"] += 1
            elif cat == "python_function":
                facts["python_function_events"] += 1
        if "llmdiag_unprofiled_step_ns" in trace:
            facts.setdefault("helper_metadata", []).append(trace["llmdiag_unprofiled_step_ns"])
    return facts


def ns(ms_list: list[float | None]) -> list[int | None]:
    return [None if x is None else int(round(x * 1e6)) for x in ms_list]


def summary(r0: dict[str, Any], active: list[int], planted: bool) -> dict[str, Any]:
    """Top-level ground truth (rank 0; per-rank numbers stay under `ranks`), every time in ns.

    profiled = the recorded steps' host wall time between step edges (no sync inside the loop);
    unprofiled_with_cause = the same job after the profiler stopped, synchronized at both step edges;
    unprofiled_without_cause = the same, cause switched off (None when nothing was planted).
    """
    prof_ms = [r0["profiled"]["host_ms"][s] for s in active]
    with_ms = r0["reference"]["wall_ms"]
    wo = r0.get("reference_without_cause")
    without_ms = wo["wall_ms"] if wo else None
    p_med, w_med = statistics.median(prof_ms), statistics.median(with_ms)
    out = {
        "profiled_steps": active,
        "profiled_step_ns": ns(prof_ms),
        "profiled_step_median_ns": int(round(p_med * 1e6)),
        "unprofiled_with_cause_step_ns": ns(with_ms),
        "unprofiled_with_cause_median_ns": int(round(w_med * 1e6)),
        "unprofiled_without_cause_step_ns": ns(without_ms) if without_ms else None,
        "unprofiled_without_cause_median_ns": int(round(statistics.median(without_ms) * 1e6)) if without_ms else None,
        "measured_profiler_overhead_share": round((p_med - w_med) / p_med, 4) if p_med > 0 else None,
        "cause_cost_median_ns": int(round((w_med - statistics.median(without_ms)) * 1e6)) if without_ms else None,
        "planted": planted,
    }
    helper = r0.get("helper_unprofiled") or {}
    after = helper.get("after_step_ns") or []
    out["helper_after_window_step_ns"] = after  # the helper's own unprofiled steps after the window (in the trace)
    out["helper_after_window_median_ns"] = int(statistics.median(after)) if after else None
    return out


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = args.ddp or args.fsdp
    cuda = torch.cuda.is_available()
    if distributed:
        import torch.distributed as dist

        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if cuda:
            torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl" if cuda else "gloo")
        rank = dist.get_rank()
        device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    else:
        rank, local_rank = 0, 0
        device = torch.device("cuda" if cuda else "cpu")
    torch.manual_seed(args.seed)
    if args.no_tf32:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")

    import transformers

    model = build_model(args, device)
    params = trainable_params(model, args)
    n_total = sum(p.numel() for p in model.parameters())
    n_train = sum(p.numel() for p in params)
    n_param_tensors = len(params)
    if args.grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    if args.infer:
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
    core = model
    if args.ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[local_rank] if cuda else None)
    if args.fsdp:
        from torch.distributed.fsdp import fully_shard

        for layer in core.model.layers:
            fully_shard(layer)
        fully_shard(core)
        params = [p for p in core.parameters() if p.requires_grad]
    fwd = model
    if args.compile_mode:
        fwd = torch.compile(model, mode=args.compile_mode)
    elif args.compile:
        if args.compile_dynamic_false:
            from torch._dynamo import config as dynamo_config

            for key in ("recompile_limit", "cache_size_limit"):
                if hasattr(dynamo_config, key):
                    setattr(dynamo_config, key, 64)
            fwd = torch.compile(model, dynamic=False)
        else:
            fwd = torch.compile(model)

    vocab = args.vocab or SHAPES[args.shape]["vocab_size"]
    row_len = args.max_length
    if args.rank_max_length:
        row_len = int(args.rank_max_length.split(",")[rank])
    fixed = None
    if args.pad_lengths:
        fixed = FixedLengthBatches([int(x) for x in args.pad_lengths.split(",")], args.batch_size, vocab, args.seed)
        loader = None
    else:
        lengths = sample_lengths(DOLLY_SAMPLES, 512, args.seed)
        dataset = PackedDataset(lengths, vocab, args.seed, row_len)
        loader = DataLoader(
            dataset,
            batch_size=args.batch_size,
            shuffle=True,
            generator=torch.Generator().manual_seed(args.seed + 1000 * rank),
            num_workers=args.num_workers,
            pin_memory=args.pin_memory and cuda,
            collate_fn=PackCollate(),
            drop_last=True,
            persistent_workers=args.num_workers > 0,
        )

    opt = (
        torch.optim.AdamW(
            params, lr=args.lr, weight_decay=0.0, foreach=tri(args.optim_foreach), fused=tri(args.optim_fused)
        )
        if not args.infer
        else None
    )
    planted = {"on": True}  # the reference without the cause switches this off
    hook_store: dict[str, torch.Tensor] = {}
    hooks = add_activation_stats(core, hook_store) if args.module_hooks else []
    delay_ms = float(args.delay_ms.split(",")[rank]) if args.delay_ms else 0.0
    delay_steps = [int(x) for x in args.delay_steps.split(",")] if args.delay_steps else []
    delay_at: set[int] = set(delay_steps)
    log_path = f"/tmp/capture_metrics_{os.getpid()}.jsonl"
    host_work: dict[str, list[float]] = {
        "build_masks_ms": [],
        "log_metrics_ms": [],
        "release_memory_ms": [],
        "tokenise_ms": [],
    }
    schedule = plan_schedule(skip_first=args.skip_first, warmup=args.warmup, active=args.active)
    prof = None
    if not args.ref_only_json:
        prof = profile_steps(
            args.out,
            args.name,
            skip_first=args.skip_first,
            warmup=args.warmup,
            active=args.active,
            record_shapes=args.record_shapes,
            profile_memory=args.profile_memory,
            with_stack=args.with_stack,
            time_steps_after=args.time_after,
        )
    n_prof = schedule.total_steps + args.time_after  # the helper's steps, those it times after the window included

    def phase(step: int) -> str:
        p = schedule.phase(step)
        return "after" if p == "done" and step < n_prof else p
    first_active = schedule.active_steps()[0]
    delay_at = {s for s in delay_steps if s < n_prof}
    delay_at |= {n_prof + s - first_active for s in delay_steps}  # the reference plants it at the same offsets
    it = iter(loader) if loader is not None else None

    def next_batch(step: int) -> dict[str, torch.Tensor]:
        nonlocal it
        if fixed is not None:
            b = fixed.batch(step)
            return {k: v.pin_memory() if args.pin_memory and cuda else v for k, v in b.items()}
        assert it is not None and loader is not None
        try:
            return next(it)
        except StopIteration:
            it = iter(loader)
            return next(it)

    save_info: dict[str, Any] = {}

    def unique_graphs() -> int:
        if not args.compile:
            return 0
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])

    def timed_host(key: str, fn: Any, *a: Any) -> Any:
        t0 = time.perf_counter()
        out = fn(*a)
        host_work[key].append(round(1000 * (time.perf_counter() - t0), 3))
        return out

    def infer_step(batch: dict[str, torch.Tensor]) -> None:
        ids = batch["input_ids"].to(device, non_blocking=True)
        with torch.no_grad():
            if args.compile_mode and planted["on"]:
                torch.compiler.cudagraph_mark_step_begin()
                fwd(input_ids=ids).logits.sum()
            else:
                model(input_ids=ids).logits.sum()

    def train_step(step: int, batch: dict[str, torch.Tensor], no_sync: bool = False) -> tuple[int, int, int]:
        tokens = int((batch["labels"] != -100).sum())
        slots = batch["input_ids"].numel()
        on = planted["on"]
        if delay_ms and step in delay_at and on:
            timed_host("tokenise_ms", tokenise_batch, delay_ms, step)
        if args.host_python and on:
            timed_host("build_masks_ms", build_masks, batch["input_ids"])
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        if args.infer:
            infer_step(batch)
            return tokens, slots, 0
        ctx = model.no_sync() if no_sync and args.ddp else contextlib.nullcontext()
        with ctx:
            if args.masked_loss:
                labels = batch.pop("labels")
                logits = fwd(**batch).logits[:, :-1]
                target = labels[:, 1:]
                if on:
                    keep = target != -100
                    loss = nn.functional.cross_entropy(logits[keep].float(), target[keep])
                else:
                    loss = nn.functional.cross_entropy(
                        logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1), ignore_index=-100
                    )
            else:
                loss = fwd(**batch).loss
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        assert opt is not None
        opt.step()
        n_items = 0
        if args.item_loop:
            n_items = item_loop(core)
        opt.zero_grad(set_to_none=True)
        if args.host_pause_ms and on:
            timed_host("log_metrics_ms", log_metrics, log_path, step, args.host_pause_ms / 1000.0)
        if args.release_memory and on:
            t0 = time.perf_counter()
            with torch.profiler.record_function("release_memory"):
                gc.collect()
                if cuda:
                    torch.cuda.empty_cache()
            host_work["release_memory_ms"].append(round(1000 * (time.perf_counter() - t0), 3))
        if args.save_at_step is not None and step == args.save_at_step:
            path = f"/tmp/capture_ckpt_{os.getpid()}.pt"
            t0 = time.perf_counter()
            with torch.profiler.record_function("save_checkpoint"):
                torch.save(core.state_dict(), path)
            save_info.update(
                step=step,
                host_s=round(time.perf_counter() - t0, 4),
                file_bytes=os.path.getsize(path),
                state_dict_bytes=sum(t.numel() * t.element_size() for t in core.state_dict().values()),
            )
            os.remove(path)
        return tokens, slots, n_items

    if args.ref_only_json:  # the same steps without a profiler, then the reference steps timed
        for step in range(n_prof):
            train_step(step, next_batch(step))
        sync(cuda)
        w, g, t = [], [], []
        for k in range(args.ref_steps):
            step = n_prof + k
            batch = next_batch(step)
            sync(cuda)
            t0 = time.perf_counter()
            tok, _, _ = train_step(step, batch)
            sync(cuda)
            w.append(1000 * (time.perf_counter() - t0))
            t.append(tok)
        with open(args.ref_only_json, "w") as f:
            json.dump(
                {
                    "steps": list(range(n_prof, n_prof + args.ref_steps)),
                    "wall_ms": r3(w),
                    "tokens": t,
                    "env": {k: v for k, v in os.environ.items() if k.startswith("PYTORCH_")},
                },
                f,
            )
        print(f"REF-ONLY {args.name}: wall ms {r3(w)}", flush=True)
        return 0
    assert prof is not None
    # profiled phase: no sync inside the loop; events and host clock at step edges
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(n_prof + 1)] if cuda else []
    host_t = [0.0] * (n_prof + 1)
    tokens, slots, items, new_graphs = [], [], [], []
    peak_window = None
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    prof.start()
    host_t[0] = time.perf_counter()
    if cuda:
        ev[0].record()
    for step in range(n_prof):
        if step == prof.schedule.active_steps()[0] and cuda:
            sync(cuda)
            torch.cuda.reset_peak_memory_stats(device)
        g0 = unique_graphs()
        tok, sl, ni = train_step(step, next_batch(step))
        new_graphs.append(unique_graphs() - g0)
        tokens.append(tok)
        slots.append(sl)
        items.append(ni)
        if cuda:
            ev[step + 1].record()
        host_t[step + 1] = time.perf_counter()
        if step == prof.schedule.active_steps()[-1] and cuda:
            sync(cuda)
            peak_window = torch.cuda.max_memory_allocated(device)
        prof.step()
    prof.stop()
    sync(cuda)
    prof_host_ms = [1000 * (host_t[i + 1] - host_t[i]) for i in range(n_prof)]
    prof_gpu_ms = [ev[i].elapsed_time(ev[i + 1]) for i in range(n_prof)] if cuda else []

    # reference phase: no profiler, synchronize at every step edge
    def timed_steps(
        n: int, start: int, no_sync: bool = False
    ) -> tuple[list[float], list[float | None], list[int], list[int]]:
        wall: list[float] = []
        gpu: list[float | None] = []
        toks: list[int] = []
        grs: list[int] = []
        for k in range(n):
            step = start + k
            batch = next_batch(step)
            sync(cuda)
            if distributed:
                torch.distributed.barrier()
                sync(cuda)
            e0 = torch.cuda.Event(enable_timing=True) if cuda else None
            e1 = torch.cuda.Event(enable_timing=True) if cuda else None
            g0 = unique_graphs()
            t0 = time.perf_counter()
            if e0 is not None:
                e0.record()
            tok, _, _ = train_step(step, batch, no_sync=no_sync)
            if e1 is not None:
                e1.record()
            sync(cuda)
            wall.append(1000 * (time.perf_counter() - t0))
            gpu.append(e0.elapsed_time(e1) if e0 is not None and e1 is not None else None)
            toks.append(tok)
            grs.append(unique_graphs() - g0)
        return wall, gpu, toks, grs

    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    ref_wall, ref_gpu, ref_tok, ref_graphs = timed_steps(args.ref_steps, n_prof)
    ref_peak = torch.cuda.max_memory_allocated(device) if cuda else None
    extra: dict[str, Any] = {}
    nxt = n_prof + args.ref_steps
    plants = bool(
        args.release_memory
        or args.host_python
        or args.host_pause_ms
        or args.masked_loss
        or args.module_hooks
        or delay_ms
        or delay_steps
        or args.compile_mode
    )
    without: dict[str, Any] | None = None
    if plants:  # the same job, the cause switched off (hooks removed, no pause/work/release, plain loss, eager)
        planted["on"] = False
        for h in hooks:
            h.remove()
        w, g, t, _ = timed_steps(args.ref_steps, nxt)
        without = {
            "steps": list(range(nxt, nxt + args.ref_steps)),
            "wall_ms": r3(w),
            "gpu_event_ms": r3(g),
            "median_wall_ms": median(w),
            "tokens_per_step": t,
            "how": "same process, cause switched off",
        }
        nxt += args.ref_steps
        planted["on"] = True
    if args.without_cause_json:
        with open(args.without_cause_json) as f:
            other = json.load(f)
        without = {
            "steps": other["steps"],
            "wall_ms": other["wall_ms"],
            "gpu_event_ms": None,
            "median_wall_ms": median(other["wall_ms"]),
            "tokens_per_step": other["tokens"],
            "how": "another process of the same job without the process-wide setting",
            "env": other["env"],
        }

    if args.ddp:  # compute alone (no gradient all-reduce), then the all-reduce alone
        w, g, _, _ = timed_steps(args.ref_steps, nxt, no_sync=True)
        nxt += args.ref_steps
        grad_bytes = sum(p.numel() * p.element_size() for p in params)
        bucket = 25 * 1024 * 1024
        gdt = params[0].dtype
        bufs = []
        left = grad_bytes
        while left > 0:
            n = min(bucket, left)
            bufs.append(torch.ones(n // gdt.itemsize, dtype=gdt, device=device))
            left -= n
        times = []
        for rep in range(7):
            sync(cuda)
            torch.distributed.barrier()
            sync(cuda)
            t0 = time.perf_counter()
            for b in bufs:
                torch.distributed.all_reduce(b)
            sync(cuda)
            if rep >= 2:
                times.append(1000 * (time.perf_counter() - t0))
        extra["ddp"] = {
            "no_sync_wall_ms": r3(w),
            "no_sync_gpu_ms": r3(g),
            "no_sync_median_wall_ms": median(w),
            "grad_bytes_per_step": grad_bytes,
            "allreduce_alone_buckets": len(bufs),
            "allreduce_alone_ms": r3(times),
            "allreduce_alone_median_ms": median(times),
            "allreduce_alone_busbw_GBps": round(
                2 * (world - 1) / world * grad_bytes / (statistics.median(times) / 1000) / 1e9, 3
            )
            if times and world > 1
            else None,
            "note": "no_sync: the same steps with DDP's gradient all-reduce skipped (compute alone); "
            "allreduce_alone: the step's gradient bytes all-reduced in 25 MiB buckets of the gradients' dtype after a barrier (transfer alone)",
        }
    if args.train == "full" and args.optim_foreach == "false" and args.optim_fused in ("none", "false"):
        # optimizer step alone: the planted for-loop AdamW vs foreach vs fused
        def time_opt(o: torch.optim.Optimizer, reps: int = 5) -> list[float]:
            out = []
            for p in params:
                p.grad = torch.randn_like(p) * 1e-3
            for rep in range(reps + 2):
                sync(cuda)
                t0 = time.perf_counter()
                o.step()
                sync(cuda)
                if rep >= 2:
                    out.append(1000 * (time.perf_counter() - t0))
            return out

        res = {}
        for name, kw in (
            ("for_loop", dict(foreach=False, fused=False)),
            ("foreach", dict(foreach=True)),
            ("fused", dict(fused=True)),
        ):
            if name == "fused" and not cuda:
                continue
            o = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, **kw)
            res[name] = median(time_opt(o))
        extra["optimizer_step_alone_median_ms"] = res
    if args.grad_ckpt:  # the same steps with checkpointing off: time and memory
        core.gradient_checkpointing_disable()
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        w, g, _, _ = timed_steps(args.ref_steps, nxt)
        nxt += args.ref_steps
        extra["no_grad_ckpt"] = {
            "wall_ms": r3(w),
            "gpu_ms": r3(g),
            "median_wall_ms": median(w),
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
        }

    active = list(prof.schedule.active_steps())
    mine = {
        "rank": rank,
        "host": socket.gethostname(),
        "gpu": torch.cuda.get_device_name(device) if cuda else "cpu",
        "gpu_total_bytes": torch.cuda.get_device_properties(device).total_memory if cuda else None,
        "row_length": row_len if fixed is None else None,
        "tokens_per_step": tokens + ref_tok,
        "slots_per_step": slots,
        "profiled": {
            "steps": list(range(n_prof)),
            "phases": [phase(s) for s in range(n_prof)],
            "host_ms": r3(prof_host_ms),
            "gpu_event_ms": r3(prof_gpu_ms),
            "active_median_host_ms": median([prof_host_ms[s] for s in active]),
            "active_median_gpu_event_ms": median([prof_gpu_ms[s] for s in active]) if cuda else None,
            "new_compiled_graphs": new_graphs if args.compile else None,
            "item_calls_per_step": items if args.item_loop else None,
            "peak_allocated_bytes_window": peak_window,
        },
        "reference": {
            "steps": list(range(n_prof, n_prof + args.ref_steps)),
            "wall_ms": r3(ref_wall),
            "gpu_event_ms": r3(ref_gpu),
            "median_wall_ms": median(ref_wall),
            "tokens_per_s": round(sum(ref_tok) / (sum(ref_wall) / 1000), 1) if ref_wall else None,
            "new_compiled_graphs": ref_graphs if args.compile else None,
            "peak_allocated_bytes": ref_peak,
        },
        "peak_allocated_bytes_run": torch.cuda.max_memory_allocated(device) if cuda else None,
        "trace_files": [os.path.basename(f) for f in prof.trace_files()],
        **extra,
    }
    if save_info:
        mine["save_checkpoint"] = save_info
    mine["reference_without_cause"] = without
    mine["host_work_ms"] = {k: v for k, v in host_work.items() if v}
    mine["delay"] = (
        {"ms": delay_ms, "profiled_steps": delay_steps, "reference_steps": sorted(x for x in delay_at if x >= n_prof)}
        if delay_ms
        else None
    )
    mine["activation_stats_hooks"] = len(hooks) if args.module_hooks else None
    last_active = active[-1]
    timed = list(zip(prof.unprofiled_steps, prof.unprofiled_step_ns))
    mine["helper_unprofiled"] = {
        "steps": [s for s, _ in timed if s < last_active],
        "step_ns": [t for s, t in timed if s < last_active],
        "after_steps": [s for s, _ in timed if s > last_active],
        "after_step_ns": [t for s, t in timed if s > last_active],
    }
    mine["trace_facts"] = trace_facts(prof.trace_files())
    ranks = [mine]
    if distributed:
        gathered: list[Any] = [None] * world
        torch.distributed.all_gather_object(gathered, mine)
        ranks = gathered
    if rank == 0:
        truth = {
            "capture": args.name,
            "what": args.what,
            "argv": sys.argv[1:] if argv is None else argv,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "cuda": torch.version.cuda,
            "world_size": world,
            "distributed": "ddp" if args.ddp else "fsdp2" if args.fsdp else None,
            "nccl_env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM_"))},
            "model": {
                "shape": f"Qwen2.5-{args.shape.upper()}",
                "layers": args.layers,
                "params": n_total,
                "trained": args.train,
                "trainable_params": n_train,
                "trainable_tensors": n_param_tensors,
                "dtype": args.dtype,
                "tf32": None if not args.no_tf32 else False,
                "grad_ckpt": args.grad_ckpt,
                "compile": ("dynamic=False" if args.compile_dynamic_false else "default") if args.compile else None,
            },
            "data": {
                "batch_size": args.batch_size,
                "packing": fixed is None,
                "row_length": args.rank_max_length or args.max_length if fixed is None else None,
                "pad_lengths": args.pad_lengths,
                "num_workers": args.num_workers if fixed is None else None,
                "pin_memory": args.pin_memory,
            },
            "optimizer": {
                "name": "AdamW",
                "foreach": tri(args.optim_foreach),
                "fused": tri(args.optim_fused),
                "lr": args.lr,
            },
            "profiler": {
                "time_steps_after": args.time_after,
                "skip_first": args.skip_first,
                "warmup": args.warmup,
                "active_steps": active,
                "record_shapes": args.record_shapes,
                "profile_memory": args.profile_memory,
                "with_stack": args.with_stack,
            },
            "ranks": ranks,
        }
        truth.update(summary(ranks[0], active, without is not None))
        truth["env"] = {k: v for k, v in os.environ.items() if k.startswith("PYTORCH_")}
        path = os.path.join(args.out, args.name, "truth.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(truth, f, indent=1, allow_nan=False, default=str)
        r0 = ranks[0]
        print(
            f"TRUTH {args.name}: world {world} profiled host ms {r0['profiled']['host_ms']} "
            f"ref wall ms {r0['reference']['wall_ms']} tokens {r0['tokens_per_step'][:3]} "
            f"files {[len(r['trace_files']) for r in ranks]}",
            flush=True,
        )
    if distributed:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
