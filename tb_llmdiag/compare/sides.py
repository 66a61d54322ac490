"""BEFORE / AFTER (or CANDIDATE / BASELINE) from the command line to one run report each.

A side is a trace file, a run folder or logdir (analysed now, through the ``Analyzer`` the CLI passes in:
``tb_llmdiag.api``, so that ``compare`` does not import the front door that re-exports it), or a saved
``llmdiag report --json`` document (plain or gzipped; recognised by content: a JSON object whose ``tool.name``
is ``tb_llmdiag``). A side that holds several runs needs ``--run NAME``; NAME is a run name, or
``run/worker`` or ``run/worker/span`` where one run has several files. Only the selected files are analysed.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any, Protocol

from tb_llmdiag.compare.names import Candidate, select
from tb_llmdiag.compare.names import label as _label
from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.discover import Index, TraceFile, discover, is_kineto_head


class Analyzer(Protocol):
    """What loading a side needs of the front door; ``tb_llmdiag.api`` is one (``cli`` passes it in)."""

    def analyze_file(self, tf: TraceFile) -> dict[str, Any]: ...

    def analyze_index(self, index: Index) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]: ...


#: report schemas ``series`` reads (1: per-step parallel lists; 2: ``steps.per_step`` rows; 3: as 2, plus ``jobs``;
#: collectives no longer count as busy, so busy shares of a schema-2 side include collective time)
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
    """The report a file holds when it is a saved ``llmdiag report --json`` document, else None."""
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


def candidates(path: str) -> list[Candidate]:
    doc = saved_report(path)
    if doc is not None:
        return [
            Candidate(str(r.get("run")), str(r.get("worker")), str(r.get("span")), report=r)
            for r in doc["runs"]
            if isinstance(r, dict)
        ]
    index = discover(path)
    return [Candidate(tf.run, tf.worker, tf.span, trace_file=tf) for tf in index.files]


def load_side(path: str, run: str | None, role: str, analyzer: Analyzer) -> tuple[dict[str, Any], list[str]]:
    """The run report of one side and its warnings. Raises TraceFormatError (exit 4) when it could not be analysed."""
    c = select(candidates(path), run, role, path)
    if c.report is not None:
        rep = dict(c.report)
    else:
        assert c.trace_file is not None  # a candidate holds a report or a file
        rep = analyzer.analyze_file(c.trace_file)
    status = rep.get("status")
    where = f"{role} {path} (run {_label(c, [c])})"
    if status not in ("ok", "partial"):
        raise TraceFormatError(f"{where} could not be analysed: {rep.get('error') or 'no report'}")
    warnings = [f"{where}: analysed from a partial trace ({rep.get('error')})"] if status == "partial" else []
    return rep, warnings
