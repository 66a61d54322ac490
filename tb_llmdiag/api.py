"""The library's front door: discover -> load -> metrics -> diagnosis, as report dicts.

Thin by design: each step lives in its own layer; this module only composes them and turns user
errors into per-run error entries, so one bad file never stops the others.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any, BinaryIO

from tb_llmdiag import __version__
from tb_llmdiag.compare import compare, is_compare_key, names
from tb_llmdiag.compare.side import JobSide, RunSide, Side
from tb_llmdiag.errors import LlmDiagError, NoTracesFound, TraceFormatError
from tb_llmdiag.findings import EVIDENCE_LABELS, EVIDENCE_UNITS, RULES, diagnose
from tb_llmdiag.ingest import discover as discover_local
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.ingest.discover import Index, TraceFile, discover_url
from tb_llmdiag.ingest.files import NotRegularFile, file_refusal, open_regular
from tb_llmdiag.ingest.formats import READER_MODULES
from tb_llmdiag.ingest.fs import is_url, local_copy, open_object, strip_file_url
from tb_llmdiag.ingest.links import LinkOutside, outside
from tb_llmdiag.ingest.saved_report import saved_report
from tb_llmdiag.ingest.written import still_being_written
from tb_llmdiag.jobs.build import job_entry, job_groups, rank_label
from tb_llmdiag.jobs.rank_summary import RankSummary, rank_activities, rank_profiler, summarize_rank
from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics import Analysis, analyze, registry
from tb_llmdiag.metrics.headline import headline
from tb_llmdiag.metrics.summary import summarize
from tb_llmdiag.metrics.workload import run_phase
from tb_llmdiag.model import MODEL_VERSION, Trace
from tb_llmdiag.queries import *  # noqa: F403  (the front door's queries: queries.__all__, re-exported whole)
from tb_llmdiag.queries import __all__ as queries_names
from tb_llmdiag.scale.runner import InlineRunner, Runner
from tb_llmdiag.scale.session import TAB_ENV as DASK_ENV
from tb_llmdiag.scale.session import runner_session, tab_executor
from tb_llmdiag.series import SERIES_SCHEMA
from tb_llmdiag.series import build as build_series
from tb_llmdiag.timeline import TIMELINE_VERSION
from tb_llmdiag.timeline import build as build_timelines
from tb_llmdiag.traceview.build import TRACEVIEW_VERSION, Put
from tb_llmdiag.traceview.build import build_for as build_traceview
from tb_llmdiag.traceview.evidence import locate as locate_evidence
from tb_llmdiag.traceview.index import BadIndex, TraceIndex

logger = logging.getLogger(__name__)

#: Version of the report JSON (docs/report_schema.md). 3: the ``jobs`` level, the ``communication`` topic,
#: collectives no longer count as GPU busy.
REPORT_SCHEMA = 3

#: Everything a cached result depends on besides the file itself (the tab's cache key includes it).
ENGINE_VERSION = (MODEL_VERSION, REPORT_SCHEMA, TIMELINE_VERSION, TRACEVIEW_VERSION)

# fmt: off
__all__ = [
    "BadIndex", "DASK_ENV", "ENGINE_VERSION", "Index", "JobSide", "LinkOutside", "NotRegularFile",
    "REPORT_SCHEMA", "RULES", "RunSide", "Runner", "SERIES_SCHEMA", "Side", "TIMELINE_VERSION", "TRACEVIEW_VERSION", "TraceFile",
    "TraceIndex", "analyze_file", "analyze_for_tab", "analyze_index", "analyze_rank_file", "analyze_trace", "compare",
    "discover", "error_report", "is_compare_key", "is_url", "job_for_summaries", "job_groups", "load_analysis",
    "locate_evidence", "names", "open_raw", "preload", "rank_summary", "report", "report_index", "saved_report",
    "tab_executor", "timeline", "timeline_of_runs", "writing", "writing_report", *queries_names,
]
# fmt: on


#: Modules the engine imports on first use (so that TensorBoard starts without them); preload() lists
#: them, and a test checks that analysing a trace imports nothing more of ours.
_LAZY_MODULES = (
    *READER_MODULES,
    "numpy.ma",  # numpy imports it on the first np.unique
)


def preload() -> None:
    """Import the readers and metric topics now rather than on first use. For long-lived processes and
    for the bench, which times the work on a trace and not the imports (its floor, too, imports msgspec
    before its clock starts)."""
    import importlib

    for name in _LAZY_MODULES:
        importlib.import_module(name)


def discover(path: str) -> Index:
    """Every trace under ``path``: a local logdir, run folder or file (``file://`` too), or an fsspec URL
    (``s3://bucket/runs``, ``gs://...``, ``memory://...``) when fsspec and the protocol's backend are installed.

    Raises:
        NoTracesFound: nothing recognisable at ``path``.
        MissingExtra: a URL whose fsspec backend is not installed.
    """
    return discover_url(path) if is_url(path) else discover_local.discover(strip_file_url(path))


def _base(tf: TraceFile) -> dict[str, Any]:
    return {
        "run": tf.run,
        "worker": tf.worker,
        "span": tf.span,
        "source_kind": tf.source_kind,
        "path": tf.path,
        "size_bytes": tf.size_bytes,
        "rank": tf.rank,
        "phase": None,
    }


def error_report(tf: TraceFile, message: str) -> dict[str, Any]:
    """The RunReport of a run that could not be analysed: one line saying why."""
    return {
        **_base(tf),
        "status": "error",
        "error": message,
        "read_state": None,
        "warnings": [],
        "summary": None,
        "headline": None,
        "metrics": {},
        "findings": [],
        "what_if": None,
    }


def writing_report(tf: TraceFile, reason: str) -> dict[str, Any]:
    """The RunReport of a file still being written (``ingest/written.py``): status ``writing``, ``error`` says
    so in one line; it is read once it stops changing, and never kept as its final report."""
    return {**error_report(tf, reason), "status": "writing"}


def writing(tf: TraceFile) -> str | None:
    """Why ``tf`` is still being written (``ingest/written.py``: its size or mtime moved since discovery, or a
    recent gzip file has no end marker yet), or None. Objects (URLs) are written whole, links out are refused: never."""
    return (
        None
        if is_url(tf.path) or outside(tf.path, tf.inside)
        else still_being_written(tf.path, tf.size_bytes, tf.mtime_ns)
    )


def analyze_trace(tf: TraceFile, trace: Trace) -> dict[str, Any]:
    """The RunReport of an already loaded trace."""
    return analyze_trace_with_breakdown(tf, trace)[0]


#: How many of a rank's top findings its RankSummary keeps (the job view lists them per rank).
TOP_FINDINGS_PER_RANK = 3


def is_rank(trace: Trace, analysis: Analysis) -> bool:
    """Whether the trace is one rank of a distributed run: it holds collectives, or its distributedInfo states a
    world of several ranks. Only those get a RankSummary (a job's other files are listed as not ranks)."""
    dist = trace.distributed
    return bool(len(analysis.context.coll)) or (dist is not None and (dist.world_size or 0) > 1)


def rank_summary(tf: TraceFile, trace: Trace, report: dict[str, Any], analysis: Analysis) -> RankSummary:
    """The compact per-rank record the job level reads (``jobs.rank_summary``), from an analysed trace."""
    ids = [f["id"] for f in report.get("findings") or []][:TOP_FINDINGS_PER_RANK]
    ctx = analysis.context
    s = summarize_rank(trace, ctx.steps, label=rank_label(tf), top_finding_ids=ids, collectives=ctx.coll)
    metrics = report.get("metrics") or {}
    return s.replace(activities=tuple(rank_activities(metrics)), **rank_profiler(metrics))


def analyze_trace_with_breakdown(tf: TraceFile, trace: Trace) -> tuple[dict[str, Any], Analysis]:
    """The RunReport of an already loaded trace and the analysis behind it, whose ``breakdown`` the tab's
    step timelines and ``/steps`` rows are built from (``timeline.build(trace, analysis.breakdown)``)."""
    analysis = analyze(trace)
    metrics = analysis.metrics
    findings, what_if = diagnose(metrics)
    read_state = {"complete": True, "read_share": 1.0, "reason": None, **trace.read_state}
    complete = bool(read_state["complete"])
    report = {
        # "partial": the reader stopped early (invalid JSON, a cut file); the report covers what it read
        **_base(tf),
        "phase": run_phase(tf.phase, metrics),
        "status": "ok" if complete else "partial",
        "error": None if complete else read_state["reason"],
        "read_state": read_state,
        "warnings": list(trace.warnings),
        "summary": summarize(analysis.context),
        "headline": headline(metrics),
        "metrics": metrics,
        "findings": findings,
        "what_if": what_if,
    }
    window = trace.metadata.get("llmdiag_window")
    if isinstance(window, dict):  # an over-the-run window (docs/report_schema.md): only then, so others keep their form
        report["window"] = window
    return jsonable(report), analysis


def load(tf: TraceFile) -> Trace | dict[str, Any]:
    """The file's Trace, or the error RunReport saying in one line why it cannot be read.

    Unexpected reader exceptions (bugs on odd input) are logged and reported the same way, so one bad
    file never takes the others down.
    """
    try:
        if is_url(tf.path):  # an object: the readers read a private local copy of it
            with local_copy(tf.path) as local:
                return load_trace(local)
        return load_trace(tf.path, tf.inside)
    except LlmDiagError as exc:
        return error_report(tf, str(exc))
    except MemoryError:
        return error_report(tf, "out of memory while reading the trace; profile fewer steps")
    except Exception as exc:  # noqa: BLE001
        logger.exception("reading %s failed", tf.path)
        return error_report(tf, f"could not read the trace (internal error: {type(exc).__name__}: {exc})")


def analyze_file(tf: TraceFile) -> dict[str, Any]:
    """Load and analyse one trace file. Never raises for bad input: returns an error RunReport (or a
    ``writing`` one for a file still being written)."""
    return analyze_rank_file(tf, summary=False)[0]


def analyze_rank_file(tf: TraceFile, *, summary: bool = True) -> tuple[dict[str, Any], RankSummary | None]:
    """``analyze_file`` and, when ``summary`` and the trace could be analysed, its RankSummary (one read). A file
    still being written gives a ``writing`` RunReport (``writing``) and no summary."""
    refusal = outside(tf.path, tf.inside)  # a link out of the logdir (ingest/links.py): nothing of it is read
    if refusal is not None:
        return error_report(tf, refusal), None
    reason = writing(tf)
    if reason is not None:
        return writing_report(tf, reason), None
    trace = load(tf)
    if not isinstance(trace, Trace):
        return trace, None
    try:
        rep, analysis = analyze_trace_with_breakdown(tf, trace)
    except Exception as exc:  # noqa: BLE001
        logger.exception("analysing %s failed", tf.path)
        return error_report(tf, f"could not analyse the trace (internal error: {type(exc).__name__}: {exc})"), None
    if not summary or not is_rank(trace, analysis):
        return rep, None
    try:
        return rep, rank_summary(tf, trace, rep, analysis)
    except Exception:  # noqa: BLE001  (the rank's own report stands; the job states it lacks this rank)
        logger.exception("summarising rank %s failed", tf.path)
        return rep, None


def analyze_for_tab(
    tf: TraceFile, *, progress: Callable[[str], None] | None = None, put_array: Put | None = None
) -> dict[str, Any]:
    """What the tab shows for one trace: ``{"report": RunReport, "timelines": [StepTimeline, ...],
    "steps": {"steps": [per-step breakdown]}, "traceview": {"meta": {...}, "arrays": {name: ndarray}} | None,
    "rank_summary": {"summary": RankSummary dict | None}}`` (docs/http_api.md; the trace view's index is
    ``tb_llmdiag/traceview``; the job view reads the rank summaries, ``job_for_summaries``), from one read of the file.

    A file that cannot be read (not a regular file, not a trace, truncated) gives its error RunReport
    and no timelines. A bug in the analysis raises: the caller shows it and does not keep it.
    ``progress`` is told each phase as it starts: ``reading``, ``analysing``, ``timeline``. ``put_array`` (a file
    writer: ``tab/analysis_queue.py``) is given the trace view's arrays one at a time; ``traceview["arrays"]`` is then None.
    """

    def say(phase: str) -> None:
        if progress is not None:
            progress(phase)

    nothing: dict[str, Any] = dict(timelines=[], steps={"steps": []}, traceview=None, rank_summary={"summary": None})
    refusal = None if is_url(tf.path) else (outside(tf.path, tf.inside) or file_refusal(tf.path))
    if refusal is not None:
        return {"report": error_report(tf, refusal), **nothing}
    reason = writing(tf)  # it may have started growing again since it was queued
    if reason is not None:
        return {"report": writing_report(tf, reason), **nothing}
    say("reading")
    trace = load(tf)
    if not isinstance(trace, Trace):
        return {"report": trace, **nothing}
    say("analysing")
    rep, analysis = analyze_trace_with_breakdown(tf, trace)
    if rep.get("status") not in ("ok", "partial"):  # a partial report's timelines cover what was read
        return {"report": rep, **nothing}
    say("timeline")
    # the timelines and /steps rows read the analysis's one step breakdown (what the report counts)
    timelines, breakdown = build_timelines(trace, analysis.breakdown)
    summary: dict[str, Any] | None = None
    try:  # what the job view reads when this trace is one rank of a job (KBs)
        if is_rank(trace, analysis):
            summary = rank_summary(tf, trace, rep, analysis).to_dict()
    except Exception:  # noqa: BLE001  (the rank's own report stands; its job states it lacks this rank)
        logger.exception("summarising rank %s failed", tf.path)
    del analysis  # the trace view needs only the trace
    findings = jsonable(locate_evidence(trace, rep))
    handed = [trace]  # handed over: the build frees the trace once its columns are written (the worker's peak)
    del trace
    meta, arrays = build_traceview(handed, put_array)
    meta["findings"] = findings
    return {
        "report": rep,
        "timelines": list(timelines),
        "steps": {"steps": breakdown},
        "traceview": {"meta": meta, "arrays": arrays},
        "rank_summary": {"summary": summary},
    }


def open_raw(tf: TraceFile) -> tuple[BinaryIO, int]:
    """The trace file as recorded, open for reading, and its size (regular files only).

    Raises:
        NotRegularFile: a FIFO, device, socket, directory or symlink loop named like a trace.
        LinkOutside: a link to a file outside the logdir (``ingest/links.py``).
        OSError: the file is gone or unreadable.
        TraceFormatError: an object (URL) that is gone or unreadable.
    """
    return open_object(tf.path) if is_url(tf.path) else open_regular(tf.path, tf.inside)


def report_for_index(
    index: Index, runs: list[dict[str, Any]], jobs: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "schema": REPORT_SCHEMA,
        "tool": {"name": "tb_llmdiag", "version": __version__},
        "root": index.root,
        "warnings": list(index.warnings),
        "jobs": jobs or [],
        "runs": runs,
    }


def rank_task(task: tuple[TraceFile, bool]) -> tuple[dict[str, Any], RankSummary | None]:
    """``analyze_rank_file(tf, summary=in_job)`` for ``(tf, in_job)``: the per-rank task a Runner runs where
    the data is (a Dask worker reads the file itself); only the report and the KB-sized summary come back."""
    return analyze_rank_file(task[0], summary=task[1])


def task_key(tf: TraceFile) -> str:
    """A short, stable name for the task analysing ``tf`` (from its path)."""
    return hashlib.sha1(tf.path.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def analyze_index(index: Index, runner: Runner | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every file's RunReport (discovery order) and a ``jobs[]`` entry per run with several ranks
    (``jobs.build``): each trace is read once; only the ranks of a job keep a (KB-sized) RankSummary.
    The per-file analyses run on ``runner`` (``scale``: local processes, a Dask cluster; this process when
    None), the job reduce here. A task that failed (a bug, a worker that died too often) is that run's error
    entry; the others are reported."""
    in_job = {tf.path for _, _, fs in job_groups(index.files) for tf in fs}
    files = index.files
    results: list[tuple[dict[str, Any], RankSummary | None] | None] = [None] * len(files)
    tasks = [(tf, tf.path in in_job) for tf in files]
    for i, res, exc in (runner or InlineRunner()).map_unordered(rank_task, tasks, [task_key(tf) for tf in files]):
        if exc is not None:
            line = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            res = (error_report(files[i], f"the analysis task failed ({line})"), None)
        results[i] = res
    runs, summaries = [], {}
    for tf, res in zip(files, results):
        rep, summary = res if res is not None else (error_report(tf, "the analysis task never finished"), None)
        runs.append(rep)
        summaries[tf.path] = summary
    jobs = [
        jsonable(job_entry(run, span, [(tf, summaries.get(tf.path)) for tf in fs]))
        for run, span, fs in job_groups(index.files, {r["path"] for r in runs if r["status"] != "error"})
    ]
    return runs, jobs


def job_for_summaries(run: str, span: str, members: list[tuple[TraceFile, dict[str, Any] | None]]) -> dict[str, Any]:
    """The ``jobs[]`` entry of one job from its ranks' RankSummaries as dicts (``RankSummary.to_dict``, what
    the tab caches per rank); None for a rank without one."""
    return jsonable(
        job_entry(run, span, [(tf, RankSummary.from_dict(d) if d is not None else None) for tf, d in members])
    )


def report_index(index: Index, runner: Runner | None = None) -> dict[str, Any]:
    """The whole report of a discovered index, its per-file analyses on ``runner`` (``analyze_index``)."""
    return report_for_index(index, *analyze_index(index, runner))


def report(path: str, *, dask: str | None = None, workers: int = 1, runner: Runner | None = None) -> dict[str, Any]:
    """The whole report for a logdir, run folder or trace file (local or an fsspec URL). The per-file analyses
    run on ``runner`` if given, else on the Dask scheduler ``dask`` (``tcp://host:8786`` or ``local[:N]``),
    else on ``workers`` local processes (> 1), else in this process; the job reduce runs here. The report is
    the same wherever they ran.

    Raises:
        NoTracesFound: nothing recognisable at ``path``.
        MissingExtra: ``dask`` given without Dask installed, or a URL without its fsspec backend.
        DaskUnavailable: the scheduler does not answer.
    """
    index = discover(path)
    if not index.files:
        raise NoTracesFound(
            f"{path}: no profiler traces found (looked for Kineto *.json[.gz] and plugins/profile/*/*.xplane.pb)"
        )
    if runner is not None:
        return report_index(index, runner)
    with runner_session(dask, workers) as session:
        return report_index(index, session)


def timeline_of_runs(runs: list[dict[str, Any]], root: str = "") -> dict[str, Any]:
    """The over-the-run timeline (docs/timeline.md) of run reports already made (the tab's cached ones)."""
    return build_series(runs, root)


def timeline(path: str, *, dask: str | None = None, workers: int = 1, runner: Runner | None = None) -> dict[str, Any]:
    """The over-the-run timeline of every trace under ``path``: each window's report (``report``), grouped into
    series with their change points and what changed at each (``tb_llmdiag.series``, docs/timeline.md)."""
    rep = report(path, dask=dask, workers=workers, runner=runner)
    doc = build_series(rep["runs"], rep["root"])
    doc["tool"] = rep["tool"]
    return doc


def metric_registry() -> dict[str, Any]:
    """Every report number's unit, direction, tolerance and definition (``tb_llmdiag/metrics/registry.py``):
    ``{"units", "metrics", "evidence_units", "evidence_labels"}``: a finding id and evidence key to the unit and the
    label of the metric the rule reads it from."""
    return {**registry.as_json(), "evidence_units": EVIDENCE_UNITS, "evidence_labels": EVIDENCE_LABELS}


def load_analysis(tf: TraceFile) -> tuple[dict[str, Any], Trace, Analysis]:
    """The RunReport of one file, its trace and analysis (for ``top_activities``, ``locate_evidence``).
    Raises TraceFormatError with the error RunReport's one line when it cannot be read."""
    trace = load(tf)
    if not isinstance(trace, Trace):
        raise TraceFormatError(f"{tf.path}: {trace['error']}")
    rep, analysis = analyze_trace_with_breakdown(tf, trace)
    return rep, trace, analysis
