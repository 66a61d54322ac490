"""Saved ``llmdiag report --json`` documents (plain or gzipped), recognised by content: a JSON object whose
``tool.name`` is ``tb_llmdiag``. ``compare`` and ``check`` read them as sides (docs/compare.md)."""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.kineto import sniff as is_kineto_head

#: report schemas the comparison reads (1: per-step parallel lists; 2: ``steps.per_step`` rows; 3: as 2, plus
#: ``jobs``; collectives no longer count as busy, so busy shares of a schema-2 side include collective time)
READABLE_SCHEMAS = (1, 2, 3)
#: saved reports larger than this are not read whole (a report of a big logdir is a few MiB)
MAX_REPORT_BYTES = 256 << 20
_SNIFF = 65536


def _open(path: str, limit: int) -> bytes:
    with open(path, "rb") as f:
        raw = f.read(limit)
    if raw[:2] == b"\x1f\x8b":
        with gzip.open(path, "rb") as g:
            raw = g.read(limit)
    return raw


def saved_report(path: str) -> dict[str, Any] | None:
    """The report a file holds when it is a saved ``llmdiag report --json`` document, else None. Raises
    TraceFormatError when it looks like one but cannot be read as one."""
    if not os.path.isfile(path):
        return None
    try:
        head = _open(path, _SNIFF)
    except OSError:
        return None
    if head.lstrip()[:1] != b"{" or is_kineto_head(head):
        return None
    raw = _open(path, MAX_REPORT_BYTES + 1)
    if len(raw) > MAX_REPORT_BYTES or b'"tb_llmdiag"' not in raw:
        return None
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise TraceFormatError(f"{path}: looks like a saved llmdiag report but is not valid JSON ({exc})") from None
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
