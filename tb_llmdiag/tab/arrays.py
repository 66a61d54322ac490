"""Binary cache entries: named 1-D numpy arrays in one file, memory-mapped on read (the trace view's index).

Format: one JSON header line ``{"layout", "key", "what", "bytes", "arrays": [[name, dtype, length, offset],
...]}`` (possibly padded with spaces before its newline: ``Writer`` streams the data in first) then ``bytes``
bytes of data; array ``name`` is ``length`` items of ``dtype`` (little-endian, from the ``DTYPES`` list only)
at ``offset`` from the data's start (64-byte aligned). A read checks the header against the entry asked for,
the data length against the file, and every array against the data (inside it, not overlapping another);
anything else is a miss (None). Arrays come back as read-only ``np.memmap`` views: the OS pages them in on
use and may drop them under memory pressure; nothing is copied into the heap.
Why memory maps rather than loading into an in-process LRU: a 1 GB trace's index is a few hundred MB, and a
query touches only O(log n + output) of it; mapped, it costs nothing until touched and is shared with the
page cache across TensorBoard restarts.

A mapped file cut short in place (another process, a cleanup job) kills the process that touches a page past
its new end with SIGBUS (#27: TensorBoard exited 135). So ``read(..., private=True)`` (what the server uses)
maps a private copy: the entry is copied into an unnamed temporary file beside it (unlinked at once, so no
other process can name it), checked there, and mapped from there; the entry itself may then be cut or removed.
A copy that cannot be made (a full disk) is a miss: the run is analysed again and kept in memory.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

import numpy as np

logger = logging.getLogger(__name__)

DTYPES = ("<i8", "<i4", "<i2", "|u1")
_ALIGN = 64
_MAX_HEADER = 1 << 20


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


#: Bytes kept for the header line before the data when arrays are streamed in (the header is padded with
#: spaces to this length; a longer header moves the data once).
HEADER_ROOM = 1 << 14


class Writer:
    """Streams an entry into a temporary file beside ``path``: ``add(name, array)`` writes each array as it comes
    (the caller may drop it at once: memory stays one array), ``finish()`` writes the header and returns the
    temporary file (``os.replace`` it onto ``path``), ``abort()`` removes it. Directories are made 0700."""

    def __init__(self, path: Path, layout: int, key: str, what: str) -> None:
        self.path, self.layout, self.key, self.what = path, layout, key, what
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key}.", suffix=".tmp")
        self.tmp = Path(tmp)
        self._f: BinaryIO = os.fdopen(fd, "wb", buffering=0)  # unbuffered: what add() wrote is on disk
        self._table: list[list[str | int]] = []
        self._off = 0

    def add(self, name: str, arr: np.ndarray) -> None:
        dt = arr.dtype.newbyteorder("<").str if arr.dtype.itemsize > 1 else arr.dtype.str
        if dt not in DTYPES or arr.ndim != 1:
            raise ValueError(f"array {name}: unsupported dtype {arr.dtype} or shape {arr.shape}")
        a = np.ascontiguousarray(arr.astype(dt, copy=False))
        self._f.seek(HEADER_ROOM + self._off)
        view = a.data.cast("B")
        while view.nbytes:
            view = view[self._f.write(view) or 0 :]
        self._table.append([name, dt, int(a.shape[0]), self._off])
        self._off = _aligned(self._off + a.nbytes)

    def read_back(self) -> dict[str, np.ndarray]:
        """The arrays added so far, read into memory (a caller that cannot finish the file keeps them)."""
        return {
            str(n): np.fromfile(self.tmp, dtype=np.dtype(str(dt)), count=int(ln), offset=HEADER_ROOM + int(off))
            for n, dt, ln, off in self._table
        }

    def finish(self) -> Path:
        head = json.dumps(
            {"layout": self.layout, "key": self.key, "what": self.what, "bytes": self._off, "arrays": self._table}
        ).encode("utf-8")
        f = self._f
        f.truncate(HEADER_ROOM + self._off)
        if len(head) < HEADER_ROOM:
            f.seek(0)
            f.write(head + b" " * (HEADER_ROOM - 1 - len(head)) + b"\n")  # JSON allows the trailing spaces
            f.close()
            return self.tmp
        f.close()
        moved = Writer(self.path, self.layout, self.key, self.what)  # a header this long: the data moves once
        with open(self.tmp, "rb") as src:
            moved._f.write(head + b"\n")
            src.seek(HEADER_ROOM)
            shutil.copyfileobj(src, moved._f, 1 << 22)
        moved._f.close()
        os.unlink(self.tmp)
        return moved.tmp

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._f.close()
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)


def write(path: Path, layout: int, key: str, what: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Write atomically (temp file + rename)."""
    w = Writer(path, layout, key, what)
    try:
        for name, arr in arrays.items():
            w.add(name, arr)
        os.replace(w.finish(), path)
    except BaseException:
        w.abort()
        raise


def atomic_write(path: Path, key: str, fill: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through ``fill`` into a temporary file beside it, then rename: readers never see half a
    file, and a failed write leaves nothing behind. Directories are made 0700 (the cache is per user)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read(path: Path, layout: int, key: str, what: str, *, private: bool = False) -> dict[str, np.ndarray] | None:
    """The arrays of a valid entry (module docstring), else None (logged unless the file is absent); with
    ``private``, mapped from a private copy that no other process can cut short."""
    try:
        with open(path, "rb") as src, _private_copy(src, path) if private else contextlib.nullcontext(src) as f:
            head = f.readline(_MAX_HEADER)
            size = os.fstat(f.fileno()).st_size
            problem = _problem(head, size, layout, key, what)
            if isinstance(problem, str):
                logger.warning("llm_diag: ignoring cache entry %s: %s", path, problem)
                return None
            return {
                name: np.memmap(f, dtype=np.dtype(dt), mode="r", offset=len(head) + off, shape=(ln,))
                if ln
                else np.zeros(0, dtype=np.dtype(dt))
                for name, dt, ln, off in problem
            }  # each memmap holds its own mapping: closing the file (or the unnamed copy) leaves it valid
    except FileNotFoundError:
        return None
    except OSError as e:
        logger.warning("llm_diag: ignoring unreadable cache entry %s: %s", path, e)
        return None


def _private_copy(src: BinaryIO, path: Path) -> BinaryIO:
    """An unnamed temporary file beside ``path`` holding ``src``'s bytes, at its start (module docstring)."""
    dst = tempfile.TemporaryFile(dir=path.parent)  # noqa: SIM115 - returned open: the caller's with closes it
    try:
        shutil.copyfileobj(src, dst, 4 << 20)
        dst.seek(0)
    except BaseException:
        dst.close()
        raise
    return dst


def _problem(head: bytes, size: int, layout: int, key: str, what: str) -> str | list[tuple[str, str, int, int]]:
    """Why the header does not describe this file, or its array table."""
    if not head.endswith(b"\n"):
        return "no header line"
    try:
        h = json.loads(head)
    except ValueError:
        return "the header is not JSON"
    if not isinstance(h, dict) or set(h) != {"layout", "key", "what", "bytes", "arrays"}:
        return "no array-cache header"
    if h["layout"] != layout or h["key"] != key or h["what"] != what:
        return "written for another entry or layout"
    if not isinstance(h["bytes"], int) or h["bytes"] != size - len(head):
        return "cut short or padded (its length is not the header's)"
    table, spans, names = [], [], set()
    for row in h["arrays"] if isinstance(h["arrays"], list) else [None]:
        if not (
            isinstance(row, list)
            and len(row) == 4
            and isinstance(row[0], str)
            and row[1] in DTYPES
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in row[2:])
        ):
            return "a malformed array entry"
        name, dt, ln, off = row
        end = off + ln * np.dtype(dt).itemsize
        if name in names or end > h["bytes"] or off % _ALIGN:
            return f"array {name!r} lies outside the data or twice"
        names.add(name)
        spans.append((off, end))
        table.append((name, dt, ln, off))
    spans.sort()
    if any(b[0] < a[1] for a, b in zip(spans, spans[1:])):
        return "arrays overlap"
    return table
