"""Discovery on an fsspec filesystem (``s3://bucket/logdir``, ``gs://``, ``memory://``): the same formats, layouts,
names and content checks as a local folder's (``common.traces_in`` over ``formats.FORMATS``), over one recursive
listing (``fs.find``) instead of ``os.walk``, with the first bytes of an object read when its content decides.
``TraceFile.path`` is the object's URL; ``version`` its ETag (or mtime) for the cache key.
"""

from __future__ import annotations

import posixpath
from typing import Any

from tb_llmdiag.errors import NoTracesFound
from tb_llmdiag.ingest.discover import common
from tb_llmdiag.ingest.discover.common import Index
from tb_llmdiag.ingest.files import HEAD_BYTES
from tb_llmdiag.ingest.fs import filesystem, object_info, read_head, url_of


def _rel_run(root: str, folder: str, root_name: str) -> str:
    rel = posixpath.relpath(folder, root)
    return root_name if rel == "." else rel


def _seen(detail: dict[str, Any]) -> common.Seen:
    size, mtime_ns, version = object_info(detail)
    return common.Seen(size, mtime_ns, version)


def _folder(fs: Any, folder: str, names: dict[str, dict[str, Any]]) -> common.Folder:
    return common.Folder(
        path=folder,
        see=lambda name: _seen(names[name]),
        head=lambda name: read_head(fs, posixpath.join(folder, name), HEAD_BYTES),
        path_of=lambda name: url_of(fs, posixpath.join(folder, name)),
    )


def _single(fs: Any, path: str, detail: dict[str, Any]) -> Index:
    folder, name = posixpath.split(path)
    tf = common.single(folder, name, _seen(detail), url_of(fs, path), read_head(fs, path, HEAD_BYTES))
    return Index(root=url_of(fs, folder), files=(tf,))


def discover_url(url: str) -> Index:
    """Every trace under ``url`` (a logdir, a run folder, or one trace object).

    Raises:
        NoTracesFound: nothing at ``url``, or it cannot be listed.
        MissingExtra: no fsspec backend for the protocol.
    """
    fs, root = filesystem(url)
    root = root.rstrip("/") or "/"
    try:
        info = fs.info(root)
    except FileNotFoundError:
        raise NoTracesFound(f"{url}: no such file, folder or bucket") from None
    except (OSError, ValueError) as exc:
        raise NoTracesFound(f"{url}: cannot be listed ({type(exc).__name__}: {exc})".splitlines()[0]) from None
    if info.get("type") != "directory":
        return _single(fs, root, info)
    try:
        listing: dict[str, dict[str, Any]] = fs.find(root, detail=True)
    except (OSError, ValueError) as exc:
        raise NoTracesFound(f"{url}: cannot be listed ({type(exc).__name__}: {exc})".splitlines()[0]) from None
    folders: dict[str, dict[str, dict[str, Any]]] = {}
    for path, detail in listing.items():
        rel = posixpath.relpath(path, root)
        if detail.get("type", "file") != "file" or any(p.startswith(".") for p in rel.split("/")[:-1]):
            continue
        folder, name = posixpath.split(path)
        folders.setdefault(folder, {})[name] = detail
    root_name = posixpath.basename(root) or "."
    found: list[common.Found] = []
    for folder in sorted(folders):
        names = folders[folder]
        got, _ = common.traces_in(_folder(fs, folder, names), sorted(names), lambda f: _rel_run(root, f, root_name))
        found.extend(got)
    files = common.number_spans(found)
    return Index(root=url_of(fs, root), files=tuple(files), warnings=tuple(common.duplicate_rank_warnings(files)))


__all__ = ["discover_url"]
