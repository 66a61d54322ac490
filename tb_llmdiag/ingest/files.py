"""Opening a trace file: the one regular-file check and the one open, for the readers, discovery, the tab and
saved reports (``saved_report.py``).

Contract:
- ``problem(path)``: why ``path`` cannot be read as a trace, in one line ("it is a named pipe (FIFO), not a trace
  file", "a symlink loop (the link points back to itself)", "permission denied (...)", "no such file"), or None.
  It looks with ``stat`` only: a FIFO would block ``open()``, and opening some devices has side effects.
- ``open_regular(path, inside)``: the open file (binary, blocking reads) and its size. It is checked before the open
  (``problem``), opened with ``O_NONBLOCK`` (a FIFO swapped in meanwhile cannot hang ``open()``), checked again with
  ``fstat`` on the open descriptor (a file swapped between the check and the open cannot slip through), and, with
  ``inside`` (a logdir's real path), where the descriptor really is (``links.check_opened``, #27).
  A file that is not regular is ``NotRegularFile`` (a ``TraceFormatError``: ``cannot read <name>: <problem>``); one
  that is gone or unreadable raises its ``OSError`` (the tab answers 404), which ``open_trace`` (the readers' open)
  turns into a ``TraceFormatError`` in the same words.
"""

from __future__ import annotations

import errno
import io
import os
import stat

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.links import check_opened

_KIND_OF_MODE = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)
#: bytes of a file's start that content checks look at (``formats.py``: inflated when gzipped)
HEAD_BYTES = 65536
#: open() flags: never block on a FIFO, never become a controlling terminal, not inherited by children
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


class NotRegularFile(TraceFormatError):
    """The path exists but is not a regular file: a FIFO, device, socket, directory or symlink loop."""


def not_regular(mode: int) -> str | None:
    """What a file of this st_mode is when it is not a regular file ("a named pipe (FIFO)"...), else None."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KIND_OF_MODE if test(mode)), "not a regular file")


def os_error_message(exc: OSError) -> str:
    """One line for why a path cannot be opened."""
    if exc.errno == errno.ELOOP:
        return "a symlink loop (the link points back to itself)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied (the file is not readable by this user)"
    if exc.errno == errno.ENOENT:
        return "no such file"
    return exc.strerror or str(exc)


def _mode_problem(mode: int) -> str | None:
    what = not_regular(mode)
    return None if what is None else f"it is {what}, not a trace file"


def problem(path: str) -> str | None:
    """Why ``path`` cannot be read as a trace (module docstring), or None; nothing is opened."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return os_error_message(exc)
    found = _mode_problem(st.st_mode)
    if found is None and not os.access(path, os.R_OK):
        return os_error_message(PermissionError(errno.EACCES, "permission denied"))
    return found


def file_refusal(path: str) -> str | None:
    """``problem(path)`` as the one line a refused file gets (``cannot read <name>: ...``), or None."""
    found = problem(path)
    return None if found is None else f"cannot read {os.path.basename(path)}: {found}"


def open_regular(path: str, inside: str = "") -> tuple[io.BufferedReader, int]:
    """The open file and its size in bytes, when ``path`` is a regular file (whose real path lies in ``inside``, a
    logdir's real path; "" = anywhere).

    Raises:
        NotRegularFile: a FIFO, device, socket, directory or symlink loop.
        LinkOutside: the opened file lies outside ``inside`` (links.py).
        FileNotFoundError / PermissionError (OSError): gone or unreadable.
    """
    name = os.path.basename(path)
    try:
        found = _mode_problem(os.stat(path).st_mode)  # before any open(): opening some devices has side effects
        if found is not None:
            raise NotRegularFile(f"cannot read {name}: {found}")
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(f"cannot read {name}: {os_error_message(exc)}") from None
        raise
    try:
        st = os.fstat(fd)
        found = _mode_problem(st.st_mode)
        if found is not None:
            raise NotRegularFile(f"cannot read {name}: {found}")
        check_opened(fd, path, inside)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), int(st.st_size)
    except BaseException:
        os.close(fd)
        raise


def open_trace(path: str, inside: str = "") -> tuple[io.BufferedReader, int]:
    """``open_regular`` for a reader: a file that is gone or unreadable is a TraceFormatError in words too."""
    try:
        return open_regular(path, inside)
    except OSError as exc:
        raise TraceFormatError(f"cannot read {os.path.basename(path)}: {os_error_message(exc)}") from None


def read_head(path: str, limit: int = HEAD_BYTES) -> bytes:
    """The first ``limit`` stored bytes of a regular file (``open_regular``); b"" when it cannot be read."""
    try:
        f, _ = open_regular(path)
        with f:
            return f.read(limit)
    except (OSError, TraceFormatError):
        return b""


__all__ = [
    "HEAD_BYTES",
    "NotRegularFile",
    "file_refusal",
    "not_regular",
    "open_regular",
    "open_trace",
    "os_error_message",
    "problem",
    "read_head",
]
