"""The msgspec Structs a Kineto/Chrome trace decodes into, and the typed-then-lenient decoders.

Only the fields the analyses read are declared, so the decoder skips the rest without building them.
A value of an unexpected type falls back to a generic decode that keeps the events that convert.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Union

import msgspec

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.kineto.layout import DEVICE_CATEGORIES
from tb_llmdiag.ingest.validate import Rejected


class Args(msgspec.Struct, gc=False):
    """The args of a complete event, only the keys we read (fewer fields: faster decode and free)."""

    correlation: int | str | None = None
    stream: int | str | None = None
    device: int | str | None = None
    bytes: int | float | str | None = None
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")


class MemoryArgs(msgspec.Struct, gc=False):
    """The args of a ``[memory]`` instant event."""

    mem_bytes: int | float | None = msgspec.field(default=None, name="Bytes")
    total_allocated: int | float | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: int | float | None = msgspec.field(default=None, name="Total Reserved")
    device_type: int | str | None = msgspec.field(default=None, name="Device Type")
    device_id: int | str | None = msgspec.field(default=None, name="Device Id")


NO_ARGS = Args()


class _Event(msgspec.Struct, tag="X", tag_field="ph", gc=False):
    """A complete ("X") event: the only phase that becomes a row."""

    cat: str | None = None
    name: str | int | float | None = ""
    ts: float | int | str | None = None
    dur: float | int | str | None = None
    pid: int | float | str | None = None
    tid: int | float | str | None = None
    args: Args | None = None


class EventExactTs(_Event, tag="X"):
    """A complete event whose timestamp is kept as its JSON text: used when timestamps are so large
    (epoch microseconds) that a float64 cannot hold their nanosecond decimals."""

    ts: msgspec.Raw = msgspec.Raw(b"")  # type: ignore[assignment]


COMPLETE = (_Event, EventExactTs)
#: Timestamps at or above this many us are read exactly. Below it a float64's spacing is < 1 ns
#: (2**-10 us in [2**42, 2**43)), so rounding recovers Kineto's whole-ns decimals exactly; above it
#: (epoch-based clocks) it would not.
_EXACT_TS_ABOVE_US = 2**43


class _Instant(msgspec.Struct, tag="i", tag_field="ph", gc=False):
    """An instant event; ``[memory]`` samples are instants."""

    name: str | int | float | None = ""
    ts: float | int | str | None = None
    args: MemoryArgs | None = None


class _InstantUpper(_Instant, tag="I"):
    pass


INSTANTS = (_Instant, _InstantUpper)


class FlowStart(msgspec.Struct, tag="s", tag_field="ph", gc=False):
    """A flow's start ("s"). Kineto's ``fwdbwd`` flows link a forward operator (the start, at its ``ts`` on its
    thread) to the backward operator autograd ran for it (the end, ``FlowEnd``), by ``id`` (``kineto/links.py``);
    its launch flows (``ac2g``) decode too and are dropped by their ``cat`` in the scan. Any JSON value is accepted
    (the scan keeps the numbers and converts the rest): a flow of an odd shape never fails its piece's typed decode."""

    cat: Any = None
    id: Any = None
    ts: Any = None
    tid: Any = None


class FlowEnd(FlowStart, tag="f"):
    """A flow's end ("f")."""


class FlowStartExactTs(FlowStart, tag="s"):
    """A flow's start whose timestamp is kept as its JSON text (``EventExactTs``)."""

    ts: msgspec.Raw = msgspec.Raw(b"")


class FlowEndExactTs(FlowStartExactTs, tag="f"):
    """A flow's end whose timestamp is kept as its JSON text."""


#: the flow types, by exact_ts: (start, end)
FLOWS = {False: (FlowStart, FlowEnd), True: (FlowStartExactTs, FlowEndExactTs)}
#: every flow type, (start, end) pairs: what the scan looks for (an end at each odd index)
FLOW_TYPES = FLOWS[False] + FLOWS[True]
#: the category of the forward-backward flows
FWDBWD = "fwdbwd"

# Every other Chrome phase (metadata, counters, async...) decodes to an empty struct: its
# fields are skipped by the decoder instead of being built.
_OTHER_PHASES = tuple(
    msgspec.defstruct(f"_Phase_{ord(ph)}", [], tag=ph, tag_field="ph", gc=False) for ph in "BECbnetPNODMVvRcST"
)
_AnyEvent = Union[(_Event, _Instant, _InstantUpper, *FLOWS[False]) + _OTHER_PHASES]  # type: ignore[valid-type]  # noqa: UP007 (a union of a tuple built at run time)
_AnyEventExactTs = Union[(EventExactTs, _Instant, _InstantUpper, *FLOWS[True]) + _OTHER_PHASES]  # type: ignore[valid-type]  # noqa: UP007 (a union of a tuple built at run time)


class _DeviceProps(msgspec.Struct, gc=False):
    id: int | None = None
    name: str | None = None
    totalGlobalMem: int | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None
    numSms: int | None = None


class _DistInfo(msgspec.Struct, gc=False):
    rank: int | str | None = None
    world_size: int | str | None = None
    backend: str | None = None


class Envelope(msgspec.Struct, gc=False):
    traceEvents: list[_AnyEvent] = []  # type: ignore[valid-type]
    schemaVersion: int | str | None = None
    deviceProperties: list[_DeviceProps] | None = None
    distributedInfo: _DistInfo | None = None
    baseTimeNanoseconds: int | None = None
    traceName: str | None = None
    displayTimeUnit: str | None = None
    record_shapes: int | bool | None = None
    profile_memory: int | bool | None = None
    with_stack: int | bool | None = None
    Framework: str | None = None  # Lightning writes "pytorch-lightning"


class _EnvelopeExactTs(Envelope):
    traceEvents: list[_AnyEventExactTs] = []  # type: ignore[valid-type]


class _Decoders(NamedTuple):
    events: msgspec.json.Decoder  # a piece of the traceEvents array
    event: msgspec.json.Decoder  # one event
    envelope: msgspec.json.Decoder  # a whole document (header, or the last events plus the metadata after them)
    event_type: Any  # the event union, for converting events one by one on the lenient path


_DECODERS = {  # by exact_ts
    # the unions are built at run time from the phase table, which mypy cannot read as a type
    False: _Decoders(
        msgspec.json.Decoder(list[_AnyEvent]),  # type: ignore[valid-type]
        msgspec.json.Decoder(_AnyEvent),
        msgspec.json.Decoder(Envelope),
        _AnyEvent,
    ),
    True: _Decoders(
        msgspec.json.Decoder(list[_AnyEventExactTs]),  # type: ignore[valid-type]
        msgspec.json.Decoder(_AnyEventExactTs),
        msgspec.json.Decoder(_EnvelopeExactTs),
        _AnyEventExactTs,
    ),
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
    except RecursionError:  # msgspec's own depth limit (the splitter bounds events well below it)
        raise msgspec.DecodeError("JSON nested too deep") from None
    except UnicodeDecodeError as exc:  # msgspec reports bad UTF-8 this way: malformed JSON all the same
        raise msgspec.DecodeError(f"invalid UTF-8 ({exc.reason})") from None


class _Category(msgspec.Struct, gc=False):
    """What an event that did not convert still says: its phase and category (every other field is skipped
    unread, a 1e400 included)."""

    ph: str | None = None
    cat: str | None = None


_CATEGORY = msgspec.json.Decoder(_Category)


def _is_device_event(raw: msgspec.Raw) -> bool:
    """Whether an event that did not convert is a complete event of a device category (a kernel, a copy)."""
    try:
        head = _CATEGORY.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return False
    return head.ph == "X" and head.cat in DEVICE_CATEGORIES


def decode_events(
    data: Any, warnings: list[str], exact_ts: bool = False, rejected: Rejected | None = None
) -> list[Any]:
    """Typed decode of a JSON array of events; on a type mismatch, each event is decoded on its own
    and the ones that do not convert (a wrong type, a number beyond float64 like 1e400, not an object)
    are skipped and counted in ``warnings`` and, with how many were device events, in ``rejected`` (whose
    verdict then reads a trace whose every kernel was skipped as partial: validate.py).

    Raises msgspec.DecodeError for malformed JSON (invalid UTF-8 included: UnicodeDecodeError).
    """
    decoders = _DECODERS[exact_ts]
    typed = _typed_decode(decoders.events, data)
    if typed is not None:
        return typed
    try:
        raws = _RAW_LIST.decode(data)
    except msgspec.ValidationError:  # not an array at all
        raws = []
    out: list[Any] = []
    bad = bad_device = 0
    for raw in raws:
        event = _typed_decode(decoders.event, raw)
        if event is None:
            event = _convert_one(raw, decoders.event_type, exact_ts)
        if event is None:
            bad += 1
            bad_device += _is_device_event(raw)
        else:
            out.append(event)
    if bad and rejected is not None:
        rejected.add(unreadable=bad, device=bad_device)
    if bad:
        warnings.append(
            f"{bad} events of an unexpected shape were skipped (a value of the wrong type, or a number beyond float64)"
        )
    return out


_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def _convert_one(raw: msgspec.Raw, event_type: Any, exact_ts: bool) -> Any:
    """One event decoded generically and converted leniently (numbers in strings...), or None."""
    try:
        item = msgspec.json.decode(raw)
    except msgspec.ValidationError:  # a number out of range
        return None
    try:
        if isinstance(item, dict):
            if exact_ts and "ts" in item:
                item["ts"] = msgspec.Raw(msgspec.json.encode(item["ts"]))
            args = item.get("args")
            if isinstance(args, dict) and "Input Dims" in args:  # a Raw field: keep its JSON text
                args["Input Dims"] = msgspec.Raw(msgspec.json.encode(args["Input Dims"]))
        return msgspec.convert(item, event_type, strict=False)
    except (msgspec.ValidationError, TypeError):
        return None


def decode_envelope(
    data: bytes, warnings: list[str], exact_ts: bool = False, rejected: Rejected | None = None
) -> Envelope:
    """Like decode_events, for a whole document (header or tail)."""
    typed = _typed_decode(_DECODERS[exact_ts].envelope, data)
    if typed is not None:
        return typed
    try:
        doc = msgspec.json.decode(data)
    except msgspec.ValidationError as exc:  # a number beyond float64 (1e400)
        raise TraceFormatError(f"the trace's metadata holds a number out of range ({exc})") from None
    if not isinstance(doc, dict):
        raise TraceFormatError("not a Chrome/Kineto trace (the document is not a JSON object)")
    events = doc.pop("traceEvents", [])
    fields: dict[str, Any] = {}
    for key in Envelope.__struct_fields__:
        if key in doc:
            try:
                msgspec.convert({key: doc[key]}, Envelope, strict=False)
                fields[key] = doc[key]
            except msgspec.ValidationError:
                warnings.append(f"ignored the malformed trace field '{key}'")
    env = msgspec.convert(fields, Envelope, strict=False)
    env.traceEvents = decode_events(
        msgspec.json.encode(events if isinstance(events, list) else []), warnings, exact_ts, rejected
    )
    return env


def needs_exact_ts(data: bytes | bytearray | memoryview, end: int) -> bool:
    """Are the timestamps epoch-sized (see _EXACT_TS_ABOVE_US)? Judged from the first one before ``end``."""
    m = _FIRST_TS.search(data, 0, end)
    return m is not None and abs(int(m.group(1))) >= _EXACT_TS_ABOVE_US
