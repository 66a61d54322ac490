"""The library's front door: a trace file through the pipeline (discover -> load -> metrics -> diagnosis) to its
result, a logdir to its report, two sides to their comparison. The surfaces (CLI, tab, agent) use these names only
(``__all__``: at most 15, a test holds it):

- ``discover(path) -> Index``; ``analyze(tf) -> Analysed``: the one pipeline from a trace file to its result: its
  RunReport and, when it could be read, its trace, analysis and (a rank of a job) RankSummary; what a surface asks
  of one run is asked of that result (``Analysed.activities``, ``.evidence``, ``.source_of``; the tab's payloads:
  ``.tab_result``). ``report(path | index)``: every file's RunReport and the ``jobs[]`` entries;
  ``job_for_summaries``: one job from its ranks' cached RankSummaries.
- ``timeline(path | index | run reports)``: the windows of each run over the run as series, their change points
  and what changed (``tb_llmdiag.series``, docs/timeline.md).
- ``compare(before, after)``: two sides (each a run report or a ``(job, runs)`` pair) to their comparison, or
  with ``gate`` to ``llmdiag check``'s pass / fail; the sides come from ``saved_report`` (a saved
  ``llmdiag report --json`` document) or ``discover``, a run name picked by ``resolve`` (``run_names``: every
  name), by the rules of ``compare/names.py``.
- ``catalogue``: what the engine can report (the metric registry, the findings, the rules, the rule behind a
  finding, the keys a comparison reads).
- ``ENGINE_VERSION`` (what a cached result depends on), ``TraceIndex`` (a stored trace-view index),
  ``tab_executor`` (the tab's Dask executor), ``preload`` (the lazy imports, now).

Thin by design: each step lives in its own layer; this module composes them and turns user errors into per-run
error entries, so one bad file never stops the others. The types the surfaces annotate with are their layers'
(``Index``, ``TraceFile``: ``ingest.discover``; ``Target``: ``compare.names``; ``RunReport``: ``findings.structs``),
imported for type checking only.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tb_llmdiag import __version__
from tb_llmdiag.compare import check, is_compare_key
from tb_llmdiag.compare import compare as compare_sides
from tb_llmdiag.compare.names import resolve, run_names
from tb_llmdiag.compare.side import JobSide, RunSide, SideDoc
from tb_llmdiag.compare.stats import RESAMPLES, SEED
from tb_llmdiag.errors import LlmDiagError, NoTracesFound
from tb_llmdiag.findings.catalogue import finding_catalogue, finding_rule, rule_catalogue
from tb_llmdiag.findings.diagnosis import diagnose
from tb_llmdiag.findings.structs import UNSET, RunReport
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.ingest.discover import Index, TraceFile, discover
from tb_llmdiag.ingest.formats import READER_MODULES
from tb_llmdiag.ingest.fs import local_copy
from tb_llmdiag.ingest.saved_report import saved_report
from tb_llmdiag.jobs.build import job_entry, job_groups, rank_label
from tb_llmdiag.jobs.rank_summary import RankSummary, rank_activities, rank_profiler, summarize_rank
from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics import Analysis
from tb_llmdiag.metrics import analyze as analyze_metrics
from tb_llmdiag.metrics.anatomy.topic import PartRows, kept_part_rows
from tb_llmdiag.metrics.headline import headline
from tb_llmdiag.metrics.summary import summarize
from tb_llmdiag.metrics.workload import run_phase
from tb_llmdiag.model import MODEL_VERSION, Trace
from tb_llmdiag.registry import metric_registry
from tb_llmdiag.scale.runner import InlineRunner, Runner
from tb_llmdiag.scale.session import runner_session, tab_executor
from tb_llmdiag.series import build as build_series
from tb_llmdiag.timeline import TIMELINE_VERSION
from tb_llmdiag.timeline import build as build_timelines
from tb_llmdiag.traceview.activities import DEFAULT_TOP, asked_range, top_activities
from tb_llmdiag.traceview.anatomy import part_locations, parts_in_range
from tb_llmdiag.traceview.build import TRACEVIEW_VERSION, Put
from tb_llmdiag.traceview.build import build_for as build_traceview
from tb_llmdiag.traceview.evidence import locate as locate_evidence
from tb_llmdiag.traceview.index import TraceIndex
from tb_llmdiag.traceview.source import source_of

logger = logging.getLogger(__name__)

#: Version of the report JSON (docs/report_schema.md). 3: the ``jobs`` level, the ``communication`` topic,
#: collectives no longer count as GPU busy.
REPORT_SCHEMA = 3


class EngineVersion(NamedTuple):
    """Everything a cached result depends on besides the file itself (the tab's cache key includes it, as a list)."""

    model: int
    report: int
    timeline: int
    traceview: int


ENGINE_VERSION = EngineVersion(MODEL_VERSION, REPORT_SCHEMA, TIMELINE_VERSION, TRACEVIEW_VERSION)

# fmt: off
__all__ = [
    "ENGINE_VERSION", "Analysed", "TraceIndex", "analyze", "catalogue", "compare", "discover", "job_for_summaries",
    "preload", "report", "resolve", "run_names", "saved_report", "tab_executor", "timeline",
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


# ------------------------------------------------------------------------------------------- one trace file


def error_report(tf: TraceFile, message: str, status: str = "error") -> RunReport:
    """The RunReport of a run that could not be analysed: one line saying why."""
    return RunReport(
        run=tf.run,
        worker=tf.worker,
        span=tf.span,
        source_kind=tf.source_kind,
        path=tf.path,
        size_bytes=tf.size_bytes,
        rank=tf.rank,
        status=status,
        error=message,
        read_state=None,
        warnings=[],
        summary=None,
        headline=None,
        metrics={},
        findings=[],
        what_if=None,
    )


def not_ready(tf: TraceFile) -> RunReport | None:
    """The one readiness check before a file is read: the error RunReport of a file nothing of which may be read
    (``TraceFile.refusal``: a link out of the logdir, not a regular file), the ``writing`` RunReport of a file still
    being written (``TraceFile.writing``: read once it stops changing, never kept as its final report), or None."""
    refusal = tf.refusal()
    if refusal is not None:
        return error_report(tf, refusal)
    reason = tf.writing()
    return None if reason is None else error_report(tf, reason, "writing")


def load(tf: TraceFile) -> Trace | RunReport:
    """The file's Trace, or the error RunReport saying in one line why it cannot be read.

    Unexpected reader exceptions (bugs on odd input) are logged and reported the same way, so one bad
    file never takes the others down.
    """
    try:
        if tf.is_object:  # an object: the readers read a private local copy of it
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


def run_report(tf: TraceFile, trace: Trace, analysis: Analysis) -> RunReport:
    """The RunReport of an analysed trace (docs/report_schema.md), typed: its JSON is made once, where it leaves the
    front door (``Analysed.report``, ``report``)."""
    metrics = analysis.metrics
    findings, what_if = diagnose(metrics)
    read_state = {"complete": True, "read_share": 1.0, "reason": None, **trace.read_state}
    complete = bool(read_state["complete"])
    window = trace.metadata.get("llmdiag_window")
    return RunReport(
        run=tf.run,
        worker=tf.worker,
        span=tf.span,
        source_kind=tf.source_kind,
        path=tf.path,
        size_bytes=tf.size_bytes,
        rank=tf.rank,
        phase=run_phase(tf.phase, metrics),
        # "partial": the reader stopped early (invalid JSON, a cut file); the report covers what it read
        status="ok" if complete else "partial",
        error=None if complete else read_state["reason"],
        read_state=read_state,
        warnings=list(trace.warnings),
        summary=summarize(analysis.context),
        headline=headline(metrics),
        metrics=dict(metrics),
        findings=findings,
        what_if=what_if,
        # an over-the-run window (docs/report_schema.md): only then, so others keep their form
        window=window if isinstance(window, dict) else UNSET,
    )


#: How many of a rank's top findings its RankSummary keeps (the job view lists them per rank).
TOP_FINDINGS_PER_RANK = 3


def is_rank(trace: Trace, analysis: Analysis) -> bool:
    """Whether the trace is one rank of a distributed run: it holds collectives, or its distributedInfo states a
    world of several ranks. Only those get a RankSummary (a job's other files are listed as not ranks)."""
    dist = trace.distributed
    return bool(len(analysis.context.coll)) or (dist is not None and (dist.world_size or 0) > 1)


def rank_summary(tf: TraceFile, trace: Trace, report: RunReport, analysis: Analysis) -> RankSummary:
    """The compact per-rank record the job level reads (``jobs.rank_summary``), from an analysed trace: its step
    windows and breakdown are the ``communication`` topic's (kept in the analysis's cache), not computed again."""
    ids = [f.id for f in report.findings][:TOP_FINDINGS_PER_RANK]
    ctx = analysis.context
    s = summarize_rank(
        trace, ctx.steps, label=rank_label(tf), top_finding_ids=ids, collectives=ctx.coll, cache=ctx.cache
    )
    metrics = report.metrics
    return s.replace(activities=tuple(rank_activities(metrics)), **rank_profiler(metrics))


@dataclass
class Analysed:
    """One trace file through the pipeline (``analyze``): its RunReport (``run``, typed; ``report``: its JSON, made
    once); when it could be read and analysed, its Trace and Analysis; for a rank of a job
    (``analyze(tf, summary=True)``), its RankSummary."""

    run: RunReport
    trace: Trace | None = None
    analysis: Analysis | None = None
    rank_summary: RankSummary | None = None
    _json: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def report(self) -> dict[str, Any]:
        """The RunReport's JSON (docs/report_schema.md), made on first use and kept."""
        if self._json is None:
            self._json = self.run.json()
        return self._json

    def _trace(self) -> Trace:
        if self.trace is None:
            raise LlmDiagError(f"run {self.run.run} was not read: {self.run.error}")
        return self.trace

    def activities(
        self,
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
        trace = self._trace()
        if self.analysis is None:
            raise LlmDiagError(f"run {self.run.run} was not analysed: {self.run.error}")
        lo, hi = asked_range(self.report, step, start_ns, end_ns)
        return top_activities(trace, self.analysis, lo, hi, top=top, step=step)

    def _part_rows(self) -> PartRows:
        if self.analysis is None:
            raise LlmDiagError(f"run {self.report.get('run')} was not analysed: {self.report.get('error')}")
        pr = kept_part_rows(self.analysis.context)
        if pr is None:
            anatomy = (self.report.get("metrics") or {}).get("anatomy") or {}
            raise LlmDiagError(f"no model parts for this run: {anatomy.get('reason') or 'the anatomy topic is absent'}")
        return pr

    def anatomy_in(
        self, *, step: int | None = None, start_ns: int | None = None, end_ns: int | None = None
    ) -> dict[str, Any]:
        """The model parts' device time in step ``step`` (the report's ``anatomy.parts.*.step_time_ns``, what the
        tab's bar draws) or in [start_ns, end_ns) (the busy union there split as the topic splits the window,
        ``traceview/anatomy.py``); the whole window when neither is given: ``{"step", "start_ns", "end_ns",
        "duration_ns", "parts_busy_ns", "parts": [{"name", "time_ns", "share"}, ...]}`` (``activities.*`` in the
        registry), the parts largest first.

        Raises:
            BadRange: an unknown step, both a step and times, a range that is empty or outside the trace.
            LlmDiagError: a run without the ``anatomy`` topic (an XLA trace, no device time).
        """
        lo, hi = asked_range(self.report, step, start_ns, end_ns)
        pr = self._part_rows()
        if step is None:
            got = parts_in_range(self._trace(), pr, lo, hi)
            busy, times = got["busy_ns"], got["parts"]
        else:
            a = self.report["metrics"]["anatomy"]
            at = list(a.get("step_index") or []).index(step)
            times = {n: f["step_time_ns"][at] for n, f in a["parts"].items() if f["step_time_ns"][at] > 0}
            busy = sum(times.values())
        ranked = sorted(times.items(), key=lambda kv: -kv[1])
        parts = [{"name": n, "time_ns": t, "share": t / busy if busy else None} for n, t in ranked]
        return {
            "step": step,
            "start_ns": lo,
            "end_ns": hi,
            "duration_ns": hi - lo,
            "parts_busy_ns": busy,
            "parts": parts,
        }

    def part_locations(self) -> list[dict[str, Any]]:
        """Where each model part's kernels run in the trace (``traceview/anatomy.py``), as the tab's trace view opens
        them; empty without the ``anatomy`` topic."""
        if self.analysis is None or kept_part_rows(self.analysis.context) is None:
            return []
        return jsonable(part_locations(self._trace(), self._part_rows()))

    def evidence(self) -> list[dict[str, Any]]:
        """Each finding's ranges and culprit located in the trace (``traceview/evidence.py``), as the tab shows them."""
        return jsonable(locate_evidence(self._trace(), self.report))

    def source_of(self, name: str | None, rng: list[int] | tuple[int, int]) -> dict[str, Any] | None:
        """The Python frames around the trace range ``rng`` (``traceview/source.py``)."""
        return source_of(self._trace(), name, rng)

    def tab_result(
        self, *, progress: Callable[[str], None] | None = None, put_array: Put | None = None
    ) -> dict[str, Any]:
        """What the tab shows for the trace (``analyze(tf, summary=True, strict=True)``: a bug in the analysis raises,
        and the tab shows it and does not keep it): ``{"report": RunReport, "timelines": [StepTimeline, ...],
        "steps": {"steps": [per-step breakdown]}, "traceview": {"meta": {...}, "arrays": {name: ndarray}} | None,
        "rank_summary": {"summary": RankSummary dict | None}}`` (docs/http_api.md; the trace view's index is
        ``tb_llmdiag/traceview``; the job view reads the rank summaries, ``job_for_summaries``). Made once: the trace
        is handed to the trace view's build, which frees it (``trace`` and ``analysis`` are None after).

        A file that could not be read (not a regular file, not a trace, truncated) gives its error RunReport and no
        timelines. ``progress`` is told ``timeline`` as that phase starts (``analyze`` told it ``reading`` and
        ``analysing``). ``put_array`` (a file writer: ``tab/analysis_queue.py``) is given the trace view's arrays one
        at a time; ``traceview["arrays"]`` is then None.
        """
        if self.trace is None or self.analysis is None or self.run.status not in ("ok", "partial"):
            # a partial report's timelines cover what was read
            return dict(
                report=self.report, timelines=[], steps={"steps": []}, traceview=None, rank_summary={"summary": None}
            )
        if progress is not None:
            progress("timeline")
        # the timelines and /steps rows read the analysis's one step breakdown (what the report counts)
        timelines, breakdown = build_timelines(self.trace, self.analysis.breakdown)
        summary = self.rank_summary.to_dict() if self.rank_summary is not None else None  # the job view's (KBs)
        parts = self.part_locations()
        self.analysis = None  # the trace view needs only the trace
        findings = self.evidence()
        handed = [self.trace]  # handed over: the build frees the trace once its columns are written (the worker's peak)
        self.trace = None
        meta, arrays = build_traceview(handed, put_array)
        meta["findings"] = findings
        meta["parts"] = parts
        return {
            "report": self.report,
            "timelines": list(timelines),
            "steps": {"steps": breakdown},
            "traceview": {"meta": meta, "arrays": arrays},
            "rank_summary": {"summary": summary},
        }


def analyze(
    tf: TraceFile, *, summary: bool = False, progress: Callable[[str], None] | None = None, strict: bool = False
) -> Analysed:
    """One trace file through the pipeline: its RunReport, trace and analysis, and, when ``summary`` and the trace
    is a rank of a job (``is_rank``), its RankSummary. Never raises for bad input: a file that is refused, still
    being written (``not_ready``) or cannot be read gives its error (or ``writing``) RunReport and no trace.

    ``progress`` is told each phase as it starts (``reading``, ``analysing``). A bug in the analysis becomes the
    run's error RunReport, or raises when ``strict`` (the tab shows it and keeps nothing). A failed summary leaves
    the rank's own report standing (its job states it lacks this rank)."""
    early = not_ready(tf)
    if early is not None:
        return Analysed(early)
    if progress is not None:
        progress("reading")
    trace = load(tf)
    if not isinstance(trace, Trace):
        return Analysed(trace)
    if progress is not None:
        progress("analysing")
    try:
        analysis = analyze_metrics(trace)
        rep = run_report(tf, trace, analysis)
    except Exception as exc:  # noqa: BLE001
        if strict:
            raise
        logger.exception("analysing %s failed", tf.path)
        return Analysed(error_report(tf, f"could not analyse the trace (internal error: {type(exc).__name__}: {exc})"))
    got = Analysed(rep, trace, analysis)
    try:
        if summary and is_rank(trace, analysis):
            got.rank_summary = rank_summary(tf, trace, rep, analysis)
    except Exception:  # noqa: BLE001
        logger.exception("summarising rank %s failed", tf.path)
    return got


# ------------------------------------------------------------------------------------------- a logdir


def rank_task(task: tuple[TraceFile, bool]) -> tuple[RunReport, RankSummary | None]:
    """``analyze(tf, summary=in_job)`` for ``(tf, in_job)``: the per-rank task a Runner runs where the data is (a
    Dask worker reads the file itself); only the report and the KB-sized summary come back."""
    got = analyze(task[0], summary=task[1])
    return got.run, got.rank_summary


def task_key(tf: TraceFile) -> str:
    """A short, stable name for the task analysing ``tf`` (from its path)."""
    return hashlib.sha1(tf.path.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def analyze_index(index: Index, runner: Runner | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every file's RunReport (discovery order) and a ``jobs[]`` entry per run with several ranks
    (``jobs.build``): each trace is read once; only the ranks of a job keep a (KB-sized) RankSummary.
    The per-file analyses run on ``runner`` (``scale``: local processes, a Dask cluster; this process when
    None), the job reduce here. A task that failed (a bug, a worker that died too often) is that run's error
    entry; the others are reported. As each outcome arrives, its report becomes its JSON (the one conversion)
    and the typed report is dropped: the process holds one copy of each rank's report, never two."""
    in_job = {tf.path for _, _, fs in job_groups(index.files) for tf in fs}
    files = index.files
    runs: list[dict[str, Any] | None] = [None] * len(files)
    summaries: dict[str, RankSummary | None] = {}
    tasks = [(tf, tf.path in in_job) for tf in files]
    for i, res, exc in (runner or InlineRunner()).map_unordered(rank_task, tasks, [task_key(tf) for tf in files]):
        if exc is not None:
            line = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            res = (error_report(files[i], f"the analysis task failed ({line})"), None)
        runs[i], summaries[files[i].path] = res[0].json(), res[1]
        del res  # the typed report goes now, not with the next outcome
    done = [
        rep if rep is not None else error_report(tf, "the analysis task never finished").json()
        for tf, rep in zip(files, runs)
    ]
    jobs = [
        jsonable(job_entry(run, span, [(tf, summaries.get(tf.path)) for tf in fs]))
        for run, span, fs in job_groups(index.files, {r["path"] for r in done if r["status"] != "error"})
    ]
    return done, jobs


def job_for_summaries(run: str, span: str, members: list[tuple[TraceFile, dict[str, Any] | None]]) -> dict[str, Any]:
    """The ``jobs[]`` entry of one job from its ranks' RankSummaries as dicts (``RankSummary.to_dict``, what
    the tab caches per rank); None for a rank without one."""
    return jsonable(
        job_entry(run, span, [(tf, RankSummary.from_dict(d) if d is not None else None) for tf, d in members])
    )


def report(
    path: str | Index, *, dask: str | None = None, workers: int = 1, runner: Runner | None = None
) -> dict[str, Any]:
    """The whole report for a logdir, run folder or trace file (local or an fsspec URL), or for an index already
    discovered (``discover``; its files only). The per-file analyses run on ``runner`` if given, else on the Dask
    scheduler ``dask`` (``tcp://host:8786`` or ``local[:N]``), else on ``workers`` local processes (> 1), else in
    this process; the job reduce runs here. The report is the same wherever they ran.

    Raises:
        NoTracesFound: nothing recognisable at ``path``.
        MissingExtra: ``dask`` given without Dask installed, or a URL without its fsspec backend.
        DaskUnavailable: the scheduler does not answer.
    """
    index = path if isinstance(path, Index) else discover(path)
    if not index.files and not isinstance(path, Index):
        raise NoTracesFound(
            f"{path}: no profiler traces found (looked for Kineto *.json[.gz] and plugins/profile/*/*.xplane.pb)"
        )
    if runner is None:
        with runner_session(dask, workers) as session:
            runs, jobs = analyze_index(index, session)
    else:
        runs, jobs = analyze_index(index, runner)
    return {
        "schema": REPORT_SCHEMA,
        "tool": {"name": "tb_llmdiag", "version": __version__},
        "root": index.root,
        "warnings": list(index.warnings),
        "jobs": jobs,
        "runs": runs,
    }


# ------------------------------------------------------------------------------------------- over the run


def timeline(
    source: str | Index | Sequence[Mapping[str, Any]],
    *,
    root: str = "",
    dask: str | None = None,
    workers: int = 1,
    runner: Runner | None = None,
) -> dict[str, Any]:
    """The over-the-run timeline (docs/timeline.md): the windows of each run grouped into series, with their change
    points and what changed at each (``tb_llmdiag.series``). ``source``: a path or a discovered index, whose every
    trace is reported first (``report``, on ``runner``, ``dask`` or ``workers`` as there; the document then names
    the tool), or run reports already made (the tab's and the agent's cached ones; ``root``: their logdir)."""
    if not isinstance(source, (str, Index)):
        return build_series(source, root)
    rep = report(source, dask=dask, workers=workers, runner=runner)
    doc = build_series(rep["runs"], rep["root"])
    doc["tool"] = rep["tool"]
    return doc


# ------------------------------------------------------------------------------------------- two sides


def compare(
    before: RunSide | JobSide | SideDoc,
    after: RunSide | JobSide | SideDoc,
    *,
    gate: bool = False,
    warnings: Sequence[str] = (),
    sources: tuple[str, str] = ("", ""),
    roles: tuple[str, str] = ("BEFORE", "AFTER"),
    tolerances: Mapping[str, float] | None = None,
    max_regression: float | None = None,
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> dict[str, Any]:
    """The comparison document (docs/compare.md) of two sides of one level, each a run report or a ``(job, runs)``
    pair (``compare.core.compare``: ``sources``, ``roles``, ``tolerances``, ``max_regression``, ``seed`` and
    ``resamples`` as there), the warnings of loading the sides (``warnings``) before its own. With ``gate``, the
    ``llmdiag check`` document instead (``compare.gate``): pass / fail, the regressions, the comparison under
    ``compare``.

    Raises:
        BadTolerance: a tolerance that is not a fraction in [0, 100).
    """
    doc = compare_sides(
        before,
        after,
        sources=sources,
        roles=roles,
        tolerances=tolerances,
        max_regression=max_regression,
        seed=seed,
        resamples=resamples,
    )
    if warnings:
        doc["warnings"] = [*warnings, *doc["warnings"]]
    return check(doc) if gate else doc


# ------------------------------------------------------------------------------------------- the catalogue


class Catalogue:
    """What the engine can report, from its declared tables (``findings/catalogue.py``, ``compare/table.py``):
    ``metrics()``: the metric registry with the findings' evidence units and labels (what the tab serves);
    ``findings()``: every finding rule (what an agent cites); ``rules()``: every rule once by id (``llmdiag rules``);
    ``rule_of(finding_id, metrics)``: the rule behind one finding on the run of those metrics;
    ``is_compare_key(key)``: whether the comparison reads a number of that key (``--tolerance KEY=...``)."""

    metrics = staticmethod(metric_registry)
    findings = staticmethod(finding_catalogue)
    rules = staticmethod(rule_catalogue)
    rule_of = staticmethod(finding_rule)
    is_compare_key = staticmethod(is_compare_key)


#: The surfaces' one entry to what the engine can report (``Catalogue``).
catalogue = Catalogue()
