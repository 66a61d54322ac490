"""Find profiler traces under a logdir, the way users' stacks lay them out, without parsing them.

Kineto traces are recognised by content (a ``"traceEvents"`` key, or Kineto's ``"schemaVersion"``
header, near the start), so every layout works: ``tensorboard_trace_handler``
(``<worker>.<ts>.pt.trace.json[.gz]``), accelerate ``profile_{rank}.json``, torchtitan
``iteration_N/rank{R}_trace.json``, NeMo ``device/rank-N.json`` (its ``host/rank-N.json`` is a Chakra
graph and is rejected by content), Axolotl ``profiler_trace.json``, torchtune
``iteration_N/r{rank}-....pt.trace.json.gz``, Lightning's per-action files. XPlane captures are
``<run>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>[_<port>].xplane.pb``; XProf's cache files and the
``.trace.json.gz`` written beside an ``.xplane.pb`` are skipped (the ``.xplane.pb`` holds more).

Naming: run = the folder relative to the logdir (the logdir's own name for files directly in it; for XPlane the folder
holding ``plugins/``); worker = the file-name prefix (the host for XPlane); span = 1-based index of the
file's timestamp within (run, worker), as torch-tb-profiler numbers them, or "default" without one
(the capture-folder name for XPlane). Rank comes from ``distributedInfo.rank``, else from the name.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, replace

from tb_llmdiag.errors import NoTracesFound, RunNotFound, TraceFormatError
from tb_llmdiag.ingest.files import problem as _problem
from tb_llmdiag.ingest.links import follow_links, outside, within

_TB_HANDLER = re.compile(r"^(.*?)(?:\.(\d+))?\.pt\.trace\.json(?:\.gz)?$")
_JSON_NAME = re.compile(r"\.json(?:\.gz)?$")
_XPLANE_NAME = re.compile(r"^(.*)\.xplane\.pb$")
_RANK_FROM_NAME = (re.compile(r"rank[-_]?(\d+)"), re.compile(r"^r(\d+)-"), re.compile(r"profile_(\d+)\.json"))
_DIST_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')
_SNIFF_BYTES = 65536


@dataclass(frozen=True)
class TraceFile:
    """One trace file and the names it is shown under."""

    run: str
    worker: str
    span: str
    path: str
    source_kind: str  # "kineto" | "xplane"
    size_bytes: int
    mtime_ns: int
    rank: int | None = None
    phase: str = "train"  # "validation" for Lightning validation_step files
    version: str = ""  # objects (fsspec URLs): the ETag or mtime the tab's cache key includes
    inside: str = ""  # the logdir's real path the file must stay in when opened (links.py); "" = anywhere

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.run, self.worker, self.span)


@dataclass(frozen=True)
class Index:
    """What discovery found. Lookups by name only: request names never become paths."""

    root: str
    files: tuple[TraceFile, ...]
    warnings: tuple[str, ...] = ()

    def find(self, run: str, worker: str, span: str) -> TraceFile:
        for f in self.files:
            if f.key == (run, worker, span):
                return f
        raise RunNotFound(f"no trace for run={run!r} worker={worker!r} span={span!r}")


def _head(path: str, limit: int = _SNIFF_BYTES) -> bytes:
    """The first ``limit`` bytes of the (decompressed) file; b"" if unreadable."""
    try:
        with open(path, "rb") as f:
            raw = f.read(limit)
        if raw[:2] == b"\x1f\x8b":
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, limit)
        return raw
    except (OSError, zlib.error):
        return b""


def is_kineto_head(head: bytes) -> bool:
    """Content check on the start of a JSON file: a Chrome/Kineto trace, not a Chakra graph or other JSON."""
    if b'"traceEvents"' in head:
        return True
    start = head.lstrip()[:1]
    # Kineto writes schemaVersion/deviceProperties/distributedInfo before a possibly distant traceEvents
    return start == b"{" and b'"schemaVersion"' in head and b'"nodes"' not in head


def _rank(name: str, head: bytes) -> int | None:
    m = _DIST_RANK.search(head)
    if m:
        return int(m.group(1))
    for pattern in _RANK_FROM_NAME:
        m2 = pattern.search(name)
        if m2:
            return int(m2.group(1))
    return None


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _walk(root: str, inside: str, warnings: list[str]) -> Iterable[tuple[str, list[str]]]:
    """Folders under ``root`` and their file names. Linked folders are walked only when following links
    (``inside`` == ""), each real folder once; one that leaves the logdir is named in ``warnings``."""
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, onerror=None, followlinks=not inside):
        real = os.path.realpath(dirpath)
        if real in seen:  # a link cycle, or a folder reached twice through links
            dirnames[:] = []
            continue
        seen.add(real)
        keep = []
        for d in sorted(d for d in dirnames if not d.startswith(".")):
            link = os.path.join(dirpath, d)
            if inside and os.path.islink(link) and not within(os.path.realpath(link), inside):
                warnings.append(
                    f"{os.path.relpath(link, root)} skipped: a link to a folder outside the logdir "
                    "(set LLMDIAG_FOLLOW_LINKS=1 to follow links out of it)"
                )
            keep.append(d)
        dirnames[:] = keep
        yield dirpath, sorted(filenames)


def _rel_run(root: str, folder: str) -> str:
    """The run name of a folder: its path relative to the logdir; the logdir's own name for the logdir itself."""
    rel = os.path.relpath(folder, root)
    if rel == ".":
        return os.path.basename(root.rstrip(os.sep)) or "."
    return rel.replace(os.sep, "/")


def _kineto_entries(
    root: str, folder: str, filenames: list[str], warnings: list[str], inside: str
) -> list[tuple[TraceFile, str | None]]:
    """(TraceFile with span left blank, timestamp) for every Kineto trace in one folder. A file named
    like torch's trace handler writes (``*.pt.trace.json[.gz]``) is listed even when its content is not a
    trace or it cannot be read, so its one-line error is reported; another ``.json`` file that cannot be
    read or is not a regular file is named in ``warnings``."""
    out: list[tuple[TraceFile, str | None]] = []
    xplane_here = any(_XPLANE_NAME.match(n) for n in filenames)
    for name in filenames:
        if not _JSON_NAME.search(name):
            continue
        if xplane_here and name.endswith(".trace.json.gz"):
            continue  # XProf's Chrome export beside the .xplane.pb: the .pb is read instead
        path = os.path.join(folder, name)
        by_name = name.endswith((".pt.trace.json", ".pt.trace.json.gz"))
        leaves = outside(path, inside)  # a link out of the logdir: listed by name, its target never read
        problem = leaves or _problem(path)
        st = (0, 0) if leaves else (_stat(path) or (0, 0))
        if problem is not None and not by_name:
            warnings.append(f"{os.path.relpath(path, root)} skipped: {problem}")
            continue
        elif st[0] == 0 and not by_name:
            continue
        head = _head(path) if problem is None else b""
        if not by_name and not is_kineto_head(head):
            continue
        m = _TB_HANDLER.match(name)
        if m:
            worker, ts = m.group(1), m.group(2)
        else:
            worker, ts = _JSON_NAME.sub("", name), None
        phase = "validation" if "validation_step" in worker else "train"
        out.append(
            (
                TraceFile(
                    run=_rel_run(root, folder),
                    worker=worker,
                    span="",
                    path=os.path.abspath(path),
                    source_kind="kineto",
                    size_bytes=st[0],
                    mtime_ns=st[1],
                    rank=_rank(name, head),
                    phase=phase,
                    inside=inside,
                ),
                ts,
            )
        )
    return out


def _xplane_entries(root: str, folder: str, filenames: list[str], inside: str) -> list[TraceFile]:
    parts = folder.replace(os.sep, "/").rstrip("/").split("/")
    if len(parts) < 3 or parts[-3:-1] != ["plugins", "profile"]:
        return []
    run_folder = os.path.dirname(os.path.dirname(os.path.dirname(folder)))
    out = []
    for name in filenames:
        m = _XPLANE_NAME.match(name)
        if not m:
            continue
        path = os.path.join(folder, name)
        st = (0, 0) if outside(path, inside) else _stat(path)  # a link out: listed, refused when read
        if st is None:
            continue
        out.append(
            TraceFile(
                run=_rel_run(root, run_folder),
                worker=m.group(1),
                span=parts[-1],
                path=os.path.abspath(path),
                source_kind="xplane",
                size_bytes=st[0],
                mtime_ns=st[1],
                inside=inside,
            )
        )
    return out


def _number_spans(entries: list[tuple[TraceFile, str | None]]) -> list[TraceFile]:
    """Spans per (run, worker): 1-based in numeric timestamp order; "default" without a timestamp."""
    groups: dict[tuple[str, str], list[tuple[TraceFile, str | None]]] = {}
    for tf, ts in entries:
        groups.setdefault((tf.run, tf.worker), []).append((tf, ts))
    out: list[TraceFile] = []
    for items in groups.values():
        stamped = sorted((e for e in items if e[1] is not None), key=lambda e: int(e[1] or 0))
        for i, (tf, _) in enumerate(stamped, start=1):
            out.append(replace(tf, span=str(i)))
        unstamped = [tf for tf, ts in items if ts is None]
        for j, tf in enumerate(unstamped):
            out.append(replace(tf, span="default" if j == 0 else f"default-{j + 1}"))
    return out


def _duplicate_rank_warnings(files: list[TraceFile]) -> list[str]:
    """Two files of one run (and one span number) that claim the same rank: e.g. torchtune <= 0.6.1's `r0` bug."""
    seen: dict[tuple[str, str, int], TraceFile] = {}
    warnings = []
    for tf in files:
        if tf.rank is None or tf.source_kind != "kineto":
            continue
        key = (tf.run, tf.phase, tf.rank)
        other = seen.get(key)
        if other is not None and (other.worker != tf.worker or other.span == tf.span):
            warnings.append(
                f"run {tf.run!r}: {os.path.basename(other.path)} and {os.path.basename(tf.path)} both claim "
                f"rank {tf.rank}; rank labels may be wrong (torchtune <= 0.6.1 names every rank r0)"
            )
        else:
            seen.setdefault(key, tf)
    return warnings


def discover(path: str) -> Index:
    """Every trace under ``path`` (a logdir, a run folder, or one trace file). Files whose real path leaves
    the logdir (symlinks) are listed but refused when read, unless ``LLMDIAG_FOLLOW_LINKS=1`` (links.py).

    Raises:
        NoTracesFound: the path does not exist or holds no trace we recognise.
    """
    root = os.path.abspath(path)
    if os.path.isdir(root):
        pass
    elif os.path.lexists(root):
        problem = _problem(root)
        if problem is not None and "no such file" not in problem:
            raise TraceFormatError(f"{path}: {problem}")
        if problem is None:
            return _single_file(root)
        raise NoTracesFound(f"{path}: no such file or directory (a broken symlink)")
    else:
        raise NoTracesFound(f"{path}: no such file or directory")
    kineto: list[tuple[TraceFile, str | None]] = []
    xplane: list[TraceFile] = []
    warnings: list[str] = []
    inside = "" if follow_links() else os.path.realpath(root)  # links.py: files stay inside the logdir
    for folder, filenames in _walk(root, inside, warnings):
        kineto.extend(_kineto_entries(root, folder, filenames, warnings, inside))
        xplane.extend(_xplane_entries(root, folder, filenames, inside))
    files = _number_spans(kineto) + xplane
    files.sort(key=lambda f: (f.run, f.worker, _span_order(f.span)))
    return Index(root=root, files=tuple(files), warnings=tuple(warnings + _duplicate_rank_warnings(files)))


def _span_order(span: str) -> tuple[int, str]:
    return (int(span), "") if span.isdigit() else (1 << 30, span)


def _single_file(path: str) -> Index:
    folder, name = os.path.split(path)
    st = _stat(path)
    if st is None:
        raise NoTracesFound(f"{path}: cannot be read")
    if _XPLANE_NAME.match(name):
        m = _XPLANE_NAME.match(name)
        tf = TraceFile(
            run=os.path.basename(folder) or ".",
            worker=m.group(1) if m else name,
            span="default",
            path=path,
            source_kind="xplane",
            size_bytes=st[0],
            mtime_ns=st[1],
        )
        return Index(root=folder, files=(tf,))
    m2 = _TB_HANDLER.match(name)
    worker = m2.group(1) if m2 else _JSON_NAME.sub("", name)
    head = _head(path)  # a regular file: discover() checked
    # a file named explicitly is always tried: a wrong format gets its one-line error at load time
    tf = TraceFile(
        run=os.path.basename(folder) or ".",
        worker=worker,
        span="default",
        path=path,
        source_kind="kineto",
        size_bytes=st[0],
        mtime_ns=st[1],
        rank=_rank(name, head),
    )
    return Index(root=folder, files=(tf,))
