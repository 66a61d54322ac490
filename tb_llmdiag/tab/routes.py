"""The tab's routes as pure functions over the catalog: ``*_impl(catalog, args) -> Answer``; ``CATALOG_ROUTES``
maps the JSON routes' paths to them.

The WSGI wrappers in ``tab.plugin`` only parse the request and write the answer. Names are looked up in
the discovered index, never joined into paths; errors are ``PublicError``s whose message is one line.
Statuses (docs/http_api.md): 200 a result; 202 not analysed yet (progress body, the run moves to the
front of the queue); 422 the analysis of this run failed (``{"error", "status": "error", ...}``:
retried only when the file changes); 400/404 bad or unknown names.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from tensorboard import errors as tb_errors

from tb_llmdiag import api
from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.tab.analysis_queue import Key
from tb_llmdiag.tab.catalog import Catalog, Entry
from tb_llmdiag.tab.traceviews import TraceViews

#: A JSON route's implementation over the catalog and the request's arguments.
CatalogImpl = Callable[[Catalog, Mapping[str, str]], "Answer"]
#: HTTP status of a run whose analysis failed (not a bad trace: those are 200 error RunReports).
FAILED = 422
_ORDER = {"error": 0, "writing": 1, "analysing": 2, "pending": 3, "ready": 4}


class Unprocessable(tb_errors.PublicError):
    """A name in the index whose file cannot be served (a FIFO, device or link loop named like a trace)."""

    error_code = "Unprocessable"
    http_code = FAILED


@dataclass
class Answer:
    code: int
    body: Any  # a JSON-able value, or bytes already JSON
    headers: list[tuple[str, str]] = field(default_factory=list)


def key_from(args: Mapping[str, str]) -> Key:
    names = []
    for arg in ("run", "worker", "span"):
        v = args.get(arg)
        if v is None or v == "":
            raise tb_errors.InvalidArgumentError(f"missing query parameter '{arg}'")
        if len(v) > 1024 or "\x00" in v:
            raise tb_errors.InvalidArgumentError(f"bad value for '{arg}'")
        names.append(v)
    return (names[0], names[1], names[2])


def entry_for(cat: Catalog, args: Mapping[str, str]) -> tuple[Key, Entry]:
    key = key_from(args)
    entry = cat.lookup(key)
    if entry is None:
        raise tb_errors.NotFoundError(f"no trace for run={key[0]!r} worker={key[1]!r} span={key[2]!r}")
    return key, entry


def step_arg(args: Mapping[str, str]) -> int | None:
    v = args.get("step")
    if v in (None, ""):
        return None
    try:
        return int(v)
    except ValueError:
        raise tb_errors.InvalidArgumentError("'step' must be an integer step index") from None


def status_payload(cat: Catalog, key: Key, e: Entry) -> dict[str, Any]:
    status, error = e.shown()
    out: dict[str, Any] = {
        "run": key[0],
        "worker": key[1],
        "span": key[2],
        "status": status,
        "error": error,
        "size_bytes": e.tf.size_bytes,
    }
    if e.status == "analysing":
        out["phase"] = e.phase or "starting"
        out["elapsed_s"] = round(time.monotonic() - (e.started_s or time.monotonic()), 1)
    elif e.status == "pending":
        out["queue_position"] = cat.queue_position(key)
    return out


def metric_registry_impl() -> Answer:
    """The metric registry (units, directions, tolerances of every report number), as ``api.catalogue.metrics()``.

    Static for the life of the process, so the browser may cache it.
    """
    return Answer(200, api.catalogue.metrics(), [("Cache-Control", "private, max-age=3600")])


def runs_impl(cat: Catalog, logdir: str, plugins: Mapping[str, Any]) -> Answer:
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for key, e in cat.snapshot():
        status, error = e.shown()
        runs.setdefault(key[0], {}).setdefault(key[1], []).append(
            {
                "span": key[2],
                "source_kind": e.tf.source_kind,
                "status": status,
                "error": error,
                "size_bytes": e.tf.size_bytes,
                "rank": e.tf.rank,
                "saving_ns": e.saving_ns,
            }
        )
    out_runs = []
    for run, workers in runs.items():
        spans = [s for ws in workers.values() for s in ws]
        worst = min((s["status"] for s in spans), key=lambda st: _ORDER[st])
        # A run is "ready" only when every span is; one error shows but does not hide the others.
        agg = "analysing" if any(s["status"] in ("analysing", "pending") for s in spans) else worst
        if any(s["status"] == "writing" for s in spans) and agg != "error":
            agg = "writing"
        savings = [s["saving_ns"] for s in spans if s["saving_ns"] is not None]
        out_runs.append(
            {
                "run": run,
                "status": agg,
                "error": next((s["error"] for s in spans if s["error"]), None),
                "saving_ns": max(savings) if savings else None,
                "workers": [{"worker": w, "spans": ws} for w, ws in workers.items()],
            }
        )
    with cat.lock:
        body = {
            "logdir": logdir,
            "scanned": cat.first_scan.is_set(),
            "scan_error": cat.scan_error,
            "warnings": list(cat.warnings),
            "cache": cat.cache.state,
            "runs": out_runs,
            "trace_viewers": {"pytorch_profiler": "pytorch_profiler" in plugins, "profile": "profile" in plugins},
        }
    return Answer(200, body)


def not_ready(cat: Catalog, key: Key, e: Entry, what: str) -> Answer | None:
    """The answer for a run without a servable result: progress (202) or its failure (422). A trace
    whose report is an error has no steps or timeline: those routes answer 422 with its one line."""
    if e.status == "failed" or (what != "report" and e.status == "ready" and e.report_status == "error"):
        return Answer(FAILED, status_payload(cat, key, e))
    if e.status != "ready":  # pending / analysing, or writing: 202 until the file stops changing
        cat.prioritise(key)
        return Answer(202, status_payload(cat, key, e))
    return None


def cached_impl(cat: Catalog, args: Mapping[str, str], what: str) -> Answer:
    """``/report`` and ``/steps``: the run's cached JSON (validated), else its status."""
    key, e = entry_for(cat, args)
    early = not_ready(cat, key, e, what)
    if early is not None:
        return early
    data = cat.cache.get_bytes(e.cache_key, what, e.identity() if what == "report" else None)
    if data is None:  # the cache entry vanished or is invalid: analyse again
        cat.requeue(key)
        return Answer(202, status_payload(cat, key, e))
    return Answer(200, data)


def timeline_impl(cat: Catalog, args: Mapping[str, str]) -> Answer:
    """``/timeline``: one step's timeline (default: the step of median duration)."""
    key, e = entry_for(cat, args)
    step = step_arg(args)
    early = not_ready(cat, key, e, "timeline")
    if early is not None:
        return early
    index = cat.cache.get(e.cache_key, "timelines")
    data = None
    if index is not None:
        if not index:
            raise tb_errors.NotFoundError("this trace has no timeline (no device or host activity was read)")
        if step is None:  # the step whose duration is the median: the representative one
            by_dur = sorted(index, key=lambda r: r["duration_ns"])
            chosen = by_dur[(len(by_dur) - 1) // 2]
        else:
            chosen = next((r for r in index if r["index"] == step), None)
            if chosen is None:
                raise tb_errors.NotFoundError(f"no step {step} in this trace")
        data = cat.cache.get_bytes(e.cache_key, f"timeline.{int(chosen['ordinal'])}")
    if data is None:
        cat.requeue(key)
        return Answer(202, status_payload(cat, key, e))
    return Answer(200, data)


def name_arg(args: Mapping[str, str], arg: str) -> str:
    """A required name parameter (a run or a span) of at most 1024 characters and no NUL."""
    v = args.get(arg)
    if v is None or v == "" or len(v) > 1024 or "\x00" in v:
        raise tb_errors.InvalidArgumentError(f"missing or bad query parameter '{arg}'")
    return v


def _job_progress(run: str, span: str, ready: int, count: int) -> Answer:
    body = {"run": run, "span": span, "status": "analysing", "error": None, "ranks_ready": ready, "rank_count": count}
    return Answer(202, body)


def job_of(
    cat: Catalog, run: str, span: str, *, with_reports: bool = False
) -> tuple[dict[str, Any], list[dict[str, Any]]] | Answer:
    """The job of one run and span (``api.job_for_summaries``: the report's ``jobs[]`` entry) from each rank's
    cached RankSummary, and (``with_reports``) its ready ranks' cached run reports; or the answer to give instead. The one policy
    of ``/job`` and ``/compare?level=job``, the CLI's: 202 while some rank is not analysed yet (they move to the
    front of the queue); a rank whose analysis failed is listed with ``status: "error"`` and left out of the
    figures (the job is an error when fewer than two ranks remain); 404 when the run has fewer than two traces
    of that span. A job built from the same member entries is answered from memory (``Catalog.job_memo``)."""
    members = [(k, e) for k, e in cat.snapshot() if k[0] == run and k[2] == span]
    if len(members) < 2:
        raise tb_errors.NotFoundError(f"run {run!r} span {span!r} is not a job (fewer than two ranks)")
    waiting = [(k, e) for k, e in members if e.status in ("pending", "analysing")]
    if waiting:
        for k, _ in waiting:
            cat.prioritise(k)
        return _job_progress(run, span, len(members) - len(waiting), len(members))
    signature = tuple((k, e.cache_key, e.status) for k, e in members)
    if not with_reports and (memo := cat.job_memo(run, span, signature)) is not None:
        return memo, []
    summaries, reports = [], []
    for k, e in members:
        found = cat.cache.get(e.cache_key, "rank_summary") if e.status == "ready" else None
        rep = cat.cache.get(e.cache_key, "report", e.identity()) if e.status == "ready" and with_reports else None
        if e.status == "ready" and (
            found is None or (with_reports and rep is None)
        ):  # the entry vanished or predates rank summaries
            cat.requeue(k)
            return _job_progress(run, span, len(members) - 1, len(members))
        summaries.append((e.tf, found.get("summary") if found else None))
        if rep is not None:
            reports.append(rep)
    job = api.job_for_summaries(run, span, summaries)
    cat.keep_job(run, span, signature, job)
    return job, reports


def job_impl(cat: Catalog, args: Mapping[str, str]) -> Answer:
    """``/job?run=&span=``: the job of a run with several ranks (``job_of``)."""
    got = job_of(cat, name_arg(args, "run"), name_arg(args, "span"))
    return got if isinstance(got, Answer) else Answer(200, got[0])


def trace_impl(cat: Catalog, args: Mapping[str, str]) -> tuple[BinaryIO, int, list[tuple[str, str]], str]:
    """``/trace``: the open file (regular files only, opened by ``ingest``), its size, headers, type."""
    _, e = entry_for(cat, args)
    try:
        f, size = e.tf.open()  # the path comes from the index, never from the request
    except TraceFormatError as err:  # not a regular file, a link out of the logdir, an object gone
        raise Unprocessable(str(err)) from None
    except OSError as err:
        raise tb_errors.NotFoundError(f"the trace file is gone: {err.strerror}") from None
    name = os.path.basename(e.tf.path)
    ctype = (
        "application/gzip"
        if name.endswith(".gz")
        else ("application/json" if name.endswith(".json") else "application/octet-stream")
    )
    safe = "".join(c if (c.isalnum() or c in "._-") else "_" for c in name) or "trace"
    headers = [
        ("Content-Length", str(size)),
        ("X-Content-Type-Options", "nosniff"),
        ("Content-Disposition", f'attachment; filename="{safe}"'),
        ("Cache-Control", "no-cache"),
    ]
    return f, size, headers, ctype


def _int_arg(args: Mapping[str, str], name: str, default: int | None, lo: int, hi: int) -> int | None:
    v = args.get(name)
    if v in (None, ""):
        return default
    try:
        x = int(v)
    except ValueError:
        raise tb_errors.InvalidArgumentError(f"'{name}' must be an integer") from None
    if not lo <= x <= hi:
        raise tb_errors.InvalidArgumentError(f"'{name}' must be between {lo} and {hi}")
    return x


_MAX_NS = 1 << 62


def _index(cat: Catalog, views: TraceViews, args: Mapping[str, str]) -> tuple[api.TraceIndex | None, Answer | None]:
    """The run's loaded trace-view index, or the answer to give instead (202 / 422)."""
    key, e = entry_for(cat, args)
    early = not_ready(cat, key, e, "trace_view")
    if early is not None:
        return None, early
    index = views.get(e.cache_key)
    if index is None:  # missing or damaged: analyse again
        cat.requeue(key)
        return None, Answer(202, status_payload(cat, key, e))
    return index, None


def trace_view_impl(cat: Catalog, views: TraceViews, args: Mapping[str, str]) -> Answer:
    """``/trace_view``: every lane's intervals in [start_ns, end_ns) merged to ``px`` pixels (http_api.md)."""
    start = _int_arg(args, "start_ns", None, -_MAX_NS, _MAX_NS)
    end = _int_arg(args, "end_ns", None, -_MAX_NS, _MAX_NS)
    px = _int_arg(args, "px", 1440, 1, 16384)
    depth = _int_arg(args, "depth", 6, 1, 64)
    expand = frozenset(x for x in (args.get("expand") or "").split(",") if x)
    index, early = _index(cat, views, args)
    if index is None:
        return early  # type: ignore[return-value]
    span = int(index.meta["span_ns"])
    a = 0 if start is None else start
    b = max(span, 1) if end is None else end
    if b <= a:
        raise tb_errors.InvalidArgumentError("'end_ns' must be greater than 'start_ns'")
    body = index.view(a, b, int(px or 1440), depth=int(depth or 6), expand=expand)
    body["findings"] = index.meta.get("findings") or []
    body["parts"] = index.meta.get("parts") or []
    return Answer(200, body)


def trace_event_impl(cat: Catalog, views: TraceViews, args: Mapping[str, str]) -> Answer:
    """``/trace_event``: one event's details and its launch <-> kernel flow."""
    ev = _int_arg(args, "ev", None, 0, _MAX_NS)
    if ev is None:
        raise tb_errors.InvalidArgumentError("missing query parameter 'ev'")
    index, early = _index(cat, views, args)
    if index is None:
        return early  # type: ignore[return-value]
    if ev >= int(index.meta["n_events"]):
        raise tb_errors.NotFoundError(f"no event {ev} in this trace")
    return Answer(200, index.event(ev))


def trace_search_impl(cat: Catalog, views: TraceViews, args: Mapping[str, str]) -> Answer:
    """``/trace_search``: events whose name contains ``q`` (case-insensitive), first ones in time order."""
    q = args.get("q") or ""
    if not q or len(q) > 200 or "\x00" in q:
        raise tb_errors.InvalidArgumentError("'q' must be 1 to 200 characters")
    index, early = _index(cat, views, args)
    if index is None:
        return early  # type: ignore[return-value]
    return Answer(200, index.search(q))


def _base_key(args: Mapping[str, str]) -> dict[str, str]:
    """The baseline's names (``base_run``, ``base_worker``, ``base_span``) as a selection's ``run``, ``worker``, ``span``."""
    out = {}
    for arg in ("run", "worker", "span"):
        v = args.get(f"base_{arg}")
        if v is None or v == "":
            raise tb_errors.InvalidArgumentError(f"missing query parameter 'base_{arg}'")
        out[arg] = v
    return out


def run_compare_impl(cat: Catalog, args: Mapping[str, str]) -> Answer:
    """``/compare``: the run against a baseline run (``api.compare``): 202 / 422 while either is not
    ready or failed (as ``/report``), 422 when either report is an error RunReport, else the comparison."""
    pairs = [entry_for(cat, _base_key(args)), entry_for(cat, args)]
    for key, e in pairs:
        early = not_ready(cat, key, e, "report")
        if early is not None:
            return early
    reports = []
    for key, e in pairs:
        rep = cat.cache.get(e.cache_key, "report", e.identity())
        if rep is None:
            cat.requeue(key)
            return Answer(202, status_payload(cat, key, e))
        if rep.get("status") == "error":
            body = status_payload(cat, key, e)
            body.update(
                status="error", error=f"{key[0]} ({key[1]}, span {key[2]}) could not be analysed: {rep.get('error')}"
            )
            return Answer(FAILED, body)
        reports.append(rep)
    return Answer(200, api.compare(reports[0], reports[1]))


def job_compare_impl(cat: Catalog, args: Mapping[str, str]) -> Answer:
    """``/compare?level=job&run=&span=&base_run=&base_span=``: the baseline job as BEFORE, this job as AFTER."""
    sides = []
    for prefix in ("base_", ""):
        run, span = name_arg(args, f"{prefix}run"), name_arg(args, f"{prefix}span")
        got = job_of(cat, run, span, with_reports=True)
        if isinstance(got, Answer):
            return got
        if got[0].get("status") != "ok":
            error = f"job {run} (span {span}) could not be analysed: {got[0].get('error')}"
            return Answer(FAILED, {"run": run, "span": span, "status": "error", "error": error})
        sides.append(got)
    return Answer(200, api.compare(sides[0], sides[1]))


def compare_impl(cat: Catalog, args: Mapping[str, str]) -> Answer:
    """``/compare``: ``level=job`` compares two jobs (``job_compare_impl``); ``level=run`` or none, two traces
    (``run_compare_impl``)."""
    level = args.get("level") or "run"
    if level not in ("run", "job"):
        raise tb_errors.InvalidArgumentError("'level' must be run or job")
    return job_compare_impl(cat, args) if level == "job" else run_compare_impl(cat, args)


def over_run_impl(cat: Catalog, args: Mapping[str, str]) -> Answer:
    """``/over_run?run=&worker=``: the over-the-run timeline (docs/timeline.md) of one run and worker, every span's
    window from its cached report (``api.timeline``); 202 with the count ready while some are not analysed
    yet (they move to the front of the queue); a file still being written is left out until it is whole. Windows
    whose analysis failed are points without numbers."""
    run, worker = name_arg(args, "run"), name_arg(args, "worker")
    members = [(k, e) for k, e in cat.snapshot() if k[0] == run and k[1] == worker]
    if not members:
        raise tb_errors.NotFoundError(f"no run {run!r} worker {worker!r}")
    waiting = [(k, e) for k, e in members if e.status in ("pending", "analysing")]
    for k, _ in waiting:
        cat.prioritise(k)
    reports = []
    for k, e in members:
        rep = cat.cache.get(e.cache_key, "report", e.identity()) if e.status == "ready" else None
        if e.status == "ready" and rep is None:  # the cache entry vanished: analyse it again
            cat.requeue(k)
            waiting.append((k, e))
        elif rep is not None:
            reports.append(rep)
    if waiting:
        body = {"run": run, "worker": worker, "status": "analysing", "error": None,
                "windows_ready": len(members) - len(waiting), "window_count": len(members)}  # fmt: skip
        return Answer(202, body)
    return Answer(200, api.timeline(reports))


#: The JSON routes over the catalog alone, by path: ``impl(catalog, args) -> Answer`` (``tab/plugin.py`` serves
#: each; a new one is an entry here and its ``*_impl``).
CATALOG_ROUTES: dict[str, CatalogImpl] = {
    "/report": lambda cat, args: cached_impl(cat, args, "report"),
    "/steps": lambda cat, args: cached_impl(cat, args, "steps"),
    "/timeline": timeline_impl,
    "/compare": compare_impl,
    "/job": job_impl,
    "/over_run": over_run_impl,
}
