"""BEFORE / AFTER (or BASELINE / CANDIDATE) from the command line to one side each: a run or a job
(``tb_llmdiag.compare.side``; docs/compare.md, "Sides"), through the front door.

A path is a trace file, a run folder or logdir (analysed now, through ``api.analyze`` / ``api.report``; only the
selected files), or a saved ``llmdiag report --json`` document
(``api.saved_report``). A side is a *job* when it holds the ranks of one run (several trace files of one run and
span, or a saved report with that run's ``jobs[]`` entry and its ranks' run reports). Which one a side is:

- no ``--run``: the only run (a run), else the only job when every file of the side is one of its ranks (a job),
  else an error listing the runs and jobs;
- ``--run NAME``: a job when NAME is the run of a job (``NAME/SPAN`` when its run has several), a run when NAME
  names one trace (``run``, ``run/worker`` or ``run/worker/span``: one rank of a job compares at rank level).
The name rules are ``compare/names.py``'s (``api.resolve``), shared with the agent's run names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tb_llmdiag import api
from tb_llmdiag.errors import LlmDiagError, TraceFormatError

if TYPE_CHECKING:
    from tb_llmdiag.compare.names import Target


class MixedSides(LlmDiagError):
    """One side is a job, the other a single run (a command-line problem: exit 2)."""

    exit_code = 2


#: A side as ``api.compare`` takes it: a run report, or a job's ``jobs[]`` entry and its ranks' run reports.
Side = Mapping[str, Any] | tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]


@dataclass(frozen=True)
class Loaded:
    """One side, loaded (``level``: ``run`` or ``job``), and the warnings its loading gave."""

    side: Side
    level: str
    warnings: list[str] = field(default_factory=list)


def load_run(target: Target, path: str, role: str) -> Loaded:
    """The run report of one side. Raises TraceFormatError (exit 4) when it could not be analysed."""
    rep = dict(target.reports[0]) if target.reports else api.analyze(target.files[0]).report
    status = rep.get("status")
    where = f"{role} {path} (run {target.run})"
    if status not in ("ok", "partial"):
        raise TraceFormatError(f"{where} could not be analysed: {rep.get('error') or 'no report'}")
    warnings = [f"{where}: analysed from a partial trace ({rep.get('error')})"] if status == "partial" else []
    return Loaded(rep, "run", warnings)


def _checked(job: Mapping[str, Any] | None, runs: Sequence[Mapping[str, Any]], where: str) -> Loaded:
    job = job or {}
    if job.get("status") != "ok":
        raise TraceFormatError(f"{where} could not be analysed as a job: {job.get('error') or 'no job entry'}")
    bad = [r for r in runs if r.get("status") not in ("ok", "partial")]
    warnings = [f"{where}: rank {r.get('worker')} could not be analysed ({r.get('error')})" for r in bad]
    warnings += [f"{where}: {n}" for n in job.get("notes") or []]
    return Loaded((job, [r for r in runs if r not in bad]), "job", warnings)


def _saved_job(doc: Mapping[str, Any], target: Target, where: str) -> Loaded:
    run, span = target.run, target.span
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
    return _checked(entry, target.reports, where)


def load(path: str, run: str | None, role: str) -> Loaded:
    """One side (module docstring). Raises AmbiguousSide / RunNotFound / NoTracesFound (as ``api.resolve``),
    TraceFormatError when it could not be analysed."""
    doc = api.saved_report(path)
    if doc is not None:
        target = api.resolve(doc, run, path, role)
        if target.level == "job":
            return _saved_job(doc, target, f"{role} {path} (job {target.run}, span {target.span})")
    else:
        index = api.discover(path)
        target = api.resolve(index, run, path, role)
        if target.level == "job":
            got = api.report(replace(index, files=target.files))  # only the job's ranks are analysed
            where = f"{role} {path} (job {target.run}, span {target.span})"
            return _checked(got["jobs"][0] if got["jobs"] else None, got["runs"], where)
    return load_run(target, path, role)


def mixed_error(b: Loaded, a: Loaded, roles: tuple[str, str], flags: tuple[str, str]) -> MixedSides:
    """The one-line error when one side is a job and the other a run: how to pick a rank of the job."""
    job_side, role, flag = (b, roles[0], flags[0]) if b.level == "job" else (a, roles[1], flags[1])
    assert isinstance(job_side.side, tuple)
    other = roles[1] if role == roles[0] else roles[0]
    job, runs = job_side.side
    first = next((r for r in runs), None)
    example = f"{job.get('run')}/{first.get('worker')}/{first.get('span')}" if first is not None else "run/worker/span"
    return MixedSides(
        f"{role} is a job ({job.get('run')}, {len(runs)} ranks) and {other} a single run: compare one "
        f"rank with {flag} {example}, or give {other} a job too"
    )
