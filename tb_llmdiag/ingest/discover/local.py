"""Find profiler traces under a local logdir, the way users' stacks lay them out, without parsing them.

Every format of ``formats.FORMATS`` is looked for in every folder (``common.traces_in``: a file's name says which
formats it may be, its content which it is), so every layout works: ``tensorboard_trace_handler``
(``<worker>.<ts>.pt.trace.json[.gz]``), accelerate ``profile_{rank}.json``, torchtitan
``iteration_N/rank{R}_trace.json``, NeMo ``device/rank-N.json`` (its ``host/rank-N.json`` is a Chakra
graph and is rejected by content), Axolotl ``profiler_trace.json``, torchtune
``iteration_N/r{rank}-....pt.trace.json.gz``, Lightning's per-action files. XPlane captures are
``<run>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>[_<port>].xplane.pb``; XProf's cache files and the
``.trace.json.gz`` written beside an ``.xplane.pb`` are skipped (the ``.xplane.pb`` holds more).
Naming: ``common.py``. Only regular files are read (``files.problem``); links that leave the logdir: links.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from tb_llmdiag.errors import NoTracesFound, TraceFormatError
from tb_llmdiag.ingest.discover import common
from tb_llmdiag.ingest.discover.common import Index, TraceFile
from tb_llmdiag.ingest.files import problem, read_head
from tb_llmdiag.ingest.links import follow_links, outside, within


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


def _folder(root: str, folder: str, inside: str) -> common.Folder:
    def see(name: str) -> common.Seen:
        path = os.path.join(folder, name)
        leaves = outside(path, inside)  # a link out of the logdir: listed by name, its target never read
        if leaves is not None:
            return common.Seen(problem=leaves)
        try:
            st = os.stat(path)
        except OSError:
            return common.Seen(problem=problem(path))
        return common.Seen(st.st_size, st.st_mtime_ns, problem=problem(path))

    return common.Folder(
        path=folder.replace(os.sep, "/"),
        see=see,
        head=lambda name: read_head(os.path.join(folder, name)),
        path_of=lambda name: os.path.abspath(os.path.join(folder, name)),
        inside=inside,
    )


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
        why = problem(root)
        if why is not None and "no such file" not in why:
            raise TraceFormatError(f"{path}: {why}")
        if why is None:
            return _single_file(root)
        raise NoTracesFound(f"{path}: no such file or directory (a broken symlink)")
    else:
        raise NoTracesFound(f"{path}: no such file or directory")
    found: list[common.Found] = []
    warnings: list[str] = []
    inside = "" if follow_links() else os.path.realpath(root)  # links.py: files stay inside the logdir
    for folder, filenames in _walk(root, inside, warnings):
        got, skipped = common.traces_in(_folder(root, folder, inside), filenames, lambda f: _rel_run(root, f))
        found.extend(got)
        warnings.extend(f"{os.path.relpath(os.path.join(folder, n), root)} skipped: {why}" for n, why in skipped)
    files = common.number_spans(found)
    return Index(root=root, files=tuple(files), warnings=tuple(warnings + common.duplicate_rank_warnings(files)))


def _single_file(path: str) -> Index:
    folder, name = os.path.split(path)
    try:
        st = os.stat(path)
    except OSError:
        raise NoTracesFound(f"{path}: cannot be read") from None
    seen = common.Seen(st.st_size, st.st_mtime_ns)
    return Index(root=folder, files=(common.single(folder, name, seen, path, read_head(path)),))


__all__ = ["Index", "TraceFile", "discover"]
