"""On-disk cache of the tab's analysis results (report, step timelines, per-step breakdown).

Contract:
- Only the TensorBoard process writes it (analysis workers return their results; ``store`` is called
  by the parent). Writes are atomic (temp file + ``os.replace``): readers never see half a file.
- Entries are keyed by ``(abs path or URL, size_bytes, mtime_ns, [ETag], package version, api.ENGINE_VERSION,
  CACHE_LAYOUT)``: a file that changes, a new release (a new metric or rule changes the report without changing
  the trace) or a new engine version is a miss; nothing is invalidated by hand.
- Every file is one header line ``{"layout", "key", "what", "bytes"}`` then the value's JSON. A read checks
  the header (layout, key and name must be the ones asked for, ``bytes`` the length that follows), parses
  the value strictly (``msgspec``: no NaN, no out-of-range numbers) and checks its schema
  (``tab.schema``); anything else is a miss (logged), so a garbage, cut or planted entry is recomputed,
  never served. A valid value is served as the bytes on disk (no re-encoding).
- Location: ``$LLMDIAG_CACHE_DIR``, else ``$XDG_CACHE_HOME/tb_llmdiag`` or ``~/.cache/tb_llmdiag``, never
  inside the logdir served (then the per-user ``<tmp>/tb_llmdiag-<uid>``). The directory is created 0700
  and must be a real directory owned by this user. When it cannot be used (another user owns it, it is
  not writable, the disk is full), results are kept in memory (the last ``MEMORY_ENTRIES`` results) and
  ``error`` says why in one line, which ``/runs`` shows; analyses do not fail because of the cache.
- JSON is written without NaN/Inf (``allow_nan=False``): producers must use null.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

import tb_llmdiag
from tb_llmdiag import api
from tb_llmdiag.tab import arrays as array_file
from tb_llmdiag.tab.schema import VALIDATORS

if TYPE_CHECKING:
    from tb_llmdiag.ingest.discover import TraceFile

logger = logging.getLogger(__name__)

#: Version of the on-disk layout of this module (2: a header line naming the entry, then the value).
CACHE_LAYOUT = 2
#: Results kept in memory when the disk cache cannot be written.
MEMORY_ENTRIES = 64
#: Trace-view indexes (arrays, large) kept in memory when the disk cache cannot be written.
MEMORY_ARRAY_ENTRIES = 4


def default_dir() -> Path:
    env = os.environ.get("LLMDIAG_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tb_llmdiag"


def arrays_path(root: Path, key: str, what: str = "traceview.bin") -> Path:
    """Where a binary entry lives (an analysis worker streams the trace view's arrays beside it: ``tab/analysis_queue.py``)."""
    return root / key[:2] / f"{key}.{what}"


def fallback_dir() -> Path:
    """The per-user cache under the temporary directory (another user cannot pre-create ours)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"tb_llmdiag-{uid}"


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
        return True
    except (ValueError, OSError):
        return False


def prepare_dir(path: Path, *, shared_parent: bool = False) -> str | None:
    """Create ``path`` (mode 0700) if needed and check it is ours and writable; one line if it is not.

    ``shared_parent``: ``path`` sits in a directory other users can write (the temporary directory), so
    a link there is refused and the directory is made 0700 (someone else may have created it first).
    """
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path) if shared_parent else os.stat(path)
    except FileExistsError:
        return f"the cache directory {path} is not a directory (a file is there)"
    except OSError as e:
        return f"cannot create the cache directory {path}: {e.strerror}"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return f"the cache directory {path} is not a directory (a link or a file is there)"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"the cache directory {path} belongs to another user (uid {st.st_uid}); not using it"
    if shared_parent and stat.S_IMODE(st.st_mode) & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as e:
            return f"cannot make the cache directory {path} private: {e.strerror}"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"the cache directory {path} is not writable"
    return None


def _dumps(value: Any) -> bytes:
    """Compact JSON; a NaN or Inf (producers must not send one) would become null, never a NaN token.
    Strings that are not valid Unicode (lone surrogates from odd trace names) are written escaped."""
    try:
        return msgspec.json.encode(value)
    except UnicodeEncodeError:
        return json.dumps(value, allow_nan=False, separators=(",", ":")).encode("ascii")


class ResultCache:
    """Validated JSON results per trace file version, on disk or (when the disk cannot be used) in memory."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *, logdir: str | None = None) -> None:
        path = Path(root).expanduser() if root is not None else default_dir()
        self.note: str | None = None
        shared = False
        if logdir and _inside(path, Path(logdir)):
            fallback = fallback_dir()
            self.note = f"the cache directory {path} is inside the logdir; using {fallback}"
            logger.warning("llm_diag: %s", self.note)
            path = fallback
            shared = True
        self.root: Path | None = path / f"v{CACHE_LAYOUT}"
        self.error: str | None = prepare_dir(path, shared_parent=shared)
        if self.error is None:
            self.error = prepare_dir(self.root)
        if self.error is not None:
            logger.warning("llm_diag: %s; results are kept in memory", self.error)
            self.root = None
        self._memory: OrderedDict[tuple[str, str], tuple[Any, bytes]] = OrderedDict()
        self._arrays: OrderedDict[tuple[str, str], dict[str, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def state(self) -> dict[str, Any]:
        """What ``/runs`` shows: where results go, and why not to disk when they cannot."""
        return {
            "dir": None if self.root is None else str(self.root),
            "writable": self.error is None,
            "error": None
            if self.error is None
            else f"{self.error}; results are kept in memory until TensorBoard stops (analysed again after a restart)",
        }

    @staticmethod
    def key(tf: TraceFile) -> str:
        """The entry key of one file version: its path (an object's URL as it is), size, mtime and, for objects,
        its version (the ETag or generation: ``TraceFile.version``), with the package and engine versions and the
        layout."""
        where = tf.path if tf.is_object else os.path.abspath(tf.path)
        ident = json.dumps(
            [
                where,
                int(tf.size_bytes),
                int(tf.mtime_ns),
                tb_llmdiag.__version__,
                list(api.ENGINE_VERSION),
                CACHE_LAYOUT,
            ]
            + ([tf.version] if tf.version else [])
        )
        return hashlib.sha256(ident.encode("utf-8")).hexdigest()[:40]

    def _path(self, root: Path, key: str, what: str) -> Path:
        return root / key[:2] / f"{key}.{what}.json"

    # -- reading
    def get(self, key: str, what: str, expect: Mapping[str, Any] | None = None) -> Any | None:
        """The stored value if it is present and valid (header, schema, and the fields in ``expect``,
        e.g. the report's run names and path), else None."""
        found = self._get(key, what, expect)
        return None if found is None else found[0]

    def get_bytes(self, key: str, what: str, expect: Mapping[str, Any] | None = None) -> bytes | None:
        """The valid value as JSON bytes, for routes that answer with it."""
        found = self._get(key, what, expect)
        return None if found is None else found[1]

    def _get(self, key: str, what: str, expect: Mapping[str, Any] | None) -> tuple[Any, bytes] | None:
        with self._lock:
            found = self._memory.get((key, what))
            if found is not None:
                self._memory.move_to_end((key, what))
        if found is None and self.root is not None:
            found = self._read(self._path(self.root, key, what), key, what)
        if found is not None and expect and any(found[0].get(k) != v for k, v in expect.items()):
            logger.warning("llm_diag: ignoring cache entry %s.%s: written for another file or name", key, what)
            return None
        return found

    def get_arrays(self, key: str, what: str) -> dict[str, np.ndarray] | None:
        """A binary entry's arrays (``tab/arrays.py``: header checked, memory-mapped from a private copy that no
        other process can cut short under us), else None."""
        with self._lock:
            found = self._arrays.get((key, what))
            if found is not None:
                self._arrays.move_to_end((key, what))
                return found
        if self.root is None:
            return None
        return array_file.read(arrays_path(self.root, key, what), CACHE_LAYOUT, key, what, private=True)

    def _read(self, p: Path, key: str, what: str) -> tuple[Any, bytes] | None:
        try:
            with open(p, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            logger.warning("llm_diag: ignoring unreadable cache entry %s: %s", p, e)
            return None
        head, _, body = data.partition(b"\n")
        try:
            header = json.loads(head)
            value = msgspec.json.decode(body) if isinstance(header, dict) and header.get("bytes") == len(body) else None
        except (ValueError, RecursionError, msgspec.DecodeError) as e:
            logger.warning("llm_diag: ignoring unreadable cache entry %s: %s", p, e)
            return None
        problem = self._problem(header, value, key, what)
        if problem is not None:
            logger.warning("llm_diag: ignoring cache entry %s: %s", p, problem)
            return None
        return value, body

    @staticmethod
    def _problem(header: Any, value: Any, key: str, what: str) -> str | None:
        if not isinstance(header, dict) or set(header) != {"layout", "key", "what", "bytes"}:
            return "no cache header"
        if header["layout"] != CACHE_LAYOUT or header["key"] != key or header["what"] != what:
            return "written for another entry or layout"
        if value is None:
            return "cut short or padded (its length is not the header's)"
        kind = "timeline" if what.startswith("timeline.") else what
        check = VALIDATORS.get(kind)
        if check is None:
            return f"unknown entry {what!r}"
        return check(value)

    # -- writing (the TensorBoard process only)
    def store(self, key: str, result: dict[str, Any]) -> None:
        """Keep one analysis result (``api.Analysed.tab_result``'s shape). Never raises for disk trouble:
        on the first failure the cache turns to memory and ``error`` says why."""
        timelines = list(result.get("timelines") or [])
        index = [
            {
                "ordinal": i,
                "index": int(tl["step"]["index"]),
                "name": tl["step"].get("name"),
                "duration_ns": int(tl["step"]["duration_ns"]),
            }
            for i, tl in enumerate(timelines)
        ]
        entries: list[tuple[str, Any]] = [(f"timeline.{i}", tl) for i, tl in enumerate(timelines)]
        entries += [
            ("timelines", index),
            ("steps", result.get("steps") or {"steps": []}),
            ("rank_summary", result.get("rank_summary") or {"summary": None}),
        ]
        tv = result.get("traceview")
        if tv is not None:
            entries.append(("traceview", tv["meta"]))
        entries.append(("report", result["report"]))  # the report last: its presence means "ready"
        spilled = Path(tv["file"]) if tv is not None and tv.get("file") else None  # streamed there by the worker
        if self.root is not None:
            try:
                if spilled is not None:
                    target = arrays_path(self.root, key)
                    os.replace(spilled, target)
                    spilled = target
                elif tv is not None:
                    array_file.write(arrays_path(self.root, key), CACHE_LAYOUT, key, "traceview.bin", tv["arrays"])
                for what, value in entries:
                    self._write(self.root, key, what, value)
                for stale in (self.root / key[:2]).glob(f".{key}.*.tmp"):  # an earlier try's worker died writing
                    with contextlib.suppress(OSError):
                        stale.unlink()
                return
            except OSError as e:
                self.error = f"cannot write the cache directory {self.root}: {e.strerror or e}"
                logger.warning("llm_diag: %s; results are kept in memory from now on", self.error)
                self.root = None
        arrays = tv["arrays"] if tv is not None and spilled is None else _take(spilled, key)
        with self._lock:
            if arrays is not None:
                self._arrays[(key, "traceview.bin")] = dict(arrays)
                while len(self._arrays) > MEMORY_ARRAY_ENTRIES:
                    self._arrays.popitem(last=False)
            for what, value in entries:
                self._memory[(key, what)] = (value, _dumps(value))
                self._memory.move_to_end((key, what))
            reports = [k for k in self._memory if k[1] == "report"]
            for old_key, _ in reports[: max(0, len(reports) - MEMORY_ENTRIES)]:
                for k in [k for k in self._memory if k[0] == old_key]:
                    del self._memory[k]

    def _write(self, root: Path, key: str, what: str, value: Any) -> None:
        body = _dumps(value)
        head = json.dumps({"layout": CACHE_LAYOUT, "key": key, "what": what, "bytes": len(body)})
        data = head.encode("utf-8") + b"\n" + body
        array_file.atomic_write(self._path(root, key, what), key, lambda f: f.write(data))


def _take(spilled: Path | None, key: str) -> dict[str, np.ndarray] | None:
    """A worker's streamed arrays read into memory (the cache turned to memory meanwhile), the file removed."""
    if spilled is None:
        return None
    found = array_file.read(spilled, CACHE_LAYOUT, key, "traceview.bin")
    arrays = {k: np.array(v) for k, v in found.items()} if found is not None else None
    with contextlib.suppress(OSError):
        os.unlink(spilled)
    return arrays
