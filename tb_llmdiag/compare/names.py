"""Which run or job a name picks among the runs a side (or a logdir) holds: the ``--run NAME`` rules, pure.

A name is a run (``run``), one trace of it (``run/worker``, ``run/worker/span``), or a job: the traces of one run
and span, two or more (``run``, or ``run/span`` when its run has several). ``compare``/``check`` (``sides``,
``job_sides``) and the front door (``api.resolve``: the agent's run names) both pick with these functions, so a
name means the same everywhere and a wrong one gets the same one-line error.

Over a discovered index or a saved report (``api.resolve``, ``api.run_names``: the CLI's sides, the agent's run names):
- ``resolve(source, name, where)``: the trace or job a run name picks (a ``Target``), by the rules above: ``run``,
  ``run/worker``, ``run/worker/span``, a job's ``run`` or ``run/span``; a wrong name is the CLI's one-line error.
- ``run_names(index)``: every trace's shortest name and every job's name, run, span and files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tb_llmdiag.errors import AmbiguousSide, NoTracesFound, RunNotFound, listed, quoted
from tb_llmdiag.ingest.discover import Index, TraceFile


@dataclass(frozen=True)
class Candidate:
    """One run a side holds: its names, and either its report (saved) or its file (to analyse)."""

    run: str
    worker: str
    span: str
    report: Mapping[str, Any] | None = None
    trace_file: TraceFile | None = None

    def names(self) -> tuple[str, ...]:
        return (self.run, f"{self.run}/{self.worker}", f"{self.run}/{self.worker}/{self.span}")


def label(c: Candidate, all_: Sequence[Candidate]) -> str:
    """The shortest name of ``c`` among ``all_``: its run, or ``run/worker/span`` where the run has several traces."""
    same_run = [x for x in all_ if x.run == c.run]
    return c.run if len(same_run) == 1 else f"{c.run}/{c.worker}/{c.span}"


def select(found: Sequence[Candidate], run: str | None, role: str, path: str) -> Candidate:
    """The one candidate ``run`` names (or the only one). Raises AmbiguousSide / RunNotFound / NoTracesFound."""
    if not found:
        raise NoTracesFound(f"{role} {path}: no profiler traces or runs found")
    labels = [label(c, found) for c in found]
    if run is None:
        if len(found) == 1:
            return found[0]
        raise AmbiguousSide(f"{role} {path} holds {len(found)} runs ({listed(labels)}); pick one with --run NAME")
    picked = [c for c in found if run in c.names()]
    if not picked:
        raise RunNotFound(f"{role} {path}: no run named {quoted(run)} (runs: {listed(labels)})")
    if len(picked) > 1:
        names = listed(label(c, found) for c in picked)
        raise AmbiguousSide(
            f"{role} {path}: --run {quoted(run)} matches {len(picked)} traces ({names}); name one as run/worker/span"
        )
    return picked[0]


def jobs_of(found: Sequence[Candidate]) -> list[tuple[str, str, int]]:
    """``(run, span, ranks)`` of every run and span with at least two traces."""
    groups: dict[tuple[str, str], int] = {}
    for c in found:
        groups[(c.run, c.span)] = groups.get((c.run, c.span), 0) + 1
    return [(r, s, n) for (r, s), n in groups.items() if n >= 2]


def job_name(run: str, span: str, found: Sequence[Candidate]) -> str:
    """The name of a job: its run, or ``run/span`` when its run has several jobs."""
    return f"{run}/{span}" if sum(1 for x in jobs_of(found) if x[0] == run) > 1 else run


def pick_job(found: Sequence[Candidate], run: str | None) -> tuple[str, str] | None:
    """The job a side (and ``--run``) means, or None when it means a single trace (``job_sides``'s docstring):
    no name picks the only job when every trace is one of its ranks; a name picks a job by its run or run/span,
    unless it names one trace (``run/worker``, ``run/worker/span``)."""
    jobs = jobs_of(found)
    if run is None:
        if len(found) > 1 and len(jobs) == 1 and jobs[0][2] == len(found):
            return jobs[0][0], jobs[0][1]
        return None
    if any(run in c.names()[1:] for c in found):  # run/worker or run/worker/span: one trace
        return None
    named = [(r, s) for r, s, _ in jobs if run in (r, f"{r}/{s}")]
    if len(named) > 1:
        spans = listed(f"{r}/{s}" for r, s in named)
        raise AmbiguousSide(f"--run {quoted(run)} names {len(named)} jobs ({spans}); name one as run/span")
    return named[0] if named else None


@dataclass(frozen=True)
class Target:
    """What a run name picks: one trace (``level == "run"``) or a job (its ranks): their files in a discovered
    index, or their run reports in a saved report (``reports``)."""

    level: str
    name: str
    files: tuple[TraceFile, ...]
    run: str
    span: str
    reports: tuple[Mapping[str, Any], ...] = ()


def _candidates(source: Index | Mapping[str, Any]) -> list[Candidate]:
    """The runs a discovered index (their files) or a saved report (their run reports) holds."""
    if isinstance(source, Index):
        return [Candidate(tf.run, tf.worker, tf.span, trace_file=tf) for tf in source.files]
    return [
        Candidate(str(r.get("run")), str(r.get("worker")), str(r.get("span")), report=r)
        for r in source["runs"]
        if isinstance(r, dict)
    ]


def run_names(index: Index) -> tuple[list[tuple[str, TraceFile]], list[Target]]:
    """Every trace's name (its shortest: ``label``) and every job (its ``Target``: name, run, span, files)."""
    found = _candidates(index)
    traces = [(label(c, found), tf) for c, tf in zip(found, index.files)]
    jobs = [
        Target("job", job_name(r, s, found), tuple(tf for tf in index.files if (tf.run, tf.span) == (r, s)), r, s)
        for r, s, _ in jobs_of(found)
    ]
    return traces, jobs


def resolve(source: Index | Mapping[str, Any], name: str | None, where: str, role: str = "run") -> Target:
    """The trace or job ``name`` picks in ``source``, a discovered index or a saved report (module docstring);
    ``where`` and ``role`` word the error. Without a name, a side of several runs that are not one job is
    ambiguous: the error names the jobs it holds, if any (``--run JOB`` picks a whole job).

    Raises:
        RunNotFound / AmbiguousSide / NoTracesFound: as ``compare``'s ``--run`` (one line, listing the runs).
    """
    found = _candidates(source)
    job = pick_job(found, name)
    if job is not None:
        run, span = job
        ranks = [c for c in found if (c.run, c.span) == (run, span)]
        files = tuple(c.trace_file for c in ranks if c.trace_file is not None)
        reports = tuple(c.report for c in ranks if c.report is not None)
        return Target("job", job_name(run, span, found), files, run, span, reports)
    try:
        c = select(found, name, role, where)
    except AmbiguousSide as exc:
        jobs = [job_name(r, s, found) for r, s, _ in jobs_of(found)]
        if name is not None or not jobs:
            raise
        raise AmbiguousSide(f"{exc} (a whole job: --run {' or '.join(jobs)})") from None
    files = (c.trace_file,) if c.trace_file is not None else ()
    reports = (c.report,) if c.report is not None else ()
    return Target("run", label(c, found), files, c.run, c.span, reports)
