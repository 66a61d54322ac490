"""Kineto / Chrome trace JSON (PyTorch's profiler, optionally gzipped): how its files are recognised and named.

Its entry in ``ingest/formats.py``: ``sniff`` (the content), ``place`` (run, worker and timestamp from the file's
name), ``rank`` and ``read`` (``reader.read_kineto``, imported on first use: TensorBoard starts without msgspec).
Names are those of the stacks' layouts (../shared/docs/USERS.md): ``tensorboard_trace_handler``'s
``<worker>.<ts>.pt.trace.json[.gz]``, accelerate ``profile_{rank}.json``, torchtitan ``rank{R}_trace.json``, NeMo
``rank-N.json``, torchtune ``r{rank}-....pt.trace.json.gz``, any other ``.json`` recognised by content.
"""

from __future__ import annotations

import re

from tb_llmdiag.model import Trace

#: names its files may carry: only these are looked at in a logdir
NAMES = re.compile(r"\.json(?:\.gz)?$")
#: names that claim the format: listed even when unreadable or not one by content (the reader then says why)
CLAIMS = re.compile(r"\.pt\.trace\.json(?:\.gz)?$")
_TB_HANDLER = re.compile(r"^(.*?)(?:\.(\d+))?\.pt\.trace\.json(?:\.gz)?$")
_RANK_FROM_NAME = (re.compile(r"rank[-_]?(\d+)"), re.compile(r"^r(\d+)-"), re.compile(r"profile_(\d+)\.json"))
_DIST_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')


def sniff(head: bytes) -> bool:
    """Content check on the start of a file: a Chrome/Kineto trace, not a Chakra graph or other JSON."""
    if b'"traceEvents"' in head:
        return True
    start = head.lstrip()[:1]
    # Kineto writes schemaVersion/deviceProperties/distributedInfo before a possibly distant traceEvents
    return start == b"{" and b'"schemaVersion"' in head and b'"nodes"' not in head


def place(folder: list[str] | None, name: str) -> tuple[list[str] | None, str, str | None, str | None] | None:
    """(run folder, worker, timestamp, span) of a file named ``name`` in ``folder`` (its parts below the logdir;
    None: a file named on its own): the run is its folder, worker and timestamp come from the trace handler's name
    (spans are numbered by timestamp), else the name less ``.json``. None when the name is not one of ours."""
    if folder is not None and not NAMES.search(name):
        return None
    m = _TB_HANDLER.match(name)
    worker, ts = (m.group(1), m.group(2)) if m else (NAMES.sub("", name), None)
    return folder, worker, ts, None


def rank(name: str, head: bytes) -> int | None:
    """The rank: ``distributedInfo.rank`` in the head, else a rank in the name (``rank3``, ``r3-``, ``profile_3``)."""
    m = _DIST_RANK.search(head)
    if m:
        return int(m.group(1))
    for pattern in _RANK_FROM_NAME:
        m2 = pattern.search(name)
        if m2:
            return int(m2.group(1))
    return None


#: the reader's module, imported on first use (``api.preload`` imports it ahead, through ``formats.READER_MODULES``)
READER = "tb_llmdiag.ingest.kineto.reader"


def read(path: str, inside: str = "") -> Trace:
    """``reader.read_kineto``."""
    from tb_llmdiag.ingest.kineto.reader import read_kineto

    return read_kineto(path, inside)


__all__ = ["CLAIMS", "NAMES", "READER", "place", "rank", "read", "sniff"]
