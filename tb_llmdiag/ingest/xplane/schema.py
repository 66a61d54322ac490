"""The XSpace protobuf schema, built at runtime: no protoc, no TensorFlow.

The messages follow ``xla/tsl/profiler/protobuf/xplane.proto`` (package ``tensorflow.profiler``; openxla/xla).
We describe them as a ``FileDescriptorProto`` in code, load it into a private ``DescriptorPool`` (so it can
never clash with TensorFlow's or xprof's generated ``xplane_pb2`` in the same process) and ask protobuf for
the message classes. That API exists unchanged from protobuf 3.20 through 7.x; only the factory call moved
(``GetMessageClass`` since 4.21, ``MessageFactory.GetPrototype`` before it).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "tensorflow.profiler"
_F = descriptor_pb2.FieldDescriptorProto

_OPT, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_I64, _U64, _DBL = _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_DOUBLE
_STR, _BYTES, _MSG = _F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_MESSAGE

# (message, ((field, number, type, label, message type or "", oneof name or ""), ...)), as in xplane.proto
_SCHEMA: tuple[tuple[str, tuple[tuple[str, int, int, int, str, str], ...]], ...] = (
    (
        "XSpace",
        (
            ("planes", 1, _MSG, _REP, "XPlane", ""),
            ("errors", 2, _STR, _REP, "", ""),
            ("warnings", 3, _STR, _REP, "", ""),
            ("hostnames", 4, _STR, _REP, "", ""),
        ),
    ),
    (
        "XPlane",
        (
            ("id", 1, _I64, _OPT, "", ""),
            ("name", 2, _STR, _OPT, "", ""),
            ("lines", 3, _MSG, _REP, "XLine", ""),
            ("event_metadata", 4, _MSG, _REP, "XPlane.EventMetadataEntry", ""),
            ("stat_metadata", 5, _MSG, _REP, "XPlane.StatMetadataEntry", ""),
            ("stats", 6, _MSG, _REP, "XStat", ""),
        ),
    ),
    (
        "XLine",
        (
            ("id", 1, _I64, _OPT, "", ""),
            ("display_id", 10, _I64, _OPT, "", ""),
            ("name", 2, _STR, _OPT, "", ""),
            ("display_name", 11, _STR, _OPT, "", ""),
            ("timestamp_ns", 3, _I64, _OPT, "", ""),
            ("duration_ps", 9, _I64, _OPT, "", ""),
            ("events", 4, _MSG, _REP, "XEvent", ""),
        ),
    ),
    (
        "XEvent",
        (
            ("metadata_id", 1, _I64, _OPT, "", ""),
            ("offset_ps", 2, _I64, _OPT, "", "data"),
            ("num_occurrences", 5, _I64, _OPT, "", "data"),
            ("duration_ps", 3, _I64, _OPT, "", ""),
            ("stats", 4, _MSG, _REP, "XStat", ""),
        ),
    ),
    (
        "XStat",
        (
            ("metadata_id", 1, _I64, _OPT, "", ""),
            ("double_value", 2, _DBL, _OPT, "", "value"),
            ("uint64_value", 3, _U64, _OPT, "", "value"),
            ("int64_value", 4, _I64, _OPT, "", "value"),
            ("str_value", 5, _STR, _OPT, "", "value"),
            ("bytes_value", 6, _BYTES, _OPT, "", "value"),
            ("ref_value", 7, _U64, _OPT, "", "value"),
        ),
    ),
    (
        "XEventMetadata",
        (
            ("id", 1, _I64, _OPT, "", ""),
            ("name", 2, _STR, _OPT, "", ""),
            ("display_name", 4, _STR, _OPT, "", ""),
            ("metadata", 3, _BYTES, _OPT, "", ""),
            ("stats", 5, _MSG, _REP, "XStat", ""),
            ("child_id", 6, _I64, _REP, "", ""),
        ),
    ),
    (
        "XStatMetadata",
        (("id", 1, _I64, _OPT, "", ""), ("name", 2, _STR, _OPT, "", ""), ("description", 3, _STR, _OPT, "", "")),
    ),
)

# XPlane's two maps are repeated entry messages nested in XPlane, flagged map_entry.
_MAP_ENTRIES = (("EventMetadataEntry", "XEventMetadata"), ("StatMetadataEntry", "XStatMetadata"))


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """The schema as a FileDescriptorProto (a private file name, the upstream package)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="tb_llmdiag/xplane_runtime.proto", package=_PACKAGE, syntax="proto3")
    for msg_name, fields in _SCHEMA:
        msg = fdp.message_type.add(name=msg_name)
        oneofs: list[str] = []
        for fname, number, ftype, label, tname, oneof in fields:
            f = msg.field.add(name=fname, number=number, type=ftype, label=label)
            if tname:
                f.type_name = f".{_PACKAGE}.{tname}"
            if oneof:
                if oneof not in oneofs:
                    oneofs.append(oneof)
                    msg.oneof_decl.add(name=oneof)
                f.oneof_index = oneofs.index(oneof)
        if msg_name == "XPlane":
            for entry_name, value_type in _MAP_ENTRIES:
                entry = msg.nested_type.add(name=entry_name)
                entry.field.add(name="key", number=1, type=_I64, label=_OPT)
                entry.field.add(name="value", number=2, type=_MSG, label=_OPT, type_name=f".{_PACKAGE}.{value_type}")
                entry.options.map_entry = True
    return fdp


def _message_class(pool: descriptor_pool.DescriptorPool, name: str) -> Any:
    desc = pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")
    get_class = getattr(message_factory, "GetMessageClass", None)
    if get_class is not None:  # protobuf >= 4.21
        return get_class(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)  # protobuf 3.20


@lru_cache(maxsize=1)
def message_classes() -> dict[str, Any]:
    """``{"XSpace": cls, "XPlane": cls, ...}``, built once per process in a private pool."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(file_descriptor().SerializeToString())
    return {name: _message_class(pool, name) for name, _ in _SCHEMA}
