"""Tiny inline traces for metric tests: rows -> ``Trace`` (times in ns, sorted for you)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.model import DEVICE_KINDS, DeviceInfo, EventTable, Kind, MemoryTable, Trace, empty_memory

US = 1_000  # ns per microsecond


@dataclass(frozen=True)
class E:
    kind: Kind
    name: str
    ts: int
    dur: int
    corr: int = -1
    nbytes: int = -1
    shape: str | None = None
    stream: int = 7


def step(i: int, ts: int, dur: int) -> E:
    return E(Kind.STEP, f"ProfilerStep#{i}", ts, dur)


def launch(ts: int, dur: int, corr: int, name: str = "cudaLaunchKernel") -> E:
    return E(Kind.RUNTIME, name, ts, dur, corr=corr)


def kernel(name: str, ts: int, dur: int, corr: int = -1, stream: int = 7) -> E:
    return E(Kind.KERNEL, name, ts, dur, corr=corr, stream=stream)


def op(name: str, ts: int, dur: int, shape: str | None = None) -> E:
    return E(Kind.CPU_OP, name, ts, dur, shape=shape)


def make_trace(rows: Sequence[E], *, devices: tuple[DeviceInfo, ...] = (), memory: MemoryTable | None = None,
               source_kind: str = "kineto") -> Trace:
    rows = sorted(rows, key=lambda r: r.ts)
    names: dict[str, int] = {}
    shapes: dict[str, int] = {}
    dev = np.array([r.kind in DEVICE_KINDS for r in rows], dtype=bool)
    ev = EventTable(
        ts_ns=np.array([r.ts for r in rows], np.int64),
        dur_ns=np.array([r.dur for r in rows], np.int64),
        kind=np.array([int(r.kind) for r in rows], np.uint8),
        name_id=np.array([names.setdefault(r.name, len(names)) for r in rows], np.int32),
        device=np.where(dev, 0, -1).astype(np.int16),
        stream=np.array([r.stream if d else -1 for r, d in zip(rows, dev)], np.int32),
        tid=np.where(dev, -1, 1).astype(np.int64),
        correlation=np.array([r.corr for r in rows], np.int64),
        bytes=np.array([r.nbytes for r in rows], np.int64),
        shape_id=np.array([shapes.setdefault(r.shape, len(shapes)) if r.shape is not None else -1 for r in rows], np.int32),
        names=tuple(names),
        shapes=tuple(shapes),
    )
    return Trace(source_kind=source_kind, events=ev, memory=memory if memory is not None else empty_memory(),
                 devices=devices)


def with_steps(trace: Trace) -> tuple[Trace, object]:
    return trace, find_steps(trace)


GEMM = "volta_sgemm_128x32_nt"
COPY = "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}> >(int)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int)"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def idle_scenario() -> Trace:
    """One 100 us step with one idle gap of each cause (see tests/metrics/test_idle.py)."""
    return make_trace([
        step(1, 0, 100 * US),
        launch(1 * US, 2 * US, corr=1), kernel(GEMM, 5 * US, 10 * US, corr=1),
        op(LOADER, 15 * US, 20 * US),
        launch(36 * US, 2 * US, corr=2), kernel(COPY, 40 * US, 10 * US, corr=2),
        E(Kind.RUNTIME, "cudaStreamSynchronize", 41 * US, 9_500),
        launch(60 * US, 2 * US, corr=3), kernel(GEMM, 65 * US, 5 * US, corr=3),
        launch(62 * US, 1 * US, corr=4), kernel(ADD, 72 * US, 8 * US, corr=4),
    ])


def full_metrics_keys() -> set[str]:
    """Every ``topic.key`` compute_metrics produces on a mini trace that exercises all topics."""
    import numpy as np

    from tb_llmdiag.metrics import compute_metrics
    from tb_llmdiag.model import DeviceInfo

    rows = []
    for i in range(4):
        t = i * 100 * US
        rows += [step(i, t, 100 * US), launch(t + 1, US, i + 1), kernel(GEMM, t + 2 * US, 50 * US, i + 1),
                 op(LOADER, t + 60 * US, 5 * US), op("aten::embedding", t + 70 * US, US, f"[[100, 8], [2, {10 + i}]]"),
                 op("aten::mm", t + 72 * US, US, "[[8, 8], [8, 8]]"),
                 E(Kind.MEMCPY, "Memcpy HtoD (Pageable -> Device)", t + 80 * US, US)]
    mem = MemoryTable(ts_ns=np.array([0], np.int64), device=np.array([0], np.int16), bytes=np.array([1], np.int64),
                      total_allocated_bytes=np.array([1], np.int64), total_reserved_bytes=np.array([2], np.int64))
    trace = make_trace(rows, memory=mem, devices=(DeviceInfo(0, "NVIDIA H100 80GB HBM3", total_memory_bytes=80 << 30),))
    m = compute_metrics(trace, find_steps(trace))
    return {f"{topic}.{key}" for topic, d in m.items() for key in d}
