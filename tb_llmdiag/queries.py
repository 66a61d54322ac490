"""Front-door queries beside ``api.py`` (which re-exports every name here; surfaces import ``api`` only).

- ``resolve(index, name, where)``: the trace or job a run name picks in a discovered index, by the ``--run NAME``
  rules of ``compare`` (``compare.names``): ``run``, ``run/worker``, ``run/worker/span``, a job's ``run`` or
  ``run/span``; a wrong name is the CLI's one-line error.
- ``step_range(report, step)``: a step's window on the trace's clock, from the report's ``steps.per_step``.
- ``top_activities(trace, analysis, ...)``: the ``activities`` answer for a step or a time range
  (``traceview/activities.py``).
- ``source_of(trace, name, range)``: the Python frames around a trace range (``traceview/source.py``).
- ``finding_catalogue()``: every finding the engine can report (run and job rules) as JSON: what an agent cites.
- ``compare_reports``, ``compare_job_reports``, ``check``: the comparison of two run reports or two jobs and the
  CI gate over it (``compare``), pure over the dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tb_llmdiag.compare import check, compare_jobs, compare_runs
from tb_llmdiag.compare.names import Candidate, job_name, jobs_of, label, pick_job, select
from tb_llmdiag.errors import LlmDiagError, RunNotFound
from tb_llmdiag.findings import RULES
from tb_llmdiag.findings.job import JOB_RULES
from tb_llmdiag.ingest.discover import Index, TraceFile
from tb_llmdiag.metrics import Analysis
from tb_llmdiag.metrics.labels import VALUE_WORDS, unfilled
from tb_llmdiag.model import Trace
from tb_llmdiag.traceview.activities import DEFAULT_TOP
from tb_llmdiag.traceview.activities import top_activities as _activities
from tb_llmdiag.traceview.source import source_of

__all__ = [
    "BadRange", "RunNotFound", "Target", "check", "compare_job_reports", "compare_reports", "finding_catalogue",
    "rule_catalogue", "run_names", "resolve", "source_of", "step_range", "top_activities",
]  # fmt: skip


class BadRange(LlmDiagError):
    """A step or time range the trace does not have (a bad argument: exit code 2, like a bad command line)."""

    exit_code = 2


@dataclass(frozen=True)
class Target:
    """What a run name picks: one trace (``level == "run"``, one file) or a job (its ranks' files)."""

    level: str
    name: str
    files: tuple[TraceFile, ...]
    run: str
    span: str


def _candidates(index: Index) -> list[Candidate]:
    return [Candidate(tf.run, tf.worker, tf.span, trace_file=tf) for tf in index.files]


def run_names(index: Index) -> tuple[list[tuple[str, TraceFile]], list[tuple[str, str, str, list[TraceFile]]]]:
    """Every trace's name (its shortest: ``compare.names.label``) and every job's ``(name, run, span, files)``."""
    found = _candidates(index)
    traces = [(label(c, found), tf) for c, tf in zip(found, index.files)]
    jobs = [
        (job_name(r, s, found), r, s, [tf for tf in index.files if (tf.run, tf.span) == (r, s)])
        for r, s, _ in jobs_of(found)
    ]
    return traces, jobs


def resolve(index: Index, name: str | None, where: str, role: str = "run") -> Target:
    """The trace or job ``name`` picks in ``index`` (module docstring); ``where`` and ``role`` word the error.

    Raises:
        RunNotFound / AmbiguousSide / NoTracesFound: as ``compare``'s ``--run`` (one line, listing the runs).
    """
    found = _candidates(index)
    job = pick_job(found, name)
    if job is not None:
        run, span = job
        files = tuple(tf for tf in index.files if (tf.run, tf.span) == (run, span))
        return Target("job", job_name(run, span, found), files, run, span)
    c = select(found, name, role, where)
    assert c.trace_file is not None  # candidates of an index hold their file
    return Target("run", label(c, found), (c.trace_file,), c.run, c.span)


def step_range(report: Mapping[str, Any], step: int) -> tuple[int, int]:
    """``(start_ns, end_ns)`` of step ``step`` (its ``index``, as the report and the profiler number it).

    Raises:
        BadRange: the report has no such step (the message lists the ones it has).
    """
    rows = ((report.get("metrics") or {}).get("steps") or {}).get("per_step") or []
    for r in rows:
        if r.get("index") == step:
            return int(r["start_ns"]), int(r["end_ns"])
    have = ", ".join(str(r.get("index")) for r in rows) or "none: the trace has no step markers"
    raise BadRange(f"no step {step} in run {report.get('run')} (steps: {have})")


def top_activities(
    trace: Trace,
    analysis: Analysis,
    report: Mapping[str, Any],
    *,
    step: int | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    top: int = DEFAULT_TOP,
) -> dict[str, Any]:
    """What the host and the GPU do in step ``step``, or in [start_ns, end_ns) (the whole window when neither is
    given): the ``activities`` answer (``traceview/activities.py``; keys in the metric registry).

    Raises:
        BadRange: an unknown step, both a step and times, or a range that is empty or outside the trace.
    """
    if step is not None and (start_ns is not None or end_ns is not None):
        raise BadRange("give a step or a time range (start_ns, end_ns), not both")
    if step is not None:
        lo, hi = step_range(report, step)
    else:
        window = int(((report.get("summary") or {}).get("window_ns")) or 0)
        lo = 0 if start_ns is None else int(start_ns)
        hi = window if end_ns is None else int(end_ns)
        if not 0 <= lo < hi or lo >= window:
            raise BadRange(f"empty range or outside the trace: [{lo}, {hi}) ns; the trace covers [0, {window}) ns")
    return _activities(trace, analysis, lo, hi, top=top, step=step)


def finding_catalogue() -> dict[str, Any]:
    """Every finding the engine can report: ``{"runs": [...], "jobs": [...]}``, each rule's id, title, the metric
    (a registry key) it compares and its threshold, the registry keys of its evidence, its fix and docs."""
    runs = [
        {
            "id": r.id,
            "title": r.title,
            "platform": r.platform,
            "metric": r.metric,
            "above": r.above,
            "below": r.below,
            "evidence": {lab: p for lab, p in r.evidence if isinstance(p, str)},
            "skip_on": list(r.skip_on),
            "fix": r.fix.text,
            "docs": r.docs,
        }
        for r in RULES
    ]
    jobs = [
        {
            "id": r.id,
            "title": r.title,
            "metric": f"job.{r.metric}",
            "above": r.above,
            "evidence": [label for label, _ in r.evidence],
        }
        for r in JOB_RULES
    ]
    return {"runs": runs, "jobs": jobs}


#: what picks a job rule's fix, in words (``Rule.fix_by``)
CHOSEN_BY = {"straggler_cause": "cause of the straggler", "top_collective_kind": "leading collective kind"}

#: how ``llmdiag rules`` names a platform (``Rule.platform``; a rule without one applies to both)
PLATFORM_NAMES = {"cuda": "GPU (Kineto)", "xla": "XLA (XPlane)"}


def rule_catalogue() -> list[dict[str, Any]]:
    """Every rule once by id: the run rules (one id may have a GPU and an XLA variant: its platforms are listed
    together, with the first variant's title and fix), then the job rules (a run with several ranks)."""
    by_id: dict[str, dict[str, Any]] = {}
    for r in RULES:
        e = by_id.setdefault(
            r.id,
            {
                "id": r.id,
                "level": "run",
                "platforms": [],
                "title": r.title,
                "fix": unfilled(r.fix.text),
                "docs": r.docs,
            },
        )
        e["platforms"].extend(p for p in ([r.platform] if r.platform else PLATFORM_NAMES) if p not in e["platforms"])
    jobs = [
        {
            "id": r.id,
            "level": "job",
            "platforms": ["a job: every rank of a run"],
            "title": r.title,
            # chosen by what the job shows (the straggler's cause, the leading collective kind): named, not listed
            "fix": (r.fix.text + " " if r.fix.text else "")
            + (
                f"(one fix for each {CHOSEN_BY.get(r.fix_by, 'case')}: "
                f"{', '.join(VALUE_WORDS.get(k, k.replace('_', ' ')) for k, _ in r.fixes)})"
                if r.fixes and r.fix_by
                else ""
            ),
            "docs": r.docs,
        }
        for r in JOB_RULES
    ]
    for e in by_id.values():
        e["platforms"] = [PLATFORM_NAMES[p] for p in PLATFORM_NAMES if p in e["platforms"]]
    return [*by_id.values(), *jobs]


#: Two RunReports compared (docs/compare.md): the metric table with noise bands, the finding diff and the verdict,
#: ``compare_reports(baseline, run)`` with ``baseline`` as BEFORE. Pure: reads the two reports only.
compare_reports = compare_runs


def compare_job_reports(
    baseline_job: dict[str, Any],
    baseline_runs: list[dict[str, Any]],
    job: dict[str, Any],
    runs: list[dict[str, Any]],
    **kw: Any,
) -> dict[str, Any]:
    """Two jobs compared (docs/compare.md, ``level: "job"``): each a report's ``jobs[]`` entry and the run reports
    of its ranks, ``baseline_job`` as BEFORE; ``kw`` as ``compare_jobs`` (``sources``, ``roles``, tolerances).
    Pure: reads the dicts only."""
    return compare_jobs(baseline_job, job, baseline_runs, runs, **kw)
