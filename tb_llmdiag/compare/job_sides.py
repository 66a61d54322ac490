"""A side of ``compare`` / ``check`` as a single run or as a distributed job (docs/compare.md, "Sides").

A side is a *job* when it holds the ranks of one run (several trace files of one run and span: a logdir or run
folder, analysed now; or a saved ``report --json`` document with that run's ``jobs[]`` entry and its ranks' run
reports). Which one a side is:

- no ``--run``: the only run (a run), else the only job when every file of the side is one of its ranks (a job),
  else an error listing the runs and jobs;
- ``--run NAME``: a job when NAME is the run of a job (``NAME/SPAN`` when its run has several), a run when NAME
  names one trace (``run``, ``run/worker`` or ``run/worker/span``: one rank of a job compares at rank level).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tb_llmdiag.compare.names import AmbiguousSide, job_name
from tb_llmdiag.compare.names import jobs_of as _jobs_of
from tb_llmdiag.compare.names import pick_job as _pick_job
from tb_llmdiag.compare.sides import Analyzer, candidates, load_side, saved_report
from tb_llmdiag.errors import LlmDiagError, TraceFormatError
from tb_llmdiag.ingest.discover import Index, discover
from tb_llmdiag.jobs.build import job_groups


class MixedSides(LlmDiagError):
    """One side is a job, the other a single run (a command-line problem: exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Side:
    """One side, loaded: a run report (``level == "run"``) or a job entry and its ranks' run reports."""

    level: str
    report: Mapping[str, Any] | None = None
    job: Mapping[str, Any] | None = None
    runs: Sequence[Mapping[str, Any]] = ()
    warnings: list[str] = field(default_factory=list)

    def name(self) -> str:
        src = self.job if self.level == "job" else self.report
        return str((src or {}).get("run"))


def _saved_job(doc: Mapping[str, Any], run: str, span: str, where: str) -> Side:
    entry = next(
        (
            j
            for j in doc.get("jobs") or []
            if isinstance(j, Mapping) and (j.get("run"), str(j.get("span"))) == (run, span)
        ),
        None,
    )
    if entry is None:
        raise TraceFormatError(
            f"{where}: the saved report has {run}'s ranks but no jobs[] entry for it (saved before jobs: "
            "save it again with `llmdiag report --json`, or pick one rank with --run run/worker/span)"
        )
    runs = [r for r in doc["runs"] if isinstance(r, Mapping) and r.get("run") == run and str(r.get("span")) == span]
    return _checked(Side("job", job=entry, runs=runs), where)


def _checked(side: Side, where: str) -> Side:
    job = side.job or {}
    if job.get("status") != "ok":
        raise TraceFormatError(f"{where} could not be analysed as a job: {job.get('error') or 'no job entry'}")
    bad = [r for r in side.runs if r.get("status") not in ("ok", "partial")]
    warnings = [f"{where}: rank {r.get('worker')} could not be analysed ({r.get('error')})" for r in bad]
    warnings += [f"{where}: {n}" for n in job.get("notes") or []]
    return Side("job", job=job, runs=[r for r in side.runs if r not in bad], warnings=warnings)


def load(path: str, run: str | None, role: str, analyzer: Analyzer) -> Side:
    """One side (module docstring). Raises AmbiguousSide / RunNotFound / NoTracesFound (as ``sides.select``),
    TraceFormatError when it could not be analysed."""
    found = candidates(path)
    picked = _pick_job(found, run)
    if picked is None:
        try:
            rep, warnings = load_side(path, run, role, analyzer)
        except AmbiguousSide as exc:
            jobs = [job_name(r, s, found) for r, s, _ in _jobs_of(found)]
            if run is not None or not jobs:
                raise
            raise AmbiguousSide(f"{exc} (a whole job: --run {' or '.join(jobs)})") from None
        return Side("run", report=rep, warnings=warnings)
    jrun, span = picked
    where = f"{role} {path} (job {jrun}, span {span})"
    doc = saved_report(path)
    if doc is not None:
        return _saved_job(doc, jrun, span, where)
    index = discover(path)
    files = next(fs for r, s, fs in job_groups(index.files) if (r, s) == (jrun, span))
    runs, entries = analyzer.analyze_index(Index(root=index.root, files=tuple(files)))
    return _checked(Side("job", job=entries[0] if entries else None, runs=runs), where)


def mixed_error(b: Side, a: Side, roles: tuple[str, str], args: tuple[str | None, str | None]) -> MixedSides:
    """The one-line error when one side is a job and the other a run: how to pick a rank of the job."""
    job_side, role, flag = (b, roles[0], args[0]) if b.level == "job" else (a, roles[1], args[1])
    other = roles[1] if role == roles[0] else roles[0]
    job = job_side.job or {}
    first = next((r for r in job_side.runs), None)
    example = f"{job.get('run')}/{first.get('worker')}/{first.get('span')}" if first is not None else "run/worker/span"
    return MixedSides(
        f"{role} is a job ({job.get('run')}, {len(job_side.runs)} ranks) and {other} a single run: compare one "
        f"rank with {flag} {example}, or give {other} a job too"
    )
