"""Finding the traces under a logdir, a local folder (``local.py``) or an fsspec URL (``remote.py``), by the formats'
names and content (``formats.FORMATS``, ``common.traces_in``): an ``Index`` of ``TraceFile``s."""

from __future__ import annotations

from tb_llmdiag.ingest.discover.common import Index, TraceFile, name_order
from tb_llmdiag.ingest.discover.local import discover as discover_local
from tb_llmdiag.ingest.discover.remote import discover_url
from tb_llmdiag.ingest.fs import is_url, strip_file_url


def discover(path: str) -> Index:
    """Every trace under ``path``: a local logdir, run folder or file (``file://`` too), or an fsspec URL
    (``s3://bucket/runs``, ``gs://...``, ``memory://...``) when fsspec and the protocol's backend are installed.

    Raises:
        NoTracesFound: nothing recognisable at ``path``.
        MissingExtra: a URL whose fsspec backend is not installed.
    """
    return discover_url(path) if is_url(path) else discover_local(strip_file_url(path))


__all__ = ["Index", "TraceFile", "discover", "discover_url", "name_order"]
