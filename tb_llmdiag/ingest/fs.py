"""Trace files on object storage and other fsspec filesystems (``s3://``, ``gs://``, ``memory://``...).

Contract:
- ``is_url(path)``: the path names a protocol other than ``file://``; everything else is a local path and
  never reaches this module's fsspec calls (the plain path imports no fsspec: ``extras.require``).
- ``filesystem(url)``: the fsspec filesystem and the path inside it. A protocol whose backend is not
  installed (``s3fs`` for ``s3://``) is MissingExtra with fsspec's own one line.
- ``object_info(detail)``: size, mtime and a version string (the object's ETag, else its generation / md5 /
  mtime) from a listing entry, for the tab's cache key: an object rewritten in place gets a new key even
  when its size does not change.
- ``local_copy(url)``: the readers read local files only; an object is copied (streamed, in blocks) to a
  private temporary directory that is removed afterwards, and the readers open that copy. Nothing is
  ever written next to the object. Failures are TraceFormatError with one line.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.extras import MissingExtra, require

_PROTOCOL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
#: Listing keys that identify one version of an object, best first (S3/MinIO ETag, GCS generation...).
_VERSION_KEYS = ("ETag", "etag", "generation", "md5Hash", "md5", "VersionId", "mtime", "LastModified", "created")
_COPY_BLOCK = 8 << 20


def is_url(path: str) -> bool:
    """True for ``proto://...`` with a protocol other than ``file``."""
    m = _PROTOCOL.match(path)
    return m is not None and m.group(1).lower() != "file"


def strip_file_url(path: str) -> str:
    """``file:///a/b`` -> ``/a/b``; other paths unchanged."""
    return path[len("file://") :] if path.lower().startswith("file://") else path


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path inside it) for ``url``.

    Raises:
        MissingExtra: fsspec, or the protocol's backend, is not installed; or the protocol is unknown.
    """
    fsspec = require("fsspec", extra="remote", needs=("fsspec",), what=f"reading {url}")
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as exc:  # fsspec's "Install s3fs to access S3": a backend package is missing
        raise MissingExtra(f"reading {url}: {exc}") from None
    except ValueError as exc:  # "Protocol not known: foo"
        raise MissingExtra(f"reading {url}: {exc} (no fsspec backend for it)") from None


def url_of(fs: Any, path: str) -> str:
    """The URL of ``path`` inside ``fs`` (what TraceFile.path holds, and what workers open)."""
    return str(fs.unstrip_protocol(path))


def _number_ns(value: Any) -> int:
    """A listing's time (epoch seconds, or a datetime) as int ns; 0 when absent or odd."""
    if hasattr(value, "timestamp"):
        value = value.timestamp()
    try:
        return int(float(value) * 1e9)
    except (TypeError, ValueError):
        return 0


def object_info(detail: dict[str, Any]) -> tuple[int, int, str]:
    """(size_bytes, mtime_ns, version) of one listing entry."""
    size = int(detail.get("size") or 0)
    mtime_ns = 0
    for k in ("mtime", "LastModified", "updated", "last_modified", "created"):
        if detail.get(k) is not None:
            mtime_ns = _number_ns(detail[k])
            break
    version = next((str(detail[k]).strip('"') for k in _VERSION_KEYS if detail.get(k) not in (None, "")), "")
    return size, mtime_ns, version


def read_head(fs: Any, path: str, limit: int) -> bytes:
    """The first ``limit`` stored bytes of an object; b"" when it cannot be read."""
    try:
        with fs.open(path, "rb") as f:
            return bytes(f.read(limit))
    except (OSError, ValueError):
        return b""


def _read_error(url: str, exc: BaseException) -> TraceFormatError:
    name = posixpath.basename(url.rstrip("/"))
    if isinstance(exc, FileNotFoundError):
        return TraceFormatError(f"cannot read {name}: no such object ({url})")
    if isinstance(exc, PermissionError):
        return TraceFormatError(f"cannot read {name}: permission denied ({url})")
    return TraceFormatError(f"cannot read {name}: {type(exc).__name__}: {exc}".splitlines()[0])


@contextmanager
def local_copy(url: str) -> Iterator[str]:
    """A local copy of the object at ``url``, named like it, in a private temporary directory removed on exit.

    Raises:
        TraceFormatError: the object is missing or cannot be read.
        MissingExtra: no fsspec backend for the protocol.
    """
    fs, path = filesystem(url)
    tmp = tempfile.mkdtemp(prefix="llmdiag-object-")
    try:
        local = os.path.join(tmp, posixpath.basename(path.rstrip("/")) or "trace")
        try:
            with fs.open(path, "rb") as src, open(local, "wb") as dst:
                shutil.copyfileobj(src, dst, _COPY_BLOCK)
        except (OSError, ValueError) as exc:
            raise _read_error(url, exc) from None
        yield local
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def open_object(url: str) -> tuple[BinaryIO, int]:
    """The object at ``url`` open for reading, and its size.

    Raises:
        TraceFormatError: the object is missing or cannot be read.
    """
    fs, path = filesystem(url)
    try:
        size = int(fs.info(path).get("size") or 0)
        return fs.open(path, "rb"), size
    except (OSError, ValueError) as exc:
        raise _read_error(url, exc) from None


__all__ = ["filesystem", "is_url", "local_copy", "object_info", "open_object", "read_head", "strip_file_url", "url_of"]
