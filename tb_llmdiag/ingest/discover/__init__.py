"""Finding the traces under a logdir: a local folder (``local.py``) or an fsspec URL (``remote.py``)."""

from __future__ import annotations

from tb_llmdiag.ingest.discover.local import Index, TraceFile, discover, is_kineto_head
from tb_llmdiag.ingest.discover.remote import discover_url

__all__ = ["Index", "TraceFile", "discover", "discover_url", "is_kineto_head"]
