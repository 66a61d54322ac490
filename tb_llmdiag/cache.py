"""On-disk cache of analysis results (report + step timelines) for the TensorBoard tab.

Contract:
- Entries are keyed by ``(abs path, size_bytes, mtime_ns, model.MODEL_VERSION, report schema,
  timeline.TIMELINE_VERSION)``: a file that changes, or a new engine version, is a miss; nothing is
  ever invalidated by hand.
- The cache lives under ``$LLMDIAG_CACHE_DIR`` or ``~/.cache/tb_llmdiag`` and never inside the logdir
  being served (a directory inside it is refused for a temporary one, with a warning).
- Writes are atomic (temp file + ``os.replace``), so concurrent writers (TensorBoard's worker
  processes) and readers never see half a file. A corrupt entry reads as a miss.
- JSON is written without NaN/Inf (``allow_nan=False``): producers must use null.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from tb_llmdiag import model

logger = logging.getLogger(__name__)

#: Version of the on-disk layout of this module.
CACHE_LAYOUT = 1


def default_dir() -> Path:
    env = os.environ.get("LLMDIAG_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tb_llmdiag"


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False


class ResultCache:
    """Report and timeline JSON per trace file version. Thread- and process-safe by atomic renames."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *, logdir: str | None = None) -> None:
        path = Path(root) if root is not None else default_dir()
        if logdir and _inside(path, Path(logdir)):
            fallback = Path(tempfile.gettempdir()) / "tb_llmdiag_cache"
            logger.warning("cache dir %s is inside the logdir %s; using %s instead", path, logdir, fallback)
            path = fallback
        self.root = path / f"v{CACHE_LAYOUT}"

    @staticmethod
    def key(abs_path: str, size_bytes: int, mtime_ns: int, timeline_version: int) -> str:
        from tb_llmdiag.api import REPORT_SCHEMA  # lazily: the whole engine, not needed to start TensorBoard

        ident = json.dumps(
            [os.path.abspath(abs_path), int(size_bytes), int(mtime_ns), model.MODEL_VERSION,
             REPORT_SCHEMA, int(timeline_version)]
        )
        return hashlib.sha256(ident.encode("utf-8")).hexdigest()[:40]

    def _path(self, key: str, what: str) -> Path:
        return self.root / key[:2] / f"{key}.{what}.json"

    def get(self, key: str, what: str) -> Any | None:
        """The stored JSON value, or None on a miss or an unreadable entry."""
        p = self._path(key, what)
        try:
            with open(p, "rb") as f:
                return json.loads(f.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            logger.warning("ignoring unreadable cache entry %s: %s", p, e)
            return None

    def get_raw(self, key: str, what: str) -> bytes | None:
        """The stored bytes (already JSON), for routes that pass them through untouched."""
        try:
            with open(self._path(key, what), "rb") as f:
                return f.read()
        except OSError:
            return None

    def put(self, key: str, what: str, value: Any) -> None:
        data = json.dumps(value, allow_nan=False, separators=(",", ":")).encode("utf-8")
        p = self._path(key, what)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, p)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    # Progress notes are tiny files a worker process rewrites as it goes; the plugin reads them.
    def set_progress(self, key: str, phase: str) -> None:
        try:
            self.put(key, "progress", {"phase": phase})
        except OSError:
            pass

    def progress(self, key: str) -> str | None:
        v = self.get(key, "progress")
        return v.get("phase") if isinstance(v, dict) else None

    def clear_progress(self, key: str) -> None:
        try:
            os.unlink(self._path(key, "progress"))
        except OSError:
            pass
