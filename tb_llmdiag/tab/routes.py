"""The tab's routes as pure functions over the registry: ``*_impl(registry, args) -> Answer``.

The WSGI wrappers in ``tab.plugin`` only parse the request and write the answer. Names are looked up in
the discovered index, never joined into paths; errors are ``PublicError``s whose message is one line.
Statuses (docs/http_api.md): 200 a result; 202 not analysed yet (progress body, the run moves to the
front of the queue); 422 the analysis of this run failed (``{"error", "status": "error", ...}``:
retried only when the file changes); 400/404 bad or unknown names.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from tensorboard import errors as tb_errors

from tb_llmdiag import api
from tb_llmdiag.tab.jobs import Key
from tb_llmdiag.tab.registry import Entry, Registry
from tb_llmdiag.tab.traceviews import TraceViews

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


def entry_for(reg: Registry, args: Mapping[str, str]) -> tuple[Key, Entry]:
    key = key_from(args)
    entry = reg.lookup(key)
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


def status_payload(reg: Registry, key: Key, e: Entry) -> dict[str, Any]:
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
        out["queue_position"] = reg.queue_position(key)
    return out


def metric_registry_impl() -> Answer:
    """The metric registry (units, directions, tolerances of every report number), as ``api.metric_registry()``.

    Static for the life of the process, so the browser may cache it.
    """
    return Answer(200, api.metric_registry(), [("Cache-Control", "private, max-age=3600")])


def runs_impl(reg: Registry, logdir: str, plugins: Mapping[str, Any]) -> Answer:
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for key, e in reg.snapshot():
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
    with reg.lock:
        body = {
            "logdir": logdir,
            "scanned": reg.first_scan.is_set(),
            "scan_error": reg.scan_error,
            "warnings": list(reg.warnings),
            "cache": reg.cache.state,
            "runs": out_runs,
            "trace_viewers": {"pytorch_profiler": "pytorch_profiler" in plugins, "profile": "profile" in plugins},
        }
    return Answer(200, body)


def _not_ready(reg: Registry, key: Key, e: Entry, what: str) -> Answer | None:
    """The answer for a run without a servable result: progress (202) or its failure (422). A trace
    whose report is an error has no steps or timeline: those routes answer 422 with its one line."""
    if e.status == "failed" or (what != "report" and e.status == "ready" and e.report_status == "error"):
        return Answer(FAILED, status_payload(reg, key, e))
    if e.status != "ready":  # pending / analysing, or writing: 202 until the file stops changing
        reg.prioritise(key)
        return Answer(202, status_payload(reg, key, e))
    return None


def cached_impl(reg: Registry, args: Mapping[str, str], what: str) -> Answer:
    """``/report`` and ``/steps``: the run's cached JSON (validated), else its status."""
    key, e = entry_for(reg, args)
    early = _not_ready(reg, key, e, what)
    if early is not None:
        return early
    data = reg.cache.get_bytes(e.cache_key, what, e.identity() if what == "report" else None)
    if data is None:  # the cache entry vanished or is invalid: analyse again
        reg.requeue(key)
        return Answer(202, status_payload(reg, key, e))
    return Answer(200, data)


def timeline_impl(reg: Registry, args: Mapping[str, str]) -> Answer:
    """``/timeline``: one step's timeline (default: the step of median duration)."""
    key, e = entry_for(reg, args)
    step = step_arg(args)
    early = _not_ready(reg, key, e, "timeline")
    if early is not None:
        return early
    index = reg.cache.get(e.cache_key, "timelines")
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
        data = reg.cache.get_bytes(e.cache_key, f"timeline.{int(chosen['ordinal'])}")
    if data is None:
        reg.requeue(key)
        return Answer(202, status_payload(reg, key, e))
    return Answer(200, data)


def _base_key(args: Mapping[str, str]) -> dict[str, str]:
    """The baseline's names (``base_run``, ``base_worker``, ``base_span``) as a selection's ``run``, ``worker``, ``span``."""
    out = {}
    for arg in ("run", "worker", "span"):
        v = args.get(f"base_{arg}")
        if v is None or v == "":
            raise tb_errors.InvalidArgumentError(f"missing query parameter 'base_{arg}'")
        out[arg] = v
    return out


def compare_impl(reg: Registry, args: Mapping[str, str]) -> Answer:
    """``/compare``: the run against a baseline run (``api.compare_reports``): 202 / 422 while either is not
    ready or failed (as ``/report``), 422 when either report is an error RunReport, else the comparison."""
    pairs = [entry_for(reg, _base_key(args)), entry_for(reg, args)]
    for key, e in pairs:
        early = _not_ready(reg, key, e, "report")
        if early is not None:
            return early
    reports = []
    for key, e in pairs:
        rep = reg.cache.get(e.cache_key, "report", e.identity())
        if rep is None:
            reg.requeue(key)
            return Answer(202, status_payload(reg, key, e))
        if rep.get("status") == "error":
            body = status_payload(reg, key, e)
            body.update(
                status="error", error=f"{key[0]} ({key[1]}, span {key[2]}) could not be analysed: {rep.get('error')}"
            )
            return Answer(FAILED, body)
        reports.append(rep)
    return Answer(200, api.compare_reports(reports[0], reports[1]))


def job_impl(reg: Registry, args: Mapping[str, str]) -> Answer:
    """``/job?run=&span=``: the job of a run with several ranks (``api.job_for_summaries``, the report's
    ``jobs[]`` entry) from each rank's cached RankSummary: 202 while some rank is not analysed yet (they move to
    the front of the queue), 404 when the run has fewer than two traces of that span. A rank whose analysis
    failed is listed with ``status: "error"`` and left out of the figures."""
    names = {}
    for arg in ("run", "span"):
        v = args.get(arg)
        if v is None or v == "" or len(v) > 1024 or "\x00" in v:
            raise tb_errors.InvalidArgumentError(f"missing or bad query parameter '{arg}'")
        names[arg] = v
    members = [(k, e) for k, e in reg.snapshot() if k[0] == names["run"] and k[2] == names["span"]]
    if len(members) < 2:
        raise tb_errors.NotFoundError(
            f"run {names['run']!r} span {names['span']!r} is not a job (fewer than two ranks)"
        )
    waiting = [(k, e) for k, e in members if e.status in ("pending", "analysing")]
    if waiting:
        for k, _ in waiting:
            reg.prioritise(k)
        done = len(members) - len(waiting)
        return Answer(
            202,
            {
                "run": names["run"],
                "span": names["span"],
                "status": "analysing",
                "error": None,
                "ranks_ready": done,
                "rank_count": len(members),
            },
        )
    summaries = []
    for k, e in members:
        found = reg.cache.get(e.cache_key, "rank_summary") if e.status == "ready" else None
        if e.status == "ready" and found is None:  # the cache entry vanished or predates rank summaries
            reg.requeue(k)
            return Answer(
                202,
                {
                    "run": names["run"],
                    "span": names["span"],
                    "status": "analysing",
                    "error": None,
                    "ranks_ready": len(members) - 1,
                    "rank_count": len(members),
                },
            )
        summaries.append((e.tf, found.get("summary") if found else None))
    return Answer(200, api.job_for_summaries(names["run"], names["span"], summaries))


def trace_impl(reg: Registry, args: Mapping[str, str]) -> tuple[BinaryIO, int, list[tuple[str, str]], str]:
    """``/trace``: the open file (regular files only, opened by ``ingest``), its size, headers, type."""
    _, e = entry_for(reg, args)
    try:
        f, size = api.open_raw(e.tf)  # the path comes from the index, never from the request
    except (api.NotRegularFile, api.LinkOutside) as err:
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


def _index(reg: Registry, views: TraceViews, args: Mapping[str, str]) -> tuple[api.TraceIndex | None, Answer | None]:
    """The run's loaded trace-view index, or the answer to give instead (202 / 422)."""
    key, e = entry_for(reg, args)
    early = _not_ready(reg, key, e, "trace_view")
    if early is not None:
        return None, early
    index = views.get(e.cache_key)
    if index is None:  # missing or damaged: analyse again
        reg.requeue(key)
        return None, Answer(202, status_payload(reg, key, e))
    return index, None


def trace_view_impl(reg: Registry, views: TraceViews, args: Mapping[str, str]) -> Answer:
    """``/trace_view``: every lane's intervals in [start_ns, end_ns) merged to ``px`` pixels (http_api.md)."""
    start = _int_arg(args, "start_ns", None, -_MAX_NS, _MAX_NS)
    end = _int_arg(args, "end_ns", None, -_MAX_NS, _MAX_NS)
    px = _int_arg(args, "px", 1440, 1, 16384)
    depth = _int_arg(args, "depth", 6, 1, 64)
    expand = frozenset(x for x in (args.get("expand") or "").split(",") if x)
    index, early = _index(reg, views, args)
    if index is None:
        return early  # type: ignore[return-value]
    span = int(index.meta["span_ns"])
    a = 0 if start is None else start
    b = max(span, 1) if end is None else end
    if b <= a:
        raise tb_errors.InvalidArgumentError("'end_ns' must be greater than 'start_ns'")
    body = index.view(a, b, int(px or 1440), depth=int(depth or 6), expand=expand)
    body["findings"] = index.meta.get("findings") or []
    return Answer(200, body)


def trace_event_impl(reg: Registry, views: TraceViews, args: Mapping[str, str]) -> Answer:
    """``/trace_event``: one event's details and its launch <-> kernel flow."""
    ev = _int_arg(args, "ev", None, 0, _MAX_NS)
    if ev is None:
        raise tb_errors.InvalidArgumentError("missing query parameter 'ev'")
    index, early = _index(reg, views, args)
    if index is None:
        return early  # type: ignore[return-value]
    if ev >= int(index.meta["n_events"]):
        raise tb_errors.NotFoundError(f"no event {ev} in this trace")
    return Answer(200, index.event(ev))


def trace_search_impl(reg: Registry, views: TraceViews, args: Mapping[str, str]) -> Answer:
    """``/trace_search``: events whose name contains ``q`` (case-insensitive), first ones in time order."""
    q = args.get("q") or ""
    if not q or len(q) > 200 or "\x00" in q:
        raise tb_errors.InvalidArgumentError("'q' must be 1 to 200 characters")
    index, early = _index(reg, views, args)
    if index is None:
        return early  # type: ignore[return-value]
    return Answer(200, index.search(q))
