"""XSpace protobuf (``.xplane.pb``: torch_xla, JAX, TensorFlow profilers): how its files are recognised and named.

Its entry in ``ingest/formats.py``: ``sniff`` (the content: protobuf framing of an XSpace whose first plane is an
XPlane), ``place`` (a capture is ``<run>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>[_<port>].xplane.pb``: run, host
and capture folder) and ``read`` (``reader.read_xplane``, imported on first use: it builds the protobuf classes).
"""

from __future__ import annotations

import re

from tb_llmdiag.ingest.files import HEAD_BYTES
from tb_llmdiag.model import Trace

#: names its files carry
NAMES = re.compile(r"\.xplane\.pb$")
#: every file of that name in a capture folder is listed (the reader says why one cannot be read)
CLAIMS = NAMES
#: files its captures make redundant in their folder: XProf's Chrome export written beside an ``.xplane.pb``
SHADOWS = re.compile(r"\.trace\.json\.gz$")
_HOST = re.compile(r"^(.*)\.xplane\.pb$")
#: wire type of each field: XSpace (planes, errors, warnings, hostnames) and XPlane (id, name, lines, metadata, stats)
_SPACE_WIRE = {1: 2, 2: 2, 3: 2, 4: 2}
_PLANE_WIRE = {1: 0, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2}


def _varint(b: bytes, pos: int) -> tuple[int, int] | None:
    """(value, position after it), or None when ``b`` ends first or it runs over 10 bytes."""
    value = shift = 0
    for k in range(pos, min(len(b), pos + 10)):
        value |= (b[k] & 0x7F) << shift
        if not b[k] & 0x80:
            return value, k + 1
        shift += 7
    return None


def _well_formed(b: bytes, pos: int, end: int, wire_of: dict[int, int]) -> bool:
    """Whether b[pos:end] is a run of fields with the numbers and wire types of ``wire_of``. A message that runs past
    the end of ``b`` (the head of a longer file) is judged on what ``b`` holds of it."""
    while pos < min(end, len(b)):
        tag = _varint(b, pos)
        if tag is None:
            return end > len(b)
        number, wire = tag[0] >> 3, tag[0] & 7
        if wire_of.get(number) != wire:
            return False
        value = _varint(b, tag[1])
        if value is None:
            return end > len(b)
        pos = value[1] + (value[0] if wire == 2 else 0)
    return pos == end or (end > len(b) and pos <= end)


def sniff(head: bytes) -> bool:
    """Content check on the start of a file (``HEAD_BYTES`` of it, or all of a shorter one): an XSpace whose first
    field is a plane that reads as an XPlane, and every field after it as the XSpace's."""
    if head[:1] != b"\x0a":
        return False
    size = _varint(head, 1)
    if size is None:
        return False
    cut = len(head) >= HEAD_BYTES  # the file goes on past the head
    plane_end = size[1] + size[0]
    if plane_end > len(head) and not cut:
        return False
    space_end = 1 << 62 if cut else len(head)  # the XSpace ends with the file
    return _well_formed(head, size[1], plane_end, _PLANE_WIRE) and _well_formed(head, 0, space_end, _SPACE_WIRE)


def place(folder: list[str] | None, name: str) -> tuple[list[str] | None, str, str | None, str | None] | None:
    """(run folder, host, timestamp, span) of a file named ``name`` in ``folder`` (its parts below the logdir; None:
    a file named on its own, span "default"): the run is the folder holding ``plugins/``, the span the capture
    folder. None when the name or the folder is not a capture's."""
    m = _HOST.match(name)
    if folder is None:
        return None, m.group(1) if m else name, None, "default"
    if not m or len(folder) < 3 or folder[-3:-1] != ["plugins", "profile"]:
        return None
    return folder[:-3], m.group(1), None, folder[-1]


#: the reader's module, imported on first use (``api.preload`` imports it ahead, through ``formats.READER_MODULES``)
READER = "tb_llmdiag.ingest.xplane.reader"


def read(path: str, inside: str = "") -> Trace:
    """``reader.read_xplane``."""
    from tb_llmdiag.ingest.xplane.reader import read_xplane

    return read_xplane(path, inside)


__all__ = ["CLAIMS", "NAMES", "READER", "SHADOWS", "place", "read", "sniff"]
