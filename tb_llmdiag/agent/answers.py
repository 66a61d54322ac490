"""The MCP tools' answers, as JSON dicts built from the front door's reports (no MCP here: testable without the SDK).

Each answer keeps the report's own keys and paths (a finding is a ``findings[]`` item cut to its fields, the
comparison the ``compare`` document's rows), so every number is defined in the metric registry under the same key
(``llmdiag://registry``) and equals what ``llmdiag report --json`` / ``llmdiag compare --json`` print. Each is
``fit`` to a budget: a few KB by default, more with ``detail``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tb_llmdiag import api
from tb_llmdiag.agent.fit import DEFAULT_BUDGET_BYTES, DETAIL_BUDGET_BYTES, fit
from tb_llmdiag.agent.workspace import Workspace
from tb_llmdiag.errors import LlmDiagError, RunNotFound, TraceFormatError, quoted

if TYPE_CHECKING:
    from tb_llmdiag.compare.names import Target


class UnknownFinding(LlmDiagError):
    exit_code = 2


#: a finding's fields in a default answer: what it claims, its evidence and saving, and why it may overstate (#36)
_FINDING_BRIEF = ("id", "severity", "title", "summary", "caveat", "evidence", "saving", "docs")
#: the capture's fields every run answer carries: how much of the profiled step is the profiler's own cost
#: a saving's fields in a default answer: what it takes off which step; on the step without the profiler, the same
#: saving on the profiled step beside it (``saving.profiled``: its time and step only)
_SAVING_BRIEF = ("basis", "step_basis", "step_ns", "ns", "share")
_PROFILED_BRIEF = ("step_ns", "ns")
_PROFILER_KEYS = ("profiler_overhead_share", "profiled_step_ns", "unprofiled_step_ns", "overhead_basis")


def budget(detail: bool) -> int:
    return DETAIL_BUDGET_BYTES if detail else DEFAULT_BUDGET_BYTES


def _top(findings: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    if not findings:
        return None
    f = findings[0]
    return {k: f.get(k) for k in ("id", "severity", "title", "saving", "value") if f.get(k) is not None}


def list_runs(ws: Workspace, detail: bool = False) -> dict[str, Any]:
    """Every trace and job of the logdir: names (what the other tools take), status, the top finding and saving."""
    index = ws.index()
    traces, jobs = api.run_names(index)
    in_job = {tf.path for job in jobs for tf in job.files}
    runs = []
    for name, tf in traces:
        rep, _ = ws.report(tf, in_job=tf.path in in_job)
        entry: dict[str, Any] = {
            "name": name,
            **{k: rep.get(k) for k in ("run", "worker", "span", "rank", "status", "error")},
            "step_count": ((rep.get("metrics") or {}).get("steps") or {}).get("count"),
            "headline": {"step_median_ns": (rep.get("headline") or {}).get("step_median_ns")},
            "top_finding": _top(rep.get("findings") or []),
            "finding_ids": [f["id"] for f in rep.get("findings") or []],
        }
        if detail:
            entry["headline"] = rep.get("headline")
        runs.append(entry)
    job_entries = []
    for job in jobs:
        entry_, _ = ws.job(job)
        job_entries.append(
            {
                "name": job.name,
                "run": job.run,
                "span": job.span,
                "ranks": [n for n, tf in traces if tf in job.files],
                "status": entry_.get("status"),
                "error": entry_.get("error"),
                "top_finding": _top(entry_.get("findings") or []),
            }
        )
    answer = {"logdir": ws.root, "runs": runs, "jobs": job_entries, "warnings": list(index.warnings)}
    return fit(answer, budget(detail), "list_runs(detail=true) for more; diagnose(run) for one run")


def _finding(f: Mapping[str, Any], detail: bool) -> dict[str, Any]:
    if detail:
        return dict(f)
    out = {k: f[k] for k in _FINDING_BRIEF if f.get(k) is not None}  # a brief answer leaves out what is unknown
    out["fix"] = {"text": (f.get("fix") or {}).get("text")} if isinstance(f.get("fix"), Mapping) else f.get("fix")
    if isinstance(f.get("saving"), Mapping):
        out["saving"] = _saving_brief(f["saving"])
    return out


def _saving_brief(s: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: s[k] for k in _SAVING_BRIEF if s.get(k) is not None}
    p = s.get("profiled")
    if isinstance(p, Mapping):
        out["profiled"] = {k: p.get(k) for k in _PROFILED_BRIEF}
    return out


def _once(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings whose caveat repeats an earlier finding's say so by its id instead of repeating the text (the
    profiler's caveat is the same on every host-time finding; an answer has a budget)."""
    first: dict[str, str] = {}
    for f in findings:
        c = f.get("caveat")
        if isinstance(c, str) and c:
            if c in first:
                f["caveat"] = f"as for {first[c]}"
            else:
                first[c] = str(f.get("id"))
    return findings


def _trust(rep: Mapping[str, Any]) -> dict[str, Any]:
    """What the capture lets one trust: the read state, the reader's warnings, the profiler's own share of the
    profiled step (``capture.*``) with the capture's problems, and the ``trust`` topic if any."""
    out: dict[str, Any] = {"read_state": rep.get("read_state"), "warnings": list(rep.get("warnings") or [])}
    capture = (rep.get("metrics") or {}).get("capture") or {}
    out["profiler"] = {k: capture.get(k) for k in _PROFILER_KEYS if capture.get(k) is not None} or None
    problems = [p.get("text") for p in capture.get("problems") or [] if isinstance(p, Mapping) and p.get("text")]
    if problems:
        out["capture_problems"] = problems
    trust = (rep.get("metrics") or {}).get("trust")
    if trust is not None:
        out["trust"] = trust
    return out


def run_state(rep: Mapping[str, Any]) -> dict[str, Any]:
    """The run's status (``partial``: only part of the trace was read) and trust notes, for the answers that read
    its events: their numbers hold only as far as these say."""
    return {"status": rep.get("status"), "error": rep.get("error"), "trust": _trust(rep)}


def slowest_step(rep: Mapping[str, Any]) -> dict[str, Any] | None:
    """The slowest profiled step: its index and duration, what it adds over the median step, and what holds its
    extra time when the ``outliers`` topic names it (the step's activity, ``holder``)."""
    metrics = rep.get("metrics") or {}
    rows = list((metrics.get("steps") or {}).get("per_step") or [])
    if not rows:
        return None
    slow, med = max(rows, key=lambda r: int(r["duration_ns"])), median_step(rows)
    out = {
        "index": slow["index"],
        "duration_ns": slow["duration_ns"],
        "over_median_ns": int(slow["duration_ns"]) - int(med["duration_ns"]) if med is not None else None,
    }
    outlier = next(
        (o for o in (metrics.get("outliers") or {}).get("steps") or [] if o.get("index") == slow["index"]), None
    )
    if outlier is not None and outlier.get("holder"):
        out["holder"] = outlier["holder"]
    return out


def _run_diagnosis(name: str, rep: Mapping[str, Any], detail: bool) -> dict[str, Any]:
    s = rep.get("summary") or {}
    steps = (rep.get("metrics") or {}).get("steps") or {}
    wi = rep.get("what_if") or {}
    answer: dict[str, Any] = {
        "name": name,
        "level": "run",
        **{k: rep.get(k) for k in ("run", "worker", "span", "rank", "status", "error")},
        "summary": {
            "device": {k: (s.get("device") or {}).get(k) for k in ("name", "count")} if s.get("device") else None,
            **{k: s.get(k) for k in ("distributed", "window_ns", "step_source")},
        },
        "steps": {
            **{k: steps.get(k) for k in ("count", "median_ns", "min_ns", "max_ns", "cv")},
            "slowest": slowest_step(rep),
        },
        "headline": rep.get("headline"),
        "findings": _once([_finding(f, detail) for f in rep.get("findings") or []]),
        "what_if": wi
        if detail
        else {k: wi.get(k) for k in ("statement", "step_ns", "step_ns_if_fixed", "saving_share", "finding_id")},
        "trust": _trust(rep),
        "next": "explain_finding(run, finding) for where a finding is in the trace; top_activities(run, step) for "
        "what the host and GPU do in a step",
    }
    if detail:
        answer["summary"], answer["metrics"] = s, rep.get("metrics")
    return answer


def _job_diagnosis(ws: Workspace, target: Target, detail: bool) -> dict[str, Any]:
    job, reports = ws.job(target)
    traces, _ = api.run_names(ws.index())
    names = {tf.path: n for n, tf in traces}
    return {
        "name": target.name,
        "level": "job",
        **{k: job.get(k) for k in ("run", "span", "status", "error", "notes")},
        "metrics": job.get("metrics")
        if detail
        else {
            k: (job.get("metrics") or {}).get(k)
            for k in ("rank_count", "job_step_ns", "exposed_share", "exposed_transfer_share", "overlap_share")
        },
        "findings": [_finding(f, detail) for f in job.get("findings") or []],
        "ranks": [
            {
                "name": names.get(str(r.get("path")), r.get("worker")),
                **{k: r.get(k) for k in ("rank", "status", "error")},
                "top_finding": _top(r.get("findings") or []),
            }
            for r in reports
        ],
        "next": "diagnose(run=<rank name>) for one rank's own findings",
    }


def diagnose(ws: Workspace, run: str, detail: bool = False) -> dict[str, Any]:
    """One run's (or job's) diagnosis: headline, ranked findings with evidence, fix and saving, the what-if and
    what the capture lets one trust."""
    target = ws.target(run)
    if target.level == "job":
        answer = _job_diagnosis(ws, target, detail)
    else:
        answer = _run_diagnosis(target.name, ws.run_report(target), detail)
    return fit(answer, budget(detail), "diagnose(run, detail=true) for every field and the metric topics")


def median_step(rows: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The step whose duration is the median (the lower one of an even count): the tab's default step."""
    if not rows:
        return None
    return sorted(rows, key=lambda r: int(r["duration_ns"]))[(len(rows) - 1) // 2]


def _step_of(rows: list[Mapping[str, Any]], t: int) -> int | None:
    return next((int(r["index"]) for r in rows if r["start_ns"] <= t < r["end_ns"]), None)


def focus(rows: list[Mapping[str, Any]], part: str | None, ranges: list[list[int]]) -> int | None:
    """The step that shows a finding: the median step (the basis of every saving) when the finding's time is in it,
    else the step where its time is largest, else the step of its longest evidence range."""
    med = median_step(rows)
    if part is not None and med is not None:
        if (med.get(part) or 0) > 0:
            return int(med["index"])
        best = max(rows, key=lambda r: r.get(part) or 0)
        if (best.get(part) or 0) > 0:
            return int(best["index"])
    if ranges:
        s, e = max(ranges, key=lambda r: r[1] - r[0])
        return _step_of(rows, (s + e) // 2)
    return int(med["index"]) if med is not None else None


def explain_finding(ws: Workspace, run: str, finding: str, detail: bool = False) -> dict[str, Any]:
    """One finding: its evidence, the steps it hits, the trace ranges that show it and their source line when the
    trace recorded Python stacks."""
    target = ws.target(run)
    if target.level == "job":
        job, _ = ws.job(target)
        found = [f for f in job.get("findings") or [] if f.get("id") == finding]
        if not found:
            ids = ", ".join(f.get("id", "?") for f in job.get("findings") or []) or "none"
            raise UnknownFinding(f"job {target.name} has no finding {quoted(finding)} (its findings: {ids})")
        answer = {"name": target.name, "level": "job", "finding": found[0]}
        return fit(answer, budget(detail), "explain_finding(..., detail=true)")
    got = ws.loaded(target)
    rep = got.report
    if rep.get("status") not in ("ok", "partial"):
        raise TraceFormatError(f"run {target.name} could not be analysed: {rep.get('error')}")
    f = next((x for x in rep.get("findings") or [] if x.get("id") == finding), None)
    if f is None:
        ids = ", ".join(x["id"] for x in rep.get("findings") or []) or "none"
        raise UnknownFinding(f"run {target.name} has no finding {quoted(finding)} (its findings: {ids})")
    located = next((x for x in got.evidence() if x["id"] == finding), None)
    ranges = [list(r) for r in (f.get("ranges") or (located or {}).get("ranges") or [])]
    culprit = f.get("culprit") or (located or {}).get("culprit")
    rows = list(((rep.get("metrics") or {}).get("steps") or {}).get("per_step") or [])
    # the column of ``steps.per_step`` that holds its time in each step (the idle cause or the collective time it
    # claims: its rule's ``step_part``); findings without one are placed by their evidence ranges
    rule = api.catalogue.rule_of(finding, rep.get("metrics") or {})
    part = rule.step_part if rule is not None else None
    steps = [
        {
            "index": r["index"],
            "duration_ns": r["duration_ns"],
            **({part: r.get(part)} if part else {}),
            "evidence_ranges": sum(1 for s, e in ranges if r["start_ns"] <= (s + e) // 2 < r["end_ns"]),
        }
        for r in rows
    ]
    longest = max(ranges, key=lambda r: r[1] - r[0]) if ranges else None
    answer = {
        "name": target.name,
        "level": "run",
        **run_state(rep),
        "finding": dict(f) if detail else {**_finding(f, False), "fix": f.get("fix"), "metric": f.get("metric")},
        "profiler": _trust(rep)["profiler"],
        "steps": steps,
        "step_part": part,
        "focus_step": focus(rows, part, ranges),
        "culprit": culprit,
        "ranges": [
            {"start_ns": s, "end_ns": e, "duration_ns": e - s, "step": _step_of(rows, (s + e) // 2)} for s, e in ranges
        ],
        "source": got.source_of(culprit, longest) if longest is not None else None,
        "next": "top_activities(run, step=focus_step) for what the host and GPU do in that step",
    }
    return fit(answer, budget(detail), "explain_finding(..., detail=true) for every step and range")


def top_activities(
    ws: Workspace,
    run: str,
    step: int | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    top: int = 5,
    detail: bool = False,
) -> dict[str, Any]:
    """What the host and the GPU do in a step or time range of one run (``api.Analysed.activities``)."""
    target = ws.target(run)
    if target.level == "job":
        raise RunNotFound(f"{target.name} is a job: name one of its ranks (run/worker/span; see list_runs)")
    loaded = ws.loaded(target)
    got = loaded.activities(step=step, start_ns=start_ns, end_ns=end_ns, top=top)
    answer = {"name": target.name, **run_state(loaded.report), "activities": got}
    return fit(answer, budget(detail), "top_activities(..., top=N, detail=true); or a narrower range")


#: a part's fields in a default ``anatomy`` answer (the report's ``anatomy.parts.*`` keys); ``detail``: every field
_PART_BRIEF = (
    "time_ns", "share", "per_step_time_ns", "launches", "host_dispatch_ns", "dtype", "achieved_tflops", "peak_tflops",
    "efficiency_share", "efficiency_withheld", "identified_by", "identified_share", "top_ops", "backend",
)  # fmt: skip


#: why an XLA run has no model parts (the topic runs on Kineto traces only; the tab says the same)
XLA_NO_PARTS = "the model's parts are read from PyTorch (Kineto) traces' host call chains; this is an XLA trace"


class NoAnatomy(LlmDiagError):
    exit_code = 2


def anatomy(
    ws: Workspace,
    run: str,
    step: int | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    detail: bool = False,
) -> dict[str, Any]:
    """The GPU's time by part of the model (the report's ``metrics.anatomy``, its parts as a list largest first,
    each with its name), and with a step or a range, the parts' time there (``api.Analysed.anatomy_in``)."""
    target = ws.target(run)
    if target.level == "job":
        raise RunNotFound(f"{target.name} is a job: name one of its ranks (run/worker/span; see list_runs)")
    loaded = ws.loaded(target)
    a = (loaded.report.get("metrics") or {}).get("anatomy") or {}
    if not a.get("available"):
        xla = ((loaded.report.get("metrics") or {}).get("run") or {}).get("platform") == "xla"
        why = a.get("reason") or loaded.report.get("error") or (XLA_NO_PARTS if xla else "the run has no anatomy topic")
        raise NoAnatomy(f"no model parts for run {target.name}: {why}")
    ranked = sorted(a["parts"].items(), key=lambda kv: -kv[1]["time_ns"])
    parts = [{"name": n, **{k: v for k, v in f.items() if detail or k in _PART_BRIEF}} for n, f in ranked]
    head = {k: v for k, v in a.items() if k != "parts" and (detail or k != "step_index")}
    answer: dict[str, Any] = {"name": target.name, **run_state(loaded.report), "anatomy": {**head, "parts": parts}}
    if step is not None or start_ns is not None or end_ns is not None:
        answer["activities"] = loaded.anatomy_in(step=step, start_ns=start_ns, end_ns=end_ns)
    answer["next"] = "top_activities(run, step) for the kernels and host ops of a step; explain_finding for a cause"
    return fit(answer, budget(detail), "anatomy(..., detail=true) for every field; or a step or a narrower range")
