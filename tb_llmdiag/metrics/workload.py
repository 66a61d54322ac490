"""What the run is doing: training or inference (``run.workload``), from the trace's own events.

Definitions (Kineto traces; counts over the whole trace):
- ``backward_op_count``: host operators of autograd's backward pass: ``autograd::engine::evaluate_function: *``,
  the autograd nodes (``*Backward0``, ``*Backward``) and ATen backward kernels' ops (``aten::*_backward``).
- ``optimizer_step_count``: ``Optimizer.step#*`` / ``Optimizer.zero_grad#*`` ranges (torch.optim's profiler
  labels).
- ``optimizer_kernel_count``: device kernels of optimizers (fused/foreach Adam(W), SGD, LAMB, Lion, Adagrad,
  RMSprop: ``FusedAdamMathFunctor``, ``fused_adam``, ``multi_tensor_adam``...).
- ``workload``: ``"training"`` when any of the three is non-zero, else ``"inference"`` (vLLM, SGLang, HF
  ``generate``, diffusion pipelines: forward passes only). XPlane traces do not name backward or optimizer ops
  reliably (XLA fuses them into the step's program), so their workload is ``null`` (unknown: every rule
  applies, as before).

- ``device_kind``: what the trace's device is, for labels ("MTIA busy", lane "MTIA 9 · stream 801"): ``"CPU"``
  without any device event (kernel, memcpy, memset) on a Kineto trace or without a device plane on an XPlane
  one; ``"TPU"`` when an XPlane device is named TPU; ``"MTIA"`` when the runtime calls are MTIA's
  (``runFunction - ...``, Kineto's ``mtia_runtime``); else ``"GPU"`` (CUDA and ROCm). Null when a cut file's
  read part holds no device event (Kineto writes them last: their absence there says nothing).

The RunReport's top-level ``phase`` is this workload (``run_phase``), or ``validation`` where a file name says so.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tb_llmdiag.model import DEVICE_KINDS as DEVICE_EVENT_KINDS
from tb_llmdiag.model import Kind, Trace, kind_mask

_BACKWARD = re.compile(r"^autograd::engine::evaluate_function: |Backward\d*$|^aten::\w+_backward$")
_OPTIMIZER_STEP = re.compile(r"^Optimizer\.(?:step|zero_grad)#")
_OPTIMIZER_KERNEL = re.compile(r"(?i)adam|_sgd|sgd_|lamb(?!da)|\blion|adagrad|rmsprop")

_MTIA_RUNTIME = re.compile(r"^runFunction\b")

WORKLOADS = ("training", "inference")
DEVICE_KINDS = ("GPU", "MTIA", "TPU", "CPU")


def _count(trace: Trace, pattern: re.Pattern[str], kinds: tuple[Kind, ...]) -> int:
    """Rows of the given kinds whose name matches ``pattern`` (the regex runs once per distinct name among them)."""
    ev = trace.events
    if not len(ev) or not ev.names:
        return 0
    per_name = np.bincount(ev.name_id[kind_mask(ev.kind, kinds)], minlength=len(ev.names))
    used = np.flatnonzero(per_name)
    hit = used[np.fromiter((pattern.search(ev.names[i]) is not None for i in used), dtype=bool, count=used.size)]
    return int(per_name[hit].sum())


def workload_fields(trace: Trace) -> dict[str, Any]:
    """The ``run`` topic's workload keys (module docstring)."""
    if trace.source_kind != "kineto":
        return {
            "workload": None,
            "backward_op_count": None,
            "optimizer_step_count": None,
            "optimizer_kernel_count": None,
        }
    backward = _count(trace, _BACKWARD, (Kind.CPU_OP,))
    steps = _count(trace, _OPTIMIZER_STEP, (Kind.ANNOTATION, Kind.CPU_OP))
    kernels = _count(trace, _OPTIMIZER_KERNEL, (Kind.KERNEL,))
    return {
        "workload": "training" if backward + steps + kernels else "inference",
        "backward_op_count": backward,
        "optimizer_step_count": steps,
        "optimizer_kernel_count": kernels,
    }


def device_kind(trace: Trace) -> str | None:
    """What the trace's device is (module docstring)."""
    if trace.source_kind == "xplane":
        if not trace.devices:
            return "CPU"
        return "TPU" if any("TPU" in d.name.upper() for d in trace.devices) else "GPU"
    if not kind_mask(trace.events.kind, DEVICE_EVENT_KINDS).any():
        # none in the part of a cut file that was read says nothing (Kineto writes device events last)
        return "CPU" if trace.read_state.get("complete", True) else None
    return "MTIA" if _count(trace, _MTIA_RUNTIME, (Kind.RUNTIME,)) else "GPU"


def run_phase(file_phase: str, metrics: dict[str, Any]) -> str | None:
    """The RunReport's one ``phase``, set from here only: ``validation`` when the file name says so (Lightning's
    ``validation_step`` files: discovery's phase), else the run's workload from its events
    (``metrics.run.workload``: ``training`` / ``inference``), null when that is unknown (XPlane, unreadable)."""
    if file_phase == "validation":
        return "validation"
    workload = (metrics.get("run") or {}).get("workload")
    return workload if workload in WORKLOADS else None
