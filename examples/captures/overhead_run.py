#!/usr/bin/env python3
"""The profiler's own cost on one job, measured with profiled and unprofiled steps interleaved (#24, batch 5).

One process: the capture helper profiles the job once as a user would (`profile_steps`, writing the trace with its
unprofiled steps in the metadata), then the truth is measured in `--cycles` cycles, each one unprofiled block and
one profiled block of `--block` steps, in alternating order (U P, P U, ...), so both sides see the same drift:

- unprofiled block: one settling step, then `--block` steps between two `torch.cuda.synchronize()`;
- profiled block: a `torch.profiler.profile` with the helper's options and a schedule of 1 warm-up and `--block`
  active steps, its results dropped; the `--block` active steps between two synchronizes, the `prof.step()` that ends
  the window (where torch processes the events) left outside.

A block's step is its wall time over `--block`. Before the helper runs, `--pristine-blocks` unprofiled blocks are timed
the same way: the job before any profiler ran in the process (a profiler's state can outlive its window: docs/captures_5.md).
`measured_profiler_overhead_share` is (W - U0) / W, W the helper window's median step on the host clock (the trace's
profiled step) and U0 the pristine blocks' median; `interleaved.measured_share` is (P - U) / P of the interleaved blocks'
medians, its 95 % interval from resampling the cycles (`--boot` times).

Usage: overhead_run.py --out LOGDIR --name CAPTURE --job host|gpu --opts min|default|full [--cpus 2-5]
Writes LOGDIR/CAPTURE/rank0.*.pt.trace.json.gz (the helper's) and LOGDIR/CAPTURE/truth.json (the fields
scripts/trust_check.py reads: `ranks[0].profiled.active_median_host_ms`, `ranks[0].reference.median_wall_ms`,
`ranks[0].trace_files`, plus `interleaved` with every block).

Jobs (Qwen2.5-1.5B's shape, random weights, batches made once on the GPU, no DataLoader):
  host  LoRA r16 on 4 layers, bf16, batch 2 x 512: the host launches slower than the GPU runs (~40 ms a step)
  gpu   full fine-tune of 4 layers, bf16, batch 16 x 1024: the GPU is busy all step (~135 ms)
Option sets: min (no shapes, no memory), default (record_shapes + profile_memory, the helper's default),
full (default + with_stack).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import socket
import statistics
import sys
import time
from typing import Any

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from capture_run import SHAPES, build_model, trainable_params  # noqa: E402

from tb_llmdiag.capture import profile_steps  # noqa: E402

JOBS = {
    "host": dict(layers=4, train="lora", batch_size=2, length=512),
    "gpu": dict(layers=4, train="full", batch_size=16, length=1024),
}
OPTS = {
    "min": dict(record_shapes=False, profile_memory=False, with_stack=False),
    "default": dict(record_shapes=True, profile_memory=True, with_stack=False),
    "full": dict(record_shapes=True, profile_memory=True, with_stack=True),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--job", choices=sorted(JOBS), required=True)
    p.add_argument("--opts", choices=sorted(OPTS), required=True)
    p.add_argument("--cycles", type=int, default=24)
    p.add_argument("--block", type=int, default=6)
    p.add_argument("--active", type=int, default=6, help="the helper's recorded steps")
    p.add_argument("--skip-first", type=int, default=5)
    p.add_argument("--time-after", type=int, default=10, help="the helper's time_steps_after")
    p.add_argument("--cpus", default=None, help="pin the process to these CPUs (e.g. 2-5 or 2,3,4,5)")
    p.add_argument("--gc-freeze", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--pristine-blocks", type=int, default=6, help="unprofiled blocks timed before any profiler exists")
    p.add_argument("--boot", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    # CPU dry runs only
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--vocab", type=int, default=None)
    p.add_argument("--length", type=int, default=None)
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    return p.parse_args(argv)


def cpu_list(spec: str) -> set[int]:
    out: set[int] = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def median_ms(xs: list[float]) -> float:
    return round(float(statistics.median(xs)), 4)


def share(p: float, u: float) -> float:
    return (p - u) / p


def boot_interval(pb: list[float], ub: list[float], n: int, seed: int) -> list[float]:
    """95 % interval of (median P - median U) / median P over cycles drawn with replacement (paired by cycle)."""
    rng = random.Random(seed)
    k = len(pb)
    draws = []
    for _ in range(n):
        idx = [rng.randrange(k) for _ in range(k)]
        draws.append(share(statistics.median(pb[i] for i in idx), statistics.median(ub[i] for i in idx)))
    draws.sort()
    return [round(draws[int(0.025 * (n - 1))], 4), round(draws[int(0.975 * (n - 1))], 4)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cpus:
        os.sched_setaffinity(0, cpu_list(args.cpus))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    torch.manual_seed(args.seed)
    job = dict(JOBS[args.job])
    if args.length:
        job["length"] = args.length
    margs = argparse.Namespace(
        shape="1.5b", layers=job["layers"], vocab=args.vocab, tiny=args.tiny, dtype=args.dtype, train=job["train"]
    )
    model = build_model(margs, device)
    params = trainable_params(model, margs)
    model.train()
    opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.0)
    vocab = args.vocab or SHAPES["1.5b"]["vocab_size"]
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    batches = [
        torch.randint(0, vocab, (job["batch_size"], job["length"]), generator=g).to(device) for _ in range(4)
    ]

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    n_step = 0

    def train_step() -> None:
        nonlocal n_step
        ids = batches[n_step % len(batches)]
        n_step += 1
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):  # cuBLAS, allocator and optimizer state before anything is timed
        train_step()
    sync()
    gc.collect()
    if args.gc_freeze:
        gc.freeze()

    def unprofiled_block() -> tuple[float, list[float]]:
        train_step()  # settle after the previous block (a profiler's teardown, or nothing)
        sync()
        t = [time.perf_counter()]
        for _ in range(args.block):
            train_step()
            t.append(time.perf_counter())
        sync()
        t[-1] = time.perf_counter()
        return 1000 * (t[-1] - t[0]) / args.block, [1000 * (b - a) for a, b in zip(t, t[1:])]

    # 0. the job before any profiler has run in the process (CUPTI not yet loaded), timed as the unprofiled blocks are
    pristine = [round(unprofiled_block()[0], 4) for _ in range(args.pristine_blocks)]

    # 1. the capture helper, as a user runs it: its steps on the host clock, no sync inside the loop
    opts = OPTS[args.opts]
    prof = profile_steps(
        args.out, args.name, skip_first=args.skip_first, active=args.active, time_steps_after=args.time_after, **opts
    )
    n_helper = prof.total_steps
    host_t = [0.0] * (n_helper + 1)
    prof.start()
    host_t[0] = time.perf_counter()
    for k in range(n_helper):
        train_step()
        host_t[k + 1] = time.perf_counter()
        prof.step()
    prof.stop()
    sync()
    helper_host_ms = [1000 * (host_t[k + 1] - host_t[k]) for k in range(n_helper)]
    active = list(prof.schedule.active_steps())
    timed = list(zip(prof.unprofiled_steps, prof.unprofiled_step_ns))

    # 2. the truth: profiled and unprofiled blocks interleaved
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])

    def profiled_block() -> tuple[float, list[float]]:
        p = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(wait=0, warmup=1, active=args.block, repeat=1),
            on_trace_ready=lambda _p: None,
            **opts,
        )
        p.start()
        train_step()  # the profiler's warm-up step
        p.step()
        sync()
        t = [time.perf_counter()]
        for i in range(args.block):
            train_step()
            if i < args.block - 1:
                p.step()
            t.append(time.perf_counter())
        sync()
        t[-1] = time.perf_counter()
        p.step()  # ends the window: torch processes the events here, outside the timed steps
        p.stop()
        return 1000 * (t[-1] - t[0]) / args.block, [1000 * (b - a) for a, b in zip(t, t[1:])]

    pb: list[float] = []
    ub: list[float] = []
    p_steps: list[list[float]] = []
    u_steps: list[list[float]] = []
    order: list[str] = []
    t_start = time.perf_counter()
    for c in range(args.cycles):
        first_p = c % 2 == 1
        order.append("PU" if first_p else "UP")
        for side in ("P", "U") if first_p else ("U", "P"):
            mean, steps = profiled_block() if side == "P" else unprofiled_block()
            (pb if side == "P" else ub).append(round(mean, 4))
            (p_steps if side == "P" else u_steps).append([round(x, 4) for x in steps])
    truth_s = time.perf_counter() - t_start
    P, U = median_ms(pb), median_ms(ub)
    window_ms = median_ms([helper_host_ms[s] for s in active])
    U0 = median_ms(pristine) if pristine else U  # the job as it runs with no profiler at all
    measured = share(P, U)
    per_cycle = [share(p, u) for p, u in zip(pb, ub)]
    half = args.cycles // 2
    interleaved = {
        "how": "cycles of one unprofiled and one profiled block in alternating order; a block's step is its wall "
        "time between two synchronizes over its steps; shares are (P - U) / P of the block medians",
        "cycles": args.cycles,
        "block_steps": args.block,
        "order": order,
        "profiled_block_ms": pb,
        "unprofiled_block_ms": ub,
        "profiled_step_ms": p_steps,
        "unprofiled_step_ms": u_steps,
        "profiled_median_ms": P,
        "unprofiled_median_ms": U,
        "measured_share": round(measured, 4),
        "measured_share_95": boot_interval(pb, ub, args.boot, args.seed),
        "per_cycle_share_quartiles": [round(q, 4) for q in statistics.quantiles(per_cycle, n=4)],
        "first_half_share": round(share(statistics.median(pb[:half]), statistics.median(ub[:half])), 4),
        "second_half_share": round(share(statistics.median(pb[half:]), statistics.median(ub[half:])), 4),
        "seconds": round(truth_s, 2),
        "pristine_block_ms": pristine,
        "pristine_median_ms": median_ms(pristine) if pristine else None,
        "pristine_share": round(share(P, statistics.median(pristine)), 4) if pristine else None,
        "pristine_how": "blocks timed the same way before any profiler ran in the process",
    }
    mine = {
        "rank": 0,
        "host": socket.gethostname(),
        "gpu": torch.cuda.get_device_name(device) if cuda else "cpu",
        "cpus": sorted(os.sched_getaffinity(0)),
        "profiled": {
            "steps": list(range(n_helper)),
            "phases": [prof.schedule.phase(s) if s < prof.schedule.total_steps else "after" for s in range(n_helper)],
            "helper_host_ms": [round(x, 4) for x in helper_host_ms],
            "helper_active_median_host_ms": median_ms([helper_host_ms[s] for s in active]),
            "active_median_host_ms": window_ms,
            "basis": "the helper's recorded steps on the host clock (the trace's window)",
        },
        "reference": {
            "median_wall_ms": U0,
            "wall_ms": pristine or ub,
            "wall_ms_basis": "each block's step (its wall time over its steps)",
            "basis": "pristine blocks: timed before any profiler ran in the process"
            if pristine
            else "interleaved unprofiled blocks",
        },
        "helper_unprofiled": {
            "steps": [s for s, _ in timed if s < active[0]],
            "step_ns": [t for s, t in timed if s < active[0]],
            "after_steps": [s for s, _ in timed if s > active[-1]],
            "after_step_ns": [t for s, t in timed if s > active[-1]],
        },
        "trace_files": [os.path.basename(f) for f in prof.trace_files()],
    }
    truth = {
        "capture": args.name,
        "what": f"{args.job}-bound job ({job}), profiled with the {args.opts} options ({opts})",
        "argv": sys.argv[1:] if argv is None else argv,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "gc_freeze": args.gc_freeze,
        "env": {k: v for k, v in os.environ.items() if k in ("TEARDOWN_CUPTI", "DISABLE_CUPTI_LAZY_REINIT")},
        "job": {"name": args.job, **job},
        "profiler": {
            "options": opts,
            "skip_first": args.skip_first,
            "active_steps": active,
            "time_steps_after": args.time_after,
        },
        "measured_profiler_overhead_share": round(share(window_ms, U0), 4),
        "measured_how": "(the trace window's median step on the host clock - the pristine blocks' median step) / the "
        "window's (interleaved.measured_share: the profiled and unprofiled blocks interleaved after it)",
        "interleaved": interleaved,
        "ranks": [mine],
    }
    path = os.path.join(args.out, args.name, "truth.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(truth, f, indent=1, allow_nan=False)
    after = mine["helper_unprofiled"]["after_step_ns"]
    print(
        f"TRUTH {args.name}: window {window_ms:.2f} pristine {U0:.2f} ms share {share(window_ms, U0):+.3f} | P {P:.2f} U {U:.2f} ms share {measured:+.3f} {interleaved['measured_share_95']} "
        f"halves {interleaved['first_half_share']:+.3f}/{interleaved['second_half_share']:+.3f} | pristine "
        f"{interleaved['pristine_median_ms']} ms share {interleaved['pristine_share']} | helper window "
        f"{mine['profiled']['helper_active_median_host_ms']:.2f} after "
        f"{statistics.median(after) / 1e6 if after else float('nan'):.2f} ms | truth {truth_s:.1f} s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
