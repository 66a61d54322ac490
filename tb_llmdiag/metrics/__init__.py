"""Metrics: one topic per module, each a pure function over the trace's columns.

``analyze(trace, steps) -> Analysis``: the topics (``Analysis.metrics``, ``{topic: dict}``) and the per-step
breakdown behind them (``Analysis.breakdown``, ``metrics.gaps.StepBreakdown``), which the tab's step
timeline and ``/steps`` rows read so they show what the report counts. ``compute_metrics`` returns the topics
only. Every topic dict holds JSON scalars/lists with units in key names and null (never NaN) for unknowns. A
topic that cannot be computed says why: ``{"available": false, "reason": "..."}``. Definitions:
``docs/metrics.md`` and each module's docstring.
Topics: run, steps, idle, kernels, launch, host_sync, memcpy, dataloader, memory, annotations, flops,
communication (collectives vs compute per rank, ``metrics/communication.py``), attribution (what the host does
while the GPU waits, and where the GPU's work comes from: ``metrics/attribution.py``), capture (what the capture holds
and lost, and the profiler's own cost: ``metrics/capture.py``, ``metrics/overhead.py``)
(+ ``xla`` on XLA runs, from ``metrics/xla.py``). ``run`` says once what kind of run this is:
``{"platform": "cuda" | "xla", "source_kind": "kineto" | "xplane", "workload": "training" | "inference" | null,
"read_complete": bool, "read_share", ...}`` (Kineto traces are ``cuda``, XPlane
traces ``xla``); every platform-dependent consumer (headline, rules, tab) reads ``run.platform``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics.annotations import annotation_metrics
from tb_llmdiag.metrics.attribution import attribution_metrics
from tb_llmdiag.metrics.causes import cause_topics
from tb_llmdiag.metrics.communication import communication_metrics
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.dataloader import dataloader_metrics
from tb_llmdiag.metrics.flops import flops_metrics
from tb_llmdiag.metrics.gaps import StepBreakdown, step_breakdown
from tb_llmdiag.metrics.host_sync import host_sync_metrics
from tb_llmdiag.metrics.idle import idle_metrics
from tb_llmdiag.metrics.inference import inference_metrics
from tb_llmdiag.metrics.kernels import kernel_metrics
from tb_llmdiag.metrics.launch import launch_metrics
from tb_llmdiag.metrics.memcpy import memcpy_metrics
from tb_llmdiag.metrics.memory import memory_metrics
from tb_llmdiag.metrics.overhead import capture_topic
from tb_llmdiag.metrics.step_stats import step_metrics
from tb_llmdiag.metrics.steps import Steps, find_steps
from tb_llmdiag.metrics.workload import device_kind, workload_fields
from tb_llmdiag.metrics.xla import compute_xla
from tb_llmdiag.metrics.xla_split import with_step_split
from tb_llmdiag.model import Trace

logger = logging.getLogger(__name__)

#: ``run.platform`` per ``Trace.source_kind``.
PLATFORM_OF_SOURCE: dict[str, str] = {"kineto": "cuda", "xplane": "xla"}


@dataclass(frozen=True)
class Analysis:
    """One trace's metric topics and what the tab draws beside them (see the module docstring)."""

    metrics: dict[str, dict[str, Any]]
    context: Context
    breakdown: StepBreakdown


def _safe(topic: str, fn: Callable[[], Any]) -> Any:
    """Run one topic; an unexpected error becomes an unavailable topic, never a failed report."""
    try:
        return fn()
    except Exception as exc:  # odd traces must not take the whole report down
        logger.exception("metrics topic %s failed", topic)
        return {"available": False, "reason": f"could not be computed: {type(exc).__name__}: {exc}"}


def run_topic(trace: Trace) -> dict[str, Any]:
    """The ``run`` topic: the platform, decided once from the reader that read the trace, and the workload
    (``metrics/workload.py``: training or inference, from the trace's events)."""
    read = trace.read_state
    share = read.get("read_share")
    return {
        "platform": PLATFORM_OF_SOURCE.get(trace.source_kind, "cuda"),
        "source_kind": trace.source_kind,
        "device_kind": device_kind(trace),
        **workload_fields(trace),
        # the reader's read state (``Trace.read_state``): false when it stopped early (a cut file); rules
        # that need the whole file are skipped then (``findings/workload.py``), and so are MFU and tokens/s
        "read_complete": bool(read.get("complete", True)),
        "read_share": float(share) if isinstance(share, (int, float)) else 1.0 if read.get("complete", True) else None,
    }


def analyze(trace: Trace, steps: Steps | None = None) -> Analysis:
    """All metric topics of one trace and the step breakdown behind them (``steps``: ``find_steps(trace)``
    when not given)."""
    steps = find_steps(trace) if steps is None else steps
    ctx = Context.build(trace, steps)
    bd = step_breakdown(ctx)
    # first of the topics: its transient (the host call forest) then fits in what the read freed
    attribution = _safe("attribution", lambda: attribution_metrics(ctx, bd))
    out: dict[str, Any] = {"run": run_topic(trace)}
    out["steps"] = _safe("steps", lambda: step_metrics(ctx, bd))
    out["idle"] = _safe("idle", lambda: idle_metrics(ctx, bd))
    out["kernels"] = _safe("kernels", lambda: kernel_metrics(ctx))
    out["launch"] = _safe("launch", lambda: launch_metrics(ctx, out["idle"]))
    out["host_sync"] = _safe("host_sync", lambda: host_sync_metrics(ctx, out["idle"]))
    out["memcpy"] = _safe("memcpy", lambda: memcpy_metrics(ctx))
    out["dataloader"] = _safe("dataloader", lambda: dataloader_metrics(ctx, bd.gaps))
    out["memory"] = _safe("memory", lambda: memory_metrics(ctx))
    out["annotations"] = _safe("annotations", lambda: annotation_metrics(ctx))
    out["flops"] = _safe("flops", lambda: flops_metrics(ctx, out["steps"], out["kernels"], out["run"]))
    out["communication"] = _safe("communication", lambda: communication_metrics(trace, ctx.coll, steps, ctx.cache))
    out["capture"] = _safe("capture", lambda: capture_topic(ctx, bd))  # what the capture holds, lost, costs
    out["inference"] = _safe("inference", lambda: inference_metrics(trace, out["run"]))
    out.update(cause_topics(ctx, out))  # compile, precision, optimizer, checkpointing, outliers, sync_storm
    out["attribution"] = attribution
    if out["run"]["platform"] == "xla":
        out["xla"] = _safe("xla", lambda: compute_xla(trace, steps))
        out["xla"] = _safe("xla", lambda: with_step_split(out["xla"], steps))
    return Analysis(metrics=jsonable(out), context=ctx, breakdown=bd)


def compute_metrics(trace: Trace, steps: Steps) -> dict[str, dict[str, Any]]:
    """All metric topics of one trace (see the module docstring)."""
    return analyze(trace, steps).metrics
