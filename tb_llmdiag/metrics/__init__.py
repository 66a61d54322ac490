"""Metrics: one topic per module, each a pure function over the trace's columns.

``compute_metrics(trace, steps) -> {topic: dict}``; every topic dict holds JSON scalars/lists with units in
key names and null (never NaN) for unknowns. A topic that cannot be computed says why:
``{"available": false, "reason": "..."}``. Definitions: ``docs/metrics.md`` and each module's docstring.
Topics: steps, idle, kernels, launch, host_sync, memcpy, dataloader, memory, annotations, flops
(+ ``xla`` for XPlane traces, from ``metrics/xla.py``).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Callable

from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics.xla_split import with_step_split
from tb_llmdiag.model import Trace

logger = logging.getLogger(__name__)


def _safe(topic: str, fn: Callable[[], Any]) -> Any:
    """Run one topic; an unexpected error becomes an unavailable topic, never a failed report."""
    try:
        return fn()
    except Exception as exc:  # odd traces must not take the whole report down
        logger.exception("metrics topic %s failed", topic)
        return {"available": False, "reason": f"could not be computed: {type(exc).__name__}: {exc}"}


def compute_metrics(trace: Trace, steps: Any) -> dict[str, dict[str, Any]]:
    """All metric topics of one trace (see the module docstring)."""
    from tb_llmdiag.metrics.annotations import annotation_metrics
    from tb_llmdiag.metrics.causes import cause_topics
    from tb_llmdiag.metrics.context import Context
    from tb_llmdiag.metrics.dataloader import dataloader_metrics
    from tb_llmdiag.metrics.flops import flops_metrics
    from tb_llmdiag.metrics.host_sync import host_sync_metrics
    from tb_llmdiag.metrics.idle import HostSignals, IdleGaps, idle_metrics
    from tb_llmdiag.metrics.kernels import kernel_metrics
    from tb_llmdiag.metrics.launch import launch_metrics
    from tb_llmdiag.metrics.memcpy import memcpy_metrics
    from tb_llmdiag.metrics.memory import memory_metrics
    from tb_llmdiag.metrics.step_stats import main_cause, outlier_causes, step_metrics

    ctx = Context.build(trace, steps)
    out: dict[str, Any] = {}
    out["steps"] = _safe("steps", lambda: step_metrics(ctx))
    host = HostSignals.of(trace, ctx.cache)
    idle_pair = _safe("idle", lambda: idle_metrics(ctx, host))
    if isinstance(idle_pair, tuple):
        out["idle"], gaps = idle_pair
    else:
        import numpy as np

        out["idle"] = idle_pair
        gaps = IdleGaps(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint8))
    if out["steps"].get("available"):
        causes = _safe("steps", lambda: outlier_causes(out["steps"], out["idle"]))
        out["steps"]["outlier_causes"] = causes if isinstance(causes, list) else []
        out["steps"]["outlier_main_cause"] = main_cause(out["steps"]["outlier_causes"])
    out["kernels"] = _safe("kernels", lambda: kernel_metrics(ctx))
    out["launch"] = _safe("launch", lambda: launch_metrics(ctx, out["idle"]))
    out["host_sync"] = _safe("host_sync", lambda: host_sync_metrics(ctx, out["idle"]))
    out["memcpy"] = _safe("memcpy", lambda: memcpy_metrics(ctx))
    out["dataloader"] = _safe("dataloader", lambda: dataloader_metrics(ctx, gaps))
    out["memory"] = _safe("memory", lambda: memory_metrics(ctx))
    out["annotations"] = _safe("annotations", lambda: annotation_metrics(ctx))
    out["flops"] = _safe("flops", lambda: flops_metrics(ctx, out["steps"], out["kernels"]))
    out.update(cause_topics(ctx, out))  # issue #14: compile, precision, optimizer, checkpointing, outliers, sync_storm
    if trace.source_kind == "xplane":
        try:
            xla = importlib.import_module("tb_llmdiag.metrics.xla")
        except ImportError:
            xla = None
        if xla is not None and hasattr(xla, "compute_xla"):
            out["xla"] = _safe("xla", lambda: xla.compute_xla(trace, steps))
            out["xla"] = _safe("xla", lambda: with_step_split(out["xla"]))
    return jsonable(out)  # type: ignore[no-any-return]
