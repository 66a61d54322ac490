"""XSpace ``.xplane.pb`` (torch_xla / JAX / TensorFlow profiler) -> ``model.Trace``.

Contract:
- ``read_xplane(path)`` returns a ``Trace`` with ``source_kind="xplane"``; any file it cannot read as an
  XSpace (empty, truncated, garbage, not a profile) raises ``TraceFormatError`` with a one-line message.
- Times: an event starts at ``XLine.timestamp_ns + XEvent.offset_ps / 1000`` and ends at that plus
  ``duration_ps / 1000`` (both floored to ns, so nested events stay nested); ``origin_ns`` is the earliest
  start of the file, rows are sorted by start.
- Memory: the file's bytes are held once; the top level of the XSpace is split by hand and each XPlane is
  parsed, turned into numpy columns and dropped before the next one is parsed.

Mapping (docs/xplane.md has the full table):
- ``/device:TPU:N``: line ``XLA Ops`` -> KERNEL; ``Steps``, ``XLA Modules`` and other lines -> GPU_ANNOTATION.
  Per-op constants (``hlo_category``, ``flops``, ``bytes_accessed``, ``program_id``) come from the event
  metadata's stats; an op inherits the ``_c`` flow id of the ``XLA Modules`` event around it as its
  correlation, and the host event that produced it (``_p``) becomes RUNTIME with the same correlation.
- ``/device:GPU:N``: stream lines -> KERNEL / MEMCPY / MEMSET (by name); derived lines (``XLA Ops``,
  ``XLA Modules``, ``Steps``...) -> GPU_ANNOTATION. ``correlation_id`` -> correlation; ``hlo_op``,
  ``hlo_module`` -> extra columns. ``device`` = N, ``stream`` = line id.
- ``/host:*``: events with a ``step_num`` stat -> STEP named ``<name>#<step_num>`` (one per step number);
  ``$``-prefixed python tracer frames -> PYTHON; CUPTI ``cuda*`` -> RUNTIME, ``cu*`` -> DRIVER; the rest
  CPU_OP. Compiles and host<->device transfers are tagged in the ``xla_role`` extra column.
  ``tid`` = line id. Without host steps, the first device's ``Steps`` line gives the STEP rows.
- ``/host:metadata``: the programs (``name``, ``program_id``) go to ``metadata["xla_programs"]``.
- Device plane stats (``peak_teraflops_per_second``, ``memory_size``...) -> ``DeviceInfo``.

Extra columns (aligned with ``events``; ``*_id`` index into ``extra_names[col]``, -1 when absent):
``step_num``, ``program_id``, ``flops``, ``bytes_accessed`` (int64, -1 unknown), ``hlo_category_id``,
``hlo_op_id``, ``hlo_module_id`` (``hlo_module`` stat, or the ``name`` stat of compiler events),
``graph_hash_id`` (torch_xla ``graph_hash``), ``xla_role`` (uint8 index into ``XLA_ROLES``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.source import open_regular
from tb_llmdiag.ingest.xplane_schema import message_classes
from tb_llmdiag.model import DEVICE_KINDS, DeviceInfo, EventTable, Kind, Trace, empty_events, kind_mask

log = logging.getLogger(__name__)

#: Values of the ``xla_role`` extra column.
XLA_ROLES: tuple[str, ...] = ("", "compile", "transfer_to_device", "transfer_from_device")
ROLE_COMPILE, ROLE_TO_DEVICE, ROLE_FROM_DEVICE = 1, 2, 3

_ROLE_PATTERNS: tuple[tuple[int, re.Pattern[str]], ...] = (
    # torch_xla: XLAGraphExecutor::Compile > PjRtComputationClient::Compile > PjRt<Backend>Client::Compile;
    # JAX: backend_compile / backend_compile_and_load (+ <Backend>Client::Compile on a compiler thread).
    (ROLE_COMPILE, re.compile(r"^(XLAGraphExecutor::Compile|\w*Client::Compile\w*|backend_compile\w*)$")),
    (ROLE_TO_DEVICE, re.compile(r"^(\w+::TransferToDevice\w*|\w*Client::BufferFromHostBuffer\w*"
                                r"|\w*TransferToInfeed\w*)$")),
    # JAX reads device values through <Backend>Buffer::ToLiteral (PjRtStreamExecutor, TfrtGpu, CommonPjRt)
    (ROLE_FROM_DEVICE, re.compile(r"^(\w+::TransferFromDevice\w*|\w*Buffer::ToLiteral\w*"
                                  r"|\w*Buffer::CopyRawToHost\w*|\w*TransferFromOutfeed\w*)$")),
)

_DEVICE_PLANE = re.compile(r"^/device:(TPU|GPU|CUSTOM):(\d+)$")
_DERIVED_LINES = frozenset({
    "XLA Modules", "XLA Ops", "XLA TraceMe", "Steps", "Framework Ops", "Framework Name Scope",
    "TensorFlow Ops", "TensorFlow Name Scope", "Source code", "Launch Stats", "Async XLA Ops",
})
_MEMCPY = re.compile(r"^(Memcpy|memcpy|MEMCPY)")
_MEMSET = re.compile(r"^(Memset|memset|MEMSET)")
_MEMCPY_SIZE = re.compile(r"(?:num_bytes|size|bytes)[:=\s]+(\d+)")
_COMPILER_EVENT = re.compile(r"Compiler::|Compile")
# a compile call that names its module: JAX's ``PjRtCApiClient::CompileAndLoad(jit_train_step)``
_COMPILE_OF_MODULE = re.compile(r"^\w+::Compile\w*\s*\(([\w.\-]+)\)$")
# xprof's program label ``<module>(<program_id>)`` on /host:metadata
_PROGRAM_LABEL = re.compile(r"^(.*)\((\d+)\)$")
#: device plane stats that name the device, most specific first
_DEVICE_NAME_STATS = ("device_type_string", "gpu_device_name", "device_name", "gpu_model", "device_vendor")

# Per-event stats we read, by stat name -> slot. Int slots, then string slots.
_INT_STATS = {"step_num": "step_num", "correlation_id": "correlation", "program_id": "program_id",
              "flops": "flops", "bytes_accessed": "bytes_accessed", "_p": "producer", "_c": "consumer"}
_STR_STATS = {"hlo_op": "hlo_op_id", "hlo_module": "hlo_module_id", "graph_hash": "graph_hash_id",
              "hlo_category": "hlo_category_id", "name": "name_stat", "memcpy_details": "memcpy_details"}
_META_STATS = ("hlo_category", "flops", "bytes_accessed", "program_id")

_STR_COLUMNS = ("hlo_category_id", "hlo_op_id", "hlo_module_id", "graph_hash_id")
_INT_COLUMNS = ("step_num", "program_id", "flops", "bytes_accessed")

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
class _Chunk:
    """Columns of one XLine (absolute ns times)."""

    start: NDArray[np.int64]
    end: NDArray[np.int64]
    kind: NDArray[np.uint8]
    name_id: NDArray[np.int32]
    device: int
    stream: int
    tid: int
    ints: dict[str, NDArray[np.int64]]  # _INT_COLUMNS + correlation, producer, consumer, bytes
    strs: dict[str, NDArray[np.int32]]  # _STR_COLUMNS (global ids)
    role: NDArray[np.uint8]
    device_step: NDArray[np.bool_]  # device "Steps" line rows (step fallback)


@dataclass
class _Builder:
    path: str
    names: _Interner = field(default_factory=_Interner)
    strs: dict[str, _Interner] = field(default_factory=lambda: {c: _Interner() for c in _STR_COLUMNS})
    chunks: list[_Chunk] = field(default_factory=list)
    devices: list[DeviceInfo] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    stream_ids: _Interner = field(default_factory=_Interner)


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


def _split_xspace(data: bytes) -> tuple[list[tuple[int, int]], dict[int, list[str]]]:
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
                strings[number].append(bytes(buf[pos:pos + size]).decode("utf-8", errors="replace"))
            pos += size
        else:
            raise TraceFormatError(f"wire type {wire} is not used by XSpace")
        if number == 1 and wire != 2:
            raise TraceFormatError("XSpace.planes is not a message")
        if pos > end:
            raise TraceFormatError("truncated")
    return planes, strings


def _stat_value(stat: Any, stat_names: dict[int, str]) -> Any:
    which = stat.WhichOneof("value")
    if which is None or which == "bytes_value":
        return None
    if which == "ref_value":
        return stat_names.get(stat.ref_value, "")
    return getattr(stat, which)


def _as_int(v: Any) -> int:
    """A stat value as an int64 column value (-1 when not a number)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v if -_I64_MAX <= v <= _I64_MAX else -1
    if isinstance(v, float):
        return int(v) if np.isfinite(v) and abs(v) < 9e18 else -1
    if isinstance(v, str):
        try:
            return _as_int(int(v))
        except ValueError:
            return -1
    return -1


def _plane_stats(plane: Any, stat_names: dict[int, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for st in plane.stats:
        v = _stat_value(st, stat_names)
        if v is not None:
            out[stat_names.get(st.metadata_id, str(st.metadata_id))] = v
    return out


def _device_info(index: int, kind: str, stats: dict[str, Any]) -> DeviceInfo:
    def num(key: str) -> float | None:
        v = stats.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) else None

    # the model name when the plane states one (GPU: gpu_device_name "NVIDIA H100 80GB HBM3"), else the
    # vendor ("Nvidia"), else the plane kind
    name = next((v for k in _DEVICE_NAME_STATS if isinstance(v := stats.get(k), str) and v.strip()), kind)
    mem, cores, peak = num("memory_size"), num("core_count"), num("peak_teraflops_per_second")
    major, minor = num("compute_cap_major"), num("compute_cap_minor")
    cc = f"{int(major)}.{int(minor)}" if major is not None and minor is not None else None
    return DeviceInfo(index=index, name=name, total_memory_bytes=int(mem) if mem else None, compute_capability=cc,
                      num_sms=int(cores) if cores else None, peak_tflops=peak if peak and peak > 0 else None)


def _read_programs(plane: Any, b: _Builder, stat_names: dict[int, str]) -> None:
    programs = []
    for md in plane.event_metadata.values():
        pid = None
        for st in md.stats:
            if stat_names.get(st.metadata_id) == "program_id":
                pid = _as_int(_stat_value(st, stat_names))
        # xprof names programs "<module>(<program_id>)"; torch_xla writes no program_id stat, only the name
        m = _PROGRAM_LABEL.match(md.name)
        name = m.group(1) if m else md.name
        if (pid is None or pid < 0) and m:
            pid = _as_int(int(m.group(2)))
        programs.append({"name": name, "program_id": pid if pid is not None and pid >= 0 else None,
                         "label": md.name})
    programs.sort(key=lambda p: (p["program_id"] is None, p["program_id"] or 0, p["name"]))
    b.metadata["xla_programs"] = programs
    b.metadata.update({f"host_{k}": v for k, v in _plane_stats(plane, stat_names).items()
                       if isinstance(v, (int, float, str))})


def _add_plane(plane: Any, b: _Builder) -> None:
    pname: str = plane.name
    b.metadata.setdefault("planes", []).append(pname)
    stat_names = {int(k): v.name for k, v in plane.stat_metadata.items()}
    if pname == "/host:metadata":
        _read_programs(plane, b, stat_names)
        return
    if pname == "Task Environment":
        st = _plane_stats(plane, stat_names)
        for key in ("profile_start_time", "profile_stop_time"):
            if isinstance(st.get(key), int):
                b.metadata[f"{key}_ns"] = st[key]
        return
    m = _DEVICE_PLANE.match(pname)
    device = int(m.group(2)) if m and int(m.group(2)) < 32767 else -1
    is_tpu = bool(m and m.group(1) == "TPU")
    if m:
        stats = _plane_stats(plane, stat_names)
        b.devices.append(_device_info(device, m.group(1), stats))
        b.metadata.setdefault("device_stats", {})[str(device)] = {
            k: v for k, v in stats.items() if isinstance(v, (int, float, str))}
    if not len(plane.lines):
        return

    ops = _op_table(plane, b, stat_names)
    for line in plane.lines:
        _add_line(line, b, stat_names, device, is_tpu, ops)

    if m:
        _link_device_flows(b, device)


@dataclass(frozen=True)
class _OpTable:
    """A plane's event metadata, one row per id (sorted) plus a spare last row for ids missing from the map:
    global name id, name-based kinds and role, whether it is a compiler event, and the per-op constants."""

    ids: NDArray[np.int64]
    name: NDArray[np.int64]
    kind_host: NDArray[np.uint8]
    kind_dev: NDArray[np.uint8]
    role: NDArray[np.uint8]
    compiler: NDArray[np.bool_]
    meta: dict[str, NDArray[np.int64]]  # _META_STATS (hlo_category as a global id) + module

    def rows(self, mid: NDArray[np.int64]) -> NDArray[np.intp]:
        """The row of each metadata id (the spare row when the id is not in the map)."""
        pos = np.searchsorted(self.ids, mid)
        ok = pos < self.ids.size
        found = np.zeros(mid.size, dtype=bool)
        found[ok] = self.ids[pos[ok]] == mid[ok]
        return np.where(found, pos, self.ids.size)


def _op_table(plane: Any, b: _Builder, stat_names: dict[int, str]) -> _OpTable:
    ids: list[int] = []
    name_ids: list[int] = []
    kind_host: list[int] = []
    kind_dev: list[int] = []
    roles: list[int] = []
    compiler: list[bool] = []
    meta: dict[str, list[int]] = {k: [] for k in (*_META_STATS, "module")}
    for mid, md in plane.event_metadata.items():
        name = md.name or md.display_name
        ids.append(int(mid))
        name_ids.append(b.names(name))
        kind_host.append(_host_kind(name))
        kind_dev.append(Kind.MEMCPY if _MEMCPY.match(name) else Kind.MEMSET if _MEMSET.match(name) else Kind.KERNEL)
        python = name.startswith("$")
        roles.append(0 if python else next((r for r, pat in _ROLE_PATTERNS if pat.match(name)), 0))
        compiler.append(_COMPILER_EVENT.search(name) is not None)
        vals: dict[str, Any] = {}
        for st in md.stats:
            key = stat_names.get(st.metadata_id)
            if key in meta:
                vals[key] = _stat_value(st, stat_names)
        meta["hlo_category"].append(
            b.strs["hlo_category_id"](vals["hlo_category"]) if isinstance(vals.get("hlo_category"), str) else -1)
        for key in ("flops", "bytes_accessed", "program_id"):
            meta[key].append(_as_int(vals[key]) if key in vals else -1)
        cm = None if python else _COMPILE_OF_MODULE.match(name)
        meta["module"].append(b.strs["hlo_module_id"](cm.group(1)) if cm else -1)
    order = np.argsort(np.array(ids, dtype=np.int64), kind="stable")

    def column(values: list[Any], dtype: Any, missing: Any) -> NDArray[Any]:
        return np.append(np.array(values, dtype=dtype)[order], np.array([missing], dtype=dtype))

    return _OpTable(ids=np.array(ids, dtype=np.int64)[order], name=column(name_ids, np.int64, b.names("")),
                    kind_host=column(kind_host, np.uint8, Kind.OTHER), kind_dev=column(kind_dev, np.uint8, Kind.KERNEL),
                    role=column(roles, np.uint8, 0), compiler=column(compiler, bool, False),
                    meta={k: column(v, np.int64, -1) for k, v in meta.items()})


def _host_kind(name: str) -> int:
    if name.startswith("$"):
        return Kind.PYTHON
    if (name.startswith("cuda") and name[4:5].isupper()) or (name.startswith("hip") and name[3:4].isupper()):
        return Kind.RUNTIME
    if name.startswith("cu") and name[2:3].isupper():
        return Kind.DRIVER
    return Kind.CPU_OP


def _add_line(line: Any, b: _Builder, stat_names: dict[int, str], device: int, is_tpu: bool, ops: _OpTable) -> None:
    evs = line.events
    n = len(evs)
    if n == 0:
        return
    rows = np.array([(e.metadata_id, e.offset_ps, e.duration_ps, len(e.stats)) for e in evs], dtype=np.int64)
    mid, off_ps, dur_ps, nstats = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    md_idx = ops.rows(mid)

    base = np.int64(line.timestamp_ns)
    with np.errstate(over="ignore"):
        start = base + off_ps // 1000
        end = base + (off_ps + np.maximum(dur_ps, 0)) // 1000
    end = np.maximum(end, start)

    ints = {k: np.full(n, -1, dtype=np.int64) for k in (*_INT_COLUMNS, "correlation", "producer", "consumer", "bytes")}
    strs = {k: np.full(n, -1, dtype=np.int32) for k in _STR_COLUMNS}
    for key in ("flops", "bytes_accessed", "program_id"):
        ints[key] = ops.meta[key][md_idx]
    strs["hlo_category_id"] = ops.meta["hlo_category"][md_idx].astype(np.int32)
    strs["hlo_module_id"] = ops.meta["module"][md_idx].astype(np.int32)  # event stats may override it

    # Per-event stats: only events that have any are visited; values are gathered per slot, then stored.
    has = np.flatnonzero(nstats)
    if has.size:
        slots = {sid: _INT_STATS.get(nm) or _STR_STATS[nm] for sid, nm in stat_names.items()
                 if nm in _INT_STATS or nm in _STR_STATS}
        found: dict[str, tuple[list[int], list[Any]]] = {slot: ([], []) for slot in set(slots.values())}
        get_slot, get_name = slots.get, stat_names.get
        for i in has.tolist() if slots else ():
            for st in evs[i].stats:
                slot = get_slot(st.metadata_id)
                if slot is None:
                    continue
                which = st.WhichOneof("value")
                if which is None or which == "bytes_value":
                    continue
                rows_i, vals = found[slot]
                rows_i.append(i)
                vals.append(get_name(st.ref_value, "") if which == "ref_value" else getattr(st, which))
        for slot, (rows_i, vals) in sorted(found.items(), key=lambda kv: kv[0] == "name_stat"):  # name_stat last
            if not rows_i:
                continue
            at = np.array(rows_i, dtype=np.intp)
            if slot in ints:
                ints[slot][at] = np.array([_as_int(v) for v in vals], dtype=np.int64)
                continue
            texts = [v if isinstance(v, str) else str(v) for v in vals]
            if slot == "memcpy_details":
                sizes = [_MEMCPY_SIZE.search(t) for t in texts]
                ints["bytes"][at] = np.array([_as_int(int(m.group(1))) if m else -1 for m in sizes], dtype=np.int64)
            elif slot == "name_stat":
                # the `name` stat of compiler events names the module being compiled (JAX, torch_xla on CPU/GPU)
                # (the first such stat of an event; an hlo_module stat or a module in the name wins)
                first = np.ones(at.size, dtype=bool)
                first[1:] = at[1:] != at[:-1]
                take = first & (strs["hlo_module_id"][at] < 0) & ops.compiler[md_idx[at]]
                intern = b.strs["hlo_module_id"]
                strs["hlo_module_id"][at[take]] = [intern(t) for t, k in zip(texts, take.tolist()) if k]
            else:
                intern = b.strs[slot]
                strs[slot][at] = np.array([intern(t) for t in texts], dtype=np.int32)

    role = ops.role[md_idx]
    device_step = np.zeros(n, dtype=bool)
    if device >= 0:
        lname = line.name
        if is_tpu:
            kind = np.full(n, Kind.KERNEL if lname == "XLA Ops" else Kind.GPU_ANNOTATION, dtype=np.uint8)
        elif lname in _DERIVED_LINES:
            kind = np.full(n, Kind.GPU_ANNOTATION, dtype=np.uint8)
        else:
            kind = ops.kind_dev[md_idx]
        if lname == "Steps":
            device_step = ints["step_num"] >= 0
        role = np.zeros(n, dtype=np.uint8)
        lid = int(line.id)
        stream = lid if 0 <= lid < 2**31 else b.stream_ids(str(lid)) + 1_000_000
        tid = -1
    else:
        kind = ops.kind_host[md_idx]
        kind[(ints["step_num"] >= 0) & (kind != Kind.PYTHON)] = Kind.STEP
        stream, tid = -1, int(line.id)
    b.chunks.append(_Chunk(start=start, end=end, kind=kind, name_id=ops.name[md_idx].astype(np.int32),
                           device=device, stream=stream, tid=tid, ints=ints, strs=strs, role=role,
                           device_step=device_step))


def _link_device_flows(b: _Builder, device: int) -> None:
    """TPU: ops inherit the ``_c`` flow id of the enclosing ``XLA Modules`` event as their correlation."""
    chunks = [c for c in b.chunks if c.device == device]
    mods = [c for c in chunks if c.kind.size and (c.kind == Kind.GPU_ANNOTATION).all() and (c.ints["consumer"] >= 0).any()]
    if not mods:
        return
    ms = np.concatenate([c.start for c in mods])
    me = np.concatenate([c.end for c in mods])
    mc = np.concatenate([c.ints["consumer"] for c in mods])
    keep = mc >= 0
    ms, me, mc = ms[keep], me[keep], mc[keep]
    order = np.argsort(ms, kind="stable")
    ms, me, mc = ms[order], me[order], mc[order]
    for c in mods:
        c.ints["correlation"] = np.where(c.ints["correlation"] >= 0, c.ints["correlation"], c.ints["consumer"])
    for c in chunks:
        dev = kind_mask(c.kind, DEVICE_KINDS) & (c.ints["correlation"] < 0)
        if not dev.any():
            continue
        w = np.searchsorted(ms, c.start, side="right") - 1
        inside = dev & (w >= 0) & (c.start < me[np.clip(w, 0, None)])
        c.ints["correlation"][inside] = mc[w[inside]]


def _finish(b: _Builder, hostnames: list[str]) -> Trace:
    chunks = b.chunks
    if not chunks:
        b.warnings.append("the XSpace holds no events")
        return Trace(source_kind="xplane", events=empty_events(), devices=tuple(b.devices),
                     metadata={**b.metadata, "hostnames": hostnames}, warnings=tuple(b.warnings))

    def cat(get: Any, dtype: Any) -> NDArray[Any]:
        return np.concatenate([np.asarray(get(c), dtype=dtype) for c in chunks])

    lens = [c.start.size for c in chunks]
    start = cat(lambda c: c.start, np.int64)
    end = cat(lambda c: c.end, np.int64)
    kind = cat(lambda c: c.kind, np.uint8)
    name_id = cat(lambda c: c.name_id, np.int32)
    device = np.repeat(np.array([c.device for c in chunks], dtype=np.int16), lens)
    stream = np.repeat(np.array([c.stream for c in chunks], dtype=np.int32), lens)
    tid = np.repeat(np.array([c.tid for c in chunks], dtype=np.int64), lens)
    ints = {k: cat(lambda c, k=k: c.ints[k], np.int64) for k in chunks[0].ints}
    strs = {k: cat(lambda c, k=k: c.strs[k], np.int32) for k in _STR_COLUMNS}
    role = cat(lambda c: c.role, np.uint8)
    device_step = cat(lambda c: c.device_step, bool)
    b.chunks = []

    host = device < 0
    # Host events that produced a device flow (``_p`` matching a device ``_c``) are the launches.
    dev_corr = np.unique(ints["correlation"][~host & (ints["correlation"] >= 0)])
    if dev_corr.size:
        launch = host & (ints["producer"] >= 0) & (ints["correlation"] < 0) & np.isin(ints["producer"], dev_corr)
        ints["correlation"][launch] = ints["producer"][launch]
        kind[launch & (kind == Kind.CPU_OP)] = Kind.RUNTIME

    # One STEP row per step number (the longest); without host steps, the first device's Steps line.
    step = kind == Kind.STEP
    if not step.any() and device_step.any():
        first = device[device_step].min()
        step = device_step & (device == first)
        kind[step] = Kind.STEP
    if step.any():
        idx = np.flatnonzero(step)
        o = np.lexsort((-(end[idx] - start[idx]), ints["step_num"][idx]))
        idx = idx[o]
        dup = np.zeros(idx.size, dtype=bool)
        dup[1:] = ints["step_num"][idx][1:] == ints["step_num"][idx][:-1]
        kind[idx[dup]] = np.where(host[idx[dup]], Kind.ANNOTATION, Kind.GPU_ANNOTATION)
        keep = idx[~dup]
        # name steps "<name>#<step_num>" so step numbering follows the profiler's step_num
        names = list(b.names.values)
        interner = b.names
        for i in keep.tolist():
            name_id[i] = interner(f"{names[name_id[i]]}#{ints['step_num'][i]}")

    origin = int(start.min())
    ts = start - origin
    dur = end - start
    order = np.argsort(ts, kind="stable")
    events = EventTable(
        ts_ns=ts[order], dur_ns=dur[order], kind=kind[order], name_id=name_id[order], device=device[order],
        stream=stream[order], tid=tid[order], correlation=ints["correlation"][order],
        bytes=ints["bytes"][order],
        shape_id=np.full(ts.size, -1, dtype=np.int32), names=b.names.values,
    )
    extra: dict[str, NDArray[Any]] = {k: ints[k][order] for k in _INT_COLUMNS}
    extra.update({k: strs[k][order] for k in _STR_COLUMNS})
    extra["xla_role"] = role[order]
    extra_names: dict[str, tuple[str, ...]] = {k: b.strs[k].values for k in _STR_COLUMNS}
    extra_names["xla_role"] = XLA_ROLES
    metadata = {**b.metadata, "hostnames": hostnames}
    start_ns = metadata.get("profile_start_time_ns")
    # line timestamps are usually relative to the profile's start; then its wall clock is our base time
    base_time = None
    if isinstance(start_ns, int) and 0 <= origin < 10**15:
        base_time = start_ns
    return Trace(source_kind="xplane", events=events, origin_ns=origin, devices=tuple(sorted(b.devices, key=lambda d: d.index)),
                 base_time_ns=base_time, metadata=metadata, warnings=tuple(b.warnings), extra=extra,
                 extra_names=extra_names)


def read_xplane(path: str) -> Trace:
    """Read one XSpace ``.xplane.pb`` file into a ``Trace``.

    Args:
      path: the file.
    Returns:
      The trace (``source_kind="xplane"``).
    Raises:
      TraceFormatError: the file is empty, truncated, or not an XSpace protobuf.
    """
    try:
        with open_regular(path) as f:  # a FIFO or device is refused, never blocked on
            data = f.read()
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read: {e.strerror or e}") from e
    return parse_xspace(data, path)


def parse_xspace(data: bytes, path: str = "<bytes>") -> Trace:
    """``read_xplane`` on bytes already in memory (tests, fuzzing)."""
    if not data:
        raise TraceFormatError(f"{path}: empty file, not an XPlane profile")
    try:
        plane_ranges, strings = _split_xspace(data)
    except TraceFormatError as e:
        raise TraceFormatError(f"{path}: not a readable XPlane protobuf ({e})") from None
    if not plane_ranges:
        raise TraceFormatError(f"{path}: not an XPlane profile (no planes in the file)")
    XPlane = message_classes()["XPlane"]
    b = _Builder(path=path)
    b.warnings.extend(f"profiler error: {s}" for s in strings[2])
    b.warnings.extend(f"profiler warning: {s}" for s in strings[3])
    view = memoryview(data)
    for i, (lo, hi) in enumerate(plane_ranges):
        try:
            plane = XPlane.FromString(bytes(view[lo:hi]))
        except Exception as e:  # protobuf raises DecodeError (or RuntimeError/ValueError by backend)
            raise TraceFormatError(f"{path}: plane {i} is not a valid XPlane message ({type(e).__name__})") from None
        try:
            _add_plane(plane, b)
        except (ValueError, OverflowError, IndexError, KeyError, TypeError, UnicodeError) as e:
            raise TraceFormatError(f"{path}: plane {i} ({plane.name!r}) is malformed: {type(e).__name__}: {e}") from None
        del plane
    return _finish(b, strings[4])
