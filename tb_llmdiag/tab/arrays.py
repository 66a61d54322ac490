"""Binary cache entries: named 1-D numpy arrays in one file, memory-mapped on read (the trace view's index).

Format: one JSON header line ``{"layout", "key", "what", "bytes", "arrays": [[name, dtype, length, offset],
...]}`` then ``bytes`` bytes of data; array ``name`` is ``length`` items of ``dtype`` (little-endian, from the
``DTYPES`` list only) at ``offset`` from the data's start (64-byte aligned). A read checks the header against
the entry asked for, the data length against the file, and every array against the data (inside it, not
overlapping another); anything else is a miss (None). Arrays come back as read-only ``np.memmap`` views: the
OS pages them in on use and may drop them under memory pressure; nothing is copied into the heap.
Why memory maps rather than loading into an in-process LRU: a 1 GB trace's index is a few hundred MB, and a
query touches only O(log n + output) of it; mapped, it costs nothing until touched and is shared with the
page cache across TensorBoard restarts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
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


def write(path: Path, layout: int, key: str, what: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Write atomically (temp file + rename)."""
    table, off = [], 0
    for name, arr in arrays.items():
        a = np.ascontiguousarray(arr)
        dt = a.dtype.newbyteorder("<").str if a.dtype.itemsize > 1 else a.dtype.str
        if dt not in DTYPES or a.ndim != 1:
            raise ValueError(f"array {name}: unsupported dtype {a.dtype} or shape {a.shape}")
        table.append((name, dt, int(a.shape[0]), off, a))
        off = _aligned(off + a.nbytes)
    head = (
        json.dumps(
            {
                "layout": layout,
                "key": key,
                "what": what,
                "bytes": off,
                "arrays": [[n, d, ln, o] for n, d, ln, o, _ in table],
            }
        ).encode("utf-8")
        + b"\n"
    )

    def fill(f: BinaryIO) -> None:
        f.write(head)
        for _, dt, _, o, a in table:
            f.seek(len(head) + o)
            f.write(a.astype(dt, copy=False).tobytes())
        f.truncate(len(head) + off)

    atomic_write(path, key, fill)


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


def read(path: Path, layout: int, key: str, what: str) -> dict[str, np.ndarray] | None:
    """The arrays of a valid entry (module docstring), else None (logged unless the file is absent)."""
    try:
        with open(path, "rb") as f:
            head = f.readline(_MAX_HEADER)
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        return None
    except OSError as e:
        logger.warning("llm_diag: ignoring unreadable cache entry %s: %s", path, e)
        return None
    problem = _problem(head, size, layout, key, what)
    if isinstance(problem, str):
        logger.warning("llm_diag: ignoring cache entry %s: %s", path, problem)
        return None
    out = {}
    for name, dt, ln, off in problem:
        out[name] = (
            np.memmap(path, dtype=np.dtype(dt), mode="r", offset=len(head) + off, shape=(ln,))
            if ln
            else np.zeros(0, dtype=np.dtype(dt))
        )
    return out


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
