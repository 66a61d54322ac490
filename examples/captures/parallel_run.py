#!/usr/bin/env python3
"""One parallelism capture on 2 ranks (issue #33), run under torchrun: a planted communication cause, its fix and
the loop with the communication removed, all timed unprofiled BEFORE any profiler exists in the process, then the
planted loop captured with `tb_llmdiag.capture.profile_steps`, then truth.json (every rank's numbers, gathered on
rank 0).

    torchrun --standalone --nproc_per_node 2 examples/captures/parallel_run.py --out DIR --job JOB [--tiny ...]

Writes DIR/JOB/rank<R>.<ns>.pt.trace.json.gz (one per rank, with distributedInfo) and DIR/JOB/truth.json.
The model (parallel_model.py) is Qwen2.5-0.5B-shaped (hidden 896, FFN 4864, 14/2 heads, q/k/v biases), random
weights, vocab 32,000, bf16, AdamW (foreach), random token batches made once on the device (no DataLoader).

Jobs (the variants each one times: `planted` first; `fixed` the user's fix; `nocomm` the same loop with the
communication removed, so planted - nocomm is the communication's cost):
  ddp_per_tensor        24 layers (291 tensors), 8x512 a rank: planted = a plain model, one dist.all_reduce per
                        parameter after backward (+ grad /= world); fixed = DDP (25 MiB buckets); nocomm = DDP under
                        no_sync()
  ddp_accum_no_nosync   DDP, 6 layers, 8 micro-batches of 1x1024 a step: planted = DDP's all-reduce on every
                        micro-batch; fixed = no_sync() on the first 7; nocomm = no_sync() on all 8
  fsdp                  FSDP2 fully_shard per layer + root, 16 layers, 4x1024 a rank: planted = backward prefetch off
                        (each param group's _backward_prefetch a no-op: FSDP1's backward_prefetch=None; FSDP2 has no
                        switch): a layer's all-gather queues behind the next layer's reduce-scatter on the NCCL stream
                        and its backward waits for both; fixed = explicit prefetch (set_modules_to_forward_prefetch /
                        set_modules_to_backward_prefetch, 2 layers ahead); nocomm = an unsharded replica, no FSDP
  tensor_parallel       TP=2 (parallelize_module: ColwiseParallel q/k/v/gate/up, RowwiseParallel o/down), 12 layers,
                        8x1024 the same batch on both ranks: 2 all-reduces a layer forward, 5 backward (one per
                        ColwiseParallel input gradient), all on the critical path; nocomm = a model of one rank's local shapes (7/1 heads, FFN 2432), no DTensor
  pipeline              2 stages of 8 layers (vocab 8,192 so the head weighs half a layer), hand-written GPipe
                        (all forwards then all backwards, dist.send/recv of activations and their gradients), batch
                        16x1024 a step: planted = m=2 micro-batches (bubble (p-1)/(m+p-1) = 1/3); fixed = m=8 (1/9);
                        nocomm = each stage alone with m=2 (its compute, no waiting)
  expert_all_to_all     EP=2: 8 experts (4 a rank, FFN 1408) top-2 in each of 8 layers, 4x1024 a rank:
                        all_to_all_single of the split sizes (read on the host), then the token dispatch and the
                        combine (autograd all_to_all); nocomm = tokens kept on their rank, served by its own experts
                        (expert id mod 4: the same rows through the same shapes)
  rank0_eval            DDP, 8 layers, 4x1024: rank 0 alone runs record_function("rank0_eval") (3 no_grad forwards of
                        a 4x1024 batch) at the end of every step; rank 1 waits in the next step's all-reduce;
                        fixed = without it (nocomm = DDP no_sync, without it)
  pipeline_unbalanced   the pipeline with 12 layers, stage 0 4 of them, stage 1 8 (m=4): stage 1 is a real straggler;
                        fixed = 6/6 (m=4); nocomm = the 4/8 stages alone

CPU dry run (gloo): add --tiny --layers 4 --seq 32 --rounds 1 --block 2 --skip-first 2 --active 3 --time-after 1
--dtype fp32. Under gloo everything runs as on NCCL (send/recv, all_to_all_single, FSDP2, DTensor), only on the CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import socket
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from parallel_model import QWEN25_05B_SHAPE, TINY, Config, Decoder, build  # noqa: E402

from tb_llmdiag.capture import profile_steps  # noqa: E402

JOB_ORDER = (
    "ddp_per_tensor",
    "pipeline",
    "tensor_parallel",
    "fsdp",
    "ddp_accum_no_nosync",
    "expert_all_to_all",
    "rank0_eval",
    "pipeline_unbalanced",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--job", choices=JOB_ORDER, required=True)
    p.add_argument("--name", default=None, help="run folder under --out (default: the job)")
    p.add_argument("--what", default="", help="one line for truth.json")
    p.add_argument("--layers", type=int, default=None, help="override the job's layer count")
    p.add_argument("--seq", type=int, default=None, help="override every job's sequence length")
    p.add_argument("--rounds", type=int, default=3, help="pristine rounds: one block of every variant each")
    p.add_argument("--block", type=int, default=4, help="steps in a pristine block")
    p.add_argument("--skip-first", type=int, default=5, help="the helper's skip_first (timed unprofiled)")
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--time-after", type=int, default=3)
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--tiny", action="store_true", help="hidden 64 (CPU dry runs only)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


# --- the run's context ---------------------------------------------------------------------------


@dataclasses.dataclass
class Ctx:
    args: argparse.Namespace
    rank: int
    world: int
    device: torch.device
    cuda: bool
    dtype: torch.dtype

    def cfg(self, layers: int, **kw: Any) -> Config:
        shape = dict(TINY if self.args.tiny else QWEN25_05B_SHAPE)
        shape.update(kw)
        return Config(layers=self.args.layers or layers, **shape)

    def model(self, c: Config, seed: int = 0, **kw: Any) -> Decoder:
        return build(c, self.device, self.dtype, seed=self.args.seed + seed, **kw)

    def seq(self, default: int) -> int:
        return int(self.args.seq or default)

    def batch(self, rows: int, seq: int, vocab: int, salt: int = 0, same_on_all_ranks: bool = False) -> torch.Tensor:
        g = torch.Generator().manual_seed(1000 * self.args.seed + 10 * salt + (0 if same_on_all_ranks else self.rank))
        return torch.randint(0, vocab, (rows, seq), generator=g).to(self.device)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def adamw(params: Any) -> torch.optim.Optimizer:
    return torch.optim.AdamW(list(params), lr=1e-5, weight_decay=0.0, foreach=True)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> None:
    model(ids, ids).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def nbytes(params: Any) -> int:
    return sum(p.numel() * p.element_size() for p in params)


@dataclasses.dataclass
class Job:
    """What a job times and states. `variants`: name -> one training step (`planted` first)."""

    variants: dict[str, Callable[[], None]]
    layout: dict[str, int]
    micro_batches: dict[str, int]
    roles: list[str]
    expected: dict[str, Any]
    model: dict[str, Any]
    comm_expected: dict[str, Any]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


# --- jobs ----------------------------------------------------------------------------------------


def ddp(ctx: Ctx, model: nn.Module) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, device_ids=[ctx.device.index] if ctx.cuda else None)


def job_ddp_per_tensor(ctx: Ctx) -> Job:
    c = ctx.cfg(24)
    plain, wrapped = ctx.model(c), ddp(ctx, ctx.model(c))
    opt_p, opt_w = adamw(plain.parameters()), adamw(wrapped.parameters())
    seq = ctx.seq(512)
    ids = ctx.batch(8, seq, c.vocab)
    tensors = list(plain.parameters())

    def planted() -> None:
        plain(ids, ids).backward()
        for p in tensors:  # the hand-rolled data parallel loop: one collective per parameter
            dist.all_reduce(p.grad)
            p.grad /= ctx.world
        opt_p.step()
        opt_p.zero_grad(set_to_none=True)

    def fixed() -> None:
        train_step(wrapped, opt_w, ids)

    def nocomm() -> None:
        with wrapped.no_sync():
            wrapped(ids, ids).backward()
        opt_w.step()
        opt_w.zero_grad(set_to_none=True)

    return Job(
        variants={"planted": planted, "fixed": fixed, "nocomm": nocomm},
        layout=dict(dp=ctx.world, tp=1, pp=1, ep=1),
        micro_batches={"planted": 1, "fixed": 1, "nocomm": 1},
        roles=["data-parallel replica"] * ctx.world,
        expected=dict(
            purpose="data-parallel gradient all-reduce",
            cause="per-tensor collectives: one all_reduce per parameter (no bucketing) after backward",
            fix="DistributedDataParallel (25 MiB buckets, overlapped with backward); or bucket the gradients",
            straggler=None,
        ),
        model=model_facts(c, plain, batch=f"8x{seq} a rank"),
        comm_expected={
            "planted": {"all_reduce": {"count": len(tensors), "bytes": nbytes(tensors)}},
            "fixed": {"all_reduce": {"count": "DDP buckets (25 MiB cap)", "bytes": nbytes(tensors)}},
        },
        extra={"gradient_tensors": len(tensors), "gradient_bytes": nbytes(tensors)},
    )


def job_ddp_accum(ctx: Ctx) -> Job:
    c = ctx.cfg(6)
    m = 8
    wrapped = ddp(ctx, ctx.model(c))
    opt = adamw(wrapped.parameters())
    seq = ctx.seq(1024)
    micro = [ctx.batch(1, seq, c.vocab, salt=i) for i in range(m)]
    params = list(wrapped.parameters())

    def accum(sync_every: bool, sync_last: bool) -> None:
        for i, ids in enumerate(micro):
            last = i == m - 1
            ctx_ = contextlib.nullcontext() if sync_every or (last and sync_last) else wrapped.no_sync()
            with ctx_:
                (wrapped(ids, ids) / m).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Job(
        variants={
            "planted": lambda: accum(True, True),
            "fixed": lambda: accum(False, True),
            "nocomm": lambda: accum(False, False),
        },
        layout=dict(dp=ctx.world, tp=1, pp=1, ep=1),
        micro_batches={"planted": m, "fixed": m, "nocomm": m},
        roles=["data-parallel replica"] * ctx.world,
        expected=dict(
            purpose="data-parallel gradient all-reduce",
            cause="an all-reduce every micro-batch under gradient accumulation (no no_sync())",
            fix="with model.no_sync(): on the first m-1 micro-batches (one all-reduce a step)",
            straggler=None,
        ),
        model=model_facts(c, wrapped.module, batch=f"{m} micro-batches of 1x{seq} a rank"),
        comm_expected={
            "planted": {"all_reduce": {"rounds": m, "bytes": m * nbytes(params)}},
            "fixed": {"all_reduce": {"rounds": 1, "bytes": nbytes(params)}},
        },
        extra={"gradient_bytes": nbytes(params)},
    )


def fsdp_groups(module: nn.Module) -> list[Any]:
    state = module._get_fsdp_state()  # type: ignore[operator]
    groups = getattr(state, "_fsdp_param_groups", None)
    if groups is None:
        groups = [state._fsdp_param_group] if getattr(state, "_fsdp_param_group", None) is not None else []
    return list(groups)


def job_fsdp(ctx: Ctx) -> Job:
    from torch.distributed.fsdp import fully_shard

    c = ctx.cfg(16)
    models = {}
    for name in ("planted", "fixed"):
        m = ctx.model(c)
        for layer in m.layers:
            fully_shard(layer)
        fully_shard(m)
        models[name] = m
    layers_p, layers_f = list(models["planted"].layers), list(models["fixed"].layers)
    for layer in layers_p:  # prefetch off: the all-gather of a layer is issued only when its backward starts
        for g in fsdp_groups(layer):
            g._backward_prefetch = lambda: None
    for i, layer in enumerate(layers_f):
        layer.set_modules_to_forward_prefetch(layers_f[i + 1 : i + 3])
        layer.set_modules_to_backward_prefetch(list(reversed(layers_f[max(0, i - 2) : i])))
    replica = ctx.model(c)
    opts = {k: adamw(m.parameters()) for k, m in models.items()}
    opt_r = adamw(replica.parameters())
    seq = ctx.seq(1024)
    ids = ctx.batch(4, seq, c.vocab)
    full = nbytes(replica.parameters())
    return Job(
        variants={
            "planted": lambda: train_step(models["planted"], opts["planted"], ids),
            "fixed": lambda: train_step(models["fixed"], opts["fixed"], ids),
            "nocomm": lambda: train_step(replica, opt_r, ids),
        },
        layout=dict(dp=ctx.world, tp=1, pp=1, ep=1, fsdp_shard=ctx.world),
        micro_batches={"planted": 1, "fixed": 1, "nocomm": 1},
        roles=["FSDP2 shard"] * ctx.world,
        expected=dict(
            purpose="FSDP parameter all-gather (forward and backward) and gradient reduce-scatter",
            cause="FSDP without prefetch: backward all-gathers issued when each layer's backward starts, "
            "behind the previous layer's reduce-scatter on the same NCCL stream (exposed)",
            fix="explicit prefetch: set_modules_to_forward_prefetch / set_modules_to_backward_prefetch "
            "(FSDP2's default backward prefetch of one layer is the minimum)",
            straggler=None,
            reshard_after_forward=True,
        ),
        model=model_facts(c, replica, batch=f"4x{seq} a rank"),
        comm_expected={
            "planted": {
                "all_gather": {"count": 2 * len(layers_p) + 1, "bytes": "2x parameter bytes (+ root once)"},
                "reduce_scatter": {"count": len(layers_p) + 1, "bytes": full},
            },
            "parameter_bytes_unsharded": full,
        },
    )


def tp_plan() -> dict[str, Any]:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    col, row = ColwiseParallel, RowwiseParallel
    return {
        "self_attn.q_proj": col(),
        "self_attn.k_proj": col(),
        "self_attn.v_proj": col(),
        "self_attn.o_proj": row(),
        "mlp.gate_proj": col(),
        "mlp.up_proj": col(),
        "mlp.down_proj": row(),
    }


def job_tensor_parallel(ctx: Ctx) -> Job:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import parallelize_module

    c = ctx.cfg(12)
    mesh = init_device_mesh(ctx.device.type, (ctx.world,))
    tp = ctx.model(c)
    for layer in tp.layers:
        parallelize_module(layer, mesh, tp_plan())
    dt = [p for p in tp.parameters() if isinstance(p, DTensor)]
    plain = [p for p in tp.parameters() if not isinstance(p, DTensor)]
    opt_d, opt_p = adamw(dt), adamw(plain)
    local = ctx.model(
        ctx.cfg(
            12,
            heads=c.heads // ctx.world,
            kv_heads=c.kv_heads // ctx.world,
            ffn=c.ffn // ctx.world,
            dim_head=c.head_dim,
        )
    )
    opt_l = adamw(local.parameters())
    seq = ctx.seq(1024)
    ids = ctx.batch(8, seq, c.vocab, same_on_all_ranks=True)  # a TP group shares its data

    def planted() -> None:
        tp(ids, ids).backward()
        opt_d.step()
        opt_p.step()
        opt_d.zero_grad(set_to_none=True)
        opt_p.zero_grad(set_to_none=True)

    act = 8 * seq * c.hidden * torch.tensor([], dtype=ctx.dtype).element_size()
    n = len(tp.layers)
    return Job(
        variants={"planted": planted, "nocomm": lambda: train_step(local, opt_l, ids)},
        layout=dict(dp=1, tp=ctx.world, pp=1, ep=1),
        micro_batches={"planted": 1, "nocomm": 1},
        roles=[f"tensor-parallel shard {r} of {ctx.world} (heads and FFN columns)" for r in range(ctx.world)],
        expected=dict(
            purpose="tensor-parallel activation all-reduce (RowwiseParallel outputs forward, ColwiseParallel "
            "input gradients backward)",
            cause="tensor-parallel communication on the critical path (every all-reduce exposed, a steady share "
            "of every step)",
            fix="keep TP within NVLink; sequence parallel (reduce-scatter + all-gather, norms sharded); async TP "
            "(torch.compile + symmetric memory) to overlap it; or a smaller TP degree. Measured here: the "
            "communication's cost (nocomm), no fix variant",
            straggler=None,
        ),
        model=model_facts(c, local, batch=f"8x{seq}, the same on both ranks", note="local shapes"),
        comm_expected={
            "planted": {
                "all_reduce": {
                    "count": 7 * n,
                    "bytes": 7 * n * act,
                    "bytes_each": act,
                    "what": "a layer: 2 forward (o_proj, down_proj outputs), 5 backward (the input gradients of "
                    "q, k, v, gate, up: one per ColwiseParallel module)",
                }
            }
        },
    )


# --- pipeline ------------------------------------------------------------------------------------


def stage_model(ctx: Ctx, c: Config, split: tuple[int, int]) -> Decoder:
    first = ctx.rank == 0
    n = split[ctx.rank]
    return ctx.model(dataclasses.replace(c, layers=n), seed=ctx.rank, has_embed=first, has_head=not first)


def gpipe(ctx: Ctx, stage: Decoder, opt: torch.optim.Optimizer, ids: torch.Tensor, m: int, comm: bool) -> None:
    """One GPipe step on a 2-stage pipeline: every micro-batch forward, then every one backward. Stage 0 sends
    activations and receives their gradients; stage 1 the reverse. `comm` off: the stage alone (stage 1 reads a
    fixed random activation, stage 0 a gradient of ones)."""
    rows = ids.shape[0] // m
    mbs = ids.split(rows)
    shape = (rows, ids.shape[1], stage.c.hidden)
    if ctx.rank == 0:
        outs = []
        for x in mbs:
            h = stage(x)
            if comm:
                dist.send(h.detach(), 1)
            outs.append(h)
        for h in outs:
            g = torch.empty(shape, dtype=ctx.dtype, device=ctx.device)
            if comm:
                dist.recv(g, 1)
            else:
                g.fill_(1e-3)
            h.backward(g)
    else:
        ins, losses = [], []
        for x in mbs:
            a = torch.empty(shape, dtype=ctx.dtype, device=ctx.device)
            if comm:
                dist.recv(a, 0)
            else:
                a.normal_()
            a.requires_grad_(True)
            ins.append(a)
            losses.append(stage(a, x) / m)
        for a, loss in zip(ins, losses):
            loss.backward()
            if comm:
                assert a.grad is not None
                dist.send(a.grad, 0)
    opt.step()
    opt.zero_grad(set_to_none=True)


def job_pipeline(ctx: Ctx, unbalanced: bool = False) -> Job:
    c = ctx.cfg(12 if unbalanced else 16, vocab=8192 if not ctx.args.tiny else TINY["vocab"])
    n = c.layers
    split = (n // 3, n - n // 3) if unbalanced else (n // 2, n - n // 2)
    fair = (n // 2, n - n // 2)
    stage = stage_model(ctx, c, split)
    opt = adamw(stage.parameters())
    seq = ctx.seq(1024)
    rows = 16
    ids = ctx.batch(rows, seq, c.vocab, same_on_all_ranks=True)  # stage 0 reads the tokens, stage 1 the labels
    act = rows * seq * c.hidden * torch.tensor([], dtype=ctx.dtype).element_size()
    if unbalanced:
        balanced = stage_model(ctx, c, fair)
        opt_b = adamw(balanced.parameters())
        m = 4
        variants = {
            "planted": lambda: gpipe(ctx, stage, opt, ids, m, True),
            "fixed": lambda: gpipe(ctx, balanced, opt_b, ids, m, True),
            "nocomm": lambda: gpipe(ctx, stage, opt, ids, m, False),
        }
        mbs = {"planted": m, "fixed": m, "nocomm": m}
        expected = dict(
            purpose="pipeline activations and their gradients sent between stages (send/recv)",
            cause=f"unbalanced stages: stage 1 runs {split[1]} layers + the head, stage 0 {split[0]} + the "
            "embedding; stage 0 waits for stage 1 (a real straggler) on top of the bubble",
            fix=f"balance the stages ({fair[0]}/{fair[1]} layers)",
            straggler=1,
            bubble_share_expected=round(1 / (m + 1), 4),
        )
    else:
        variants = {
            "planted": lambda: gpipe(ctx, stage, opt, ids, 2, True),
            "fixed": lambda: gpipe(ctx, stage, opt, ids, 8, True),
            "nocomm": lambda: gpipe(ctx, stage, opt, ids, 2, False),
            "nocomm_m8": lambda: gpipe(ctx, stage, opt, ids, 8, False),
        }
        mbs = {"planted": 2, "fixed": 8, "nocomm": 2, "nocomm_m8": 8}
        expected = dict(
            purpose="pipeline activations and their gradients sent between stages (send/recv)",
            cause="pipeline bubble: 2 stages, m=2 micro-batches, bubble (p-1)/(m+p-1) = 1/3 of the step; each "
            "stage's wait for the other is the pipeline's own dependency, not a straggler",
            fix="more micro-batches (m=8: bubble 1/9) or an interleaved / zero-bubble schedule",
            straggler=None,
            bubble_share_expected={"planted": round(1 / 3, 4), "fixed": round(1 / 9, 4)},
        )
    return Job(
        variants=variants,
        layout=dict(dp=1, tp=1, pp=ctx.world, ep=1),
        micro_batches=mbs,
        roles=[
            f"pipeline stage 0: embedding + {split[0]} layers (sends activations, receives their gradients)",
            f"pipeline stage 1: {split[1]} layers + norm + head + loss (receives activations, sends gradients)",
        ],
        expected=expected,
        model=model_facts(c, stage, batch=f"{rows}x{seq} a step, split into m micro-batches", note="this stage"),
        comm_expected={
            k: {"send": {"count": v, "bytes": act}, "recv": {"count": v, "bytes": act}, "bytes_each": act // v}
            for k, v in mbs.items()
            if not k.startswith("nocomm")
        },
        extra={"schedule": "GPipe (hand-written dist.send/recv)", "stage_layers": list(split)},
    )


# --- expert parallel -----------------------------------------------------------------------------


def a2a_dispatch(ctx: Ctx) -> Callable[..., torch.Tensor]:
    from torch.distributed.nn.functional import all_to_all_single

    def dispatch(moe: Any, rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        el = len(moe.experts)
        order = torch.argsort(ids, stable=True)  # grouped by expert, so by the rank that owns it
        send_e = torch.bincount(ids, minlength=moe.n_experts)
        recv_e = torch.empty_like(send_e)
        dist.all_to_all_single(recv_e, send_e)  # how many rows each rank sends each of my experts
        recv = recv_e.view(ctx.world, el)
        ins = send_e.view(ctx.world, el).sum(1).tolist()
        outs = recv.sum(1).tolist()  # read on the host: the dispatch's sizes
        x = rows[order]
        got = all_to_all_single(torch.empty((sum(outs), x.shape[1]), dtype=x.dtype, device=x.device), x, outs, ins)
        local = torch.arange(el, device=x.device).repeat(ctx.world).repeat_interleave(recv.flatten())
        y = moe.run_local(got, local)
        back = all_to_all_single(torch.empty_like(x), y, ins, outs)
        return torch.empty_like(back).index_copy(0, order, back)

    return dispatch


def job_expert(ctx: Ctx) -> Job:
    c = ctx.cfg(8, experts=8, top_k=2)
    el = c.experts // ctx.world
    model = ctx.model(c, local_experts=el, first_expert=ctx.rank * el)
    opt = adamw(model.parameters())
    seq = ctx.seq(1024)
    ids = ctx.batch(4, seq, c.vocab)
    comm = a2a_dispatch(ctx)

    def local(moe: Any, rows: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        return moe.run_local(rows, e % len(moe.experts))

    def with_dispatch(fn: Callable[..., torch.Tensor]) -> Callable[[], None]:
        def step() -> None:
            for layer in model.layers:
                layer.mlp.dispatch = fn
            train_step(model, opt, ids)

        return step

    rows = 4 * seq * c.top_k
    row_b = c.hidden * torch.tensor([], dtype=ctx.dtype).element_size()
    return Job(
        variants={"planted": with_dispatch(comm), "nocomm": with_dispatch(local)},
        layout=dict(dp=ctx.world, tp=1, pp=1, ep=ctx.world),
        micro_batches={"planted": 1, "nocomm": 1},
        roles=[f"experts {r * el}-{r * el + el - 1} of {c.experts}; its own 4x{seq} tokens" for r in range(ctx.world)],
        expected=dict(
            purpose="expert-parallel token dispatch and combine (all-to-all), with the split-size exchange",
            cause="expert all-to-all on the critical path (dispatch and combine, forward and backward, every MoE "
            "layer; the split sizes read on the host first)",
            fix="measured: the communication removed (tokens served by their own rank's experts); in practice "
            "overlap dispatch with shared-expert / attention compute, or fewer EP ranks across slow links",
            straggler=None,
        ),
        model=model_facts(c, model, batch=f"4x{seq} a rank, top-2 of 8 experts", note="this rank"),
        comm_expected={
            "planted": {
                "all_to_all": {
                    "count": 5 * c.layers,
                    "what": "a layer: split sizes (int64 x experts), dispatch, combine forward; dispatch and "
                    "combine backward",
                    "rows_sent_a_dispatch": rows,
                    "bytes_a_dispatch": rows * row_b,
                }
            }
        },
        extra={
            "dense_gradient_sync": "left out: the non-expert gradients are not all-reduced, so every collective "
            "is the experts' dispatch/combine"
        },
    )


def job_rank0_eval(ctx: Ctx) -> Job:
    c = ctx.cfg(8)
    wrapped = ddp(ctx, ctx.model(c))
    opt = adamw(wrapped.parameters())
    seq = ctx.seq(1024)
    ids = ctx.batch(4, seq, c.vocab)
    eval_ids = ctx.batch(4, seq, c.vocab, salt=7)

    def step(evaluate: bool, sync: bool = True) -> None:
        with contextlib.nullcontext() if sync else wrapped.no_sync():
            wrapped(ids, ids).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if evaluate and ctx.rank == 0:
            with torch.profiler.record_function("rank0_eval"), torch.no_grad():
                for _ in range(3):
                    wrapped.module(eval_ids, eval_ids)

    params = list(wrapped.parameters())
    return Job(
        variants={"planted": lambda: step(True), "fixed": lambda: step(False), "nocomm": lambda: step(False, False)},
        layout=dict(dp=ctx.world, tp=1, pp=1, ep=1),
        micro_batches={"planted": 1, "fixed": 1, "nocomm": 1},
        roles=[f"data-parallel replica; runs rank0_eval (3 no_grad forwards of 4x{seq}) after every step"]
        + ["data-parallel replica"] * (ctx.world - 1),
        expected=dict(
            purpose="data-parallel gradient all-reduce",
            cause="work only some ranks do: rank 0 alone runs record_function('rank0_eval') between steps; the "
            "other ranks wait for it in the next step's all-reduce",
            fix="run the evaluation on every rank (sharded) or less often, or off the training ranks",
            straggler=0,
            rank_only_region="rank0_eval",
        ),
        model=model_facts(c, wrapped.module, batch=f"4x{seq} a rank"),
        comm_expected={"planted": {"all_reduce": {"count": "DDP buckets (25 MiB cap)", "bytes": nbytes(params)}}},
    )


def model_facts(c: Config, model: nn.Module, batch: str, note: str = "") -> dict[str, Any]:
    return {
        "config": dataclasses.asdict(c),
        "params": sum(p.numel() for p in model.parameters()),
        "param_tensors": len(list(model.parameters())),
        "params_note": note or "one replica",
        "batch": batch,
    }


JOBS: dict[str, Callable[[Ctx], Job]] = {
    "ddp_per_tensor": job_ddp_per_tensor,
    "ddp_accum_no_nosync": job_ddp_accum,
    "fsdp": job_fsdp,
    "tensor_parallel": job_tensor_parallel,
    "pipeline": job_pipeline,
    "expert_all_to_all": job_expert,
    "rank0_eval": job_rank0_eval,
    "pipeline_unbalanced": lambda ctx: job_pipeline(ctx, unbalanced=True),
}


# --- measuring -----------------------------------------------------------------------------------

COMM_NS = ("c10d", "_c10d_functional", "c10d_functional")
SKIP_OPS = {"wait_tensor", "barrier", "monitored_barrier", "_wrap_tensor_autograd"}


class CommCounter(TorchDispatchMode):
    """Counts the collectives dispatched in its scope, by op, with the largest tensor's bytes (all-gather: the
    gathered output; reduce-scatter: the full input; all-reduce, send/recv, all-to-all: the buffer)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[str, dict[str, int]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func._schema.name
        ns, _, op = name.partition("::")
        if ns in COMM_NS and op.rstrip("_") not in SKIP_OPS:
            sizes = [t.numel() * t.element_size() for t in flat_tensors((args, kwargs, out))]
            rec = self.ops.setdefault(op.rstrip("_"), {"count": 0, "bytes": 0})
            rec["count"] += 1
            rec["bytes"] += max(sizes, default=0)
        return out


def flat_tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in flat_tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in flat_tensors(v)]
    return []


def time_block(ctx: Ctx, step: Callable[[], None], n: int) -> list[float]:
    """One settling step, then `n` steps between a synchronize + barrier and a synchronize, each on the host clock
    (the last one holds the device's drain), in ms."""
    step()
    ctx.sync()
    dist.barrier()
    ctx.sync()
    t = [time.perf_counter()]
    for _ in range(n):
        step()
        t.append(time.perf_counter())
    ctx.sync()
    t[-1] = time.perf_counter()
    return [round(1000 * (b - a), 4) for a, b in zip(t, t[1:])]


def pristine(ctx: Ctx, job: Job) -> dict[str, Any]:
    """`rounds` rounds of one block of every variant, the order rotated each round (both sides see the same drift)."""
    names = list(job.variants)
    blocks: dict[str, list[list[float]]] = {k: [] for k in names}
    orders = []
    for r in range(ctx.args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        orders.append(order)
        for name in order:
            blocks[name].append(time_block(ctx, job.variants[name], ctx.args.block))
    out: dict[str, Any] = {"orders": orders, "block_steps": ctx.args.block}
    for name, bl in blocks.items():
        steps = [x for b in bl for x in b]
        out[name] = {
            "step_ms": bl,
            "block_mean_ms": [round(sum(b) / len(b), 4) for b in bl],
            "median_step_ms": round(statistics.median(steps), 4),
            "median_block_mean_ms": round(statistics.median(sum(b) / len(b) for b in bl), 4),
        }
    return out


def capture(ctx: Ctx, job: Job, name: str) -> dict[str, Any]:
    prof = profile_steps(
        ctx.args.out,
        name,
        skip_first=ctx.args.skip_first,
        warmup=1,
        active=ctx.args.active,
        time_steps_after=ctx.args.time_after,
        record_shapes=True,
        profile_memory=False,
        with_stack=False,
    )
    step = job.variants["planted"]
    host = [0.0] * (prof.total_steps + 1)
    prof.start()
    host[0] = time.perf_counter()
    for k in range(prof.total_steps):
        step()
        host[k + 1] = time.perf_counter()
        prof.step()
    prof.stop()
    ctx.sync()
    active = list(prof.schedule.active_steps())
    host_ms = [round(1000 * (b - a), 4) for a, b in zip(host, host[1:])]
    timed = list(zip(prof.unprofiled_steps, prof.unprofiled_step_ns))
    return {
        "steps": list(range(prof.total_steps)),
        "phases": [prof.schedule.phase(s) if s < prof.schedule.total_steps else "after" for s in range(len(host_ms))],
        "host_ms": host_ms,
        "active_steps": active,
        "active_median_host_ms": round(statistics.median(host_ms[s] for s in active), 4),
        "helper_unprofiled": {
            "steps": [s for s, _ in timed if s < active[0]],
            "step_ns": [t for s, t in timed if s < active[0]],
            "after_steps": [s for s, _ in timed if s > active[-1]],
            "after_step_ns": [t for s, t in timed if s > active[-1]],
        },
        "trace_files": [os.path.basename(f) for f in prof.trace_files()],
        "trace_bytes": sum(os.path.getsize(f) for f in prof.trace_files()),
    }


def count_comm(ctx: Ctx, job: Job) -> dict[str, Any]:
    """One step of every variant under CommCounter (after the capture: its timing is not used)."""
    out: dict[str, Any] = {}
    for name, step in job.variants.items():
        counter = CommCounter()
        try:
            ctx.sync()
            dist.barrier()
            with counter:
                step()
            ctx.sync()
            out[name] = counter.ops
        except Exception as e:  # noqa: BLE001  (the counter is a cross-check; the analytic counts stay)
            out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    return out


def saving(per_rank: list[dict[str, Any]], a: str, b: str) -> dict[str, Any] | None:
    """(a - b) of the pristine median step, every rank, and rank 0's share of a."""
    if a not in per_rank[0]["pristine"] or b not in per_rank[0]["pristine"]:
        return None
    ms = [r["pristine"][a]["median_step_ms"] - r["pristine"][b]["median_step_ms"] for r in per_rank]
    base = per_rank[0]["pristine"][a]["median_step_ms"]
    return {
        "per_rank_ms": [round(x, 4) for x in ms],
        "rank0_ms": round(ms[0], 4),
        "rank0_share_of_planted": round(ms[0] / base, 4) if base > 0 else None,
    }


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.filterwarnings("ignore", message=".*all_to_all_single is deprecated.*")
    name = args.name or args.job
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cuda else "gloo", device_id=torch.device("cuda", local_rank) if cuda else None)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    ctx = Ctx(args, rank, world, device, cuda, dtype)
    t_start = time.perf_counter()
    job = JOBS[args.job](ctx)
    for step in job.variants.values():  # allocator, cuBLAS, NCCL communicators, optimizer state
        for _ in range(2):
            step()
    ctx.sync()
    dist.barrier()
    setup_s = time.perf_counter() - t_start
    t0 = time.perf_counter()
    pr = pristine(ctx, job)  # before any profiler exists in the process
    pristine_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    cap = capture(ctx, job, name)
    capture_s = time.perf_counter() - t0
    comm = count_comm(ctx, job)
    mine = {
        "rank": rank,
        "role": job.roles[rank],
        "host": socket.gethostname(),
        "gpu": torch.cuda.get_device_name(device) if cuda else "cpu",
        "pristine": pr,
        "profiled": cap,
        "comm_measured_per_step": comm,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
        "seconds": {"setup": round(setup_s, 2), "pristine": round(pristine_s, 2), "capture": round(capture_s, 2)},
    }
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        write_truth(args, name, job, gathered, world, argv)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def write_truth(args: argparse.Namespace, name: str, job: Job, ranks: list[Any], world: int, argv: Any) -> None:
    r0 = ranks[0]
    fix = "fixed" if "fixed" in job.variants else None
    truth = {
        "capture": name,
        "job": args.job,
        "what": args.what,
        "argv": sys.argv[1:] if argv is None else argv,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "backend": dist.get_backend(),
        "world_size": world,
        "nccl_env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM_"))},
        "layout": job.layout,
        "micro_batches": job.micro_batches,
        "roles": job.roles,
        "expected": job.expected,
        "variants": {
            "planted": "the planted loop (the one captured)",
            "fixed": "the user's fix" if fix else None,
            "nocomm": "the same loop with the communication removed (planted - nocomm = its cost)",
            **({"nocomm_m8": "stages alone with m=8"} if "nocomm_m8" in job.variants else {}),
        },
        "model": job.model,
        "dtype": args.dtype,
        "comm_expected_per_step": job.comm_expected,
        "comm_measured_per_step_rank0": r0["comm_measured_per_step"],
        "profiler": {
            "helper": "tb_llmdiag.capture.profile_steps",
            "skip_first": args.skip_first,
            "warmup": 1,
            "active_steps": r0["profiled"]["active_steps"],
            "time_steps_after": args.time_after,
            "record_shapes": True,
            "profile_memory": False,
            "with_stack": False,
        },
        "pristine_how": "before any profiler ran in the process: rounds of one block of every variant (order "
        "rotated), a block = 1 settling step then `block_steps` steps between synchronize + barrier and "
        "synchronize, each step on the host clock",
        "pristine_median_step_ms": {k: [r["pristine"][k]["median_step_ms"] for r in ranks] for k in job.variants},
        "fix_saving": saving(ranks, "planted", fix) if fix else None,
        "comm_cost": saving(ranks, "planted", "nocomm"),
        "profiled_active_median_host_ms": [r["profiled"]["active_median_host_ms"] for r in ranks],
        "ranks": ranks,
        **job.extra,
    }
    if args.job.startswith("pipeline"):
        truth["stage_alone_median_step_ms"] = [r["pristine"]["nocomm"]["median_step_ms"] for r in ranks]
    path = os.path.join(args.out, name, "truth.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(truth, f, indent=1, allow_nan=False, default=str)
    print(
        f"TRUTH {name}: pristine median ms {truth['pristine_median_step_ms']} | fix saving "
        f"{(truth['fix_saving'] or {}).get('rank0_ms')} | comm cost {(truth['comm_cost'] or {}).get('rank0_ms')} | "
        f"profiled {truth['profiled_active_median_host_ms']} | comm {r0['comm_measured_per_step']} | "
        f"trace bytes {[r['profiled']['trace_bytes'] for r in ranks]} | s {[r['seconds'] for r in ranks][0]}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
