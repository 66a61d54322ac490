"""Saved ``llmdiag report --json`` documents (plain or gzipped), recognised by content: a JSON object whose
``tool.name`` is ``tb_llmdiag``. ``compare`` and ``check`` read them as sides (docs/compare.md).

A saved report is opened as every trace is (``files.open_regular``: one regular-file check, one open that cannot
block on a FIFO, the link re-check with ``inside``), once, and read as one stream: its first bytes say whether it
can be a saved report, the rest is read only when it can."""

from __future__ import annotations

import gzip
import io
import json
import os
import zlib
from typing import Any

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.files import open_regular, os_error_message
from tb_llmdiag.ingest.formats import recognised

#: report schemas the comparison reads (1: per-step parallel lists; 2: ``steps.per_step`` rows; 3: as 2, plus
#: ``jobs``; collectives no longer count as busy, so busy shares of a schema-2 side include collective time)
READABLE_SCHEMAS = (1, 2, 3)
#: saved reports larger than this are not read whole (a report of a big logdir is a few MiB)
MAX_REPORT_BYTES = 256 << 20
_SNIFF = 65536
_BLOCK = 1 << 20


def _read_up_to(src: io.BufferedIOBase, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of ``src``, and whether its gzip stream ended early (what came before is kept:
    ``read1`` hands over each piece as it is inflated)."""
    out = bytearray()
    try:
        while len(out) < limit:
            piece = src.read1(min(_BLOCK, limit - len(out)))
            if not piece:
                break
            out += piece
    except (EOFError, zlib.error, gzip.BadGzipFile):
        return bytes(out), True
    return bytes(out), False


def _read(path: str, inside: str) -> tuple[bytes, bool] | None:
    """The (inflated) bytes of a file that may be a saved report, up to ``MAX_REPORT_BYTES + 1``, and whether
    its gzip stream ended early; None when its first bytes show it is not one. A folder or a missing path is
    None too (the caller discovers it: a logdir, or "no such file or directory").

    Raises:
        TraceFormatError: a FIFO, device, socket or symlink loop (``NotRegularFile``), a link out of ``inside``
            (``LinkOutside``), or a file that cannot be read, in ``files``' words.
    """
    if os.path.isdir(path):
        return None
    try:
        f, _ = open_regular(path, inside)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TraceFormatError(f"cannot read {os.path.basename(path)}: {os_error_message(exc)}") from None
    with f:
        gzipped = f.peek(2)[:2] == b"\x1f\x8b"
        src: io.BufferedIOBase = gzip.GzipFile(fileobj=f, mode="rb") if gzipped else f
        head, cut = _read_up_to(src, _SNIFF)
        if head.lstrip()[:1] != b"{" or recognised(head) is not None:  # a trace of some format (formats.py)
            return None
        if cut or len(head) < _SNIFF:
            return head, cut
        rest, cut = _read_up_to(src, MAX_REPORT_BYTES + 1 - len(head))
        return head + rest, cut


def saved_report(path: str, inside: str = "") -> dict[str, Any] | None:
    """The report a file holds when it is a saved ``llmdiag report --json`` document, else None (a trace, a
    folder, a missing path: the caller discovers it). ``inside``: a logdir's real path the file must lie in
    ("" = anywhere: the command line's own arguments).

    Raises:
        TraceFormatError: the path cannot be read (``_read``), or it looks like a saved report but cannot be
            read as one.
    """
    got = _read(path, inside)
    if got is None:
        return None
    raw, cut = got
    if len(raw) > MAX_REPORT_BYTES or b'"tb_llmdiag"' not in raw:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        why = "its gzip stream ends early (file truncated?)" if cut else f"is not valid JSON ({exc})"
        raise TraceFormatError(f"{path}: looks like a saved llmdiag report but {why}") from None
    if not isinstance(doc, dict) or (doc.get("tool") or {}).get("name") != "tb_llmdiag":
        return None
    if doc.get("schema") not in READABLE_SCHEMAS:
        raise TraceFormatError(
            f"{path}: saved report has schema {doc.get('schema')!r}; this llmdiag compares "
            f"schemas {', '.join(map(str, READABLE_SCHEMAS))} (save it again with `llmdiag report --json`)"
        )
    if not isinstance(doc.get("runs"), list):
        raise TraceFormatError(f"{path}: saved report has no 'runs' list")
    return doc
