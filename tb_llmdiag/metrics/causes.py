"""The cause topics of issue #14, computed after the core topics: ``compile``, ``precision``, ``optimizer``,
``checkpointing``, ``outliers``, ``sync_storm``, and the host floor the what-if needs (``host_floor``) (one module each; definitions in their docstrings and
docs/metrics.md). Kineto runs only: XPlane runs have their own (``xla``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tb_llmdiag.metrics.checkpointing import checkpointing_metrics
from tb_llmdiag.metrics.compile import compile_metrics
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.host_floor import host_floor_metrics
from tb_llmdiag.metrics.optimizer import optimizer_metrics
from tb_llmdiag.metrics.outliers import outlier_metrics
from tb_llmdiag.metrics.precision import precision_metrics
from tb_llmdiag.metrics.sync_storm import sync_storm_metrics

logger = logging.getLogger(__name__)


def _safe(topic: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return fn()
    except Exception as exc:  # odd traces must not take the whole report down
        logger.exception("metrics topic %s failed", topic)
        return {"available": False, "reason": f"could not be computed: {type(exc).__name__}: {exc}"}


def cause_topics(ctx: Context, core: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The cause topics of one trace, given the core topics (``steps``, ``idle``, ``host_sync``)."""
    if ctx.trace.source_kind == "xplane":
        return {}
    return {
        "compile": _safe("compile", lambda: compile_metrics(ctx)),
        "precision": _safe("precision", lambda: precision_metrics(ctx)),
        "optimizer": _safe("optimizer", lambda: optimizer_metrics(ctx)),
        "checkpointing": _safe("checkpointing", lambda: checkpointing_metrics(ctx)),
        "outliers": _safe("outliers", lambda: outlier_metrics(ctx, core.get("steps") or {})),
        "sync_storm": _safe(
            "sync_storm", lambda: sync_storm_metrics(ctx, core.get("host_sync") or {}, core.get("idle") or {})
        ),
        "host_floor": _safe("host_floor", lambda: host_floor_metrics(ctx)),
    }
