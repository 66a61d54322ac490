"""Whether a trace file is still being written (a live logdir: the profiler is exporting it right now).

Contract:
- ``still_being_written(path, size_bytes, mtime_ns)``: a one-line reason, or None. A file is still being
  written when its size or mtime differ from what discovery saw (it grew, or was rewritten, while it was
  looked at), or when a gzip file modified less than ``RECENT_S`` seconds ago has no end marker yet (its
  stream does not inflate to its end: the writer closes the stream last; checked once per (path, size,
  mtime)). Older files are not checked: a cut file left alone is truncated, and the reader says so; so is a
  complete gzip stream around cut JSON, and a cut plain JSON file (nothing in it tells a pause from a cut).
- Growth between two looks is the caller's to see: the tab's scan marks a file whose size or mtime changed
  since its previous scan as still being written until one scan finds it unchanged (``tab/catalog.py``).
A file that is gone is not "being written" (the reader says it is gone).
"""

from __future__ import annotations

import os
import time
import zlib
from functools import lru_cache

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.files import not_regular, open_regular

#: A gzip file modified less than this long ago must show its end marker.
RECENT_S = 30.0


_BLOCK = 1 << 20


@lru_cache(maxsize=64)
def gzip_has_end(path: str, size_bytes: int, mtime_ns: int) -> bool:
    """Whether the gzip stream inflates to its end marker; the key's size and mtime make each version one check.
    Output is bounded per block and dropped (the reader does the real read)."""
    budget = max(64 * size_bytes, 64 << 20)  # inflated bytes: a bomb is the reader's to refuse, not ours
    try:
        f, _ = open_regular(path)  # a FIFO swapped in since the stat is refused, never blocked on (files.py)
        with f:
            z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while not z.eof:
                block = f.read(_BLOCK)
                if not block:
                    return False
                budget -= len(z.decompress(block, _BLOCK))
                while z.unconsumed_tail and not z.eof and budget > 0:
                    budget -= len(z.decompress(z.unconsumed_tail, _BLOCK))
                if budget <= 0:
                    return True  # too much to tell cheaply: not "being written" (growth between scans still is)
            return True
    except (OSError, zlib.error, TraceFormatError):
        return True  # unreadable, not a regular file or corrupt, not growing: the reader says what is wrong


def _age_s(mtime_ns: int, now_ns: int | None) -> float:
    return ((time.time_ns() if now_ns is None else now_ns) - mtime_ns) / 1e9


def still_being_written(path: str, size_bytes: int, mtime_ns: int, *, now_ns: int | None = None) -> str | None:
    """Why the file looks still being written (module docstring), or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not_regular(st.st_mode):
        return None  # a FIFO or device named like a trace is never opened here (files.py refuses it)
    if st.st_size != size_bytes:
        return f"still being written: it grew from {size_bytes:,} to {st.st_size:,} bytes while it was read"
    if st.st_mtime_ns != mtime_ns:
        return "still being written: it was modified while it was read"
    age = _age_s(st.st_mtime_ns, now_ns)
    if path.endswith(".gz") and 0 <= age < RECENT_S and not gzip_has_end(path, st.st_size, st.st_mtime_ns):
        return (
            f"still being written: the gzip stream has no end marker yet (modified {age:.0f} s ago); "
            "it is read once it is complete"
        )
    return None
