"""Finding the traces under a logdir, a local folder (``local.py``) or an fsspec URL (``remote.py``), by the formats'
names and content (``formats.FORMATS``, ``common.traces_in``): an ``Index`` of ``TraceFile``s."""

from __future__ import annotations

from tb_llmdiag.ingest.discover.common import Index, TraceFile
from tb_llmdiag.ingest.discover.local import discover
from tb_llmdiag.ingest.discover.remote import discover_url

__all__ = ["Index", "TraceFile", "discover", "discover_url"]
