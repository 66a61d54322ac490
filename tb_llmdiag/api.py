"""The library's front door: discover -> load -> metrics -> diagnosis, as report dicts.

Thin by design: each step lives in its own layer; this module only composes them and turns user
errors into per-run error entries, so one bad file never stops the others.
"""

from __future__ import annotations

import logging
from typing import Any

from tb_llmdiag import __version__
from tb_llmdiag.diagnosis import diagnose
from tb_llmdiag.errors import LlmDiagError, NoTracesFound
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.ingest.discover import Index, TraceFile, discover
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.headline import headline
from tb_llmdiag.metrics.steps import find_steps
from tb_llmdiag.metrics.summary import summarize
from tb_llmdiag.model import Trace
from tb_llmdiag.jsonsafe import jsonable

logger = logging.getLogger(__name__)

#: Version of the report JSON (docs/report_schema.md).
REPORT_SCHEMA = 1


#: Modules the engine imports on first use (so that TensorBoard starts without them); preload() lists
#: them, and a test checks that analysing a trace imports nothing more of ours.
_LAZY_MODULES = (
    "tb_llmdiag.ingest.chrome_trace", "tb_llmdiag.ingest.xplane", "tb_llmdiag.rules_xla",
    "tb_llmdiag.metrics.annotations", "tb_llmdiag.metrics.context", "tb_llmdiag.metrics.dataloader",
    "tb_llmdiag.metrics.flops", "tb_llmdiag.metrics.host_sync", "tb_llmdiag.metrics.idle",
    "tb_llmdiag.metrics.kernels", "tb_llmdiag.metrics.launch", "tb_llmdiag.metrics.memcpy",
    "tb_llmdiag.metrics.memory", "tb_llmdiag.metrics.step_stats", "tb_llmdiag.metrics.xla",
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


def analyze_trace(tf: TraceFile, trace: Trace) -> dict[str, Any]:
    """The RunReport of an already loaded trace (the plugin reuses the Trace for its timeline)."""
    steps = find_steps(trace)
    metrics = compute_metrics(trace, steps)
    findings, what_if = diagnose(metrics)
    read_state = {"complete": True, "read_share": 1.0, "reason": None, **trace.read_state}
    complete = bool(read_state["complete"])
    report = {
        # "partial": the reader stopped early (invalid JSON, a cut file); the report covers what it read
        **_base(tf), "status": "ok" if complete else "partial", "error": None if complete else read_state["reason"],
        "read_state": read_state, "warnings": list(trace.warnings),
        "summary": summarize(trace, steps), "headline": headline(metrics), "metrics": metrics,
        "findings": findings, "what_if": what_if,
    }
    return jsonable(report)


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
    """Load and analyse one trace file. Never raises for bad input: returns an error RunReport."""
    trace = load(tf)
    if not isinstance(trace, Trace):
        return trace
    try:
        return analyze_trace(tf, trace)
    except Exception as exc:  # noqa: BLE001
        logger.exception("analysing %s failed", tf.path)
        return error_report(tf, f"could not analyse the trace (internal error: {type(exc).__name__}: {exc})")


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
