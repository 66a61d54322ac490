"""The Kineto reader's declared layout: source category -> Kind, which args fields each kind of row carries
(shared with the C scanner), and the dtypes of the scanned and stored columns (used by columns.py)."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import numpy as np

from tb_llmdiag.model import DEVICE_KINDS, Kind

#: source category -> Kind (unknown categories are OTHER; host/device is decided from the kind)
KIND_OF_CATEGORY: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "Operator": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.ANNOTATION,
    "python_function": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME,
    "Runtime": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "mtia_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "kernel": Kind.KERNEL,
    "Kernel": Kind.KERNEL,
    "mtia_ccp_events": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "Memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "Memset": Kind.MEMSET,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "cuda_sync": Kind.SYNC,
}
#: categories of device work (kernels, copies, memsets): an event of one that could not be read is device work lost
DEVICE_CATEGORIES = frozenset(c for c, k in KIND_OF_CATEGORY.items() if k in DEVICE_KINDS)
#: Kinds of rows on a device lane (they have a stream and a device, not a host thread)
DEVICE_SIDE = (*DEVICE_KINDS, Kind.GPU_ANNOTATION, Kind.SYNC)
DEVICE_ROW, LAUNCH_ROW = 1, 2
#: by kind code: which args fields a row carries (device rows: correlation, stream, device, bytes and
#: pid; launch rows: correlation). Shared with the C scanner.
ROW_ARGS = bytes(
    DEVICE_ROW if k in DEVICE_SIDE else LAUNCH_ROW if k in (Kind.RUNTIME, Kind.DRIVER) else 0 for k in range(256)
)
SKIP = 255  # pseudo-kind of skipped categories
STR_ID_BASE = -(1 << 40)  # string pid/tid values ("Spans", "PyTorch Profiler") are interned below this
SKIPPED_CATEGORIES = {"Trace"}  # the profiler's own "PyTorch Profiler (0)" span
DIGITS = re.compile(r"-?\d+")
PLAIN_DECIMAL = re.compile(rb"(-?\d+)(?:\.(\d*))?")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: rows per slab of columns (Columns._store): 4 Mi rows, ~230 MB of address space, committed only as filled
SLAB_ROWS = 4 << 20
#: the model's columns as Columns keeps them (EventTable's dtypes)
ROW_DTYPES = {
    "ts_ns": np.int64,
    "dur_ns": np.int64,
    "kind": np.uint8,
    "name_id": np.int32,
    "device": np.int16,
    "stream": np.int32,
    "tid": np.int64,
    "correlation": np.int64,
    "bytes": np.int64,
    "shape_id": np.int32,
}


class Scan(NamedTuple):
    """What Columns.scan finds in one decoded piece."""

    xs: list[Any]  # the complete events that become rows
    kind: np.ndarray  # uint8 Kind codes
    ts: np.ndarray  # float64 us
    dur: np.ndarray  # float64 us; NaN where missing
    name_id: np.ndarray  # int32 ids into Columns.names
    tid: np.ndarray  # int64 thread ids (streams on device rows); see Columns._ids
    pid: np.ndarray  # int64, device rows only (-1 elsewhere)
    correlation: np.ndarray  # int64 launch/kernel correlation id, device and launch rows only
    stream: np.ndarray  # int64 args.stream, device rows only
    device: np.ndarray  # int64 args.device, device rows only
    bytes: np.ndarray  # int64 args.bytes, device rows only
    shape_id: np.ndarray  # int32 ids into Columns.shapes: recorded Input Dims of SHAPE_OPS operators, else -1
    memory: dict[str, np.ndarray]  # the "[memory]" samples' columns (MEMORY_DTYPES)
    flows: dict[str, np.ndarray] = {}  # the fwdbwd flows' columns (FLOW_DTYPES), in file order; {} without one


#: Scan's numeric columns besides kind, and their dtypes
MEMORY_DTYPES = {
    "ts": np.float64,
    "device_type": np.int64,
    "device_id": np.int64,
    "bytes": np.int64,
    "total_allocated": np.int64,
    "total_reserved": np.int64,
}
#: the columns of the forward-backward flows (``"cat": "fwdbwd"``) a scan keeps: ts (us, as the rows' ts before
#: they become ns), tid (as the rows' tid), id (-1: none) and end (1: the flow's end, on the backward operator)
FLOW_DTYPES = {"ts": np.float64, "tid": np.int64, "id": np.int64, "end": np.uint8}
SCAN_DTYPES = {
    "ts": np.float64,
    "dur": np.float64,
    "name_id": np.int32,
    "tid": np.int64,
    "pid": np.int64,
    "correlation": np.int64,
    "stream": np.int64,
    "device": np.int64,
    "bytes": np.int64,
    "shape_id": np.int32,
}
