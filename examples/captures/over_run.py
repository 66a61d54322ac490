#!/usr/bin/env python3
"""#34: one training run with windows over the run, three planted changes, and the wall time it costs.

One process runs a small pretraining loop (a Qwen2 decoder built from a config, random weights, bf16, AdamW; batches
made once on the device, no DataLoader, the loss read every step as a logging loop does) for `--steps` steps, with:

- **sequence length doubles** from step `--seq-change` (batch B x L -> B x 2L: twice the tokens a step);
- **allocator thrash** from step `--thrash`: every step allocates a scratch buffer of a different size (64-320 MiB)
  and ends with `torch.cuda.empty_cache()`, so every step hands its blocks back to the driver and gets them again
  (cudaFree / cudaMalloc in the trace, `num_device_alloc` / `num_device_free` in the allocator's counters);
- **a slow data shard** at steps `--slow` .. `--slow + --slow-steps - 1`: the batch is late by `--slow-ms` (a host
  sleep before the step, where a loader would wait on a slow disk).

`--mode profiled` captures with `tb_llmdiag.capture.profile_run` (a window every `--every` steps, triggered windows at
`--trigger` over the recent median, the default 2 % budget, `total_steps` known); `--mode none` runs the same loop
with no profiler at all in the process: the wall-time reference (docs/captures_5.md: a profiler slows later steps of
its own process, so the reference is a process of its own). Both write `<out>/<name>/truth.json`: every step's wall
time (host clock between the ends of two steps, the loss read in each), the loop's wall time between two
synchronizes, where each change was planted, tokens a step, the allocator's counters every step, and (profiled) the
windows taken with their metadata and summaries.

`--batch 0` calibrates the batch (`--target-step-ms`, printed and in truth.json): over_run.sh lets the first process
choose it and passes it to the others, so every process runs the same job.

Usage: over_run.py --out DIR --name NAME --mode profiled|none [--steps 1500 --every 100 ...]
CPU dry run: over_run.py --out /tmp/o --name p --mode profiled --tiny --steps 60 --every 10 --seq-change 20
  --thrash 35 --slow 47 --slow-steps 4
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import socket
import sys
import time
from typing import Any

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
from overhead_run import cpu_list  # noqa: E402  (the script's folder is on sys.path, as anatomy_run.py uses it)

from tb_llmdiag.capture import profile_run  # noqa: E402

MODEL = dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=2, num_attention_heads=32,
             num_key_value_heads=8, vocab_size=32000)  # fmt: skip
# Two wide layers: a quarter of the operators a step of the first device run's 8 layers of 2,048 (there a window's
# profiler stop and export took 0.3-0.45 s, so at 43 ms steps the 2 % budget allowed a window every 500 steps, not
# 100); the profiler's cost follows the operators it records, not the FLOPs. Large models' steps run for seconds.
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000)  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--mode", choices=("profiled", "none"), required=True)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch", type=int, default=10, help="sequences a step; 0: calibrated to --target-step-ms")
    p.add_argument("--target-step-ms", type=float, default=70.0,
                   help="with --batch 0: the batch whose step before --seq-change takes about this long")  # fmt: skip
    p.add_argument("--length", type=int, default=512, help="sequence length before --seq-change (doubled after)")
    p.add_argument("--seq-change", type=int, default=650)
    p.add_argument("--thrash", type=int, default=1050)
    p.add_argument("--slow", type=int, default=1234)
    p.add_argument("--slow-steps", type=int, default=8)
    p.add_argument("--slow-ms", type=float, default=150.0)
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--trigger", type=float, default=0.5)
    p.add_argument("--cooldown", type=int, default=150)
    p.add_argument("--budget", type=float, default=0.02)
    p.add_argument("--cpus", default=None, help="pin the process to these CPUs (e.g. 2-9)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tiny", action="store_true", help="CPU dry run: a tiny model, fp32")
    return p.parse_args(argv)


def build(args: argparse.Namespace, device: torch.device) -> tuple[Any, Any]:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        **(TINY if args.tiny else MODEL), max_position_embeddings=4 * args.length, tie_word_embeddings=False
    )
    dtype = torch.float32 if args.tiny else torch.bfloat16
    torch.manual_seed(args.seed)
    model = Qwen2ForCausalLM(cfg).to(device=device, dtype=dtype)
    model.train()
    fused = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0, fused=fused)
    return model, opt


class Job:
    """The training loop's step with the three planted changes (module docstring)."""

    def __init__(self, args: argparse.Namespace, device: torch.device) -> None:
        self.args, self.device = args, device
        self.model, self.opt = build(args, device)
        self.cuda = device.type == "cuda"
        self.make_batches(args.batch or 1)

    def make_batches(self, batch: int) -> None:
        args = self.args
        args.batch = batch
        vocab = (TINY if args.tiny else MODEL)["vocab_size"]
        g = torch.Generator(device="cpu").manual_seed(args.seed)
        self.batches = {
            L: [torch.randint(0, vocab, (batch, L), generator=g).to(self.device) for _ in range(2)]
            for L in (args.length, 2 * args.length)
        }

    def length(self, step: int) -> int:
        return self.args.length * (2 if step >= self.args.seq_change else 1)

    def tokens(self, step: int) -> int:
        return self.args.batch * self.length(step)

    def step(self, step: int) -> float:
        a = self.args
        if a.slow <= step < a.slow + a.slow_steps:
            time.sleep(a.slow_ms / 1000)  # the slow shard: the batch arrives late
        ids = self.batches[self.length(step)][step % 2]
        loss = self.model(input_ids=ids, labels=ids).loss
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        if step >= a.thrash:
            mib = 64 + 32 * (step % 9)  # a different size every step
            scratch = torch.empty(mib << 20, dtype=torch.uint8, device=self.device)
            scratch.fill_(1)
            del scratch
            if self.cuda:
                torch.cuda.empty_cache()
        return float(loss.item())  # the loss logged every step

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def alloc_counts(self) -> tuple[int, int]:
        if not self.cuda:
            return 0, 0
        s = torch.cuda.memory_stats()
        return int(s.get("num_device_alloc", 0)), int(s.get("num_device_free", 0))


def calibrate(job: Job, target_ms: float) -> dict[str, Any]:
    """The batch whose step before the sequence change takes about `target_ms`: steps timed at two batch sizes, a
    line through them (a fixed part and a part per sequence)."""
    timed = {}
    for b in (4, 12):
        job.make_batches(b)
        for _ in range(2):
            job.step(0)
        job.sync()
        t = time.perf_counter()
        for _ in range(4):
            job.step(0)
        job.sync()
        timed[b] = 1000 * (time.perf_counter() - t) / 4
    # a noisy pair cannot make the line flat: at least half the per-sequence time of the larger batch
    per_seq_ms = max((timed[12] - timed[4]) / 8, 0.5 * timed[12] / 12)
    fixed_ms = max(0.0, timed[12] - 12 * per_seq_ms)
    batch = int(min(40, max(1, round((target_ms - fixed_ms) / per_seq_ms))))
    job.make_batches(batch)
    return {"target_step_ms": target_ms, "step_ms_at_batch": {str(b): round(v, 3) for b, v in timed.items()},
            "batch": batch}  # fmt: skip


def run_loop(job: Job, args: argparse.Namespace, prof: Any) -> dict[str, Any]:
    """The timed loop: every step's wall time, the loop's, the allocator's counters."""
    n = args.steps
    ends = [0.0] * (n + 1)
    allocs, frees, losses = [0] * n, [0] * n, [0.0] * n
    mem_every: list[dict[str, int]] = []
    job.sync()
    ends[0] = t0 = time.perf_counter()
    for s in range(n):
        losses[s] = job.step(s)
        if prof is not None:
            prof.step(tokens=job.tokens(s))
        ends[s + 1] = time.perf_counter()
        allocs[s], frees[s] = job.alloc_counts()
        if job.cuda and s % 100 == 0:
            mem_every.append({"step": s, "allocated_bytes": torch.cuda.memory_allocated(),
                              "reserved_bytes": torch.cuda.memory_reserved()})  # fmt: skip
    job.sync()
    loop_s = time.perf_counter() - t0
    return {
        "loop_wall_s": round(loop_s, 4),
        "step_wall_ms": [round(1000 * (b - a), 4) for a, b in zip(ends, ends[1:])],
        "num_device_alloc": allocs,
        "num_device_free": frees,
        "loss": [round(x, 4) for x in losses[:: max(1, n // 100)]],
        "memory_every_100": mem_every,
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated() if job.cuda else None,
    }


def windows_truth(prof: Any, out_dir: str) -> list[dict[str, Any]]:
    """The windows taken: why, which steps, their cost and file, and the summary the helper's analysis gave."""
    rows = []
    for w in prof.windows:
        res = prof.summaries.get(w.index, {})
        rows.append({
            "index": w.index, "reason": w.reason, "warmup_step": w.warmup_step,
            "window_steps": [w.first_step, w.last_step], "trigger": w.trigger,
            "every_effective": w.every_effective, "skipped_steps": w.skipped_steps,
            "profiled_step_ns": [t for _, t in w.steps_ns], "after_step_ns": [t for _, t in w.after],
            "profiler_start_ns": w.start_ns, "profiler_stop_export_ns": w.stop_ns,
            "file": os.path.relpath(res["path"], out_dir) if res.get("path") else None,
            "summary": res.get("summary"), "error": res.get("error"),
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cpus:
        os.sched_setaffinity(0, cpu_list(args.cpus))
    device = torch.device("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
    calibrating = args.batch == 0
    job = Job(args, device)
    calibration = calibrate(job, args.target_step_ms) if calibrating else None
    for s in range(3):  # cuBLAS, allocator and optimizer state, both lengths, before anything is timed
        job.step(args.seq_change + s if s else 0)
    job.sync()
    gc.collect()
    gc.freeze()
    out_dir = os.path.join(args.out, args.name)
    os.makedirs(out_dir, exist_ok=True)
    prof = None
    if args.mode == "profiled":
        prof = profile_run(args.out, args.name, every=args.every, trigger=args.trigger, cooldown_steps=args.cooldown,
                           budget=args.budget, total_steps=args.steps)  # fmt: skip
        prof.start()
    loop = run_loop(job, args, prof)
    stop_s = None
    if prof is not None:
        t = time.perf_counter()
        prof.stop()  # the last summaries: after the loop, outside its wall time
        stop_s = round(time.perf_counter() - t, 4)
    truth = {
        "schema": 1,
        "mode": args.mode,
        "name": args.name,
        "args": vars(args),
        "model": TINY if args.tiny else MODEL,
        "device": torch.cuda.get_device_name() if job.cuda else "cpu",
        "host": socket.gethostname(),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "planted": {
            "seq_len_doubles_at_step": args.seq_change,
            "seq_len": [args.length, 2 * args.length],
            "tokens_per_step": [args.batch * args.length, 2 * args.batch * args.length],
            "allocator_thrash_from_step": args.thrash,
            "allocator_thrash": "a scratch buffer of 64-320 MiB (a different size each step) and "
            "torch.cuda.empty_cache() at the end of every step",
            "slow_steps": list(range(args.slow, args.slow + args.slow_steps)),
            "slow_host_sleep_ms": args.slow_ms,
        },  # fmt: skip
        "calibration": calibration,
        **loop,
        "stop_s": stop_s,
    }
    if prof is not None:
        truth["windows"] = windows_truth(prof, out_dir)
        truth["budget"] = {"share": prof.budget.share, "spent_ns": prof.budget.spent_ns,
                           "one_time_ns": prof.budget.one_time_ns, "costs_ns": prof.budget.costs_ns}  # fmt: skip
        truth["scalars"] = [list(x) for x in prof.sink.written] if prof.sink else []
    with open(os.path.join(out_dir, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1, allow_nan=False)
    n_win = len(truth.get("windows", []))
    print(f"TRUTH {args.name} mode={args.mode} loop_wall_s={loop['loop_wall_s']} windows={n_win} stop_s={stop_s} "
          f"batch={args.batch}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
