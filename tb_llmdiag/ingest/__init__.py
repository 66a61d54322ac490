"""Readers: one profiler file -> ``model.Trace``. The only layer that opens trace files."""

from __future__ import annotations

import os

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.files import HEAD_BYTES, open_trace
from tb_llmdiag.ingest.formats import format_of, inflated
from tb_llmdiag.model import Trace

#: Files above this size are refused with a clear message rather than risking the machine's memory.
MAX_TRACE_BYTES = int(os.environ.get("LLMDIAG_MAX_TRACE_BYTES", str(4 << 30)))


def load_trace(path: str, inside: str = "") -> Trace:
    """Read one trace file with the reader of its format, recognised by content (``formats.py``); with ``inside``
    (a logdir's real path), only a file whose real path lies in it (``ingest/links.py``).

    Raises:
        TraceFormatError: unreadable, empty, truncated beyond use, too large, or not a profiler trace.
    """
    f, size = open_trace(path, inside)  # a FIFO or a device is refused before it is opened (files.py)
    with f:
        if size == 0:
            raise TraceFormatError("the file is empty")
        if size > MAX_TRACE_BYTES:
            raise TraceFormatError(
                f"the file is {size / 2**30:.1f} GiB, over the {MAX_TRACE_BYTES / 2**30:.1f} GiB limit "
                "(set LLMDIAG_MAX_TRACE_BYTES to raise it, or profile fewer steps)"
            )
        head = inflated(f.read(HEAD_BYTES), HEAD_BYTES)
    return format_of(os.path.basename(path), head).read(path, inside)


__all__ = ["load_trace"]
