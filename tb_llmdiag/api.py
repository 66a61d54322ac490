"""The library's front door: discover -> load -> metrics -> diagnosis, as report dicts.

Thin by design: each step lives in its own layer; this module only composes them and turns user
errors into per-run error entries, so one bad file never stops the others.
"""

from __future__ import annotations

import logging
from typing import Any, BinaryIO, Callable

from tb_llmdiag import __version__
from tb_llmdiag.compare import compare_runs
from tb_llmdiag.findings import EVIDENCE_UNITS, diagnose
from tb_llmdiag.errors import LlmDiagError, NoTracesFound
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.ingest.discover import Index, TraceFile, discover
from tb_llmdiag.ingest.raw import NotRegularFile, open_regular, regular_file_error
from tb_llmdiag.ingest.written import still_being_written
from tb_llmdiag.metrics import Analysis, analyze
from tb_llmdiag.metrics import registry
from tb_llmdiag.metrics.headline import headline
from tb_llmdiag.metrics.summary import summarize
from tb_llmdiag.model import MODEL_VERSION, Trace
from tb_llmdiag.timeline import TIMELINE_VERSION
from tb_llmdiag.timeline import build as build_timelines
from tb_llmdiag.traceview.build import TRACEVIEW_VERSION
from tb_llmdiag.traceview.build import build as build_traceview
from tb_llmdiag.traceview.evidence import locate as locate_evidence
from tb_llmdiag.traceview.index import BadIndex, TraceIndex
from tb_llmdiag.jsonsafe import jsonable

logger = logging.getLogger(__name__)

#: Version of the report JSON (docs/report_schema.md).
REPORT_SCHEMA = 2

#: Everything a cached result depends on besides the file itself (the tab's cache key includes it).
ENGINE_VERSION = (MODEL_VERSION, REPORT_SCHEMA, TIMELINE_VERSION, TRACEVIEW_VERSION)

__all__ = [
    "ENGINE_VERSION", "REPORT_SCHEMA", "TIMELINE_VERSION", "TRACEVIEW_VERSION", "BadIndex", "Index", "TraceIndex", "NotRegularFile", "TraceFile", "analyze_file",
    "analyze_for_tab", "analyze_trace", "discover", "error_report", "open_raw", "preload", "report", "writing",
    "writing_report",
]


#: Modules the engine imports on first use (so that TensorBoard starts without them); preload() lists
#: them, and a test checks that analysing a trace imports nothing more of ours.
_LAZY_MODULES = (
    "tb_llmdiag.ingest.chrome_trace", "tb_llmdiag.ingest.xplane",
    "numpy.ma",  # numpy imports it on the first np.unique
)


def preload() -> None:
    """Import the readers and metric topics now rather than on first use. For long-lived processes and
    for the bench, which times the work on a trace and not the imports (its floor, too, imports msgspec
    before its clock starts)."""
    import importlib

    for name in _LAZY_MODULES:
        importlib.import_module(name)


def _base(tf: TraceFile) -> dict[str, Any]:
    return {
        "run": tf.run, "worker": tf.worker, "span": tf.span, "source_kind": tf.source_kind,
        "path": tf.path, "size_bytes": tf.size_bytes, "rank": tf.rank, "phase": tf.phase,
    }


def error_report(tf: TraceFile, message: str) -> dict[str, Any]:
    """The RunReport of a run that could not be analysed: one line saying why."""
    return {**_base(tf), "status": "error", "error": message, "read_state": None, "warnings": [], "summary": None,
            "headline": None, "metrics": {}, "findings": [], "what_if": None}


def writing_report(tf: TraceFile, reason: str) -> dict[str, Any]:
    """The RunReport of a file still being written (``ingest/written.py``): status ``writing``, ``error`` says
    so in one line; it is read once it stops changing, and never kept as its final report."""
    return {**error_report(tf, reason), "status": "writing"}


def writing(tf: TraceFile) -> str | None:
    """Why ``tf`` is still being written (``ingest/written.py``: its size or mtime moved since discovery, or a
    recent gzip file has no end marker yet), or None."""
    return still_being_written(tf.path, tf.size_bytes, tf.mtime_ns)


def analyze_trace(tf: TraceFile, trace: Trace) -> dict[str, Any]:
    """The RunReport of an already loaded trace."""
    return analyze_trace_with_breakdown(tf, trace)[0]


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
        **_base(tf), "status": "ok" if complete else "partial", "error": None if complete else read_state["reason"],
        "read_state": read_state, "warnings": list(trace.warnings),
        "summary": summarize(analysis.context), "headline": headline(metrics), "metrics": metrics,
        "findings": findings, "what_if": what_if,
    }
    return jsonable(report), analysis


def load(tf: TraceFile) -> Trace | dict[str, Any]:
    """The file's Trace, or the error RunReport saying in one line why it cannot be read.

    Unexpected reader exceptions (bugs on odd input) are logged and reported the same way, so one bad
    file never takes the others down.
    """
    try:
        return load_trace(tf.path)
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
    reason = writing(tf)
    if reason is not None:
        return writing_report(tf, reason)
    trace = load(tf)
    if not isinstance(trace, Trace):
        return trace
    try:
        return analyze_trace(tf, trace)
    except Exception as exc:  # noqa: BLE001
        logger.exception("analysing %s failed", tf.path)
        return error_report(tf, f"could not analyse the trace (internal error: {type(exc).__name__}: {exc})")


def analyze_for_tab(tf: TraceFile, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """What the tab shows for one trace: ``{"report": RunReport, "timelines": [StepTimeline, ...],
    "steps": {"steps": [per-step breakdown]}, "traceview": {"meta": {...}, "arrays": {name: ndarray}} | None}``
    (docs/http_api.md; the trace view's index is ``tb_llmdiag/traceview``), from one read of the file.

    A file that cannot be read (not a regular file, not a trace, truncated) gives its error RunReport
    and no timelines. A bug in the analysis raises: the caller shows it and does not keep it.
    ``progress`` is told each phase as it starts: ``reading``, ``analysing``, ``timeline``.
    """
    def say(phase: str) -> None:
        if progress is not None:
            progress(phase)

    nothing: dict[str, Any] = {"timelines": [], "steps": {"steps": []}, "traceview": None}
    refusal = regular_file_error(tf.path)
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
    meta, arrays = build_traceview(trace)
    meta["findings"] = jsonable(locate_evidence(trace, rep))
    return {"report": rep, "timelines": list(timelines), "steps": {"steps": breakdown},
            "traceview": {"meta": meta, "arrays": arrays}}


def open_raw(tf: TraceFile) -> tuple[BinaryIO, int]:
    """The trace file as recorded, open for reading, and its size (regular files only).

    Raises:
        NotRegularFile: a FIFO, device, socket, directory or symlink loop named like a trace.
        OSError: the file is gone or unreadable.
    """
    return open_regular(tf.path)


def report_for_index(index: Index, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schema": REPORT_SCHEMA, "tool": {"name": "tb_llmdiag", "version": __version__},
            "root": index.root, "warnings": list(index.warnings), "runs": runs}


def report(path: str) -> dict[str, Any]:
    """The whole report for a logdir, run folder or trace file.

    Raises:
        NoTracesFound: nothing recognisable at ``path``.
    """
    index = discover(path)
    if not index.files:
        raise NoTracesFound(f"{path}: no profiler traces found (looked for Kineto *.json[.gz] and "
                            "plugins/profile/*/*.xplane.pb)")
    return report_for_index(index, [analyze_file(tf) for tf in index.files])


def metric_registry() -> dict[str, Any]:
    """Every report number's unit, direction, tolerance and definition (``tb_llmdiag/metrics/registry.py``):
    ``{"units", "metrics", "evidence_units"}``; ``evidence_units`` maps a finding id and evidence label to the
    unit of the metric the rule reads it from."""
    return {**registry.as_json(), "evidence_units": EVIDENCE_UNITS}


def compare_reports(baseline: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """Two RunReports compared (docs/compare.md): the metric table with noise bands, the finding diff and the
    verdict, ``baseline`` as BEFORE and ``run`` as AFTER. Pure: reads the two reports only."""
    return compare_runs(baseline, run)
