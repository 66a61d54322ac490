"""The profiler's own cost in the profiled step: ``capture.profiler_overhead_share`` and how it was estimated.

Definitions (per step: the median over the profiled steps; P = ``steps.median_ns``, the profiled median step):
- ``unprofiled_step_ns``: the median of the unprofiled step times a capture helper wrote into the trace's metadata
  (``tb_llmdiag.capture`` times the steps it does not profile; ``ingest/kineto/meta.py`` reads them, those timed
  after the window when there are any: the job is then in the window's state), else null. ``overhead_method`` says
  which steps it used.
- With it (``overhead_basis`` = ``unprofiled_steps``): ``profiler_overhead_ns`` = max(0, P - unprofiled step) and
  ``profiler_overhead_share`` = that / P: measured, not modelled.
- Without it (``overhead_basis`` = ``model``): the profiler's cost is what recording costs on the host, per step:
  ``overhead_model_ns`` = sum over what the capture recorded of count per step x cost per record (``record_cost_ns``):
  CPU operators, dearer with ``record_shapes``, runtime/driver calls (CUPTI's callback) and ``[memory]`` samples
  (``profile_memory``) at ``MODEL``'s costs, scaled by the host's speed under the profiler as the trace shows it
  (``host_speed_scale``: how long a recorded ``aten::view``, an op that does no work, takes); ``python_function``
  records (``with_stack``) at ``python_record_ns``: ``PYTHON_RECORD_NS``, measured, not scaled (the Python tracer's
  callback does not go through the dispatcher the view times), or the trace's median record cycle when that is
  shorter (a record's whole cost lies between its start and the next one's); plus Kineto's ``overhead`` rows inside
  the steps.
  That time lengthens the step only where the host is what the GPU waits for: ``profiler_overhead_ns`` =
  min(``overhead_model_ns``, ``overhead_room_ns``), the room being the median step's idle time waiting for the host
  (``host_wait``) or drained by a sync (``sync``). A GPU-bound step hides the cost; a host-bound one pays all of it.
  The costs were fitted on real H100 and H200 captures with known unprofiled step times (``tests/data/*/truth.json``,
  ``tests/test_overhead.py`` holds the error on each).
- ``overhead_model_ns`` and ``overhead_room_ns`` are given whenever the model applies, measured or not: the host
  cost is what a fix that leaves the step bound by the host's own time keeps (``findings/trust.py``).
- Without steps or host rows: ``overhead_basis`` = ``none`` and the share is null.
- ``overhead_method``: one line saying which of these gave the number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_llmdiag.metrics.capture import OVERHEAD_NAMES, capture_metrics
from tb_llmdiag.metrics.context import Context, in_windows
from tb_llmdiag.metrics.gaps import StepBreakdown
from tb_llmdiag.model import Kind
from tb_llmdiag.units import fmt_ns


@dataclass(frozen=True)
class OverheadModel:
    """Host cost per recorded record, ns (fitted: module docstring)."""

    cpu_op_ns: float
    shapes_per_op_ns: float  # added per CPU operator when record_shapes is on
    runtime_ns: float
    memory_ns: float


#: fitted by scripts/overhead_fit.py on 42 ranks of tests/data (H100 and H200 hosts; every option set), holding the
#: six trust_host_* / trust_gpu_* captures within 0.05 of their measured share: rms 0.107 over all, 5 ranks off by
#: more than 0.15 (two DDP "noise" runs, a recompile run, the Python-heavy blame_host_python, one DDP rank). The
#: runtime-call cost folds into the per-operator one there (the counts move together).
MODEL = OverheadModel(cpu_op_ns=4.5e3, shapes_per_op_ns=0.0, runtime_ns=0.0, memory_ns=2e3)
#: the Python tracer's cost per ``python_function`` record (``with_stack=True``), measured, not fitted (docs/whatif.md,
#: "The Python tracer's cost per record"): the profiler's measured cost with stacks less without, per Python record per
#: step, on the three host-bound pairs that differ only in ``with_stack``, their median (trust_host_full -
#: trust_host_default: 2.55 ms / 3,111 records = 0.82 us; trust4_host_*: 2.41 ms / 3,092 = 0.78 us; trust5_host_*:
#: 6.41 ms / 3,783 = 1.69 us; CPython 3.12, H100/H200 hosts whose ``aten::view`` speed scales, 0.23 and 0.38 on the
#: first two, did not order them). The pairs pin it within 0.8-1.7 us, no closer. The traces' own record cycles:
#: back-to-back leaf records start 0.35-0.9 us apart (10th-25th percentile), the code between included.
PYTHON_RECORD_NS = 0.8e3
#: the trace's own bound on it: a Python record's start to the next one's on its thread, where the first has ended
#: (its whole cost, the next one's entry and the code between), the median over at least this many such pairs
MIN_RECORD_CYCLES = 100
#: the host's own speed under this profiler, as the trace shows it: the per-record costs scale with
#: (median ``aten::view`` duration / SPEED_REF_NS) ** SPEED_EXPONENT (a view does no work: its recorded time is the
#: dispatcher plus the profiler's own per-op cost on this host; 1 when the trace has no view)
SPEED_OP = "aten::view"
SPEED_REF_NS = 2500.0
SPEED_EXPONENT = 2.0
#: idle causes the profiler's host cost can lengthen (``metrics.gaps.CAUSES``)
ROOM_CAUSES = ("host_wait", "sync")
#: share of that room the cost fills (fitted with MODEL)
ROOM_SHARE = 0.4


def _per_step(ctx: Context, *kinds: Kind) -> float:
    rows = ctx.cache.kinds(*kinds)
    ev = ctx.trace.events
    return float(in_windows(ev.ts_ns[rows], ctx.win_s, ctx.win_e).sum()) / ctx.n_steps


def model_ns(ctx: Context, record_shapes: bool | None) -> tuple[float, dict[str, float]]:
    """The modelled host cost per step and the per-step counts behind it."""
    ev = ctx.trace.events
    counts = {
        "cpu_ops": _per_step(ctx, Kind.CPU_OP),
        "runtime_calls": _per_step(ctx, Kind.RUNTIME, Kind.DRIVER),
        "python_frames": _per_step(ctx, Kind.PYTHON),
        "memory_samples": float(in_windows(ctx.trace.memory.ts_ns, ctx.win_s, ctx.win_e).sum()) / ctx.n_steps,
    }
    over = ctx.cache.rows_named(OVERHEAD_NAMES, Kind.OTHER)
    over = over[in_windows(ev.ts_ns[over], ctx.win_s, ctx.win_e)]
    counts["speed_scale"] = host_speed_scale(ctx)
    counts["python_record_ns"] = python_record_ns(ctx)
    cost = record_cost_ns(
        counts["cpu_ops"],
        counts["runtime_calls"],
        counts["python_frames"],
        counts["memory_samples"],
        record_shapes=record_shapes,
        speed_scale=counts["speed_scale"],
        python_ns=counts["python_record_ns"],
    )
    return cost + float(ev.dur_ns[over].sum()) / ctx.n_steps, counts


def record_cost_ns(
    cpu_ops: float,
    runtime_calls: float,
    python_frames: float,
    memory_samples: float = 0.0,
    *,
    record_shapes: bool | None,
    speed_scale: float,
    python_ns: float,
) -> float:
    """The profiler's host cost of recording these records: ``MODEL``'s per-record costs x ``speed_scale`` for
    operators, runtime calls and memory samples, ``python_ns`` (``python_record_ns``) for the Python tracer's records
    (module docstring). The one formula for the step (``model_ns``) and for the records inside one activity
    (``attribution.unrecorded_profiler_ns``)."""
    m = MODEL
    op_ns = m.cpu_op_ns + (m.shapes_per_op_ns if record_shapes else 0.0)
    scaled = cpu_ops * op_ns + runtime_calls * m.runtime_ns + memory_samples * m.memory_ns
    return scaled * speed_scale + python_frames * python_ns


def python_record_ns(ctx: Context) -> float:
    """The Python tracer's cost per record on this trace: ``PYTHON_RECORD_NS``, or the median record cycle when that is
    shorter (module docstring; ``MIN_RECORD_CYCLES``)."""
    ev = ctx.trace.events
    rows = ctx.cache.kinds(Kind.PYTHON)
    rows = rows[np.argsort(ev.tid[rows], kind="stable")]  # by thread, in time within each
    ts, tid = ev.ts_ns[rows], ev.tid[rows]
    ended = (tid[1:] == tid[:-1]) & (ts[1:] >= ts[:-1] + ev.dur_ns[rows][:-1])
    cycles = (ts[1:] - ts[:-1])[ended]
    if cycles.size < MIN_RECORD_CYCLES:
        return PYTHON_RECORD_NS
    return min(PYTHON_RECORD_NS, float(np.median(cycles)))


def host_speed_scale(ctx: Context) -> float:
    """(median recorded ``aten::view`` / SPEED_REF_NS) ** SPEED_EXPONENT, or 1 without views (module docstring)."""
    ev = ctx.trace.events
    if SPEED_OP not in ev.names:
        return 1.0
    rows = ctx.cache.kinds(Kind.CPU_OP)
    d = ev.dur_ns[rows][ev.name_id[rows] == ev.names.index(SPEED_OP)]
    return float((np.median(d) / SPEED_REF_NS) ** SPEED_EXPONENT) if d.size else 1.0


def _why_no_model(ctx: Context, bd: StepBreakdown) -> str | None:
    """Why the model does not apply to this trace, or None when it does."""
    if not ctx.step_median_ns or not ctx.n_steps:
        return "no steps"
    if ctx.trace.source_kind != "kineto":
        return "the model is fitted on Kineto captures only"
    if ctx.cache.kinds(Kind.CPU_OP, Kind.RUNTIME, Kind.DRIVER, Kind.PYTHON).size == 0 or not bd.available:
        return "no host activity or no device activity recorded"
    return None


def overhead_fields(ctx: Context, bd: StepBreakdown, record_shapes: bool | None) -> dict[str, Any]:
    """The topic's overhead keys (module docstring)."""
    profiled = ctx.step_median_ns
    raw = ctx.trace.metadata.get("unprofiled_step_ns")
    unprofiled = int(np.median(raw)) if isinstance(raw, (list, tuple)) and raw else None
    out: dict[str, Any] = {
        "profiled_step_ns": profiled,
        "unprofiled_step_ns": unprofiled,
        "unprofiled_steps": len(raw) if unprofiled is not None and isinstance(raw, (list, tuple)) else 0,
        "overhead_model_ns": None,
        "overhead_room_ns": None,
        "overhead_model_share": None,
    }
    why = _why_no_model(ctx, bd)
    if why is None:
        cost, counts = model_ns(ctx, record_shapes)
        room = float(np.median(sum(bd.part_ns(c) for c in ROOM_CAUSES))) * ROOM_SHARE
        out["overhead_model_ns"] = int(round(cost))
        out["overhead_room_ns"] = int(round(room))
    if profiled and unprofiled is not None:
        cut = max(0, profiled - unprofiled)
        if why is None:
            out["overhead_model_share"] = min(cost, room) / profiled
        return {
            **out,
            "profiler_overhead_ns": cut,
            "profiler_overhead_share": cut / profiled,
            "overhead_basis": "unprofiled_steps",
            "overhead_method": f"measured: the profiled median step less the median of {out['unprofiled_steps']} "
            f"unprofiled steps {_timed_where(ctx.trace.metadata)} ({ctx.trace.metadata.get('unprofiled_source')})",
        }
    if why is not None:
        return {
            **out,
            "profiler_overhead_ns": None,
            "profiler_overhead_share": None,
            "overhead_basis": "none",
            "overhead_method": f"not estimated: {why}",
        }
    assert profiled  # _why_no_model said there are steps
    est = min(cost, room)
    opts = [
        k
        for k, on in (
            ("shapes", record_shapes),
            ("stacks", counts["python_frames"] > 0),
            ("memory", counts["memory_samples"] > 0),
        )
        if on
    ]
    out["overhead_model_share"] = est / profiled
    return {
        **out,
        "profiler_overhead_ns": int(round(est)),
        "profiler_overhead_share": est / profiled,
        "overhead_basis": "model",
        "overhead_method": (
            f"modelled: {counts['cpu_ops']:.0f} CPU ops, {counts['runtime_calls']:.0f} runtime calls, "
            f"{counts['python_frames']:.0f} Python frames and {counts['memory_samples']:.0f} memory samples per step "
            f"recorded ({'with ' + ', '.join(opts) if opts else 'no shapes, stacks or memory'}) at per-record costs "
            f"fitted on H100/H200 captures, x{counts['speed_scale']:.2f} for this host's speed under the profiler "
            f"(its recorded aten::view){_python_basis(counts)}, capped by the step's host-wait idle "
            f"time (the host cost a GPU-bound step hides)"
        ),
    }


def _python_basis(counts: Mapping[str, float]) -> str:
    """How the Python frames were priced, in words, when there are any (module docstring)."""
    if counts["python_frames"] <= 0:
        return ""
    if counts["python_record_ns"] < PYTHON_RECORD_NS:
        return f"; Python frames at {fmt_ns(counts['python_record_ns'])} each, this trace's median record cycle"
    return f"; Python frames at {fmt_ns(PYTHON_RECORD_NS)} each, measured with and without stacks, not scaled"


#: where the unprofiled steps were timed (``ingest/kineto/meta.py``'s ``unprofiled_when``), in words
TIMED_WHERE = {
    "after_window": "the capture helper timed after the profiled window",
    "before_window": "the capture helper timed before the profiled window",
}


def _timed_where(meta: Mapping[str, Any]) -> str:
    return TIMED_WHERE.get(str(meta.get("unprofiled_when")), "the trace's metadata holds")


#: a measured and a modelled share further apart than this are reported as a problem
DISAGREE_SHARE = 0.15


#: why the timed steps and the trace's estimate may disagree, by where the steps were timed
DISAGREE_WHY = {
    "before_window": "the steps before the profiled window may run faster or slower for other reasons (prefetched "
    "batches, warm-up)",
    "after_window": "either the job's speed changed around the window (data, clocks, other processes) or this "
    "workload's recording cost is not the one the estimate was fitted on",
    "": "the timed steps may run faster or slower for other reasons, or this workload's recording cost is not the one "
    "the estimate was fitted on",
}


def capture_topic(ctx: Context, bd: StepBreakdown) -> dict[str, Any]:
    """The whole ``capture`` topic: what the capture holds and lost (``metrics.capture``) and the profiler's cost.
    When the unprofiled steps the trace holds and the model disagree by more than ``DISAGREE_SHARE``, a problem says
    so, and why they may (``DISAGREE_WHY``, by where the steps were timed)."""
    held = capture_metrics(ctx)
    out = {**held, **overhead_fields(ctx, bd, held["record_shapes"])}
    measured, model = out["profiler_overhead_share"], out["overhead_model_share"]
    if out["overhead_basis"] == "unprofiled_steps" and model is not None and abs(measured - model) > DISAGREE_SHARE:
        out["problems"] = [
            *out["problems"],
            {
                "kind": "unprofiled_disagrees",
                "count": None,
                "severity": "warning",
                "text": f"The unprofiled steps {_timed_where(ctx.trace.metadata)} make the profiler "
                f"{100 * measured:.0f} % of the step, the trace's own estimate {100 * model:.0f} %: "
                f"{DISAGREE_WHY.get(str(ctx.trace.metadata.get('unprofiled_when')), DISAGREE_WHY[''])}; "
                f"the what-if uses the timed steps.",
            },
        ]
        out["problem_count"] += 1
    return out
