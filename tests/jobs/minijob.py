"""Hand-built multi-rank traces for the job tests: rows -> ``Trace`` with a rank (times in ns)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from tb_llmdiag.model import DEVICE_KINDS, DistributedInfo, EventTable, Kind, Trace

US = 1_000
AR = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
SR = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "volta_sgemm_128x32_nt"


@dataclass(frozen=True)
class R:
    kind: Kind
    name: str
    ts: int
    dur: int
    stream: int = 7
    corr: int = -1
    shape: str | None = None
    args: tuple[tuple[str, Any], ...] = ()  # Trace.extra values for this row


def step(i: int, ts: int, dur: int) -> R:
    return R(Kind.STEP, f"ProfilerStep#{i}", ts, dur)


def kern(name: str, ts: int, dur: int, stream: int = 7, corr: int = -1, **args: Any) -> R:
    return R(Kind.KERNEL, name, ts, dur, stream=stream, corr=corr, args=tuple(args.items()))


def host(kind: Kind, name: str, ts: int, dur: int, corr: int = -1, shape: str | None = None) -> R:
    return R(kind, name, ts, dur, corr=corr, shape=shape)


def make_rank(rows: Sequence[R], *, rank: int | None, world: int | None, origin_ns: int = 0,
              extra_names: dict[str, tuple[str, ...]] | None = None) -> Trace:
    rows = sorted(rows, key=lambda r: r.ts)
    names: dict[str, int] = {}
    shapes: dict[str, int] = {}
    dev = np.array([r.kind in DEVICE_KINDS for r in rows], dtype=bool)
    ev = EventTable(
        ts_ns=np.array([r.ts for r in rows], np.int64), dur_ns=np.array([r.dur for r in rows], np.int64),
        kind=np.array([int(r.kind) for r in rows], np.uint8),
        name_id=np.array([names.setdefault(r.name, len(names)) for r in rows], np.int32),
        device=np.where(dev, 0, -1).astype(np.int16),
        stream=np.array([r.stream if d else -1 for r, d in zip(rows, dev)], np.int32),
        tid=np.where(dev, -1, 1).astype(np.int64), correlation=np.array([r.corr for r in rows], np.int64),
        bytes=np.full(len(rows), -1, np.int64),
        shape_id=np.array([shapes.setdefault(r.shape, len(shapes)) if r.shape else -1 for r in rows], np.int32),
        names=tuple(names), shapes=tuple(shapes),
    )
    keys = {k for r in rows for k, _ in r.args}
    extra = {k: np.array([dict(r.args).get(k, -1) for r in rows], np.int64) for k in keys}
    dist = DistributedInfo(rank=rank, world_size=world, backend="nccl") if rank is not None or world else None
    return Trace(source_kind="kineto", events=ev, origin_ns=origin_ns, distributed=dist, extra=extra,
                 extra_names=extra_names or {})


def embedding(ts: int, batch: int, seq: int) -> R:
    return host(Kind.CPU_OP, "aten::embedding", ts, 5 * US, shape=f"[[32000, 64], [{batch}, {seq}]]")


def dp_rank(rank: int, compute_us: int | Sequence[int], *, steps: int = 2, world: int = 3, origin_ns: int = 0,
            tokens: tuple[int, int] | None = None, ar_bytes_nelems: int = -1) -> Trace:
    """A data-parallel rank: per 1000 us step, a GEMM of ``compute_us``, an all-reduce that every rank leaves
    at 600 us (so it waits 500 - compute_us + ... see the tests), a 100 us GEMM, a 50 us all-gather, then idle.
    ``compute_us`` may give one value per step (then ``steps`` is its length)."""
    per_step = [compute_us] * steps if isinstance(compute_us, int) else list(compute_us)
    rows: list[R] = []
    for k, c in enumerate(per_step):
        t0 = k * 1000 * US
        rows += [step(k + 1, t0, 1000 * US), kern(GEMM, t0, c * US),
                 kern(AR, t0 + c * US, (600 - c) * US, stream=20,
                      comm_in_nelems=ar_bytes_nelems, comm_out_nelems=ar_bytes_nelems,
                      comm_dtype_id=0 if ar_bytes_nelems >= 0 else -1),
                 kern(GEMM, t0 + 600 * US, 100 * US), kern(AG, t0 + 700 * US, 50 * US, stream=20)]
        if tokens is not None:
            rows.append(embedding(t0 + 1 * US, *tokens))
    return make_rank(rows, rank=rank, world=world, origin_ns=origin_ns,
                     extra_names={"comm_dtype": ("Float",)} if ar_bytes_nelems >= 0 else None)
