"""One background thread that turns scanned pieces into rows (_rows.c) while the reader decodes the next piece.

The reader is single-threaded Python: msgspec's decode of piece N+1 holds the GIL, but _rows.c's conversion
of piece N releases it (it works on plain buffers), so on a second core the two overlap. At most one piece
is in flight: ``submit`` is called only after ``result`` took the previous one, so memory stays bounded by
one piece's scan. The wall time drops, the CPU time does not (the same work on two cores).

``LLMDIAG_READ_THREADS=0`` (or ``_Columns(threaded=False)``) converts every piece inline instead: the
same rows (tests/test_row_worker.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


def threads_wanted() -> bool:
    """Whether readers convert rows on a worker thread (default yes; ``LLMDIAG_READ_THREADS=0``: inline)."""
    return os.environ.get("LLMDIAG_READ_THREADS", "1").strip().lower() not in ("0", "false", "no", "off")


class RowWorker:
    """A queue of depth one in front of a single worker thread, started on the first ``submit``."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: tuple[Future[Any], Callable[[Any], None]] | None = None

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...], done: Callable[[Any], None]) -> None:
        """Run ``fn(*args)`` on the worker; ``done(its result)`` runs on the caller's thread, in ``result``.
        The previous piece must have been taken (``result``) first."""
        assert self._pending is None, "one piece in flight at most"
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="llmdiag-rows")
        self._pending = (self._pool.submit(fn, *args), done)

    def result(self) -> None:
        """Wait for the piece in flight, if any, and hand its result to its ``done``. An exception raised on
        the worker is raised here, as it is (the same type and message as inline)."""
        if self._pending is None:
            return
        future, done = self._pending
        self._pending = None
        done(future.result())

    def close(self) -> None:
        """Stop the thread (after the piece in flight, whose result is dropped)."""
        self._pending = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


__all__ = ["RowWorker", "threads_wanted"]
