"""Shape checks of the tab's cached results: each returns None when a value is servable, else why not.

They check what the routes and the frontend rely on (docs/http_api.md, docs/report_schema.md), not
every number: a planted or damaged entry of the wrong shape is a cache miss, never a 200 or a 500.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tb_llmdiag import api

_REPORT_KEYS = (
    "run",
    "worker",
    "span",
    "source_kind",
    "path",
    "size_bytes",
    "status",
    "error",
    "warnings",
    "summary",
    "headline",
    "metrics",
    "findings",
    "what_if",
)
_STEP_PARTS = ("index", "duration_ns", "busy_ns", "host_wait_ns", "sync_ns", "data_loader_ns", "other_ns")


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def report(v: Any) -> str | None:
    if not isinstance(v, dict):
        return "the report is not an object"
    missing = [k for k in _REPORT_KEYS if k not in v]
    if missing:
        return f"the report lacks {', '.join(missing)}"
    if v["status"] == "error":
        return None if isinstance(v["error"], str) and v["error"] else "an error report without its message"
    if v["status"] not in ("ok", "partial"):  # partial: the reader stopped early and says where (read_state)
        return f"unknown report status {v['status']!r}"
    if not isinstance(v["summary"], dict) or not isinstance(v["metrics"], dict):
        return "the report's summary or metrics is not an object"
    if not isinstance(v["findings"], list) or not isinstance(v["warnings"], list):
        return "the report's findings or warnings is not a list"
    return None


def timelines(v: Any) -> str | None:
    if not isinstance(v, list):
        return "the timeline index is not a list"
    for i, row in enumerate(v):
        if not (
            isinstance(row, dict)
            and row.get("ordinal") == i
            and _int(row.get("index"))
            and _int(row.get("duration_ns"))
            and (row.get("name") is None or isinstance(row.get("name"), str))
        ):
            return f"timeline index row {i} is malformed"
    return None


def timeline(v: Any) -> str | None:
    if not isinstance(v, dict) or v.get("timeline_version") != api.ENGINE_VERSION.timeline:
        return "not a timeline of this version"
    step = v.get("step")
    if not (isinstance(step, dict) and _int(step.get("index")) and _int(step.get("duration_ns"))):
        return "the timeline's step is malformed"
    lanes, gaps = v.get("lanes"), v.get("gaps")
    if not (isinstance(lanes, list) and all(isinstance(x, dict) for x in lanes) and isinstance(gaps, dict)):
        return "the timeline's lanes or gaps are malformed"
    if not (isinstance(v.get("names"), list) and isinstance(v.get("categories"), list)):
        return "the timeline's name tables are malformed"
    return None


def steps(v: Any) -> str | None:
    if not isinstance(v, dict) or not isinstance(v.get("steps"), list):
        return 'the step breakdown is not {"steps": [...]}'
    for i, row in enumerate(v["steps"]):
        if not (isinstance(row, dict) and all(_int(row.get(k)) for k in _STEP_PARTS)):
            return f"step breakdown row {i} is malformed"
    return None


def rank_summary(v: Any) -> str | None:
    """``{"summary": RankSummary.to_dict() | None}`` (None: the trace could not be summarised)."""
    if not isinstance(v, dict) or "summary" not in v:
        return 'the rank summary is not {"summary": ...}'
    s = v["summary"]
    if s is not None and not (
        isinstance(s, dict) and isinstance(s.get("steps"), dict) and isinstance(s.get("collectives"), dict)
    ):
        return "the rank summary is malformed"
    return None


def traceview(v: Any) -> str | None:
    """The trace view's meta (``traceview/build.py``); its arrays are checked by ``TraceIndex.load``."""
    if not isinstance(v, dict) or v.get("traceview_version") != api.ENGINE_VERSION.traceview:
        return "not a trace-view index of this version"
    if not (
        isinstance(v.get("lanes"), list)
        and isinstance(v.get("names"), list)
        and isinstance(v.get("levels"), list)
        and isinstance(v.get("findings"), list)
        and _int(v.get("span_ns"))
        and _int(v.get("n_events"))
    ):
        return "the trace-view index is malformed"
    return None


VALIDATORS: dict[str, Callable[[Any], str | None]] = {
    "report": report,
    "timelines": timelines,
    "timeline": timeline,
    "steps": steps,
    "traceview": traceview,
    "rank_summary": rank_summary,
}
