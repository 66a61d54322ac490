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
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.files import open_trace
from tb_llmdiag.ingest.validate import read_state_with
from tb_llmdiag.ingest.xplane.base import (
    DEVICE_PLANE,
    INT_COLUMNS,
    PROGRAM_LABEL,
    STR_COLUMNS,
    XLA_ROLES,
    Builder,
    as_int,
    device_info,
    plane_stats,
    split_xspace,
    stat_value,
)
from tb_llmdiag.ingest.xplane.lines import add_line, link_device_flows, op_table
from tb_llmdiag.ingest.xplane.schema import message_classes
from tb_llmdiag.model import DEVICE_KINDS, EventTable, Kind, Trace, empty_events, kind_mask

log = logging.getLogger(__name__)


def _read_programs(plane: Any, b: Builder, stat_names: dict[int, str]) -> None:
    programs = []
    for md in plane.event_metadata.values():
        pid = None
        for st in md.stats:
            if stat_names.get(st.metadata_id) == "program_id":
                pid = as_int(stat_value(st, stat_names))
        # xprof names programs "<module>(<program_id>)"; torch_xla writes no program_id stat, only the name
        m = PROGRAM_LABEL.match(md.name)
        name = m.group(1) if m else md.name
        if (pid is None or pid < 0) and m:
            pid = as_int(int(m.group(2)))
        programs.append({"name": name, "program_id": pid if pid is not None and pid >= 0 else None, "label": md.name})
    programs.sort(key=lambda p: (p["program_id"] is None, p["program_id"] or 0, p["name"]))
    b.metadata["xla_programs"] = programs
    b.metadata.update(
        {f"host_{k}": v for k, v in plane_stats(plane, stat_names).items() if isinstance(v, (int, float, str))}
    )


def _add_plane(plane: Any, b: Builder) -> None:
    pname: str = plane.name
    b.metadata.setdefault("planes", []).append(pname)
    stat_names = {int(k): v.name for k, v in plane.stat_metadata.items()}
    if pname == "/host:metadata":
        _read_programs(plane, b, stat_names)
        return
    if pname == "Task Environment":
        st = plane_stats(plane, stat_names)
        for key in ("profile_start_time", "profile_stop_time"):
            if isinstance(st.get(key), int):
                b.metadata[f"{key}_ns"] = st[key]
        return
    m = DEVICE_PLANE.match(pname)
    device = int(m.group(2)) if m and int(m.group(2)) < 32767 else -1
    is_tpu = bool(m and m.group(1) == "TPU")
    if m:
        stats = plane_stats(plane, stat_names)
        b.devices.append(device_info(device, m.group(1), stats))
        b.metadata.setdefault("device_stats", {})[str(device)] = {
            k: v for k, v in stats.items() if isinstance(v, (int, float, str))
        }
    if not len(plane.lines):
        return

    ops = op_table(plane, b, stat_names)
    for line in plane.lines:
        add_line(line, b, stat_names, device, is_tpu, ops)

    if m:
        link_device_flows(b, device)


def _empty(b: Builder, hostnames: list[str]) -> Trace:
    """The trace of an XSpace without events; an error when every event was rejected (validate.py)."""
    if b.rejected.total:
        raise TraceFormatError(
            "no event of the XSpace has a usable time (negative or out-of-range times and durations)"
        )
    b.warnings.append("the XSpace holds no events")
    return Trace(
        source_kind="xplane",
        events=empty_events(),
        devices=tuple(b.devices),
        metadata={**b.metadata, "hostnames": hostnames},
        warnings=tuple(b.warnings),
    )


def _validated(b: Builder, kind: NDArray[np.uint8]) -> dict[str, Any]:
    """validate.py's verdict on the rows rejected while reading: their warnings on ``b``, and the read state (partial
    when they are many, or every device row)."""
    b.warnings[:0] = b.rejected.warnings()
    read_state = read_state_with({}, b.rejected, int(kind.size), int(kind_mask(kind, DEVICE_KINDS).sum()))
    if read_state:
        b.warnings.insert(0, f"partial result: {read_state['reason']}")
    return read_state


@dataclass
class _Rows:
    """The lines' chunks as whole columns, in reading order."""

    start: NDArray[np.int64]
    end: NDArray[np.int64]
    kind: NDArray[np.uint8]
    name_id: NDArray[np.int32]
    device: NDArray[np.int16]
    stream: NDArray[np.int32]
    tid: NDArray[np.int64]
    ints: dict[str, NDArray[np.int64]]
    strs: dict[str, NDArray[np.int32]]
    role: NDArray[np.uint8]
    device_step: NDArray[np.bool_]


def _concatenated(chunks: list[Any]) -> _Rows:
    def cat(get: Any, dtype: Any) -> NDArray[Any]:
        return np.concatenate([np.asarray(get(c), dtype=dtype) for c in chunks])

    lens = [c.start.size for c in chunks]
    return _Rows(
        start=cat(lambda c: c.start, np.int64),
        end=cat(lambda c: c.end, np.int64),
        kind=cat(lambda c: c.kind, np.uint8),
        name_id=cat(lambda c: c.name_id, np.int32),
        device=np.repeat(np.array([c.device for c in chunks], dtype=np.int16), lens),
        stream=np.repeat(np.array([c.stream for c in chunks], dtype=np.int32), lens),
        tid=np.repeat(np.array([c.tid for c in chunks], dtype=np.int64), lens),
        ints={k: cat(lambda c, k=k: c.ints[k], np.int64) for k in chunks[0].ints},
        strs={k: cat(lambda c, k=k: c.strs[k], np.int32) for k in STR_COLUMNS},
        role=cat(lambda c: c.role, np.uint8),
        device_step=cat(lambda c: c.device_step, bool),
    )


def _mark_launches(r: _Rows) -> None:
    """Host events that produced a device flow (``_p`` matching a device ``_c``) are the launches."""
    host = r.device < 0
    corr, producer = r.ints["correlation"], r.ints["producer"]
    dev_corr = np.unique(corr[~host & (corr >= 0)])
    if dev_corr.size:
        launch = host & (producer >= 0) & (corr < 0) & np.isin(producer, dev_corr)
        corr[launch] = producer[launch]
        r.kind[launch & (r.kind == Kind.CPU_OP)] = Kind.RUNTIME


def _mark_steps(r: _Rows, b: Builder) -> None:
    """One STEP row per step number (the longest); without host steps, the first device's Steps line. Steps are
    named "<name>#<step_num>" so that step numbering follows the profiler's step_num."""
    kind, step_num = r.kind, r.ints["step_num"]
    step = kind == Kind.STEP
    if not step.any() and r.device_step.any():
        first = r.device[r.device_step].min()
        step = r.device_step & (r.device == first)
        kind[step] = Kind.STEP
    if not step.any():
        return
    idx = np.flatnonzero(step)
    idx = idx[np.lexsort((-(r.end[idx] - r.start[idx]), step_num[idx]))]
    dup = np.zeros(idx.size, dtype=bool)
    dup[1:] = step_num[idx][1:] == step_num[idx][:-1]
    kind[idx[dup]] = np.where(r.device[idx[dup]] < 0, Kind.ANNOTATION, Kind.GPU_ANNOTATION)
    names = list(b.names.values)
    for i in idx[~dup].tolist():
        r.name_id[i] = b.names(f"{names[r.name_id[i]]}#{step_num[i]}")


def _finish(b: Builder, hostnames: list[str]) -> Trace:
    if not b.chunks:
        return _empty(b, hostnames)
    r = _concatenated(b.chunks)
    b.chunks = []
    _mark_launches(r)
    _mark_steps(r, b)
    origin = int(r.start.min())
    ts = r.start - origin
    order = np.argsort(ts, kind="stable")
    events = EventTable(
        ts_ns=ts[order],
        dur_ns=(r.end - r.start)[order],
        kind=r.kind[order],
        name_id=r.name_id[order],
        device=r.device[order],
        stream=r.stream[order],
        tid=r.tid[order],
        correlation=r.ints["correlation"][order],
        bytes=r.ints["bytes"][order],
        shape_id=np.full(ts.size, -1, dtype=np.int32),
        names=b.names.values,
    )
    extra: dict[str, NDArray[Any]] = {k: r.ints[k][order] for k in INT_COLUMNS}
    extra.update({k: r.strs[k][order] for k in STR_COLUMNS})
    extra["xla_role"] = r.role[order]
    extra_names: dict[str, tuple[str, ...]] = {k: b.strs[k].values for k in STR_COLUMNS}
    extra_names["xla_role"] = XLA_ROLES
    metadata = {**b.metadata, "hostnames": hostnames}
    start_ns = metadata.get("profile_start_time_ns")
    # line timestamps are usually relative to the profile's start; then its wall clock is our base time
    base_time = start_ns if isinstance(start_ns, int) and 0 <= origin < 10**15 else None
    read_state = _validated(b, r.kind)
    return Trace(
        source_kind="xplane",
        events=events,
        origin_ns=origin,
        devices=tuple(sorted(b.devices, key=lambda d: d.index)),
        base_time_ns=base_time,
        metadata=metadata,
        warnings=tuple(b.warnings),
        read_state=read_state,
        extra=extra,
        extra_names=extra_names,
    )


def read_xplane(path: str, inside: str = "") -> Trace:
    """Read one XSpace ``.xplane.pb`` file into a ``Trace``.

    Args:
      path: the file.
    Returns:
      The trace (``source_kind="xplane"``).
    Raises:
      TraceFormatError: the file is empty, truncated, or not an XSpace protobuf.
    """
    f, _ = open_trace(path, inside)  # a FIFO or device is refused, never blocked on
    with f:
        data = f.read()
    return parse_xspace(data, path)


def parse_xspace(data: bytes, path: str = "<bytes>") -> Trace:
    """``read_xplane`` on bytes already in memory (tests, fuzzing)."""
    if not data:
        raise TraceFormatError("empty file, not an XPlane profile")
    try:
        plane_ranges, strings = split_xspace(data)
    except TraceFormatError as e:
        raise TraceFormatError(f"not a readable XPlane protobuf ({e})") from None
    if not plane_ranges:
        raise TraceFormatError("not an XPlane profile (no planes in the file)")
    XPlane = message_classes()["XPlane"]
    b = Builder(path=path)
    b.warnings.extend(f"profiler error: {s}" for s in strings[2])
    b.warnings.extend(f"profiler warning: {s}" for s in strings[3])
    view = memoryview(data)
    for i, (lo, hi) in enumerate(plane_ranges):
        try:
            plane = XPlane.FromString(bytes(view[lo:hi]))
        except Exception as e:  # protobuf raises DecodeError (or RuntimeError/ValueError by backend)
            raise TraceFormatError(f"plane {i} is not a valid XPlane message ({type(e).__name__})") from None
        try:
            _add_plane(plane, b)
        except (ValueError, OverflowError, IndexError, KeyError, TypeError, UnicodeError) as e:
            raise TraceFormatError(f"plane {i} ({plane.name!r}) is malformed: {type(e).__name__}: {e}") from None
        del plane
    return _finish(b, strings[4])
