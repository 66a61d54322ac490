"""What both discoveries share: the index's types, one folder's traces by ``formats.FORMATS`` (the same names and
content checks for a local folder and an fsspec listing), the numbering of spans, the duplicate-rank warnings.

Naming: run = the folder relative to the logdir (the logdir's own name for files directly in it; for XPlane the
folder holding ``plugins/``); worker = the file-name prefix (the host for XPlane); span = 1-based index of the
file's timestamp within (run, worker), as torch-tb-profiler numbers them, or "default" without one (the
capture-folder name for XPlane). Rank comes from the format (Kineto: ``distributedInfo.rank``, else the name).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import BinaryIO

from tb_llmdiag.errors import RunNotFound
from tb_llmdiag.ingest.files import HEAD_BYTES, file_refusal, open_regular
from tb_llmdiag.ingest.formats import FORMATS, Format, format_of, inflated, recognised
from tb_llmdiag.ingest.fs import is_url, open_object
from tb_llmdiag.ingest.links import outside
from tb_llmdiag.ingest.written import still_being_written


@dataclass(frozen=True)
class TraceFile:
    """One trace file and the names it is shown under."""

    run: str
    worker: str
    span: str
    path: str
    source_kind: str  # "kineto" | "xplane" (formats.py)
    size_bytes: int
    mtime_ns: int
    rank: int | None = None
    phase: str = "train"  # "validation" for Lightning validation_step files
    version: str = ""  # objects (fsspec URLs): the ETag or mtime the tab's cache key includes
    inside: str = ""  # the logdir's real path the file must stay in when opened (links.py); "" = anywhere

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.run, self.worker, self.span)

    @property
    def order(self) -> tuple[tuple[tuple[int, int | str], ...], ...]:
        """The key that sorts traces as people count: run, worker and span each by ``name_order``."""
        return tuple(name_order(x) for x in self.key)

    @property
    def is_object(self) -> bool:
        """An object of a store (an fsspec URL), not a local file."""
        return is_url(self.path)

    def refusal(self) -> str | None:
        """Why nothing of the file may be read, in one line: a link out of the logdir (``links.py``), not a regular
        file or unreadable (``files.py``); None for an object, which the readers read from a private copy."""
        return None if self.is_object else outside(self.path, self.inside) or file_refusal(self.path)

    def writing(self) -> str | None:
        """Why the file is still being written (``written.py``: its size or mtime moved since discovery, or a recent
        gzip file has no end marker yet), or None. Objects (URLs) are written whole, links out are refused: never."""
        if self.is_object or outside(self.path, self.inside):
            return None
        return still_being_written(self.path, self.size_bytes, self.mtime_ns)

    def open(self) -> tuple[BinaryIO, int]:
        """The file as recorded, open for reading, and its size (regular files only).

        Raises:
            NotRegularFile: a FIFO, device, socket, directory or symlink loop named like a trace.
            LinkOutside: a link to a file outside the logdir (``links.py``).
            OSError: the file is gone or unreadable.
            TraceFormatError: an object (URL) that is gone or unreadable.
        """
        return open_object(self.path) if self.is_object else open_regular(self.path, self.inside)


@dataclass(frozen=True)
class Index:
    """What discovery found. Lookups by name only: request names never become paths."""

    root: str
    files: tuple[TraceFile, ...]
    warnings: tuple[str, ...] = ()

    def find(self, run: str, worker: str, span: str) -> TraceFile:
        for f in self.files:
            if f.key == (run, worker, span):
                return f
        raise RunNotFound(f"no trace for run={run!r} worker={worker!r} span={span!r}")


@dataclass(frozen=True)
class Seen:
    """What the filesystem says of one file: size, mtime, version (objects), and why it cannot be read, if it cannot
    (not a regular file, a link out of the logdir, unreadable: then nothing of it is read)."""

    size_bytes: int = 0
    mtime_ns: int = 0
    version: str = ""
    problem: str | None = None


@dataclass(frozen=True)
class Folder:
    """One folder being listed: its path (local or inside the fsspec filesystem, ``/``-separated), how to look at a
    file of it (``see``), read its first stored bytes (``head``) and name it in the index (``path_of``)."""

    path: str
    see: Callable[[str], Seen | None]  # None: gone since it was listed
    head: Callable[[str], bytes]
    path_of: Callable[[str], str]
    inside: str = ""


#: a trace found in a folder and its timestamp (spans of timestamped files are numbered once all are found)
Found = tuple[TraceFile, "str | None"]


def traces_in(
    folder: Folder, names: list[str], run_of: Callable[[str], str]
) -> tuple[list[Found], list[tuple[str, str]]]:
    """The traces among a folder's file ``names`` (the span of a file left "" until ``number_spans``), and the files
    skipped with why. A file is a format's when its name is one the format's files carry and the folder fits its
    layout (``place``), and either its name claims the format (then it is listed even when it cannot be read: the
    reader says why) or its content is the format's (``formats.recognised``)."""
    parts = folder.path.rstrip("/").split("/")
    present = [fmt for fmt in FORMATS if any(fmt.names.search(n) for n in names)]
    found: list[Found] = []
    skipped: list[tuple[str, str]] = []
    for name in names:
        if any(fmt.shadows is not None and fmt.shadows.search(name) for fmt in present):
            continue  # e.g. XProf's Chrome export beside the .xplane.pb: the .pb is read instead
        for fmt in FORMATS:
            got = _trace(folder, parts, name, fmt, run_of, skipped)
            if got is not None:
                found.append(got)
                break
    return found, skipped


def _trace(
    folder: Folder,
    parts: list[str],
    name: str,
    fmt: Format,
    run_of: Callable[[str], str],
    skipped: list[tuple[str, str]],
) -> Found | None:
    place = fmt.place(parts, name)
    if place is None:
        return None
    claimed = fmt.claims.search(name) is not None
    seen = folder.see(name)
    if seen is None:
        return None
    if not claimed and seen.problem is not None:
        skipped.append((name, seen.problem))
        return None
    if not claimed and seen.size_bytes == 0:
        return None
    wanted = not claimed or fmt.rank is not None  # the content decides, or the rank is read from it
    head = inflated(folder.head(name), HEAD_BYTES) if wanted and seen.problem is None else b""
    if not claimed and recognised(head) is not fmt:
        return None
    run_parts, worker, stamp, span = place
    tf = TraceFile(
        run=run_of("/".join(run_parts) if run_parts is not None else folder.path),
        worker=worker,
        span=span or "",
        path=folder.path_of(name),
        source_kind=fmt.kind,
        size_bytes=seen.size_bytes,
        mtime_ns=seen.mtime_ns,
        rank=fmt.rank(name, head) if fmt.rank is not None else None,
        phase="validation" if "validation_step" in worker else "train",
        version=seen.version,
        inside=folder.inside,
    )
    return tf, stamp


def single(folder: str, name: str, seen: Seen, path: str, head: bytes) -> TraceFile:
    """A file named on its own: always listed (a wrong format gets its one-line error when read), run = its folder's
    name, span "default"; its format by content, else by name (``formats.format_of``)."""
    head = inflated(head, HEAD_BYTES)
    fmt = format_of(name, head)
    place = fmt.place(None, name) or (None, name, None, None)
    return TraceFile(
        run=posixpath.basename(folder) or ".",
        worker=place[1],
        span="default",
        path=path,
        source_kind=fmt.kind,
        size_bytes=seen.size_bytes,
        mtime_ns=seen.mtime_ns,
        rank=fmt.rank(name, head) if fmt.rank is not None else None,
        version=seen.version,
    )


def number_spans(found: list[Found]) -> list[TraceFile]:
    """The files, sorted by name, with the spans ``traces_in`` left "" numbered per (run, worker): 1-based in numeric
    timestamp order; "default" without a timestamp."""
    groups: dict[tuple[str, str], list[Found]] = {}
    out: list[TraceFile] = []
    for tf, ts in found:
        if tf.span:
            out.append(tf)
        else:
            groups.setdefault((tf.run, tf.worker), []).append((tf, ts))
    for items in groups.values():
        stamped = sorted((e for e in items if e[1] is not None), key=lambda e: int(e[1] or 0))
        out.extend(replace(tf, span=str(i)) for i, (tf, _) in enumerate(stamped, start=1))
        unstamped = [tf for tf, ts in items if ts is None]
        out.extend(replace(tf, span="default" if j == 0 else f"default-{j + 1}") for j, tf in enumerate(unstamped))
    return sorted(out, key=lambda f: (name_order(f.run), name_order(f.worker), _span_order(f.span)))


def _span_order(span: str) -> tuple[int, str]:
    return (int(span), "") if span.isdigit() else (1 << 30, span)


_DIGITS = re.compile(r"(\d+)")


def name_order(name: str) -> tuple[tuple[int, int | str], ...]:
    """The key that sorts names as people count: ``rank2`` before ``rank10`` (each run of digits compared as a
    number, the rest as text; ``rank02`` and ``rank2`` then by their text)."""
    parts = _DIGITS.split(name)
    return tuple((1, int(p)) if i % 2 else (0, p) for i, p in enumerate(parts) if p or i == 0) + ((0, name),)


def duplicate_rank_warnings(files: list[TraceFile]) -> list[str]:
    """Two files of one run (and one span number) that claim the same rank: e.g. torchtune <= 0.6.1's `r0` bug."""
    seen: dict[tuple[str, str, int], TraceFile] = {}
    warnings = []
    for tf in files:
        if tf.rank is None:
            continue
        key = (tf.run, tf.phase, tf.rank)
        other = seen.get(key)
        if other is not None and (other.worker != tf.worker or other.span == tf.span):
            warnings.append(
                f"run {tf.run!r}: {os.path.basename(other.path)} and {os.path.basename(tf.path)} both claim "
                f"rank {tf.rank}; rank labels may be wrong (torchtune <= 0.6.1 names every rank r0)"
            )
        else:
            seen.setdefault(key, tf)
    return warnings


__all__ = [
    "Folder",
    "Found",
    "Index",
    "Seen",
    "TraceFile",
    "duplicate_rank_warnings",
    "number_spans",
    "single",
    "traces_in",
]
