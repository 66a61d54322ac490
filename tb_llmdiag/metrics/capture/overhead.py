"""The profiler's own cost in the profiled step: ``capture.profiler_overhead_share`` and how it was estimated.

Definitions (per step: the median over the profiled steps; P = ``steps.median_ns``, the profiled median step):
- ``unprofiled_step_ns``: the median of the unprofiled step times a capture helper wrote into the trace's metadata
  (``tb_llmdiag.capture`` times the steps it does not profile; ``ingest/kineto/meta.py`` reads them: those timed
  before the window when at least 3 remain with step 0 left out, the job before any profiler ran, else those after
  it), else null. ``overhead_method`` says which steps it used.
- With it (``overhead_basis`` = ``unprofiled_steps``): ``profiler_overhead_ns`` = max(0, P - unprofiled step) and
  ``profiler_overhead_share`` = that / P: measured, not modelled. ``profiler_overhead_share_95`` = [lo, hi]: the
  2.5th and 97.5th percentiles of max(0, P - U*) / P over ``BOOT_RESAMPLES`` resamples (a fixed seed), U* the median
  of the unprofiled steps drawn with replacement; P is this trace's own profiled step, a fact of the trace, not a
  sample (resampling a window of a few steps would let one slow first step swing the interval to 0.3 on a GPU-bound
  step whose share is 0.02); null with fewer than ``MIN_SAMPLES`` unprofiled steps.
- ``after_window_slowdown_share`` = (A - B) / B, A and B the medians of the helper's steps after and before the window
  (step 0 left out), when each has at least ``MIN_SAMPLES``; negative when the steps after ran faster; its 95 %
  interval ``after_window_slowdown_share_95`` resampled as above. The steps after ran slower than the spread of
  both allows when that interval's low end is above 0 and the slowdown above ``SLOWER_SHARE``: a
  ``slower_after_profiling`` warning (the trace cannot tell whether the profiler's state outlived its window or the
  job itself slowed; the measured share uses the steps before the window).
- Without it (``overhead_basis`` = ``model``): the profiler's cost is what recording costs on the host, per step:
  ``overhead_model_ns`` = sum over what the capture recorded of count per step x cost per record (``MODEL``: CPU
  operators, dearer with ``record_shapes``; runtime/driver calls (CUPTI's callback); ``python_function`` frames
  (``with_stack``); ``[memory]`` samples (``profile_memory``)), scaled by the host's speed under the profiler as the
  trace shows it (``host_speed_scale``: how long a recorded ``aten::view``, an op that does no work, takes), plus
  Kineto's ``overhead`` rows inside the steps.
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
from numpy.typing import NDArray

from tb_llmdiag.metrics.capture.topic import OVERHEAD_NAMES, capture_metrics
from tb_llmdiag.metrics.context import Context, in_windows
from tb_llmdiag.metrics.steps.gaps import StepBreakdown
from tb_llmdiag.model import Kind
from tb_llmdiag.units import fmt_interval, fmt_ns


@dataclass(frozen=True)
class OverheadModel:
    """Host cost per recorded record, ns (fitted: module docstring)."""

    cpu_op_ns: float
    shapes_per_op_ns: float  # added per CPU operator when record_shapes is on
    runtime_ns: float
    python_ns: float
    memory_ns: float


#: fitted by scripts/overhead_fit.py on the 18 batch-5 captures (docs/captures_5.md, one H100; 14 host-bound in every
#: option set, 4 GPU-bound; 5 of them are tests/data/trust5_*), whose unprofiled step is the job timed before any
#: profiler ran in the process: rms 0.061, all 18 within 0.15 (max 0.141; the fit before it: rms 0.184, 6 of 18).
#: Higher per-record costs fit as well (rms 0.044): on these host-bound steps the room below caps the cost, so the
#: costs are the lowest round ones that keep all 18 within 0.15. The captures of batches 1-4 measured their unprofiled
#: step after the profiler had run, which on host-bound jobs runs 10-45 % slower than the job ever runs unprofiled, so
#: they under-state the share; against them this fit is rms 0.114 and 43 of 48 ranks within 0.15 (the fit before it:
#: 0.104, 42 of 48).
MODEL = OverheadModel(cpu_op_ns=7e3, shapes_per_op_ns=0.0, runtime_ns=5e3, python_ns=1e3, memory_ns=2e3)
#: the Python tracer's cost per ``python_function`` record (``with_stack=True``), measured, not fitted (docs/whatif.md,
#: "The Python tracer's cost per record"), for the records inside one activity (``python_record_ns``,
#: ``attribution.unrecorded_profiler_ns``; the step's estimate keeps MODEL's fitted, room-capped ``python_ns``): the
#: profiler's measured cost with stacks less without, per Python record per step, on the three host-bound pairs that
#: differ only in ``with_stack``, their median (trust_host_full - trust_host_default: 2.55 ms / 3,111 records = 0.82 us;
#: trust4_host_*: 2.41 ms / 3,092 = 0.78 us; trust5_host_*: 6.41 ms / 3,783 = 1.69 us; CPython 3.12, H100/H200 hosts
#: whose ``aten::view`` speed scales, 0.23 and 0.38 on the first two, did not order them: not scaled). The pairs pin
#: it within 0.8-1.7 us, no closer. The traces' own record cycles: back-to-back leaf records start 0.35-0.9 us apart
#: (10th-25th percentile), the code between included.
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
#: resamples behind each 95 % interval, drawn with a fixed seed (the same trace gives the same interval)
BOOT_RESAMPLES = 1000
BOOT_SEED = 0
#: the fewest steps on a side for an interval or a slowdown
MIN_SAMPLES = 3
#: steps after the window this much slower than those before it (and their interval above 0) are a problem
SLOWER_SHARE = 0.05
#: at most this many values drawn at once while resampling (bounds the temporaries on traces with many steps)
_BOOT_CHUNK = 1 << 22
#: idle causes the profiler's host cost can lengthen (``metrics.steps.gaps.CAUSES``)
ROOM_CAUSES = ("host_wait", "sync")
#: share of that room the cost fills (fitted with MODEL)
ROOM_SHARE = 0.6


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
    m = MODEL
    op_ns = m.cpu_op_ns + (m.shapes_per_op_ns if record_shapes else 0.0)
    counts["speed_scale"] = host_speed_scale(ctx)
    counts["overhead_rows_ns"] = float(ev.dur_ns[over].sum()) / ctx.n_steps
    cost = (
        counts["cpu_ops"] * op_ns
        + counts["runtime_calls"] * m.runtime_ns
        + counts["python_frames"] * m.python_ns
        + counts["memory_samples"] * m.memory_ns
    ) * counts["speed_scale"] + counts["overhead_rows_ns"]
    return cost, counts


def python_record_ns(ctx: Context) -> float:
    """The Python tracer's cost per record on this trace: ``PYTHON_RECORD_NS``, or the median record cycle when that is
    shorter (``MIN_RECORD_CYCLES``; a record's whole cost lies between its start and the next one's)."""
    ev = ctx.trace.events
    rows = ctx.cache.kinds(Kind.PYTHON)
    rows = rows[np.argsort(ev.tid[rows], kind="stable")]  # by thread, in time within each
    # each record and the next on its thread: the next starts once this one has ended. The per-record temporaries are
    # dropped as soon as used (this sets the report's peak memory on the 191 MB bench trace)
    tid = ev.tid[rows]
    ended = tid[1:] == tid[:-1]
    del tid
    cycles = np.diff(ev.ts_ns[rows])
    ended &= cycles >= ev.dur_ns[rows[:-1]]
    del rows
    cycles = cycles[ended]
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


def resampled_medians(x: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
    """The medians of ``BOOT_RESAMPLES`` samples of ``x`` drawn with replacement, each of ``x``'s size."""
    rows = max(1, _BOOT_CHUNK // x.size)
    parts = [
        np.median(x[rng.integers(0, x.size, size=(min(rows, BOOT_RESAMPLES - i), x.size))], axis=1)
        for i in range(0, BOOT_RESAMPLES, rows)
    ]
    return np.concatenate(parts)


def interval_95(draws: NDArray[np.float64]) -> list[float]:
    """[2.5th, 97.5th] percentile of the draws."""
    lo, hi = np.quantile(draws, [0.025, 0.975])
    return [float(lo), float(hi)]


def share_interval(profiled_ns: float, unprofiled_ns: Any) -> list[float] | None:
    """The 95 % interval of the measured share max(0, P - U) / P, P the trace's profiled step and U resampled (module
    docstring), or None with fewer than ``MIN_SAMPLES`` unprofiled steps."""
    u = np.asarray(unprofiled_ns, np.float64)
    if u.size < MIN_SAMPLES or not profiled_ns > 0:
        return None
    um = resampled_medians(u, np.random.default_rng(BOOT_SEED))
    return interval_95(np.maximum(0.0, profiled_ns - um) / profiled_ns)


def slowdown_fields(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``after_window_slowdown_share`` and its interval from the helper's steps before and after the window (module
    docstring); nulls unless each side has ``MIN_SAMPLES`` (and the steps before are all positive)."""
    before, after = meta.get("unprofiled_before_step_ns"), meta.get("unprofiled_after_step_ns")
    out: dict[str, Any] = {"after_window_slowdown_share": None, "after_window_slowdown_share_95": None}
    if not isinstance(before, (list, tuple)) or not isinstance(after, (list, tuple)):
        return out
    b, a = np.asarray(before, np.float64), np.asarray(after, np.float64)
    if b.size < MIN_SAMPLES or a.size < MIN_SAMPLES or (b <= 0).any():
        return out
    rng = np.random.default_rng(BOOT_SEED)
    bm, am = resampled_medians(b, rng), resampled_medians(a, rng)
    out["after_window_slowdown_share"] = float((np.median(a) - np.median(b)) / np.median(b))
    out["after_window_slowdown_share_95"] = interval_95((am - bm) / bm)
    return out


def _why_no_model(ctx: Context, bd: StepBreakdown) -> str | None:
    """Why the model does not apply to this trace, or None when it does."""
    if not ctx.step_median_ns or not ctx.n_steps:
        return "no steps"
    if ctx.trace.source_kind != "kineto":
        return "the model is fitted on Kineto captures only"
    # the kinds the model counts (model_ns), asked as it asks them: their union, one 3 MB row list on the 191 MB bench
    # trace, would be kept for nothing
    host = sum(ctx.cache.kinds(*k).size for k in ((Kind.CPU_OP,), (Kind.RUNTIME, Kind.DRIVER), (Kind.PYTHON,)))
    if host == 0 or not bd.available:
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
        ci = share_interval(float(profiled), raw)
        return {
            **out,
            "profiler_overhead_ns": cut,
            "profiler_overhead_share": cut / profiled,
            "profiler_overhead_share_95": ci,
            "overhead_basis": "unprofiled_steps",
            "overhead_method": f"measured: the profiled median step less the median of {out['unprofiled_steps']} "
            f"unprofiled steps {_timed_where(ctx.trace.metadata)}{_field(ctx.trace.metadata)}; "
            + (
                f"95 % interval from {BOOT_RESAMPLES} resamples of the {out['unprofiled_steps']} unprofiled steps "
                "(the profiled step is this trace's own)"
                if ci is not None
                else f"no interval: fewer than {MIN_SAMPLES} unprofiled steps"
            ),
        }
    if why is not None:
        return {
            **out,
            "profiler_overhead_ns": None,
            "profiler_overhead_share": None,
            "profiler_overhead_share_95": None,
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
        "profiler_overhead_share_95": None,
        "overhead_basis": "model",
        "overhead_method": (
            f"modelled: {counts['cpu_ops']:.0f} CPU ops, {counts['runtime_calls']:.0f} runtime calls, "
            f"{counts['python_frames']:.0f} Python frames and {counts['memory_samples']:.0f} memory samples per step "
            f"recorded ({'with ' + ', '.join(opts) if opts else 'no shapes, stacks or memory'}) at per-record costs "
            f"fitted on H100/H200 captures, x{counts['speed_scale']:.2f} for this host's speed under the profiler "
            f"(its recorded aten::view), capped by the step's host-wait idle time (the host cost a GPU-bound step hides)"
        ),
    }


#: where the unprofiled steps were timed (``ingest/kineto/meta.py``'s ``unprofiled_when``), in words
TIMED_WHERE = {
    "after_window": "the capture helper timed after the profiled window",
    "before_window": "the capture helper timed before the profiled window",
}


def _field(meta: Mapping[str, Any]) -> str:
    """Where the trace holds the unprofiled steps, when a field other than the capture helper's own holds them."""
    key = str(meta.get("unprofiled_source") or "")
    return "" if not key or key.startswith("llmdiag_") else f" (the trace's metadata field {key})"


def _timed_where(meta: Mapping[str, Any]) -> str:
    return TIMED_WHERE.get(str(meta.get("unprofiled_when")), "the trace's metadata holds")


#: a measured and a modelled share further apart than this are reported as a problem
DISAGREE_SHARE = 0.15


#: why the timed steps and the trace's estimate may disagree, by where the steps were timed
DISAGREE_WHY = {
    "before_window": "the steps before the profiled window are the job as it ran before any profiler, so either "
    "this workload's recording cost is not the one the estimate was fitted on or the job's own speed moved (warm-up, "
    "data, clocks, other processes)",
    "after_window": "the steps after the profiled window may run slower than the job unprofiled (a profiler's state "
    "can outlive its window) or the job's speed changed around the window, or this workload's recording cost is not "
    "the one the estimate was fitted on",
    "": "the timed steps may run faster or slower for other reasons, or this workload's recording cost is not the one "
    "the estimate was fitted on",
}


def _disagrees(ctx: Context, measured: float, model: float) -> dict[str, Any]:
    return {
        "kind": "unprofiled_disagrees",
        "count": None,
        "severity": "warning",
        "text": f"The unprofiled steps {_timed_where(ctx.trace.metadata)} make the profiler "
        f"{100 * measured:.0f} % of the step, the trace's own estimate {100 * model:.0f} %: "
        f"{DISAGREE_WHY.get(str(ctx.trace.metadata.get('unprofiled_when')), DISAGREE_WHY[''])}; "
        f"the what-if uses the timed steps.",
    }


def _slower_after(meta: Mapping[str, Any], slow: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``slower_after_profiling`` problem (module docstring), or None."""
    share, ci = slow["after_window_slowdown_share"], slow["after_window_slowdown_share_95"]
    if share is None or ci is None or not (ci[0] > 0 and share > SLOWER_SHARE):
        return None
    before, after = meta["unprofiled_before_step_ns"], meta["unprofiled_after_step_ns"]
    return {
        "kind": "slower_after_profiling",
        "count": None,
        "severity": "warning",
        "text": f"The steps after the profiled window ran {100 * share:.0f} % slower than those before it "
        f"({fmt_ns(float(np.median(after)))} vs {fmt_ns(float(np.median(before)))}, median of {len(after)} and "
        f"{len(before)} unprofiled steps; 95 % interval {fmt_interval('share', ci)}): a profiler's state "
        "can outlive its window (Kineto keeps CUPTI attached unless TEARDOWN_CUPTI=1) or the job itself slowed; the "
        "trace cannot tell which. The profiler's share uses the steps before the window.",
    }


def capture_topic(ctx: Context, bd: StepBreakdown) -> dict[str, Any]:
    """The whole ``capture`` topic: what the capture holds and lost (``metrics.capture.topic``), the profiler's cost, and
    how the helper's unprofiled steps after the window compare with those before it. When the unprofiled steps the
    trace holds and the model disagree by more than ``DISAGREE_SHARE``, a problem says so, and why they may
    (``DISAGREE_WHY``, by where the steps were timed); when the steps after the window ran slower than those before
    it beyond their spread, another (``_slower_after``)."""
    held = capture_metrics(ctx)
    meta = ctx.trace.metadata
    slow = slowdown_fields(meta)
    out = {**held, **overhead_fields(ctx, bd, held["record_shapes"]), **slow}
    measured, model = out["profiler_overhead_share"], out["overhead_model_share"]
    found = [
        _disagrees(ctx, measured, model)
        if out["overhead_basis"] == "unprofiled_steps" and model is not None and abs(measured - model) > DISAGREE_SHARE
        else None,
        _slower_after(meta, slow),
    ]
    found = [p for p in found if p is not None]
    out["problems"] = [*out["problems"], *found]
    out["problem_count"] += len(found)
    return out
