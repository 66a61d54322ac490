"""Metrics: one topic per module, each a pure function over the trace's columns.

``analyze(trace, steps) -> Analysis``: the topics (``Analysis.metrics``, ``{topic: dict}``) and the per-step
breakdown behind them (``Analysis.breakdown``, ``metrics.steps.gaps.StepBreakdown``), which the tab's step
timeline and ``/steps`` rows read so they show what the report counts. ``compute_metrics`` returns the topics
only. Every topic dict holds JSON scalars/lists with units in key names and null (never NaN) for unknowns. A
topic that cannot be computed says why: ``{"available": false, "reason": "..."}``. Definitions:
``docs/metrics.md`` and each module's docstring.
The topics are declared in ``metrics/topics.py`` (``TOPICS``: name, function, the topics it needs, platforms,
registry entries) and computed in that order by one guarded loop (``compute_topics``), after ``run``: the cause
topics (``compile``, ``precision``, ``optimizer``, ``checkpointing``, ``outliers``, ``sync_storm``, ``host_floor``)
on Kineto runs only, ``xla`` on XLA runs only. ``run`` says once what kind of run this is:
``{"platform": "cuda" | "xla", "source_kind": "kineto" | "xplane", "workload": "training" | "inference" | null,
"read_complete": bool, "read_share", ...}`` (Kineto traces are ``cuda``, XPlane
traces ``xla``); every platform-dependent consumer (headline, rules, tab) reads ``run.platform``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.entry import COUNT, FLAG, NEITHER, SHARE, TEXT, Entry, Intro
from tb_llmdiag.metrics.steps.gaps import StepBreakdown, step_breakdown
from tb_llmdiag.metrics.steps.windows import Steps, find_steps
from tb_llmdiag.metrics.topics import TOPICS, Inputs, Topic
from tb_llmdiag.metrics.workload import device_kind, workload_fields
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


def _guarded(topic: Topic, inputs: Inputs) -> dict[str, Any]:
    """One topic; an unexpected error becomes an unavailable topic, never a failed report."""
    try:
        return topic.compute(inputs)
    except Exception as exc:  # odd traces must not take the whole report down
        logger.exception("metrics topic %s failed", topic.name)
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
        # that need the whole file are skipped then (their ``skip_on``), and so are MFU and tokens/s
        "read_complete": bool(read.get("complete", True)),
        "read_share": float(share) if isinstance(share, (int, float)) else 1.0 if read.get("complete", True) else None,
    }


def compute_topics(
    ctx: Context, bd: StepBreakdown, run: dict[str, Any], topics: tuple[Topic, ...] = TOPICS
) -> dict[str, Any]:
    """``run`` and every topic of ``topics`` (``metrics/topics.py``) on the run's platform, in order, each guarded;
    a topic reads the results of the topics it needs. ``early`` topics are computed first, kept at their row."""
    mine = [t for t in topics if run["platform"] in t.platforms]
    early = {t.name: _guarded(t, Inputs(ctx, bd, {})) for t in mine if t.early and not t.needs}
    out: dict[str, Any] = {"run": run}
    for topic in mine:
        if topic.name in early:
            out[topic.name] = early[topic.name]
        else:
            out[topic.name] = _guarded(topic, Inputs(ctx, bd, {name: out[name] for name in topic.needs}))
    return out


def analyze(trace: Trace, steps: Steps | None = None) -> Analysis:
    """All metric topics of one trace and the step breakdown behind them (``steps``: ``find_steps(trace)``
    when not given)."""
    steps = find_steps(trace) if steps is None else steps
    ctx = Context.build(trace, steps)
    bd = step_breakdown(ctx)
    return Analysis(metrics=jsonable(compute_topics(ctx, bd, run_topic(trace))), context=ctx, breakdown=bd)


def compute_metrics(trace: Trace, steps: Steps) -> dict[str, dict[str, Any]]:
    """All metric topics of one trace (see the module docstring)."""
    return analyze(trace, steps).metrics


# The registry's entries of the `run` section (``run_topic``) and of the keys every topic has (``_guarded``, and each
# topic that cannot be computed): one row per key (metrics/entry.py); metrics/registry.py collects them
RUN_INTRO: Intro = (
    "`run` (metrics/__init__.py)",
    "What kind of run this is, decided once from the reader that read the trace; every platform-dependent\n"
    "consumer (the headline, the rules' `platform`, the tab) reads `run.platform`.",
)
EVERY_TOPIC_INTRO: Intro = ("Every topic", "")

# a declared table, one entry per row: left as laid out
# fmt: off
RUN_ENTRIES: tuple[Entry, ...] = (
    ("run.platform", TEXT, NEITHER, 0, "platform",
     "`cuda` (Kineto traces: torch.profiler on CUDA or ROCm) or `xla` (XPlane traces: TPU, torch_xla, JAX), "
     "decided once from the reader; an `xla` run also has the `xla` topic, and the headline, the rules and the tab "
     "read this key"),
    ("run.source_kind", TEXT, NEITHER, 0, "source kind", "the reader that read the trace: `kineto` or `xplane`"),
    ("run.workload", TEXT, NEITHER, 0, "workload",
     "`training` when the trace holds backward or optimizer activity (`backward_op_count`, `optimizer_step_count`, "
     "`optimizer_kernel_count`), else `inference` (vLLM, SGLang, HF generate, diffusion pipelines); null on XPlane "
     "traces, which do not name them. Selects the rules (training-only advice is skipped on inference) and their "
     "wording (each rule's `skip_on` and inference flavour, findings/). Not the report's `phase`, which the file name "
     "gives"),
    ("run.device_kind", TEXT, NEITHER, 0, "device kind",
     "what the trace's device is, for labels: `GPU` (CUDA, ROCm), `MTIA` (MTIA runtime calls), `TPU` (an XPlane "
     "device named TPU), or `CPU` (no device events / no device plane); null when a cut file's read part holds no "
     "device event"),
    ("run.read_complete", FLAG, NEITHER, 0, "read complete",
     "false when the reader stopped early (a cut file, invalid JSON: `read_state` in the run report); then the "
     "rules that need the whole file (`no_device_activity`, `memory_headroom`) are skipped and MFU and tokens/s "
     "are withheld"),
    ("run.read_share", SHARE, NEITHER, 0, "read share",
     "the share of the (decompressed) file read before the reader stopped; 1 for a complete read"),
    ("run.backward_op_count", COUNT, NEITHER, 0, "backward ops",
     "host operators of autograd's backward pass (`autograd::engine::evaluate_function: *`, `*Backward0`, "
     "`aten::*_backward`)"),
    ("run.optimizer_step_count", COUNT, NEITHER, 0, "optimizer steps",
     "`Optimizer.step#*` / `Optimizer.zero_grad#*` ranges (torch.optim's profiler labels)"),
    ("run.optimizer_kernel_count", COUNT, NEITHER, 0, "optimizer kernels",
     "device kernels of optimizers (fused/foreach Adam(W), SGD, LAMB, Lion, Adagrad, RMSprop)"),
)

EVERY_TOPIC_ENTRIES: tuple[Entry, ...] = (
    ("*.available", FLAG, NEITHER, 0, "available", "false when the topic cannot be computed; `reason` says why"),
    ("*.reason", TEXT, NEITHER, 0, "reason", "why the topic is unavailable (only when `available` is false)"),
)
# fmt: on
