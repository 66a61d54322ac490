"""The trace formats we read, each recognised by its content: ``FORMATS``, iterated by ``load_trace`` and by both
discoveries (local folders and fsspec URLs).

A format registers, in its package's ``__init__`` (``kineto/``, ``xplane/``):
- ``sniff(head) -> bool``: whether the file's first ``files.HEAD_BYTES`` (inflated when gzipped) are one of its files;
- ``read(path, inside) -> Trace``: its reader (``reader``: its module, imported on first use);
- ``names`` (the file names its files may carry: the only ones discovery looks at) and ``claims`` (names listed even
  when unreadable or not recognised, so that the reader says why), ``place(folder, name)`` (run folder, worker,
  timestamp or span: the names a file is shown under), ``rank`` (from its name and head) and ``shadows`` (files its
  captures make redundant beside them).
The reader is chosen by content; when no format recognises the head, the one whose ``names`` the file carries (else
the first) reads it and says in its own words why it is not one of its files.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from tb_llmdiag.ingest import kineto, xplane
from tb_llmdiag.model import Trace

#: (run folder's parts, worker, timestamp, span): where a file shows (formats' ``place``)
Place = tuple[list[str] | None, str, str | None, str | None]


@dataclass(frozen=True)
class Format:
    """One trace format (module docstring)."""

    kind: str  # TraceFile.source_kind
    sniff: Callable[[bytes], bool]
    read: Callable[[str, str], Trace]
    names: re.Pattern[str]
    claims: re.Pattern[str]
    place: Callable[[list[str] | None, str], Place | None]
    reader: str  # the reader's module, imported on first use
    rank: Callable[[str, bytes], int | None] | None = None  # None: files of the format carry no rank
    shadows: re.Pattern[str] | None = None


FORMATS: tuple[Format, ...] = (
    Format("kineto", kineto.sniff, kineto.read, kineto.NAMES, kineto.CLAIMS, kineto.place, kineto.READER, kineto.rank),
    Format(
        "xplane",
        xplane.sniff,
        xplane.read,
        xplane.NAMES,
        xplane.CLAIMS,
        xplane.place,
        xplane.READER,
        None,
        xplane.SHADOWS,
    ),
)
#: the readers' modules, which the engine imports on first use (``api.preload``)
READER_MODULES = tuple(fmt.reader for fmt in FORMATS)


def inflated(head: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes a file's first bytes ``head`` hold: inflated when gzipped (b"" when that fails)."""
    if head[:2] != b"\x1f\x8b":
        return head
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, limit)
    except zlib.error:
        return b""


def recognised(head: bytes) -> Format | None:
    """The format whose content ``head`` (inflated) is, or None."""
    return next((fmt for fmt in FORMATS if fmt.sniff(head)), None)


def format_of(name: str, head: bytes) -> Format:
    """The format that reads a file named ``name`` starting with ``head`` (inflated): by content, else by name, else
    the first (module docstring)."""
    return recognised(head) or next((fmt for fmt in FORMATS if fmt.names.search(name)), FORMATS[0])


__all__ = ["FORMATS", "READER_MODULES", "Format", "Place", "format_of", "inflated", "recognised"]
