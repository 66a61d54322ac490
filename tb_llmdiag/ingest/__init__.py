"""Readers: one profiler file -> ``model.Trace``. The only layer that opens trace files."""

from __future__ import annotations

import os

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.files import not_regular, os_error_message
from tb_llmdiag.model import Trace

#: Files above this size are refused with a clear message rather than risking the machine's memory.
MAX_TRACE_BYTES = int(os.environ.get("LLMDIAG_MAX_TRACE_BYTES", str(4 << 30)))


def load_trace(path: str, inside: str = "") -> Trace:
    """Read one trace file, choosing the reader by content and name; with ``inside`` (a logdir's real path),
    only a file whose real path lies in it (``ingest/links.py``).

    Raises:
        TraceFormatError: unreadable, empty, truncated beyond use, too large, or not a profiler trace.
    """
    name = os.path.basename(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise TraceFormatError(f"cannot read {name}: {os_error_message(exc)}") from None
    what = not_regular(st.st_mode)
    if what is not None:  # before any open(): a FIFO would block it
        raise TraceFormatError(f"cannot read {name}: it is {what}, not a trace file")
    size = st.st_size
    if size == 0:
        raise TraceFormatError("the file is empty")
    if size > MAX_TRACE_BYTES:
        raise TraceFormatError(
            f"the file is {size / 2**30:.1f} GiB, over the {MAX_TRACE_BYTES / 2**30:.1f} GiB limit "
            "(set LLMDIAG_MAX_TRACE_BYTES to raise it, or profile fewer steps)"
        )
    if path.endswith(".pb"):
        from tb_llmdiag.ingest.xplane.reader import read_xplane

        return read_xplane(path, inside)
    from tb_llmdiag.ingest.kineto.reader import read_kineto

    return read_kineto(path, inside)


__all__ = ["load_trace"]
