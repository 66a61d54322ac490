"""The LLM Diag tab: a TensorBoard dynamic plugin over the library (routes in docs/http_api.md).

Contract:
- Thin routes: parse args, look names up in the discovered index (request strings are never joined into
  paths), answer from the on-disk cache (``tb_llmdiag.cache``) or with the run's status at once.
- ``is_active()`` answers a cached flag kept by a background scan thread, started lazily on first use;
  the scan re-runs ``discover`` every ``scan_interval_s`` so new or rewritten traces are picked up and
  analysed without a restart.
- Analyses (parse -> report -> step timelines) run off the request thread on a bounded pool (2 worker
  processes by default, so a big parse never holds the GIL of the TensorBoard server); a run the user
  asks for jumps the queue. Results go to the cache keyed by file identity and engine versions.
- The plugin instance owns the only mutable state (the registry below) behind one lock.
"""

from __future__ import annotations

import gzip
import heapq
import itertools
import logging
import mimetypes
import os
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from werkzeug import wrappers, wsgi

from tensorboard import errors as tb_errors
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin

from tb_llmdiag import timeline as timeline_mod
from tb_llmdiag.cache import ResultCache

logger = logging.getLogger(__name__)

PLUGIN_NAME = "llm_diag"
TAB_NAME = "LLM Diag"
SCAN_INTERVAL_S = 10.0
WORKERS = 2
#: The iframe's own policy is TensorBoard's; our assets repeat a compatible one (nothing but 'self',
#: plus Perfetto's UI, which TensorBoard's frame policy allows).
CSP = ("default-src 'self'; frame-src 'self' https://ui.perfetto.dev; img-src 'self' data: blob:; "
       "object-src 'none'; style-src 'self' 'unsafe-inline'; connect-src 'self'; script-src 'self'")

_CONTENT_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
                  ".html": "text/html", ".json": "application/json", ".svg": "image/svg+xml",
                  ".png": "image/png", "": "text/plain", ".md": "text/plain"}

Key = tuple[str, str, str]


def _frontend_dir() -> Path:
    here = Path(__file__).resolve().parent
    for cand in (here / "frontend", here.parent / "frontend"):  # installed wheel, then source checkout
        if (cand / "index.js").is_file():
            return cand
    return here / "frontend"


# ---------------------------------------------------------------------------------------------------
# The analysis job (module level so a worker process can import it)


def analyse_to_cache(tf: Any, cache_root: str, cache_key: str) -> dict[str, Any]:
    """Parse one trace once, write its report and step timelines to the cache; return its status.

    Runs in a worker process or thread. User errors (bad files) become an error report and are cached
    like any result; bugs raise and are not cached, so a fixed version retries.
    """
    from tb_llmdiag import api, errors, ingest

    cache = ResultCache(cache_root)
    cache.set_progress(cache_key, "reading")
    timelines: list[Any] = []
    breakdown: list[Any] = []
    try:
        trace = ingest.load_trace(tf.path)
    except errors.LlmDiagError as e:
        report = api.error_report(tf, str(e))
    except MemoryError:
        report = api.error_report(tf, "out of memory while reading the trace; profile fewer steps")
    else:
        cache.set_progress(cache_key, "analysing")
        report, analysis = api.analyze_trace_with_breakdown(tf, trace)
        cache.set_progress(cache_key, "timeline")
        if report.get("status") == "ok":
            timelines, breakdown = timeline_mod.build(trace, analysis.breakdown)
    index = []
    for i, tl in enumerate(timelines):
        cache.put(cache_key, f"timeline.{i}", tl)
        st = tl["step"]
        index.append({"ordinal": i, "index": st["index"], "name": st.get("name"), "duration_ns": st["duration_ns"]})
    cache.put(cache_key, "timelines", index)
    cache.put(cache_key, "steps", {"steps": breakdown})
    cache.put(cache_key, "report", report)  # written last: its presence means "ready"
    cache.clear_progress(cache_key)
    return {"status": report.get("status"), "error": report.get("error")}


# ---------------------------------------------------------------------------------------------------
# Registry: the discovered index, per-file status, the work queue


@dataclass
class _Entry:
    tf: Any  # ingest.discover.TraceFile
    cache_key: str
    status: str = "pending"  # pending | analysing | ready | error
    error: str | None = None
    report_status: str | None = None  # "ok" | "error" once ready
    started_s: float | None = None


class _Registry:
    def __init__(self, logdir: str, cache: ResultCache, *, scan_interval_s: float, workers: int,
                 processes: bool, discover: Callable[[str], Any] | None = None) -> None:
        self.logdir = logdir
        self.cache = cache
        self.scan_interval_s = scan_interval_s
        self._discover = discover
        self.lock = threading.Lock()
        self.entries: dict[Key, _Entry] = {}
        self.warnings: tuple[str, ...] = ()
        self.scan_error: str | None = None
        self.active = False
        self.first_scan = threading.Event()
        self._stop = threading.Event()
        self._wake = threading.Condition(self.lock)
        self._queue: list[tuple[int, int, Key, str]] = []
        self._seq = itertools.count()
        self._workers = workers
        self._processes = processes
        self._executor: Executor | None = None

    # -- lifecycle
    def start(self) -> None:
        threading.Thread(target=self._scan_loop, name="llmdiag-scan", daemon=True).start()
        for i in range(self._workers):
            threading.Thread(target=self._work_loop, name=f"llmdiag-work-{i}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    # -- scanning
    def _scan_loop(self) -> None:
        while not self._stop.is_set():
            self.scan()
            self.first_scan.set()
            self._stop.wait(self.scan_interval_s)

    def scan(self) -> None:
        if not self.logdir:
            with self.lock:
                self.scan_error = "TensorBoard was started without --logdir"
                self.active = False
            return
        try:
            discover = self._discover
            if discover is None:
                from tb_llmdiag.ingest.discover import discover
            index = discover(self.logdir)
        except Exception as e:  # a vanished or unreadable logdir must not kill the scan thread
            logger.warning("llm_diag: scanning %s failed: %s", self.logdir, e)
            with self.lock:
                self.scan_error = f"scanning the logdir failed: {e}"
            return
        fresh: list[tuple[Key, _Entry]] = []
        for tf in index.files:
            ck = self.cache.key(tf.path, tf.size_bytes, tf.mtime_ns, timeline_mod.TIMELINE_VERSION)
            with self.lock:
                old = self.entries.get(tf.key)
                if old is not None and old.cache_key == ck:
                    old.tf = tf
                    continue
            entry = _Entry(tf=tf, cache_key=ck)
            self._load_cached_status(entry)
            fresh.append((tf.key, entry))
        with self.lock:
            keys = {tf.key for tf in index.files}
            for k in [k for k in self.entries if k not in keys]:
                del self.entries[k]
            for k, entry in fresh:
                self.entries[k] = entry
                if entry.status == "pending":
                    self._enqueue_locked(k, entry.cache_key, priority=1)
            self.warnings = tuple(index.warnings)
            self.scan_error = None
            self.active = bool(self.entries)

    def _load_cached_status(self, entry: _Entry) -> None:
        rep = self.cache.get(entry.cache_key, "report")
        if isinstance(rep, dict):
            entry.status = "ready"
            entry.report_status = rep.get("status")
            entry.error = rep.get("error")

    # -- work queue
    def _enqueue_locked(self, key: Key, ck: str, priority: int) -> None:
        heapq.heappush(self._queue, (priority, next(self._seq), key, ck))
        self._wake.notify()

    def prioritise(self, key: Key) -> None:
        with self.lock:
            e = self.entries.get(key)
            if e is not None and e.status == "pending":
                self._enqueue_locked(key, e.cache_key, priority=0)

    def requeue(self, key: Key, e: _Entry) -> None:
        """Analyse a ready run again, first in line (its cache entries vanished)."""
        with self.lock:
            e.status = "pending"
            self._enqueue_locked(key, e.cache_key, priority=0)

    def queue_position(self, key: Key) -> int | None:
        with self.lock:
            pending = sorted(q for q in self._queue if self.entries.get(q[2]) and self.entries[q[2]].status == "pending")
            seen: set[Key] = set()
            for item in pending:
                if item[2] in seen:
                    continue
                seen.add(item[2])
                if item[2] == key:
                    return len(seen) - 1
        return None

    def _executor_get(self) -> Executor:
        with self.lock:
            if self._executor is None:
                self._executor = self._make_executor()
            return self._executor

    def _make_executor(self) -> Executor:
        if self._processes:
            import multiprocessing

            try:
                kw: dict[str, Any] = {"mp_context": multiprocessing.get_context("spawn")}
                try:
                    return ProcessPoolExecutor(max_workers=self._workers, max_tasks_per_child=8, **kw)
                except TypeError:  # Python < 3.11
                    return ProcessPoolExecutor(max_workers=self._workers, **kw)
            except (OSError, ValueError, NotImplementedError) as e:
                logger.warning("llm_diag: no worker processes (%s); analysing in threads", e)
        return ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="llmdiag-analyse")

    def _work_loop(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._stop.is_set():
                    self._wake.wait()
                if self._stop.is_set():
                    return
                _, _, key, ck = heapq.heappop(self._queue)
                entry = self.entries.get(key)
                if entry is None or entry.cache_key != ck or entry.status != "pending":
                    continue  # a duplicate, a stale version or already done
                entry.status = "analysing"
                entry.started_s = time.monotonic()
                tf = entry.tf
            self._run(key, entry, tf, ck)

    def _run(self, key: Key, entry: _Entry, tf: Any, ck: str) -> None:
        try:
            fut = self._executor_get().submit(analyse_to_cache, tf, str(self.cache.root.parent), ck)
            result = fut.result()
        except BrokenProcessPool as e:
            with self.lock:
                self._executor = None
            self._finish(entry, ck, "error", None, f"the analysis process died ({e}); the trace may be too big for memory")
        except Exception as e:
            logger.exception("llm_diag: analysing %s failed", tf.path)
            self._finish(entry, ck, "error", None, f"analysis failed: {type(e).__name__}: {e} (see the TensorBoard log)")
        else:
            self._finish(entry, ck, "ready", result.get("status"), result.get("error"))
        finally:
            self.cache.clear_progress(ck)

    def _finish(self, entry: _Entry, ck: str, status: str, report_status: str | None, error: str | None) -> None:
        with self.lock:
            if entry.cache_key != ck:
                return
            entry.status, entry.report_status, entry.error = status, report_status, error

    # -- views
    def lookup(self, key: Key) -> _Entry | None:
        with self.lock:
            return self.entries.get(key)

    def snapshot(self) -> list[tuple[Key, _Entry]]:
        with self.lock:
            return sorted(self.entries.items(), key=lambda kv: kv[0])


# ---------------------------------------------------------------------------------------------------
# The plugin


def _run_status(e: _Entry) -> tuple[str, str | None]:
    """The status the tab shows: pending / analysing / ready / error (+ message)."""
    if e.status == "ready":
        return ("error", e.error) if e.report_status == "error" else ("ready", None)
    return e.status, e.error


class LlmDiagPlugin(base_plugin.TBPlugin):
    """TensorBoard plugin serving the LLM Diag tab."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext, *, cache_dir: str | None = None,
                 scan_interval_s: float | None = None, workers: int | None = None,
                 processes: bool | None = None, discover: Callable[[str], Any] | None = None) -> None:
        self._context = context
        self._logdir = os.path.expanduser(context.logdir) if getattr(context, "logdir", None) else ""
        self._cache_dir = cache_dir
        self._scan_interval_s = SCAN_INTERVAL_S if scan_interval_s is None else scan_interval_s
        self._workers = workers or int(os.environ.get("LLMDIAG_WORKERS", WORKERS))
        if processes is None:
            processes = os.environ.get("LLMDIAG_INPROCESS", "") not in ("1", "true")
        self._processes = processes
        self._discover = discover
        self._registry: _Registry | None = None
        self._registry_lock = threading.Lock()
        self._assets_dir = _frontend_dir()
        self._gz_assets: dict[str, tuple[int, int, bytes]] = {}

    # -- TBPlugin API
    def _reg(self) -> _Registry:
        with self._registry_lock:
            if self._registry is None:
                cache = ResultCache(self._cache_dir, logdir=self._logdir or None)
                self._registry = _Registry(self._logdir, cache, scan_interval_s=self._scan_interval_s,
                                           workers=self._workers, processes=self._processes,
                                           discover=self._discover)
                self._registry.start()
            return self._registry

    def is_active(self) -> bool:
        reg = self._reg()
        # The first listing waits briefly for the first (cheap) scan so the tab shows up on first load.
        reg.first_scan.wait(timeout=2.0)
        return reg.active

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name=TAB_NAME, disable_reload=True)

    def get_plugin_apps(self) -> dict[str, Callable[..., Any]]:
        apps: dict[str, Callable[..., Any]] = {
            "/runs": self._serve_runs,
            "/report": self._serve_report,
            "/timeline": self._serve_timeline,
            "/steps": self._serve_steps,
            "/trace": self._serve_trace,
        }
        for rel in self._asset_paths():
            apps["/" + rel] = self._asset_app(rel)
        return apps

    def close(self) -> None:
        """Stops the background threads (tests; TensorBoard never calls it)."""
        if self._registry is not None:
            self._registry.stop()

    # -- helpers
    def _asset_paths(self) -> Iterable[str]:
        root = self._assets_dir
        if not root.is_dir():
            return []
        out = []
        for p in sorted(root.rglob("*")):
            if p.is_file() and not p.name.endswith(".test.mjs") and "node_modules" not in p.parts:
                out.append(p.relative_to(root).as_posix())
        return out

    def _key_from(self, request: wrappers.Request) -> tuple[Key, _Entry]:
        names = []
        for arg in ("run", "worker", "span"):
            v = request.args.get(arg)
            if v is None or v == "":
                raise tb_errors.InvalidArgumentError(f"missing query parameter '{arg}'")
            if len(v) > 1024 or "\x00" in v:
                raise tb_errors.InvalidArgumentError(f"bad value for '{arg}'")
            names.append(v)
        key = (names[0], names[1], names[2])
        reg = self._reg()
        reg.first_scan.wait(timeout=2.0)
        entry = reg.lookup(key)
        if entry is None:
            raise tb_errors.NotFoundError(f"no trace for run={key[0]!r} worker={key[1]!r} span={key[2]!r}")
        return key, entry

    def _status_payload(self, key: Key, e: _Entry) -> dict[str, Any]:
        status, error = _run_status(e)
        out: dict[str, Any] = {"run": key[0], "worker": key[1], "span": key[2], "status": status, "error": error,
                               "size_bytes": e.tf.size_bytes}
        if e.status == "analysing":
            out["phase"] = self._reg().cache.progress(e.cache_key) or "starting"
            out["elapsed_s"] = round(time.monotonic() - (e.started_s or time.monotonic()), 1)
        elif e.status == "pending":
            out["queue_position"] = self._reg().queue_position(key)
        return out

    @staticmethod
    def _json(request: wrappers.Request, content: Any, code: int = 200) -> wrappers.Response:
        return http_util.Respond(request, content, "application/json", code=code)

    # -- routes
    @wrappers.Request.application
    def _serve_runs(self, request: wrappers.Request) -> wrappers.Response:
        reg = self._reg()
        reg.first_scan.wait(timeout=2.0)
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for key, e in reg.snapshot():
            status, error = _run_status(e)
            runs.setdefault(key[0], {}).setdefault(key[1], []).append({
                "span": key[2], "source_kind": e.tf.source_kind, "status": status, "error": error,
                "size_bytes": e.tf.size_bytes, "rank": e.tf.rank,
            })
        order = {"error": 0, "analysing": 1, "pending": 2, "ready": 3}
        out_runs = []
        for run, workers in runs.items():
            spans = [s for ws in workers.values() for s in ws]
            worst = min((s["status"] for s in spans), key=lambda st: order[st])
            # A run is "ready" only when every span is; one error shows but does not hide the others.
            agg = "analysing" if any(s["status"] in ("analysing", "pending") for s in spans) else worst
            out_runs.append({
                "run": run, "status": agg,
                "error": next((s["error"] for s in spans if s["error"]), None),
                "workers": [{"worker": w, "spans": ws} for w, ws in workers.items()],
            })
        plugins = getattr(self._context, "plugin_name_to_instance", None) or {}
        with reg.lock:
            body = {
                "logdir": self._logdir, "scanned": reg.first_scan.is_set(), "scan_error": reg.scan_error,
                "warnings": list(reg.warnings), "runs": out_runs,
                "trace_viewers": {"pytorch_profiler": "pytorch_profiler" in plugins,
                                  "profile": "profile" in plugins},
            }
        return self._json(request, body)

    @wrappers.Request.application
    def _serve_report(self, request: wrappers.Request) -> wrappers.Response:
        return self._guard(request, lambda r: self._cached(r, "report"))

    @wrappers.Request.application
    def _serve_steps(self, request: wrappers.Request) -> wrappers.Response:
        return self._guard(request, lambda r: self._cached(r, "steps"))

    @wrappers.Request.application
    def _serve_timeline(self, request: wrappers.Request) -> wrappers.Response:
        return self._guard(request, lambda r: self._cached(r, "timeline"))

    def _cached(self, request: wrappers.Request, what: str) -> wrappers.Response:
        """A ready run's cached JSON, passed through untouched; else its status (202), the run queued first."""
        key, e = self._key_from(request)
        step = self._step_arg(request) if what == "timeline" else None
        reg = self._reg()
        if e.status != "ready":
            reg.prioritise(key)
            return self._json(request, self._status_payload(key, e), code=202)
        name = self._timeline_entry(e, step) if what == "timeline" else what
        raw = None if name is None else reg.cache.get_raw(e.cache_key, name)
        if raw is None:  # the cache was wiped under us: analyse again
            reg.requeue(key, e)
            return self._json(request, self._status_payload(key, e), code=202)
        return http_util.Respond(request, raw, "application/json")

    @staticmethod
    def _step_arg(request: wrappers.Request) -> int | None:
        step_arg = request.args.get("step")
        if step_arg in (None, ""):
            return None
        try:
            return int(step_arg)
        except ValueError:
            raise tb_errors.InvalidArgumentError("'step' must be an integer step index") from None

    def _timeline_entry(self, e: _Entry, step: int | None) -> str | None:
        """The cache entry of the asked step's timeline (default: the median-duration step); None if the index is gone."""
        index = self._reg().cache.get(e.cache_key, "timelines")
        if not isinstance(index, list):
            return None
        if not index:
            raise tb_errors.NotFoundError("this trace has no timeline (no device or host activity was read)")
        if step is None:  # the step whose duration is the median: the representative one
            by_dur = sorted(index, key=lambda r: r["duration_ns"])
            chosen = by_dur[(len(by_dur) - 1) // 2]
        else:
            chosen = next((r for r in index if r["index"] == step), None)
            if chosen is None:
                raise tb_errors.NotFoundError(f"no step {step} in this trace")
        return f"timeline.{int(chosen['ordinal'])}"

    @wrappers.Request.application
    def _serve_trace(self, request: wrappers.Request) -> wrappers.Response:
        return self._guard(request, self._trace_impl)

    def _trace_impl(self, request: wrappers.Request) -> wrappers.Response:
        _, e = self._key_from(request)
        path = e.tf.path  # from the index, never from the request
        try:
            f = open(path, "rb")
            size = os.fstat(f.fileno()).st_size
        except OSError as err:
            raise tb_errors.NotFoundError(f"the trace file is gone: {err.strerror}") from None
        name = os.path.basename(path)
        ctype = "application/gzip" if name.endswith(".gz") else (
            "application/json" if name.endswith(".json") else "application/octet-stream")
        safe = "".join(c if (c.isalnum() or c in "._-") else "_" for c in name) or "trace"
        headers = [("Content-Length", str(size)), ("X-Content-Type-Options", "nosniff"),
                   ("Content-Disposition", f'attachment; filename="{safe}"'), ("Cache-Control", "no-cache")]
        return wrappers.Response(wsgi.wrap_file(request.environ, f), headers=headers, content_type=ctype,
                                 direct_passthrough=True)

    def _asset_app(self, rel: str) -> Callable[..., Any]:
        """A route for one file of frontend/, bound at registration: no path comes from the request."""
        p = self._assets_dir / rel
        ctype = _CONTENT_TYPES.get(p.suffix) or mimetypes.guess_type(p.name)[0] or "application/octet-stream"

        @wrappers.Request.application
        def serve(request: wrappers.Request) -> wrappers.Response:
            headers = [("Content-Security-Policy", CSP)]
            try:
                data = p.read_bytes()
            except OSError:
                return http_util.Respond(request, "not found", "text/plain", code=404)
            if "gzip" in request.headers.get("Accept-Encoding", "") and ctype.startswith("text/"):
                # compressed once per content, not per request (uPlot is 145 KB)
                cached = self._gz_assets.get(rel)
                if cached is None or cached[0] != len(data) or cached[1] != hash(data):
                    cached = (len(data), hash(data), gzip.compress(data, compresslevel=6, mtime=0))
                    self._gz_assets[rel] = cached
                return http_util.Respond(request, cached[2], ctype, content_encoding="gzip", headers=headers)
            return http_util.Respond(request, data, ctype, headers=headers)

        return serve

    def _guard(self, request: wrappers.Request, impl: Callable[[wrappers.Request], wrappers.Response]) -> wrappers.Response:
        """TensorBoard's public errors as JSON bodies the tab can show ({"error": message})."""
        try:
            return impl(request)
        except tb_errors.PublicError as e:
            return self._json(request, {"error": str(e)}, code=e.http_code)
