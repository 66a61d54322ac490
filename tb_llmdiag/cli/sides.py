"""BEFORE / AFTER (or BASELINE / CANDIDATE) from the command line to one side each: a run or a job
(``tb_llmdiag.compare.side``; docs/compare.md, "Sides"), through the front door.

A path is a trace file, a run folder or logdir (analysed now, through ``api.analyze_file`` /
``api.analyze_index``; only the selected files), or a saved ``llmdiag report --json`` document
(``api.saved_report``). A side is a *job* when it holds the ranks of one run (several trace files of one run and
span, or a saved report with that run's ``jobs[]`` entry and its ranks' run reports). Which one a side is:

- no ``--run``: the only run (a run), else the only job when every file of the side is one of its ranks (a job),
  else an error listing the runs and jobs;
- ``--run NAME``: a job when NAME is the run of a job (``NAME/SPAN`` when its run has several), a run when NAME
  names one trace (``run``, ``run/worker`` or ``run/worker/span``: one rank of a job compares at rank level).
The name rules are ``compare/names.py``'s (``api.names``), shared with the agent's run names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tb_llmdiag import api
from tb_llmdiag.errors import LlmDiagError, TraceFormatError

Candidate = api.names.Candidate
AmbiguousSide = api.names.AmbiguousSide


class MixedSides(LlmDiagError):
    """One side is a job, the other a single run (a command-line problem: exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Loaded:
    """One side, loaded, and the warnings its loading gave."""

    side: api.Side
    warnings: list[str] = field(default_factory=list)


def candidates(path: str) -> list[Candidate]:
    doc = api.saved_report(path)
    if doc is not None:
        return [
            Candidate(str(r.get("run")), str(r.get("worker")), str(r.get("span")), report=r)
            for r in doc["runs"]
            if isinstance(r, dict)
        ]
    index = api.discover(path)
    return [Candidate(tf.run, tf.worker, tf.span, trace_file=tf) for tf in index.files]


def load_run(found: Sequence[Candidate], path: str, run: str | None, role: str) -> Loaded:
    """The run report of one side. Raises TraceFormatError (exit 4) when it could not be analysed."""
    c = api.names.select(found, run, role, path)
    if c.report is not None:
        rep = dict(c.report)
    else:
        assert c.trace_file is not None  # a candidate holds a report or a file
        rep = api.analyze_file(c.trace_file)
    status = rep.get("status")
    where = f"{role} {path} (run {api.names.label(c, [c])})"
    if status not in ("ok", "partial"):
        raise TraceFormatError(f"{where} could not be analysed: {rep.get('error') or 'no report'}")
    warnings = [f"{where}: analysed from a partial trace ({rep.get('error')})"] if status == "partial" else []
    return Loaded(api.RunSide(rep), warnings)


def _checked(job: Mapping[str, Any] | None, runs: Sequence[Mapping[str, Any]], where: str) -> Loaded:
    job = job or {}
    if job.get("status") != "ok":
        raise TraceFormatError(f"{where} could not be analysed as a job: {job.get('error') or 'no job entry'}")
    bad = [r for r in runs if r.get("status") not in ("ok", "partial")]
    warnings = [f"{where}: rank {r.get('worker')} could not be analysed ({r.get('error')})" for r in bad]
    warnings += [f"{where}: {n}" for n in job.get("notes") or []]
    return Loaded(api.JobSide(job, [r for r in runs if r not in bad]), warnings)


def _saved_job(doc: Mapping[str, Any], run: str, span: str, where: str) -> Loaded:
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
    return _checked(entry, runs, where)


def load(path: str, run: str | None, role: str) -> Loaded:
    """One side (module docstring). Raises AmbiguousSide / RunNotFound / NoTracesFound (as ``select``),
    TraceFormatError when it could not be analysed."""
    found = candidates(path)
    picked = api.names.pick_job(found, run)
    if picked is None:
        try:
            return load_run(found, path, run, role)
        except AmbiguousSide as exc:
            jobs = [api.names.job_name(r, s, found) for r, s, _ in api.names.jobs_of(found)]
            if run is not None or not jobs:
                raise
            raise AmbiguousSide(f"{exc} (a whole job: --run {' or '.join(jobs)})") from None
    jrun, span = picked
    where = f"{role} {path} (job {jrun}, span {span})"
    doc = api.saved_report(path)
    if doc is not None:
        return _saved_job(doc, jrun, span, where)
    index = api.discover(path)
    files = next(fs for r, s, fs in api.job_groups(index.files) if (r, s) == (jrun, span))
    runs, entries = api.analyze_index(api.Index(root=index.root, files=tuple(files)))
    return _checked(entries[0] if entries else None, runs, where)


def mixed_error(b: api.Side, a: api.Side, roles: tuple[str, str], flags: tuple[str, str]) -> MixedSides:
    """The one-line error when one side is a job and the other a run: how to pick a rank of the job."""
    job_side, role, flag = (b, roles[0], flags[0]) if isinstance(b, api.JobSide) else (a, roles[1], flags[1])
    assert isinstance(job_side, api.JobSide)
    other = roles[1] if role == roles[0] else roles[0]
    job = job_side.job
    first = next((r for r in job_side.runs), None)
    example = f"{job.get('run')}/{first.get('worker')}/{first.get('span')}" if first is not None else "run/worker/span"
    return MixedSides(
        f"{role} is a job ({job.get('run')}, {len(job_side.runs)} ranks) and {other} a single run: compare one "
        f"rank with {flag} {example}, or give {other} a job too"
    )
