"""Kineto / Chrome trace JSON (optionally gzipped) -> columnar ``Trace``.

How it stays fast and small: the file is decompressed in blocks and the ``traceEvents`` array is cut
into pieces at event boundaries, each piece decoded by msgspec straight into typed Structs holding
only the fields we need, turned into numpy columns, and dropped. Peak memory is one block plus the
columns, not the whole JSON text plus a Python object per event. Kineto writes one event per
``\\n  {`` ... ``\\n  }`` block; files written otherwise (minified) are decoded in one piece.

Reads: current traces (``cuda_runtime``, ``kernel``, ``gpu_memcpy``, fractional-us timestamps), the
2021 format (``Runtime``, ``Kernel``, ``Memcpy``, ``Operator``), ROCm (``hip*`` names, string streams),
MTIA, Triton ``cuLaunchKernel`` (``cuda_driver``), CPU-only traces, ``[memory]`` instant events.
A truncated file gives the events read up to the cut plus a warning; a file with no events at all
gives ``TraceFormatError``.
"""

from __future__ import annotations

import collections
import gc
import gzip
import logging
import math
import re
import zlib
from typing import Any, Iterator, NamedTuple, Union

import msgspec
import numpy as np

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.model import (
    DEVICE_KINDS,
    SHAPE_OPS,
    DeviceInfo,
    DistributedInfo,
    EventTable,
    Kind,
    MemoryTable,
    Trace,
    empty_memory,
    kind_mask,
)

_SCAN_ABI = 3  # the version of _scan.c's interface this module calls
try:  # the compiled one-pass scanner (_scan.c), built by setup.py where a C compiler is available
    from tb_llmdiag.ingest import _scan as _scan_ext  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _scan_ext = None
if _scan_ext is not None and getattr(_scan_ext, "ABI", None) != _SCAN_ABI:  # pragma: no cover - a stale build
    logging.getLogger(__name__).warning("ignoring %s: built from another version (reinstall to rebuild it)",
                                        _scan_ext.__file__)
    _scan_ext = None

try:  # isal's gzip reader inflates ~2x faster than the standard library's; optional
    from isal import igzip as _gzip  # type: ignore[import-not-found]
    from isal import isal_zlib as _zlib  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the environment
    _gzip = gzip  # type: ignore[assignment]
    _zlib = zlib  # type: ignore[assignment]
#: what a gzip reader raises on corrupt data (a cut-short stream raises EOFError)
_GZIP_ERRORS = (gzip.BadGzipFile, zlib.error, _zlib.error)


#: Decompressed bytes per block, and so about the size of a decoded piece: small enough that a piece's
#: text and then its Structs are still in the CPU cache when they are decoded and scanned (2 MiB read
#: ~20 % faster than 16 MiB on the bench trace).
BLOCK_BYTES = 2 << 20
_SEPARATOR = b"\n  },\n  {"  # Kineto's boundary between two top-level events
_HEAD_LIMIT = 64 << 20  # "traceEvents" must start within this many bytes

class _Args(msgspec.Struct, gc=False):
    """The args of a complete event, only the keys we read (fewer fields: faster decode and free)."""

    correlation: Union[int, str, None] = None
    stream: Union[int, str, None] = None
    device: Union[int, str, None] = None
    bytes: Union[int, float, str, None] = None
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")


class _MemoryArgs(msgspec.Struct, gc=False):
    """The args of a ``[memory]`` instant event."""

    mem_bytes: Union[int, float, None] = msgspec.field(default=None, name="Bytes")
    total_allocated: Union[int, float, None] = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Union[int, float, None] = msgspec.field(default=None, name="Total Reserved")
    device_type: Union[int, str, None] = msgspec.field(default=None, name="Device Type")
    device_id: Union[int, str, None] = msgspec.field(default=None, name="Device Id")


_NO_ARGS = _Args()


class _Event(msgspec.Struct, tag="X", tag_field="ph", gc=False):
    """A complete ("X") event: the only phase that becomes a row."""

    cat: Union[str, None] = None
    name: Union[str, int, float, None] = ""
    ts: Union[float, int, str, None] = None
    dur: Union[float, int, str, None] = None
    pid: Union[int, float, str, None] = None
    tid: Union[int, float, str, None] = None
    args: Union[_Args, None] = None


class _EventExactTs(_Event, tag="X"):
    """A complete event whose timestamp is kept as its JSON text: used when timestamps are so large
    (epoch microseconds) that a float64 cannot hold their nanosecond decimals."""

    ts: msgspec.Raw = msgspec.Raw(b"")  # type: ignore[assignment]


_COMPLETE = (_Event, _EventExactTs)
#: Timestamps at or above this many us are read exactly. Below it a float64's spacing is < 1 ns
#: (2**-10 us in [2**42, 2**43)), so rounding recovers Kineto's whole-ns decimals exactly; above it
#: (epoch-based clocks) it would not.
_EXACT_TS_ABOVE_US = 2**43


class _Instant(msgspec.Struct, tag="i", tag_field="ph", gc=False):
    """An instant event; ``[memory]`` samples are instants."""

    name: Union[str, int, float, None] = ""
    ts: Union[float, int, str, None] = None
    args: Union[_MemoryArgs, None] = None


class _InstantUpper(_Instant, tag="I"):
    pass


_INSTANTS = (_Instant, _InstantUpper)


# Every other Chrome phase (flows, metadata, counters, async...) decodes to an empty struct: its
# fields are skipped by the decoder instead of being built.
_OTHER_PHASES = tuple(
    msgspec.defstruct(f"_Phase_{ord(ph)}", [], tag=ph, tag_field="ph", gc=False) for ph in "BECbnestfPNODMVvRcST"
)
_AnyEvent = Union[(_Event, _Instant, _InstantUpper) + _OTHER_PHASES]  # type: ignore[valid-type]
_AnyEventExactTs = Union[(_EventExactTs, _Instant, _InstantUpper) + _OTHER_PHASES]  # type: ignore[valid-type]


class _DeviceProps(msgspec.Struct, gc=False):
    id: Union[int, None] = None
    name: Union[str, None] = None
    totalGlobalMem: Union[int, None] = None
    computeMajor: Union[int, None] = None
    computeMinor: Union[int, None] = None
    numSms: Union[int, None] = None


class _DistInfo(msgspec.Struct, gc=False):
    rank: Union[int, str, None] = None
    world_size: Union[int, str, None] = None
    backend: Union[str, None] = None


class _Envelope(msgspec.Struct, gc=False):
    traceEvents: list[_AnyEvent] = []  # type: ignore[valid-type]
    schemaVersion: Union[int, str, None] = None
    deviceProperties: Union[list[_DeviceProps], None] = None
    distributedInfo: Union[_DistInfo, None] = None
    baseTimeNanoseconds: Union[int, None] = None
    traceName: Union[str, None] = None
    displayTimeUnit: Union[str, None] = None
    record_shapes: Union[int, bool, None] = None
    profile_memory: Union[int, bool, None] = None
    with_stack: Union[int, bool, None] = None
    Framework: Union[str, None] = None  # Lightning writes "pytorch-lightning"


class _EnvelopeExactTs(_Envelope):
    traceEvents: list[_AnyEventExactTs] = []  # type: ignore[valid-type]


class _Decoders(NamedTuple):
    events: msgspec.json.Decoder  # a piece of the traceEvents array
    envelope: msgspec.json.Decoder  # a whole document (header, or the last events plus the metadata after them)
    event_type: Any  # the event union, for converting events one by one on the lenient path


_DECODERS = {  # by exact_ts
    False: _Decoders(msgspec.json.Decoder(list[_AnyEvent]), msgspec.json.Decoder(_Envelope), _AnyEvent),
    True: _Decoders(msgspec.json.Decoder(list[_AnyEventExactTs]), msgspec.json.Decoder(_EnvelopeExactTs),
                    _AnyEventExactTs),
}
_FIRST_TS = re.compile(rb'"ts"\s*:\s*(-?\d+)')


def _typed_decode(decoder: msgspec.json.Decoder, data: Any) -> Any:
    """The typed decode, or None when a value has an unexpected type (the caller decodes leniently).

    Raises msgspec.DecodeError for malformed JSON, invalid UTF-8 included.
    """
    try:
        return decoder.decode(data)
    except msgspec.ValidationError:
        return None
    except UnicodeDecodeError as exc:  # msgspec reports bad UTF-8 this way: malformed JSON all the same
        raise msgspec.DecodeError(f"invalid UTF-8 ({exc.reason})") from None


def _decode_events(data: bytes, warnings: list[str], exact_ts: bool = False) -> list[Any]:
    """Typed decode; on a type mismatch, decode generically and keep the events that convert.

    Raises msgspec.DecodeError only for malformed JSON.
    """
    decoders = _DECODERS[exact_ts]
    typed = _typed_decode(decoders.events, data)
    if typed is not None:
        return typed  # type: ignore[no-any-return]
    items = msgspec.json.decode(data)
    out: list[Any] = []
    bad = 0
    for item in items if isinstance(items, list) else []:
        try:
            if isinstance(item, dict):
                if exact_ts and "ts" in item:
                    item["ts"] = msgspec.Raw(msgspec.json.encode(item["ts"]))
                args = item.get("args")
                if isinstance(args, dict) and "Input Dims" in args:  # a Raw field: keep its JSON text
                    args["Input Dims"] = msgspec.Raw(msgspec.json.encode(args["Input Dims"]))
            out.append(msgspec.convert(item, decoders.event_type, strict=False))
        except (msgspec.ValidationError, TypeError):
            bad += 1
    if bad:
        warnings.append(f"{bad} events of an unexpected shape were skipped")
    return out


def _decode_envelope(data: bytes, warnings: list[str], exact_ts: bool = False) -> _Envelope:
    """Like _decode_events, for a whole document (header or tail)."""
    typed = _typed_decode(_DECODERS[exact_ts].envelope, data)
    if typed is not None:
        return typed  # type: ignore[no-any-return]
    doc = msgspec.json.decode(data)
    if not isinstance(doc, dict):
        raise TraceFormatError("not a Chrome/Kineto trace (the document is not a JSON object)")
    events = doc.pop("traceEvents", [])
    fields: dict[str, Any] = {}
    for key in _Envelope.__struct_fields__:
        if key in doc:
            try:
                msgspec.convert({key: doc[key]}, _Envelope, strict=False)
                fields[key] = doc[key]
            except msgspec.ValidationError:
                warnings.append(f"ignored the malformed trace field '{key}'")
    env = msgspec.convert(fields, _Envelope, strict=False)
    env.traceEvents = _decode_events(msgspec.json.encode(events if isinstance(events, list) else []), warnings,
                                     exact_ts)
    return env


#: source category -> Kind (unknown categories are OTHER; host/device is decided from the kind)
KIND_OF_CATEGORY: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP, "Operator": Kind.CPU_OP, "operator": Kind.CPU_OP,
    "user_annotation": Kind.ANNOTATION, "python_function": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME, "Runtime": Kind.RUNTIME, "runtime": Kind.RUNTIME,
    "mtia_runtime": Kind.RUNTIME, "cuda_driver": Kind.DRIVER,
    "kernel": Kind.KERNEL, "Kernel": Kind.KERNEL, "mtia_ccp_events": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY, "Memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET, "Memset": Kind.MEMSET,
    "gpu_user_annotation": Kind.GPU_ANNOTATION, "cuda_sync": Kind.SYNC,
}
#: Kinds of rows on a device lane (they have a stream and a device, not a host thread)
_DEVICE_SIDE = (*DEVICE_KINDS, Kind.GPU_ANNOTATION, Kind.SYNC)
_DEVICE_ROW, _LAUNCH_ROW = 1, 2
#: by kind code: which args fields a row carries (device rows: correlation, stream, device, bytes and
#: pid; launch rows: correlation). Shared with the C scanner.
_ROW_ARGS = bytes(_DEVICE_ROW if k in _DEVICE_SIDE else _LAUNCH_ROW if k in (Kind.RUNTIME, Kind.DRIVER) else 0
                  for k in range(256))
_SKIP = 255  # pseudo-kind of skipped categories
_STR_ID_BASE = -(1 << 40)  # string pid/tid values ("Spans", "PyTorch Profiler") are interned below this
_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
_SKIPPED_CATEGORIES = {"Trace"}  # the profiler's own "PyTorch Profiler (0)" span
_DIGITS = re.compile(r"-?\d+")
_PLAIN_DECIMAL = re.compile(rb"(-?\d+)(?:\.(\d*))?")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _Scan(NamedTuple):
    """What _Columns.scan finds in one decoded piece."""

    xs: list[Any]  # the complete events that become rows
    kind: np.ndarray  # uint8 Kind codes
    ts: np.ndarray  # float64 us
    dur: np.ndarray  # float64 us; NaN where missing
    name_id: np.ndarray  # int32 ids into _Columns.names
    tid: np.ndarray  # int64 thread ids (streams on device rows); see _Columns._ids
    pid: np.ndarray  # int64, device rows only (-1 elsewhere)
    correlation: np.ndarray  # int64 launch/kernel correlation id, device and launch rows only
    stream: np.ndarray  # int64 args.stream, device rows only
    device: np.ndarray  # int64 args.device, device rows only
    bytes: np.ndarray  # int64 args.bytes, device rows only
    shape_id: np.ndarray  # int32 ids into _Columns.shapes: recorded Input Dims of SHAPE_OPS operators, else -1
    memory: dict[str, np.ndarray]  # the "[memory]" samples' columns (_MEMORY_DTYPES)


#: _Scan's numeric columns besides kind, and their dtypes
_MEMORY_DTYPES = {"ts": np.float64, "device_type": np.int64, "device_id": np.int64, "bytes": np.int64,
                  "total_allocated": np.int64, "total_reserved": np.int64}
_SCAN_DTYPES = {"ts": np.float64, "dur": np.float64, "name_id": np.int32, "tid": np.int64, "pid": np.int64,
                "correlation": np.int64, "stream": np.int64, "device": np.int64, "bytes": np.int64,
                "shape_id": np.int32}


#: Interner flags of a name: its operator's Input Dims are kept (model.SHAPE_OPS); a ProfilerStep#N range
_SHAPE_NAME, _STEP_NAME = 1, 2


def _name_flags(text: str) -> int:
    return (_SHAPE_NAME if SHAPE_OPS.match(text) else 0) | (_STEP_NAME if _PROFILER_STEP.match(text) else 0)


class _Interner(dict):  # type: ignore[type-arg]
    """Event name -> id, numbered in order of first appearance. ``__missing__`` runs once per distinct
    name, so the per-event lookup is a plain dict subscript. Non-string names (a number) share the id
    of their text. ``flags[id]`` holds the name's _SHAPE_NAME/_STEP_NAME bits."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.flags = bytearray()

    def __missing__(self, key: Any) -> int:
        text = key if isinstance(key, str) else str(key)
        ident = dict.get(self, text)
        if ident is None:
            ident = len(self.texts)
            self.texts.append(text)
            self.flags.append(_name_flags(text))
            self[text] = ident
        self[key] = ident
        return ident


class _Columns:
    """Accumulates columns piece by piece; interns names, shapes and string thread/stream ids."""

    def __init__(self) -> None:
        self.names = _Interner()
        self.shapes: dict[bytes, int] = {}
        self.str_ids: dict[str, int] = {}
        self.parts: list[dict[str, np.ndarray]] = []
        self.mem_parts: list[tuple[list[Any], ...]] = []
        # category -> Kind code; categories never seen before are OTHER (the profiler's own span: _SKIP)
        self.kind_of: collections.defaultdict[Any, int] = collections.defaultdict(
            lambda: int(Kind.OTHER), {**{c: int(k) for c, k in KIND_OF_CATEGORY.items()},
                                      **{c: _SKIP for c in _SKIPPED_CATEGORIES}})
        self.origin_us: float | None = None  # the first piece's whole-us origin of ts_ns
        self.ts_min = float("inf")  # the earliest timestamp (us) of all rows
        self.skipped_no_ts = 0  # rows dropped for a missing or unparsable timestamp
        self.negative_dur = 0  # rows whose negative duration was read as 0
        self.ts_base_us: int | None = None  # set when timestamps are read exactly (see _relative_us)

    def _id(self, value: Any) -> int:
        """A pid/tid/stream value that is not an int64: "stream 7" -> 7, "0x0" -> 0, 7.0 -> 7; others
        (names, numbers beyond int64) are interned at _STR_ID_BASE - k."""
        if value is None:
            return -1
        number: int | None = None
        if isinstance(value, float):
            number = int(value) if math.isfinite(value) else None
        elif isinstance(value, int):
            number = value
        else:
            text = str(value)
            m = _DIGITS.search(text)
            if m and (m.group(0) == text.strip() or text.startswith("stream")):
                number = int(m.group(0))
            elif text.startswith("0x"):
                try:
                    number = int(text, 16)
                except ValueError:
                    pass
        if number is not None and _INT64_MIN <= number <= _INT64_MAX:
            return number
        return _STR_ID_BASE - self.str_ids.setdefault(str(value), len(self.str_ids))

    def _ids(self, values: list[Any]) -> np.ndarray:
        """Column of pid/tid/stream values: ints kept, missing -1, other values converted once per unique value."""
        try:
            return np.array(values, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            pass
        try:
            return np.array([-1 if v is None else v for v in values], dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            conv = {v: self._id(v) for v in set(values)}
            return np.array([conv[v] for v in values], dtype=np.int64)

    def scan(self, events: list[Any], has_memory: bool = True) -> _Scan:
        """The rows of one decoded piece (its complete events, skipped categories dropped) with their
        per-row columns, and its ``[memory]`` samples. Uses the compiled one-pass scanner when it was
        built, else scan_py; both give the same result."""
        if _scan_ext is None:
            return self.scan_py(events, has_memory)
        xs, found, mem, mem_found = _scan_ext.scan(events, _COMPLETE, _INSTANTS, _Args, _MemoryArgs, self.kind_of,
                                                   self.names, self.names.flags, self.shapes, _ROW_ARGS)
        kind = np.frombuffer(found["kind"], dtype=np.uint8)
        # the scanner leaves a column to Python when its values are not all plain numbers
        cols: dict[str, np.ndarray] = {}
        for name, dtype in _SCAN_DTYPES.items():
            cols[name] = np.frombuffer(found[name], dtype=dtype) if name in found else self._column(name, xs, kind, cols)
        mem_cols = {name: np.frombuffer(mem_found[name], dtype=dtype) if name in mem_found
                    else _memory_column(name, mem) for name, dtype in _MEMORY_DTYPES.items()}
        return _Scan(xs=xs, kind=kind, memory=mem_cols, **cols)

    def scan_py(self, events: list[Any], has_memory: bool = True) -> _Scan:
        """scan in Python: one list comprehension per field. ``has_memory=False`` skips looking for
        ``[memory]`` samples (the caller knows the piece has none)."""
        xs = [e for e in events if e.__class__ in _COMPLETE]
        mem = ([e for e in events if e.__class__ in _INSTANTS and e.name == "[memory]" and e.args is not None]
               if has_memory else [])
        kind_of = self.kind_of
        kind = np.array([kind_of[e.cat] for e in xs], dtype=np.uint8)
        skip = kind == _SKIP
        if skip.any():  # the profiler's own "PyTorch Profiler (0)" span is not an event of the run
            keep = np.flatnonzero(~skip)
            xs = [xs[i] for i in keep.tolist()]
            kind = kind[keep]
        cols: dict[str, np.ndarray] = {}
        for name in _SCAN_DTYPES:
            cols[name] = self._column(name, xs, kind, cols)
        return _Scan(xs=xs, kind=kind, memory={name: _memory_column(name, mem) for name in _MEMORY_DTYPES}, **cols)

    def _column(self, name: str, xs: list[Any], kind: np.ndarray, done: dict[str, np.ndarray]) -> np.ndarray:
        """One per-row column in Python (``done``: the columns before it in _SCAN_DTYPES). The args fields
        and pid are read only for the rows that carry them (device rows; launch rows too for the
        correlation id) and are -1 elsewhere; Input Dims only for SHAPE_OPS operators."""
        if name == "ts":
            ts_list = [e.ts for e in xs]
            if xs and xs[0].__class__ is _EventExactTs:
                return self._relative_us(ts_list)
            return _float_column(ts_list)
        if name == "dur":
            return _float_column([e.dur for e in xs])  # a missing "dur" is NaN here and 0 in finish()
        if name == "name_id":
            names = self.names
            return np.array([names[e.name] for e in xs], dtype=np.int32)
        if name == "tid":
            return self._ids([e.tid for e in xs])
        if name == "shape_id":  # Input Dims only for the operators analyses read (model.SHAPE_OPS)
            out32 = np.full(len(xs), -1, dtype=np.int32)
            flags = np.frombuffer(bytes(self.names.flags), dtype=np.uint8)
            rows = np.flatnonzero((kind == Kind.CPU_OP) & (flags[done["name_id"]] & _SHAPE_NAME > 0))
            if rows.size:
                shapes = self.shapes
                dims = [(xs[i].args or _NO_ARGS).input_dims for i in rows.tolist()]
                out32[rows] = [shapes.setdefault(bytes(d), len(shapes)) if len(d) else -1 for d in dims]
            return out32
        out = np.full(len(xs), -1, dtype=np.int64)
        mask = np.frombuffer(_ROW_ARGS, dtype=np.uint8)[kind] & (_DEVICE_ROW | (_LAUNCH_ROW if name == "correlation" else 0))
        rows = np.flatnonzero(mask).tolist()
        if rows:
            if name == "pid":
                out[rows] = self._ids([xs[i].pid for i in rows])
            else:
                values = [getattr(xs[i].args or _NO_ARGS, name) for i in rows]
                out[rows] = _int_column(values) if name in ("correlation", "bytes") else self._ids(values)
        return out

    def add(self, events: list[Any], has_memory: bool = True) -> None:
        """Append one decoded piece: scan() it, keep its memory samples, and finish its rows."""
        s = self.scan(events, has_memory)
        if s.memory["ts"].size:
            self.mem_parts.append(s.memory)
        if s.xs:
            self._append_rows(s)

    def _append_rows(self, s: _Scan) -> None:
        """Turn one piece's scan into the model's columns (while its arrays are small and in cache) and
        keep them for finish(): ns times relative to the first piece's whole-us origin, durations
        cleaned, ProfilerStep ranges marked, device/stream on device rows and tid on host rows."""
        cols = {"ts": s.ts, "dur": s.dur, "kind": s.kind, "name_id": s.name_id, "tid": s.tid, "pid": s.pid,
                "correlation": s.correlation, "stream": s.stream, "device": s.device, "bytes": s.bytes,
                "shape_id": s.shape_id}
        finite = np.isfinite(s.ts)
        if not finite.all():
            self.skipped_no_ts += int((~finite).sum())
            cols = {k: v[finite] for k, v in cols.items()}
        if not cols["ts"].size:
            return
        ts = cols["ts"]
        if self.origin_us is None:
            self.origin_us = float(np.floor(ts.min()))
        self.ts_min = min(self.ts_min, float(ts.min()))
        dur = cols["dur"]
        usable = dur >= 0  # a missing duration (NaN) is 0, and so is a negative one, with a warning
        if not usable.all():
            self.negative_dur += int((dur < 0).sum())
            dur = np.where(usable, dur, 0.0)
        kind = cols["kind"].copy()
        step_name = np.frombuffer(bytes(self.names.flags), dtype=np.uint8)[cols["name_id"]] & _STEP_NAME > 0
        kind[kind_mask(kind, (Kind.ANNOTATION, Kind.CPU_OP)) & step_name] = Kind.STEP
        device_side = kind_mask(kind, _DEVICE_SIDE)
        loc = cols["tid"]  # the tid, which is the stream on device rows
        self.parts.append({
            # us -> ns relative to a whole-us origin: exact for the ns-precision decimals Kineto writes
            "ts_ns": np.rint((ts - self.origin_us) * 1000.0).astype(np.int64),
            "dur_ns": np.rint(dur * 1000.0).astype(np.int64),
            "kind": kind, "name_id": cols["name_id"],
            "device": np.where(device_side, np.where(cols["device"] >= 0, cols["device"], cols["pid"]), -1
                               ).astype(np.int16),
            "stream": np.where(device_side, np.where(cols["stream"] != -1, cols["stream"], loc), -1).astype(np.int32),
            "tid": np.where(device_side, -1, loc),
            "correlation": cols["correlation"], "bytes": cols["bytes"], "shape_id": cols["shape_id"],
        })

    def _relative_us(self, raws: list[msgspec.Raw]) -> np.ndarray:
        """Exact JSON timestamps -> float us relative to a whole-us base, so ns decimals survive. A value
        that is not a plain decimal number is parsed as a float (exponents, numeric strings) or is NaN."""
        text = np.array([bytes(r) for r in raws], dtype="S40")
        try:
            whole, _, frac = np.char.partition(text, b".").T
            whole_us = whole.astype(np.int64)
            frac_ns = np.char.ljust(frac, 3, b"0").astype("S3").astype(np.int64)
            frac_ns[np.char.startswith(whole, b"-")] *= -1  # "-3.25" is -3 - 0.25
        except (ValueError, OverflowError):  # not all plain decimals: parse one by one
            return self._relative_us_slow(text.tolist())
        if self.ts_base_us is None:
            self.ts_base_us = int(whole_us.min())
        return (whole_us - self.ts_base_us) + frac_ns / 1000.0

    def _relative_us_slow(self, texts: list[bytes]) -> np.ndarray:
        out = np.full(len(texts), np.nan)
        for i, t in enumerate(texts):
            m = _PLAIN_DECIMAL.fullmatch(t.strip(b'"'))
            if m:
                whole, frac = int(m.group(1)), int((m.group(2) or b"").ljust(3, b"0")[:3])
                if self.ts_base_us is None:
                    self.ts_base_us = whole
                out[i] = (whole - self.ts_base_us) + (-frac if m.group(1).startswith(b"-") else frac) / 1000.0
            else:
                value = _to_float(t.strip(b'"'))
                if math.isfinite(value):
                    if self.ts_base_us is None:
                        self.ts_base_us = int(math.floor(value))
                    out[i] = value - self.ts_base_us
        return out

    def finish(self) -> tuple[EventTable, MemoryTable, int, tuple[str, ...]]:
        """The pieces' rows as one EventTable sorted by time, the memory samples, the origin (ns) and warnings."""
        if not self.parts:
            if self.skipped_no_ts:
                raise TraceFormatError("no event of the trace has a usable timestamp")
            raise TraceFormatError("the trace has no timed events ('traceEvents' holds no complete events)")
        warnings: list[str] = []
        if self.skipped_no_ts:
            warnings.append(f"{self.skipped_no_ts} events without a usable timestamp were skipped")
        if self.negative_dur:
            warnings.append(f"{self.negative_dur} events with negative duration were read as 0")
        col = {k: np.concatenate([p[k] for p in self.parts]) for k in self.parts[0]}
        self.parts = []
        assert self.origin_us is not None
        origin_us = np.floor(self.ts_min)  # relative to ts_base_us when timestamps were read exactly
        ts_ns = col["ts_ns"]
        if origin_us != self.origin_us:  # an earlier event came in a later piece: whole us, so exact
            ts_ns -= int(origin_us - self.origin_us) * 1000
        order = np.argsort(ts_ns, kind="stable")
        table = EventTable(
            ts_ns=ts_ns[order], dur_ns=col["dur_ns"][order], kind=col["kind"][order],
            name_id=col["name_id"][order], device=col["device"][order], stream=col["stream"][order],
            tid=col["tid"][order], correlation=col["correlation"][order], bytes=col["bytes"][order],
            shape_id=col["shape_id"][order], names=tuple(self.names.texts),
            shapes=tuple(s.decode("utf-8", "replace") for s in self.shapes),
        )
        base = self.ts_base_us or 0
        memory = self._memory(origin_us + base)
        return table, memory, (int(origin_us) + base) * 1000, tuple(warnings)

    def _memory(self, origin_us: float) -> MemoryTable:
        if not self.mem_parts:
            return empty_memory()
        col = {k: np.concatenate([p[k] for p in self.mem_parts]) for k in _MEMORY_DTYPES}
        keep = np.isfinite(col["ts"])
        col = {k: v[keep] for k, v in col.items()}
        ts_ns = np.rint((col["ts"] - origin_us) * 1000.0).astype(np.int64)
        # Device Type 0 is the CPU in Kineto's encoding; any other type is an accelerator
        device = np.where(col["device_type"] == 0, -1, col["device_id"]).astype(np.int16)
        order = np.argsort(ts_ns, kind="stable")
        return MemoryTable(
            ts_ns=ts_ns[order], device=device[order], bytes=col["bytes"][order],
            total_allocated_bytes=col["total_allocated"][order], total_reserved_bytes=col["total_reserved"][order],
        )


def _memory_column(name: str, mem: list[Any]) -> np.ndarray:
    """One column of memory samples (instant events with _MemoryArgs) in Python."""
    if name == "ts":
        return _float_column([e.ts for e in mem])
    attr = "mem_bytes" if name == "bytes" else name
    return _int_column([getattr(e.args, attr) for e in mem])


def _float_column(values: Any) -> np.ndarray:
    """Numbers -> float64; a missing value (None) is NaN, and strings are parsed (NaN if they do not)."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_to_float(v) for v in values], dtype=np.float64)


def _to_float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _int_column(values: list[Any]) -> np.ndarray:
    """Optional ints -> int64 with -1 for missing; strings and floats are parsed (-1 if they do not)."""
    try:
        return np.array(values, dtype=np.int64)  # the common case: every value present
    except (TypeError, ValueError, OverflowError):
        pass
    try:
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        out = np.empty(len(values), dtype=np.int64)
        for i, v in enumerate(values):
            try:
                out[i] = -1 if v is None else int(float(v))
            except (TypeError, ValueError, OverflowError):
                out[i] = -1
        return out


def _blocks(path: str) -> Iterator[memoryview]:
    """The file's decompressed bytes in blocks of at most BLOCK_BYTES; raises _Truncated when the
    gzip stream breaks off or is corrupt.

    Each block is a view of one reused buffer, valid until the next one is asked for. Inflating runs
    here, in the reading thread: a helper thread was tried and lost, since msgspec holds the GIL for
    a whole piece and the helper waited for it at every block.
    """
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    buf = bytearray(BLOCK_BYTES)
    with memoryview(buf) as view, (_gzip.open(path, "rb") if gzipped else open(path, "rb")) as f:
        try:
            while n := f.readinto(view):
                yield view[:n]
        except EOFError:
            raise _Truncated("the gzip stream ends early (file truncated?)") from None
        except _GZIP_ERRORS as exc:
            raise _Truncated(f"gzip data is corrupt ({exc})") from None


class _Truncated(Exception):
    """Raised by _blocks when the compressed stream breaks off; carries the reason."""


def _find_array_start(buf: bytes) -> int:
    """Index just past the '[' that opens "traceEvents", or -1 if not (yet) seen."""
    k = buf.find(b'"traceEvents"')
    if k < 0:
        return -1
    b = buf.find(b"[", k)
    return -1 if b < 0 else b + 1


def read_chrome_trace(path: str) -> Trace:
    """Read a Kineto/Chrome trace file (``.json`` or ``.json.gz``) into a ``Trace``.

    Raises:
        TraceFormatError: empty, not JSON, not a trace, or no events at all.
    """
    # The decoded structs hold no reference cycles; pausing the cyclic GC while hundreds of
    # thousands of them are built and dropped saves ~15 % of the read time.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _read(path)
    finally:
        if enabled:
            gc.enable()


def _read(path: str) -> Trace:
    """One pass over the decompressed blocks. The text lives in one bytearray: each piece is decoded in
    place through a memoryview (its leading ',' overwritten by '[' and trailing ',' by ']'), then the
    consumed prefix is dropped, so the JSON text is never copied."""
    cols = _Columns()
    warnings: list[str] = []
    head = b""
    envelope_parts: list[_Envelope] = []
    buf = bytearray()
    truncated: str | None = None
    start = -1
    chunking = True  # cut at Kineto event boundaries until a piece fails to decode
    exact_ts: bool | None = None  # decided from the first timestamp seen
    try:
        for block in _blocks(path):
            buf += block
            del block
            if start < 0:
                start = _find_array_start(buf)
                if start < 0:
                    stripped = buf.lstrip()
                    if stripped[:1] == b"[":  # Chrome "JSON Array Format": a bare list of events
                        buf = bytearray(b'{"traceEvents":') + stripped
                        start = len(b'{"traceEvents":[')
                    elif len(buf) > _HEAD_LIMIT or stripped[:1] not in (b"{", b""):
                        raise TraceFormatError("not a Chrome/Kineto trace (no 'traceEvents' array near the start)")
                    else:
                        continue
                head = bytes(buf[:start])
                del buf[: start - 1]  # buf[0] is now the array's '['
            cut = buf.rfind(_SEPARATOR) if chunking else -1
            if cut < 0:
                continue
            if exact_ts is None:
                exact_ts = _needs_exact_ts(buf, cut)
            buf[cut + 4] = 0x5D  # ']' in place of the ',' after the piece's last event
            with memoryview(buf) as view:
                try:
                    events = _decode_events(view[: cut + 5], warnings, exact_ts)
                except msgspec.DecodeError:
                    # not Kineto's layout after all: decode everything in one piece at the end
                    chunking = False
                    buf[cut + 4] = 0x2C
                    continue
                # a piece without the text "[memory]" has no allocator samples: skip looking for them
                cols.add(events, has_memory=_scan_ext is not None or buf.find(b'"[memory]"', 0, cut) >= 0)
                del events  # decoded Raw values point into the view: drop them before it closes
            del buf[: cut + 4]
            buf[0] = 0x5B  # '[' opens the rest
    except _Truncated as exc:
        truncated = str(exc)
    if start < 0:
        if not buf.strip():
            raise TraceFormatError("the file is empty" if truncated is None else f"unreadable: {truncated}")
        raise TraceFormatError("not a Chrome/Kineto trace (no 'traceEvents' array)")
    try:
        envelope_parts.append(_decode_envelope(head + b"]}", warnings))
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"the trace header is not valid JSON ({exc})") from None
    if exact_ts is None:
        exact_ts = _needs_exact_ts(buf, len(buf))
    tail_env = _decode_tail(bytes(buf), warnings, exact_ts)
    if tail_env is None:
        # truncated JSON: keep whole events up to the last boundary
        cut = buf.rfind(_SEPARATOR)
        salvaged = None
        if cut >= 0:
            try:
                salvaged = _decode_events(bytes(buf[: cut + 4]) + b"]", warnings, exact_ts)
            except msgspec.DecodeError:
                salvaged = None
        if salvaged is not None:
            cols.add(salvaged)
        truncated = truncated or "the JSON ends early"
    else:
        cols.add(tail_env.traceEvents)
        tail_env.traceEvents = []
        envelope_parts.append(tail_env)
    if truncated:
        if not cols.parts:
            raise TraceFormatError(f"truncated trace with no complete events ({truncated})")
        warnings.append(f"truncated file: {truncated}; analysed the events read before the cut")
    events, memory, origin_ns, col_warnings = cols.finish()
    warnings.extend(col_warnings)
    return _make_trace(events, memory, origin_ns, envelope_parts, tuple(warnings))


def _needs_exact_ts(data: bytes | bytearray, end: int) -> bool:
    """Are the timestamps epoch-sized (see _EXACT_TS_ABOVE_US)? Judged from the first one before ``end``."""
    m = _FIRST_TS.search(data, 0, end)
    return bool(m) and abs(int(m.group(1))) >= _EXACT_TS_ABOVE_US


def _decode_tail(buf: bytes, warnings: list[str], exact_ts: bool) -> _Envelope | None:
    """The last events plus the metadata after the array; None if the JSON is cut short."""
    try:
        return _decode_envelope(b'{"traceEvents":' + buf, warnings, exact_ts)
    except msgspec.DecodeError:
        return None


def _make_trace(events: EventTable, memory: MemoryTable, origin_ns: int, envs: list[_Envelope],
                warnings: tuple[str, ...]) -> Trace:
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
    dist = first("distributedInfo")
    distributed = None
    if dist is not None:
        distributed = DistributedInfo(rank=_opt_int(dist.rank), world_size=_opt_int(dist.world_size),
                                      backend=dist.backend)
    metadata: dict[str, Any] = {
        k: v for k in ("schemaVersion", "traceName", "displayTimeUnit", "record_shapes", "profile_memory",
                       "with_stack", "Framework")
        if (v := first(k)) is not None
    }
    return Trace(
        source_kind="kineto", events=events, memory=memory, origin_ns=origin_ns, devices=devices,
        distributed=distributed, base_time_ns=first("baseTimeNanoseconds"), metadata=metadata, warnings=warnings,
    )


def _opt_int(v: Any) -> int | None:
    try:
        return None if v is None else int(v)
    except (TypeError, ValueError):
        return None


__all__ = ["read_chrome_trace", "KIND_OF_CATEGORY"]
