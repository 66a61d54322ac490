"""The LLM Diag tab: a TensorBoard dynamic plugin over the library (routes in docs/http_api.md).

Contract:
- The composition root: builds the cache, the executor (the one given, else the Dask cluster named by
  ``LLMDIAG_DASK`` = ``tcp://host:8786`` | ``local[:N]``, else ``LLMDIAG_WORKERS`` spawned processes, or
  threads with ``LLMDIAG_INPROCESS=1``) with the way its tasks' phases come back (a cluster: its progress queue
  and task sink), the catalog and its scan thread, at construction.
- ``is_active()`` reads the catalog's flag: it never blocks (the first scan runs in the background from
  start-up, long before a browser asks).
- Routes are thin: parse the request, call a ``routes.*_impl``, write its ``Answer``. TensorBoard's
  ``PublicError``s become JSON ``{"error": one line}`` with their status.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tensorboard import errors as tb_errors
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers, wsgi

from tb_llmdiag import api
from tb_llmdiag.errors import LlmDiagError
from tb_llmdiag.tab import routes
from tb_llmdiag.tab.analysis_queue import process_pool
from tb_llmdiag.tab.assets import Assets
from tb_llmdiag.tab.cache import ResultCache
from tb_llmdiag.tab.catalog import Catalog
from tb_llmdiag.tab.traceviews import TraceViews

if TYPE_CHECKING:
    from tb_llmdiag.ingest.discover import Index

logger = logging.getLogger(__name__)

PLUGIN_NAME = "llm_diag"
TAB_NAME = "LLM Diag"
SCAN_INTERVAL_S = 10.0
WORKERS = 2
#: How long a data route waits for the very first scan (is_active never waits).
FIRST_SCAN_WAIT_S = 2.0


def _wsgi(route: Callable[[wrappers.Request], wrappers.Response]) -> Callable[..., Any]:
    """A WSGI app answering every request with ``route(request)``."""

    @wrappers.Request.application
    def app(request: wrappers.Request) -> wrappers.Response:
        return route(request)

    return app


class LlmDiagPlugin(base_plugin.TBPlugin):
    """TensorBoard plugin serving the LLM Diag tab."""

    plugin_name = PLUGIN_NAME

    def __init__(
        self,
        context: base_plugin.TBContext,
        *,
        cache_dir: str | None = None,
        scan_interval_s: float | None = None,
        workers: int | None = None,
        processes: bool | None = None,
        executor: Executor | None = None,
        discover: Callable[[str], Index] | None = None,
    ) -> None:
        self._context = context
        self._logdir = os.path.expanduser(context.logdir) if getattr(context, "logdir", None) else ""
        n = workers or int(os.environ.get("LLMDIAG_WORKERS", WORKERS))
        if processes is None:
            processes = os.environ.get("LLMDIAG_INPROCESS", "") not in ("1", "true")
        progress_queue: Any = None
        renew: Callable[[], Executor] | None = None
        task_put: Callable[[tuple[str, str]], None] | None = None
        if executor is None:
            try:  # LLMDIAG_DASK: cluster tasks publish their phases as events, the client puts them on progress_queue
                cluster = api.tab_executor()
            except LlmDiagError as e:
                logger.warning("llm_diag: %s; analysing in local processes instead", e)
                cluster = None
            if cluster is not None:
                executor, progress_queue, task_put = cluster
        cache = ResultCache(cache_dir, logdir=self._logdir or None)
        if (
            executor is None and processes
        ):  # workers stream the trace view's arrays into the cache (tab/analysis_queue.py)
            executor, progress_queue = process_pool(n, cache_root=cache.root)
            renew = lambda: process_pool(n, progress_queue, cache.root)[0]  # noqa: E731 - same progress queue
        elif executor is None:
            executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="llmdiag-analyse")
        self._catalog = Catalog(
            self._logdir,
            cache,
            executor,
            workers=n,
            progress_queue=progress_queue,
            renew=renew,
            task_put=task_put,
            scan_interval_s=SCAN_INTERVAL_S if scan_interval_s is None else scan_interval_s,
            discover=discover or api.discover,
        )
        self._catalog.start()
        self._views = TraceViews(cache)
        self._assets = Assets()

    # -- TBPlugin API
    def is_active(self) -> bool:
        return self._catalog.active

    def wait_scanned(self, timeout_s: float) -> bool:
        """Wait until the first scan has finished (tests and tools; TensorBoard never waits)."""
        return self._catalog.first_scan.wait(timeout=timeout_s)

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name=TAB_NAME, disable_reload=True)

    def get_plugin_apps(self) -> dict[str, Callable[..., Any]]:
        apps: dict[str, Callable[..., Any]] = {
            path: _wsgi(self._catalog_route(impl)) for path, impl in routes.CATALOG_ROUTES.items()
        }
        apps |= {
            "/runs": _wsgi(self._runs_route),
            "/trace": _wsgi(self._trace_route),
            "/metric_registry": _wsgi(self._metric_registry_route),
            "/trace_view": _wsgi(self._views_route(routes.trace_view_impl)),
            "/trace_event": _wsgi(self._views_route(routes.trace_event_impl)),
            "/trace_search": _wsgi(self._views_route(routes.trace_search_impl)),
        }
        apps.update(self._assets.apps())
        return apps

    def close(self) -> None:
        """Stops the background threads and the executor (tests; TensorBoard never calls it)."""
        self._catalog.stop()

    # -- routes
    def _cat(self) -> Catalog:
        self._catalog.first_scan.wait(timeout=FIRST_SCAN_WAIT_S)
        return self._catalog

    def _runs_route(self, request: wrappers.Request) -> wrappers.Response:
        plugins = getattr(self._context, "plugin_name_to_instance", None) or {}
        return self._respond(request, lambda: routes.runs_impl(self._cat(), self._logdir, plugins))

    def _catalog_route(self, impl: routes.CatalogImpl) -> Callable[[wrappers.Request], wrappers.Response]:
        """A JSON route over the catalog (``routes.CATALOG_ROUTES``)."""
        return lambda request: self._respond(request, lambda: impl(self._cat(), request.args))

    def _views_route(self, impl: Callable[..., routes.Answer]) -> Callable[[wrappers.Request], wrappers.Response]:
        """A trace-view route: ``impl(catalog, loaded indexes, args)``."""
        return lambda request: self._respond(request, lambda: impl(self._cat(), self._views, request.args))

    def _metric_registry_route(self, request: wrappers.Request) -> wrappers.Response:
        return self._respond(request, routes.metric_registry_impl)

    def _trace_route(self, request: wrappers.Request) -> wrappers.Response:
        try:
            f, _, headers, ctype = routes.trace_impl(self._cat(), request.args)
        except tb_errors.PublicError as e:
            return http_util.Respond(request, {"error": str(e)}, "application/json", code=e.http_code)
        return wrappers.Response(
            wsgi.wrap_file(request.environ, f), headers=headers, content_type=ctype, direct_passthrough=True
        )

    @staticmethod
    def _respond(request: wrappers.Request, impl: Callable[[], routes.Answer]) -> wrappers.Response:
        try:
            ans = impl()
        except tb_errors.PublicError as e:
            return http_util.Respond(request, {"error": str(e)}, "application/json", code=e.http_code)
        return http_util.Respond(request, ans.body, "application/json", code=ans.code, headers=ans.headers)
