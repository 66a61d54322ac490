"""The columnar trace model: what every reader produces and every analysis consumes.

Contract:
- One row per timed event; times are int64 nanoseconds relative to ``Trace.origin_ns``
  (the earliest event of the file), so ``ts_ns >= 0``. Rows are sorted by ``ts_ns``.
- Names are interned: ``names[name_id[i]]`` is the event's name.
- No I/O here; readers live in ``tb_llmdiag.ingest``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: Version of the model and of every derived result; part of every cache key.
MODEL_VERSION = 10  # 2: savings and what-if per mean step; 3: no external_id column; 4: per-shape host work;
# 5: odd values read instead of dropped (ids beyond int64, float tids, Input Dims on the lenient path);
# 6: steps never overlap (a step starts no earlier than the earlier steps' device work ends);
# 7: one saving per finding on the median step, the inference topic, the report's phase (#25);
# 8: a rank summary carries the profiler's own cost (the straggler's profiler floor, #25);
# 9: an over-the-run window's own metadata kept (llmdiag_window, the report's runs[].window, #34)
# 10: the shapes of a MoE's router/dispatch operators and of casts are kept (the anatomy's structure figures, #37)


class Kind(IntEnum):
    """What an event is. Readers map source categories onto these."""

    CPU_OP = 0  # aten ops and other host operators (cat cpu_op / Operator / operator)
    ANNOTATION = 1  # host user annotations: record_function ranges, DataLoader __next__, ...
    STEP = 2  # an explicit step range on the host (ProfilerStep#N, XPlane step_num events)
    PYTHON = 3  # python_function frames (with_stack)
    RUNTIME = 4  # CUDA/HIP/MTIA runtime API calls (cudaLaunchKernel, hipMemcpyAsync, ...)
    DRIVER = 5  # CUDA driver API calls (cuLaunchKernel from Triton)
    KERNEL = 6  # device kernels (GPU kernels, TPU/XLA ops)
    MEMCPY = 7  # device memcpy
    MEMSET = 8  # device memset
    GPU_ANNOTATION = 9  # gpu_user_annotation ranges on a device lane
    SYNC = 10  # cuda_sync markers (event/stream waits recorded on the device side)
    OTHER = 11


#: CPU operators whose recorded "Input Dims" readers keep (token counts, GEMM/attention FLOPs, loss
#: shapes); other ops' shapes are dropped to keep reading fast. Analyses may rely on these only.
SHAPE_OPS = re.compile(
    r"^(?:aten::(?:embedding|mm|addmm|_scaled_mm|bmm|baddbmm|matmul|linear|_?scaled_dot_product\w*|"
    r"_flash_attention\w*|_efficient_attention\w*|cross_entropy\w*|nll_loss\w*|_?log_softmax\w*|"
    # a MoE's router, dispatch and combine (experts and their load: ``metrics/anatomy/structure.py``) and the casts
    # (the vocabulary-sized copies of a loss over full logits)
    r"topk|bincount|histc|one_hot|index_add_?|index_copy_?|to|_to_copy|copy_)$"
    r"|flash_attn::)"
)

#: Kinds that occupy the accelerator.
DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)


def kind_mask(kind: NDArray[np.uint8], kinds: tuple[int, ...]) -> NDArray[np.bool_]:
    """``np.isin(kind, kinds)`` as one vectorised uint8 comparison per kind: several times faster on big
    tables than ``np.isin`` or a lookup table (indexing by the kind column first widens it to intp)."""
    out = np.zeros(kind.shape, dtype=bool)
    for k in kinds:
        out |= kind == int(k)
    return out


@dataclass(frozen=True)
class EventTable:
    """One row per timed event (Chrome 'X' events, XPlane events). ``ts_ns`` is sorted.

    Columns (all the same length):
      ts_ns, dur_ns     int64 ns; ts relative to Trace.origin_ns
      kind              uint8, a Kind
      name_id           int32 index into ``names``
      device            int16 accelerator index for device kinds, -1 on the host
      stream            int32 device stream / XPlane line id for device kinds, -1 on the host
      tid               int64 host thread id (interned when the source gives a string), -1 on devices
      correlation       int64 launch <-> kernel correlation id, -1 if none
      bytes             int64 payload of memcpy/memset, -1 if unknown
      shape_id          int32 index into ``shapes`` ("Input Dims" of CPU ops), -1 if none
    """

    ts_ns: NDArray[np.int64]
    dur_ns: NDArray[np.int64]
    kind: NDArray[np.uint8]
    name_id: NDArray[np.int32]
    device: NDArray[np.int16]
    stream: NDArray[np.int32]
    tid: NDArray[np.int64]
    correlation: NDArray[np.int64]
    bytes: NDArray[np.int64]
    shape_id: NDArray[np.int32]
    names: tuple[str, ...]
    shapes: tuple[str, ...] = ()

    COLUMNS = ("ts_ns", "dur_ns", "kind", "name_id", "device", "stream", "tid", "correlation", "bytes", "shape_id")

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])

    @property
    def end_ns(self) -> NDArray[np.int64]:
        return self.ts_ns + self.dur_ns

    def select(self, mask: NDArray[np.bool_] | NDArray[np.intp]) -> EventTable:
        """A new table with the rows picked by a boolean mask or an index array (names shared)."""
        cols = {c: getattr(self, c)[mask] for c in self.COLUMNS}
        return EventTable(**cols, names=self.names, shapes=self.shapes)

    def of_kind(self, *kinds: Kind) -> EventTable:
        return self.select(kind_mask(self.kind, kinds))

    def name_mask(self, predicate: Any) -> NDArray[np.bool_]:
        """Rows whose name satisfies ``predicate(str) -> bool``; evaluated once per unique name."""
        per_name = np.fromiter((bool(predicate(n)) for n in self.names), dtype=bool, count=len(self.names))
        return per_name[self.name_id] if len(self.names) else np.zeros(len(self), dtype=bool)

    def name_of(self, i: int) -> str:
        return self.names[int(self.name_id[i])]


def empty_events() -> EventTable:
    i64 = np.zeros(0, dtype=np.int64)
    return EventTable(
        ts_ns=i64,
        dur_ns=i64.copy(),
        kind=np.zeros(0, np.uint8),
        name_id=np.zeros(0, np.int32),
        device=np.zeros(0, np.int16),
        stream=np.zeros(0, np.int32),
        tid=i64.copy(),
        correlation=i64.copy(),
        bytes=i64.copy(),
        shape_id=np.zeros(0, np.int32),
        names=(),
    )


@dataclass(frozen=True)
class MemoryTable:
    """Allocator samples (Kineto ``[memory]`` instant events). Sorted by ts_ns.

    ``device`` is the accelerator index, -1 for host memory. Totals are after the (de)allocation.
    """

    ts_ns: NDArray[np.int64]
    device: NDArray[np.int16]
    bytes: NDArray[np.int64]  # signed: negative for frees
    total_allocated_bytes: NDArray[np.int64]
    total_reserved_bytes: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])


def empty_memory() -> MemoryTable:
    z = np.zeros(0, dtype=np.int64)
    return MemoryTable(
        ts_ns=z,
        device=np.zeros(0, np.int16),
        bytes=z.copy(),
        total_allocated_bytes=z.copy(),
        total_reserved_bytes=z.copy(),
    )


@dataclass(frozen=True)
class DeviceInfo:
    """One accelerator as the trace describes it (Kineto ``deviceProperties``, XPlane plane stats)."""

    index: int
    name: str
    total_memory_bytes: int | None = None
    compute_capability: str | None = None  # "9.0"
    num_sms: int | None = None
    peak_tflops: float | None = None  # only when the trace states it (XPlane); else metrics use a table


@dataclass(frozen=True)
class DistributedInfo:
    rank: int | None
    world_size: int | None
    backend: str | None


@dataclass(frozen=True)
class Trace:
    """Everything one profiler file says, as columns plus a little metadata."""

    source_kind: str  # "kineto" | "xplane"
    events: EventTable
    memory: MemoryTable = field(default_factory=empty_memory)
    origin_ns: int = 0  # absolute time of ts_ns == 0 in the source's clock, ns
    devices: tuple[DeviceInfo, ...] = ()
    distributed: DistributedInfo | None = None
    base_time_ns: int | None = None  # Kineto baseTimeNanoseconds (wall clock of the profiler's clock zero)
    metadata: Mapping[str, Any] = field(default_factory=dict)  # small scalars: schemaVersion, traceName, Framework...
    warnings: tuple[str, ...] = ()
    # Reader-specific per-event columns aligned with ``events`` (XPlane: flops, bytes_accessed, hlo_category_id...).
    extra: Mapping[str, NDArray[Any]] = field(default_factory=dict)
    extra_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # interned strings for *_id extras
    # How much of the file was read: {"complete", "read_bytes", "total_bytes", "read_share", "reason"}; a
    # reader that stopped early (invalid JSON, a cut file) sets complete False and says why. Empty: complete.
    read_state: Mapping[str, Any] = field(default_factory=dict)
