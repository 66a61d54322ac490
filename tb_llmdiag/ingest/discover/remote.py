"""Discovery on an fsspec filesystem (``s3://bucket/logdir``, ``gs://``, ``memory://``): the same layouts,
names and content checks as ``discover`` (whose name patterns and numbering it reuses), over one recursive
listing (``fs.find``) instead of ``os.walk``, and with the first bytes of each JSON object read for the
content check. ``TraceFile.path`` is the object's URL; ``version`` its ETag (or mtime) for the cache key.
"""

from __future__ import annotations

import posixpath
import zlib
from typing import Any

from tb_llmdiag.errors import NoTracesFound
from tb_llmdiag.ingest.discover import local
from tb_llmdiag.ingest.discover.local import Index, TraceFile
from tb_llmdiag.ingest.fs import filesystem, object_info, read_head, url_of


def _head(fs: Any, path: str, limit: int = local._SNIFF_BYTES) -> bytes:
    """The first ``limit`` bytes of the (decompressed) object; b"" if unreadable."""
    raw = read_head(fs, path, limit)
    if raw[:2] == b"\x1f\x8b":
        try:
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, limit)
        except zlib.error:
            return b""
    return raw


def _rel_run(root: str, folder: str, root_name: str) -> str:
    rel = posixpath.relpath(folder, root)
    return root_name if rel == "." else rel


def _kineto(
    fs: Any, root: str, root_name: str, folder: str, names: dict[str, dict[str, Any]]
) -> list[tuple[TraceFile, str | None]]:
    out: list[tuple[TraceFile, str | None]] = []
    xplane_here = any(local._XPLANE_NAME.match(n) for n in names)
    for name, detail in sorted(names.items()):
        if not local._JSON_NAME.search(name) or (xplane_here and name.endswith(".trace.json.gz")):
            continue
        size, mtime_ns, version = object_info(detail)
        by_name = name.endswith((".pt.trace.json", ".pt.trace.json.gz"))
        if size == 0 and not by_name:
            continue
        path = posixpath.join(folder, name)
        head = _head(fs, path)
        if not by_name and not local.is_kineto_head(head):
            continue
        m = local._TB_HANDLER.match(name)
        worker, ts = (m.group(1), m.group(2)) if m else (local._JSON_NAME.sub("", name), None)
        out.append(
            (
                TraceFile(
                    run=_rel_run(root, folder, root_name),
                    worker=worker,
                    span="",
                    path=url_of(fs, path),
                    source_kind="kineto",
                    size_bytes=size,
                    mtime_ns=mtime_ns,
                    rank=local._rank(name, head),
                    phase="validation" if "validation_step" in worker else "train",
                    version=version,
                ),
                ts,
            )
        )
    return out


def _xplane(fs: Any, root: str, root_name: str, folder: str, names: dict[str, dict[str, Any]]) -> list[TraceFile]:
    parts = folder.rstrip("/").split("/")
    if len(parts) < 3 or parts[-3:-1] != ["plugins", "profile"]:
        return []
    run_folder = posixpath.dirname(posixpath.dirname(posixpath.dirname(folder)))
    out = []
    for name, detail in sorted(names.items()):
        m = local._XPLANE_NAME.match(name)
        if m:
            size, mtime_ns, version = object_info(detail)
            out.append(
                TraceFile(
                    run=_rel_run(root, run_folder, root_name),
                    worker=m.group(1),
                    span=parts[-1],
                    path=url_of(fs, posixpath.join(folder, name)),
                    source_kind="xplane",
                    size_bytes=size,
                    mtime_ns=mtime_ns,
                    version=version,
                )
            )
    return out


def _single(fs: Any, path: str, detail: dict[str, Any]) -> Index:
    folder, name = posixpath.split(path)
    size, mtime_ns, version = object_info(detail)
    run = posixpath.basename(folder) or "."
    m = local._XPLANE_NAME.match(name)
    if m:
        tf = TraceFile(
            run=run,
            worker=m.group(1),
            span="default",
            path=url_of(fs, path),
            source_kind="xplane",
            size_bytes=size,
            mtime_ns=mtime_ns,
            version=version,
        )
    else:
        m2 = local._TB_HANDLER.match(name)
        tf = TraceFile(
            run=run,
            worker=m2.group(1) if m2 else local._JSON_NAME.sub("", name),
            span="default",
            path=url_of(fs, path),
            source_kind="kineto",
            size_bytes=size,
            mtime_ns=mtime_ns,
            rank=local._rank(name, _head(fs, path)),
            version=version,
        )
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
    kineto: list[tuple[TraceFile, str | None]] = []
    xplane: list[TraceFile] = []
    for folder in sorted(folders):
        kineto.extend(_kineto(fs, root, root_name, folder, folders[folder]))
        xplane.extend(_xplane(fs, root, root_name, folder, folders[folder]))
    files = local._number_spans(kineto) + xplane
    files.sort(key=lambda f: (f.run, f.worker, local._span_order(f.span)))
    return Index(root=url_of(fs, root), files=tuple(files), warnings=tuple(local._duplicate_rank_warnings(files)))


__all__ = ["discover_url"]
