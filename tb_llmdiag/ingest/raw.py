"""Raw bytes of a trace file, for the tab's download route: opened only if it is a regular file.

Contract: ``open_regular(path)`` never blocks and never follows a request string (callers pass a path
from the discovered index). A FIFO, a device, a socket, a directory, a dangling link or a symlink loop
named like a trace is refused with ``NotRegularFile`` and a one-line message naming what it is. The file
is opened with ``O_NONBLOCK`` (so a FIFO cannot hang ``open()``) and checked with ``fstat`` on the open
descriptor (so a file swapped between a check and the open cannot slip through).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.links import check_opened


class NotRegularFile(TraceFormatError):
    """The path exists but is not a regular file (FIFO, device, socket, directory, link loop)."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def regular_file_error(path: str) -> str | None:
    """One line saying why ``path`` is not a readable regular file, or None when it is one (no open)."""
    name = os.path.basename(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{name} is a symlink loop, not a trace file"
        if exc.errno == errno.ENOENT:
            return f"{name} is gone (deleted or a dangling link)"
        return f"cannot read {name}: {exc.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return f"{name} is {_kind(st.st_mode)}, not a trace file; only regular files are read"
    return None


def open_regular(path: str, inside: str = "") -> tuple[BinaryIO, int]:
    """The open file (binary, blocking reads) and its size in bytes; with ``inside`` (a logdir's real path),
    only a file whose real path lies in it (links.py).

    Raises:
        NotRegularFile: a FIFO, device, socket, directory or symlink loop.
        LinkOutside: the opened file lies outside ``inside``.
        FileNotFoundError / PermissionError (OSError): gone or unreadable.
    """
    try:
        pre = os.stat(path)  # devices are refused before any open() (opening some has side effects)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(f"{os.path.basename(path)} is a symlink loop, not a trace file") from None
        raise
    if not stat.S_ISREG(pre.st_mode):
        raise NotRegularFile(
            f"{os.path.basename(path)} is {_kind(pre.st_mode)}, not a trace file; only regular files are read"
        )
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(f"{os.path.basename(path)} is a symlink loop, not a trace file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(
                f"{os.path.basename(path)} is {_kind(st.st_mode)}, not a trace file; only regular files are read"
            )
        check_opened(fd, path, inside)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return f, int(st.st_size)
