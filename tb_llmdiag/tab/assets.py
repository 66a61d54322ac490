"""The tab's static files: one route per file of ``frontend/``, bound at registration.

No path ever comes from a request: the route table lists the files found at start-up, so ``..``, encoded
slashes and absolute paths are simply not routes (404). Text assets are gzip-compressed once per content.
"""

from __future__ import annotations

import gzip
import mimetypes
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tensorboard.backend import http_util
from werkzeug import wrappers

#: The iframe's own policy is TensorBoard's; our assets repeat a compatible one (nothing but 'self',
#: plus Perfetto's UI, which TensorBoard's frame policy allows).
CSP = (
    "default-src 'self'; frame-src 'self' https://ui.perfetto.dev; img-src 'self' data: blob:; "
    "object-src 'none'; style-src 'self' 'unsafe-inline'; connect-src 'self'; script-src 'self'"
)

_CONTENT_TYPES = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".css": "text/css",
    ".html": "text/html",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    "": "text/plain",
    ".md": "text/plain",
}


def frontend_dir() -> Path:
    here = Path(__file__).resolve().parent.parent
    for cand in (here / "frontend", here.parent / "frontend"):  # installed wheel, then source checkout
        if (cand / "index.js").is_file():
            return cand
    return here / "frontend"


def asset_paths(root: Path) -> Iterable[str]:
    if not root.is_dir():
        return []
    return [
        p.relative_to(root).as_posix()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".test.mjs") and "node_modules" not in p.parts
    ]


class Assets:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or frontend_dir()
        self._gz: dict[str, tuple[int, int, bytes]] = {}
        self._lock = threading.Lock()

    def apps(self) -> dict[str, Callable[..., Any]]:
        return {"/" + rel: self._app(rel) for rel in asset_paths(self.root)}

    def _gzipped(self, rel: str, data: bytes) -> bytes:
        """Compressed once per content, not per request (uPlot is 145 KB)."""
        with self._lock:
            cached = self._gz.get(rel)
        if cached is None or cached[0] != len(data) or cached[1] != hash(data):
            cached = (len(data), hash(data), gzip.compress(data, compresslevel=6, mtime=0))
            with self._lock:
                self._gz[rel] = cached
        return cached[2]

    def _app(self, rel: str) -> Callable[..., Any]:
        p = self.root / rel
        ctype = _CONTENT_TYPES.get(p.suffix) or mimetypes.guess_type(p.name)[0] or "application/octet-stream"

        @wrappers.Request.application
        def serve(request: wrappers.Request) -> wrappers.Response:
            headers = [("Content-Security-Policy", CSP)]
            try:
                data = p.read_bytes()
            except OSError:
                return http_util.Respond(request, "not found", "text/plain", code=404)
            if "gzip" in request.headers.get("Accept-Encoding", "") and ctype.startswith("text/"):
                return http_util.Respond(
                    request, self._gzipped(rel, data), ctype, content_encoding="gzip", headers=headers
                )
            return http_util.Respond(request, data, ctype, headers=headers)

        return serve
