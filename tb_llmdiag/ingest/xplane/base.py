"""XPlane reading, shared parts: the xla_role patterns, name tables, column builders and the
hand split of the XSpace wire format (see reader.py for the contract)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.validate import Rejected
from tb_llmdiag.model import DeviceInfo

log = logging.getLogger(__name__)

#: Values of the ``xla_role`` extra column.
XLA_ROLES: tuple[str, ...] = ("", "compile", "transfer_to_device", "transfer_from_device")
ROLE_COMPILE, ROLE_TO_DEVICE, ROLE_FROM_DEVICE = 1, 2, 3

ROLE_PATTERNS: tuple[tuple[int, re.Pattern[str]], ...] = (
    # torch_xla: XLAGraphExecutor::Compile > PjRtComputationClient::Compile > PjRt<Backend>Client::Compile;
    # JAX: backend_compile / backend_compile_and_load (+ <Backend>Client::Compile on a compiler thread).
    (ROLE_COMPILE, re.compile(r"^(XLAGraphExecutor::Compile|\w*Client::Compile\w*|backend_compile\w*)$")),
    (
        ROLE_TO_DEVICE,
        re.compile(
            r"^(\w+::TransferToDevice\w*|\w*Client::BufferFromHostBuffer\w*"
            r"|\w*TransferToInfeed\w*)$"
        ),
    ),
    # JAX reads device values through <Backend>Buffer::ToLiteral (PjRtStreamExecutor, TfrtGpu, CommonPjRt)
    (
        ROLE_FROM_DEVICE,
        re.compile(
            r"^(\w+::TransferFromDevice\w*|\w*Buffer::ToLiteral\w*"
            r"|\w*Buffer::CopyRawToHost\w*|\w*TransferFromOutfeed\w*)$"
        ),
    ),
)

DEVICE_PLANE = re.compile(r"^/device:(TPU|GPU|CUSTOM):(\d+)$")
DERIVED_LINES = frozenset(
    {
        "XLA Modules",
        "XLA Ops",
        "XLA TraceMe",
        "Steps",
        "Framework Ops",
        "Framework Name Scope",
        "TensorFlow Ops",
        "TensorFlow Name Scope",
        "Source code",
        "Launch Stats",
        "Async XLA Ops",
    }
)
MEMCPY = re.compile(r"^(Memcpy|memcpy|MEMCPY)")
MEMSET = re.compile(r"^(Memset|memset|MEMSET)")
MEMCPY_SIZE = re.compile(r"(?:num_bytes|size|bytes)[:=\s]+(\d+)")
COMPILER_EVENT = re.compile(r"Compiler::|Compile")
# a compile call that names its module: JAX's ``PjRtCApiClient::CompileAndLoad(jit_train_step)``
COMPILE_OF_MODULE = re.compile(r"^\w+::Compile\w*\s*\(([\w.\-]+)\)$")
# xprof's program label ``<module>(<program_id>)`` on /host:metadata
PROGRAM_LABEL = re.compile(r"^(.*)\((\d+)\)$")
#: device plane stats that name the device, most specific first
_DEVICE_NAME_STATS = ("device_type_string", "gpu_device_name", "device_name", "gpu_model", "device_vendor")

# Per-event stats we read, by stat name -> slot. Int slots, then string slots.
INT_STATS = {
    "step_num": "step_num",
    "correlation_id": "correlation",
    "program_id": "program_id",
    "flops": "flops",
    "bytes_accessed": "bytes_accessed",
    "_p": "producer",
    "_c": "consumer",
}
STR_STATS = {
    "hlo_op": "hlo_op_id",
    "hlo_module": "hlo_module_id",
    "graph_hash": "graph_hash_id",
    "hlo_category": "hlo_category_id",
    "name": "name_stat",
    "memcpy_details": "memcpy_details",
}
META_STATS = ("hlo_category", "flops", "bytes_accessed", "program_id")

STR_COLUMNS = ("hlo_category_id", "hlo_op_id", "hlo_module_id", "graph_hash_id")
INT_COLUMNS = ("step_num", "program_id", "flops", "bytes_accessed")

_I64_MAX = np.iinfo(np.int64).max


class _Interner:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.ids)
        return i

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(self.ids)


@dataclass
class Chunk:
    """Columns of one XLine (absolute ns times)."""

    start: NDArray[np.int64]
    end: NDArray[np.int64]
    kind: NDArray[np.uint8]
    name_id: NDArray[np.int32]
    device: int
    stream: int
    tid: int
    ints: dict[str, NDArray[np.int64]]  # INT_COLUMNS + correlation, producer, consumer, bytes
    strs: dict[str, NDArray[np.int32]]  # STR_COLUMNS (global ids)
    role: NDArray[np.uint8]
    device_step: NDArray[np.bool_]  # device "Steps" line rows (step fallback)


@dataclass
class Builder:
    path: str
    names: _Interner = field(default_factory=_Interner)
    strs: dict[str, _Interner] = field(default_factory=lambda: {c: _Interner() for c in STR_COLUMNS})
    chunks: list[Chunk] = field(default_factory=list)
    devices: list[DeviceInfo] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    stream_ids: _Interner = field(default_factory=_Interner)
    rejected: Rejected = field(default_factory=Rejected)  # rows with impossible times (validate.py)
    events_seen: int = 0  # against validate.MAX_EVENTS


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise TraceFormatError("truncated or malformed varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def split_xspace(data: bytes) -> tuple[list[tuple[int, int]], dict[int, list[str]]]:
    """Top-level fields of an XSpace: plane byte ranges (field 1) and the repeated strings (2, 3, 4).

    Raises TraceFormatError on anything that is not well-formed protobuf framing.
    """
    buf = memoryview(data)
    end, pos = len(data), 0
    planes: list[tuple[int, int]] = []
    strings: dict[int, list[str]] = {2: [], 3: [], 4: []}
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise TraceFormatError("field number 0")
        if wire == 0:
            _, pos = _varint(buf, pos, end)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(buf, pos, end)
            if pos + size > end:
                raise TraceFormatError(f"field {number} runs {pos + size - end} bytes past the end of the file")
            if number == 1:
                planes.append((pos, pos + size))
            elif number in strings:
                strings[number].append(bytes(buf[pos : pos + size]).decode("utf-8", errors="replace"))
            pos += size
        else:
            raise TraceFormatError(f"wire type {wire} is not used by XSpace")
        if number == 1 and wire != 2:
            raise TraceFormatError("XSpace.planes is not a message")
        if pos > end:
            raise TraceFormatError("truncated")
    return planes, strings


def stat_value(stat: Any, stat_names: dict[int, str]) -> Any:
    which = stat.WhichOneof("value")
    if which is None or which == "bytes_value":
        return None
    if which == "ref_value":
        return stat_names.get(stat.ref_value, "")
    return getattr(stat, which)


def as_int(v: Any) -> int:
    """A stat value as an int64 column value (-1 when not a number)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v if -_I64_MAX <= v <= _I64_MAX else -1
    if isinstance(v, float):
        return int(v) if np.isfinite(v) and abs(v) < 9e18 else -1
    if isinstance(v, str):
        try:
            return as_int(int(v))
        except ValueError:
            return -1
    return -1


def plane_stats(plane: Any, stat_names: dict[int, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for st in plane.stats:
        v = stat_value(st, stat_names)
        if v is not None:
            out[stat_names.get(st.metadata_id, str(st.metadata_id))] = v
    return out


def device_info(index: int, kind: str, stats: dict[str, Any]) -> DeviceInfo:
    def num(key: str) -> float | None:
        v = stats.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) else None

    # the model name when the plane states one (GPU: gpu_device_name "NVIDIA H100 80GB HBM3"), else the
    # vendor ("Nvidia"), else the plane kind
    name = next((v for k in _DEVICE_NAME_STATS if isinstance(v := stats.get(k), str) and v.strip()), kind)
    mem, cores, peak = num("memory_size"), num("core_count"), num("peak_teraflops_per_second")
    major, minor = num("compute_cap_major"), num("compute_cap_minor")
    cc = f"{int(major)}.{int(minor)}" if major is not None and minor is not None else None
    return DeviceInfo(
        index=index,
        name=name,
        total_memory_bytes=int(mem) if mem else None,
        compute_capability=cc,
        num_sms=int(cores) if cores else None,
        peak_tflops=peak if peak and peak > 0 else None,
    )
