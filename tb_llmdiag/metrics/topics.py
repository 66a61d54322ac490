"""The metric topics, declared: one row per topic, with how it is computed, the topics whose results it needs, the
platforms it runs on and its registry entries.

``metrics.analyze`` computes the rows in this order, each inside one guard (a topic that raises becomes
``{"available": false, "reason": ...}``, never a failed report), after the ``run`` section (``run_topic``), which
every row may need. A row runs only on the platforms it names (``run.platform``: ``cuda`` for Kineto traces,
``xla`` for XPlane traces). ``metrics/registry.py`` collects the rows' entries in the same order, which is
docs/metrics.md's order.

A new topic is its module (the function, its ``ENTRIES`` and ``INTRO`` beside it) and a row here, after the topics
it ``needs``; a row's ``compute`` reads only those (``Inputs.topics`` holds nothing else).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# by its path, under another name: `annotations` is __future__'s, in this module and in the package
import tb_llmdiag.metrics.host.annotations as user_annotations
from tb_llmdiag.metrics.anatomy import topic as anatomy
from tb_llmdiag.metrics.attribution import topic as attribution
from tb_llmdiag.metrics.capture import overhead
from tb_llmdiag.metrics.capture import topic as capture
from tb_llmdiag.metrics.comm import communication
from tb_llmdiag.metrics.comm import purpose as comm_purpose
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.entry import Entry, Intro
from tb_llmdiag.metrics.gpu import kernels, memcpy, memory, precision
from tb_llmdiag.metrics.host import dataloader, launch, sync_storm
from tb_llmdiag.metrics.host import floor as host_floor
from tb_llmdiag.metrics.host import sync as host_sync
from tb_llmdiag.metrics.steps import idle, outliers
from tb_llmdiag.metrics.steps import stats as step_stats
from tb_llmdiag.metrics.steps.gaps import StepBreakdown
from tb_llmdiag.metrics.throughput import flops, inference
from tb_llmdiag.metrics.training import checkpointing, optimizer
from tb_llmdiag.metrics.training import compile as torch_compile
from tb_llmdiag.metrics.xla import split as xla_split
from tb_llmdiag.metrics.xla import topic as xla

#: every ``run.platform``
PLATFORMS = ("cuda", "xla")
#: the Kineto (torch.profiler) runs only: topics that read CUDA/ROCm names, threads and ranges
CUDA = ("cuda",)


@dataclass(frozen=True)
class Inputs:
    """What a topic is computed from: the context built once (trace, steps, rows, signals), the step breakdown,
    and the results of the topics it needs (``Topic.needs``: those only)."""

    ctx: Context
    breakdown: StepBreakdown
    topics: Mapping[str, dict[str, Any]]


@dataclass(frozen=True)
class Topic:
    name: str
    compute: Callable[[Inputs], dict[str, Any]]
    entries: tuple[Entry, ...]
    intro: Intro | None = None
    needs: tuple[str, ...] = ()
    platforms: tuple[str, ...] = PLATFORMS
    #: computed before every other row (it needs none), its result kept at its own row: a topic whose transient
    #: memory then fits in what the read has just freed, before the other topics' caches build up (the attribution:
    #: docs/performance.md)
    early: bool = False


def _xla(i: Inputs) -> dict[str, Any]:
    """The ``xla`` topic: its metrics, then the step split the XLA findings read (``metrics/xla/split.py``)."""
    return xla_split.with_step_split(xla.compute_xla(i.ctx.trace, i.ctx.steps), i.ctx.steps)


# a declared table, one topic per row: left as laid out
# fmt: off
TOPICS: tuple[Topic, ...] = (
    Topic("steps", lambda i: step_stats.step_metrics(i.ctx, i.breakdown), step_stats.ENTRIES, step_stats.INTRO),
    Topic("idle", lambda i: idle.idle_metrics(i.ctx, i.breakdown), idle.ENTRIES, idle.INTRO),
    Topic("kernels", lambda i: kernels.kernel_metrics(i.ctx), kernels.ENTRIES, kernels.INTRO),
    Topic("launch", lambda i: launch.launch_metrics(i.ctx, i.topics["idle"]), launch.ENTRIES, launch.INTRO,
          needs=("idle",)),
    Topic("host_sync", lambda i: host_sync.host_sync_metrics(i.ctx, i.topics["idle"]), host_sync.ENTRIES,
          host_sync.INTRO, needs=("idle",)),
    Topic("memcpy", lambda i: memcpy.memcpy_metrics(i.ctx), memcpy.ENTRIES, memcpy.INTRO),
    Topic("dataloader", lambda i: dataloader.dataloader_metrics(i.ctx, i.breakdown.gaps), dataloader.ENTRIES,
          dataloader.INTRO),
    Topic("memory", lambda i: memory.memory_metrics(i.ctx), memory.ENTRIES, memory.INTRO),
    Topic("annotations", lambda i: user_annotations.annotation_metrics(i.ctx), user_annotations.ENTRIES,
          user_annotations.INTRO),
    Topic("flops", lambda i: flops.flops_metrics(i.ctx, i.topics["steps"], i.topics["kernels"], i.topics["run"]),
          flops.ENTRIES, flops.INTRO, needs=("steps", "kernels", "run")),
    Topic("host_floor", lambda i: host_floor.host_floor_metrics(i.ctx), host_floor.ENTRIES, host_floor.INTRO,
          platforms=CUDA),
    Topic("inference", lambda i: inference.inference_metrics(i.ctx.trace, i.topics["run"]), inference.ENTRIES,
          needs=("run",)),
    Topic("compile", lambda i: torch_compile.compile_metrics(i.ctx), torch_compile.ENTRIES, torch_compile.INTRO,
          platforms=CUDA),
    Topic("precision", lambda i: precision.precision_metrics(i.ctx), precision.ENTRIES, precision.INTRO,
          platforms=CUDA),
    Topic("optimizer", lambda i: optimizer.optimizer_metrics(i.ctx), optimizer.ENTRIES, optimizer.INTRO,
          platforms=CUDA),
    Topic("checkpointing", lambda i: checkpointing.checkpointing_metrics(i.ctx), checkpointing.ENTRIES,
          checkpointing.INTRO, platforms=CUDA),
    Topic("outliers", lambda i: outliers.outlier_metrics(i.ctx, i.topics["steps"]), outliers.ENTRIES,
          outliers.INTRO, needs=("steps",), platforms=CUDA),
    Topic("sync_storm", lambda i: sync_storm.sync_storm_metrics(i.ctx, i.topics["host_sync"], i.topics["idle"]),
          sync_storm.ENTRIES, sync_storm.INTRO, needs=("host_sync", "idle"), platforms=CUDA),
    Topic("attribution", lambda i: attribution.attribution_metrics(i.ctx, i.breakdown), attribution.ENTRIES,
          attribution.INTRO, early=True),
    # the model's parts: early too, right after the attribution, whose host call forest it reads and then releases
    Topic("anatomy", lambda i: anatomy.anatomy_metrics(i.ctx), anatomy.ENTRIES, anatomy.INTRO, platforms=CUDA,
          early=True),
    Topic("communication",
          lambda i: communication.communication_metrics(i.ctx.trace, i.ctx.coll, i.ctx.steps, i.ctx.cache),
          communication.ENTRIES, communication.INTRO),
    Topic("comm_purpose", lambda i: comm_purpose.comm_purpose_metrics(i.ctx), comm_purpose.ENTRIES,
          comm_purpose.INTRO, platforms=CUDA),
    # what the capture holds and lost (metrics/capture/topic.py) and the profiler's own cost (metrics/capture/overhead.py)
    Topic("capture", lambda i: overhead.capture_topic(i.ctx, i.breakdown), capture.ENTRIES, capture.INTRO),
    Topic("xla", _xla, xla.ENTRIES, xla.INTRO, platforms=("xla",)),
)
# fmt: on
