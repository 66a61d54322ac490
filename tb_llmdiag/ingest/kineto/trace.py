"""The Trace a Kineto file becomes: its columns plus the metadata of its envelope (devices, distributed info,
the profiler's settings), allocator samples beyond their device's memory rejected (used by reader.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.ingest.kineto.comm_args import CommArgs
from tb_llmdiag.ingest.kineto.graph_args import GraphArgs
from tb_llmdiag.ingest.kineto.structs import Envelope
from tb_llmdiag.model import DeviceInfo, DistributedInfo, EventTable, MemoryTable, Trace


def make_trace(
    events: EventTable,
    memory: MemoryTable,
    origin_ns: int,
    envs: list[Envelope],
    warnings: tuple[str, ...],
    read_state: dict[str, Any],
    side: tuple[CommArgs, GraphArgs, np.ndarray | None] | None = None,
    meta: dict[str, Any] | None = None,
) -> Trace:
    def first(attr: str) -> Any:
        for env in envs:
            value = getattr(env, attr)
            if value is not None:
                return value
        return None

    devices = tuple(
        DeviceInfo(
            index=int(p.id) if p.id is not None else i,
            name=p.name or "unknown",
            total_memory_bytes=p.totalGlobalMem,
            compute_capability=(f"{p.computeMajor}.{p.computeMinor}" if p.computeMajor is not None else None),
            num_sms=p.numSms,
        )
        for i, p in enumerate(first("deviceProperties") or [])
    )
    memory, dropped = _plausible_memory(memory, devices)
    if dropped:
        warnings = warnings + (f"{dropped} allocator samples above their device's memory were rejected",)
    dist = first("distributedInfo")
    distributed = None
    if dist is not None:
        distributed = DistributedInfo(
            rank=_opt_int(dist.rank), world_size=_opt_int(dist.world_size), backend=dist.backend
        )
    extra: dict[str, Any] = {}
    extra_names: dict[str, Any] = {}
    if side is not None:  # the reader's second passes (NCCL args, CUDA graph ids) and forward-backward links
        comm, graph, links = side
        extra, extra_names = comm.columns(events)
        extra.update(graph.columns(events))
        if links is not None:  # not a column: two rows, backward operators and their forward ones (links.py)
            extra["fwd_links"] = links
    metadata: dict[str, Any] = {
        k: v
        for k in (
            "schemaVersion",
            "traceName",
            "displayTimeUnit",
            "record_shapes",
            "profile_memory",
            "with_stack",
            "Framework",
        )
        if (v := first(k)) is not None
    }
    for k, v in (meta or {}).items():  # versions, Kineto's logged warnings, unprofiled step times (meta.py)
        metadata.setdefault(k, v)
    return Trace(
        source_kind="kineto",
        events=events,
        memory=memory,
        origin_ns=origin_ns,
        devices=devices,
        distributed=distributed,
        base_time_ns=first("baseTimeNanoseconds"),
        metadata=metadata,
        warnings=warnings,
        read_state=read_state,
        extra=extra,
        extra_names=extra_names,
    )


def _plausible_memory(memory: MemoryTable, devices: tuple[DeviceInfo, ...]) -> tuple[MemoryTable, int]:
    """Drop allocator samples whose totals exceed their device's memory (or 2^50 bytes anywhere): no
    allocator holds more than its device has. Returns the kept samples and how many were dropped."""
    if not len(memory):
        return memory, 0
    total = np.full(len(memory), float(2**50))
    for d in devices:
        if d.total_memory_bytes:
            total[memory.device == d.index] = float(d.total_memory_bytes)
    used = np.maximum(memory.total_allocated_bytes, memory.total_reserved_bytes).astype(np.float64)
    keep = used <= total
    if keep.all():
        return memory, 0
    return MemoryTable(
        ts_ns=memory.ts_ns[keep],
        device=memory.device[keep],
        bytes=memory.bytes[keep],
        total_allocated_bytes=memory.total_allocated_bytes[keep],
        total_reserved_bytes=memory.total_reserved_bytes[keep],
    ), int((~keep).sum())


def _opt_int(v: Any) -> int | None:
    try:
        return None if v is None else int(v)
    except (TypeError, ValueError, OverflowError):
        return None
