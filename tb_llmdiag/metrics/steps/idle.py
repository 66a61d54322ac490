"""GPU busy and idle time within the analysis window, and why the GPU was idle.

Definitions (ns; "window" = the union of the step windows, see ``metrics.context``):
- busy = length of the union of the device events other than collectives (kernels, memcpys, memsets; all
  devices and streams) inside the window; ``busy_share = busy_ns / window_ns``. Collective kernels (NCCL/RCCL,
  DeepEP, XLA collectives: ``metrics.comm.collectives``) are never busy compute: ``collective_ns`` /
  ``collective_share`` = the window time only collectives cover (the ``communication`` topic splits it).
  idle = time without any device event (collectives included); busy + collective + idle = window.
- Idle gaps and their causes (``host_wait``, ``sync``, ``data_loader``, ``other``): ``metrics.steps.gaps``, computed
  once per analysis (``StepBreakdown``); ``<cause>_ns`` / ``_share`` sum the gaps of each cause.
- ``host_wait_top_ops`` / ``host_wait_culprit``: the host operators running during ``host_wait`` gaps
  (``host_wait_culprits``).
- Long gaps: gaps of at least 500 ms (Nsight Systems' "GPU gaps" rule). Low-utilisation steps: steps
  whose own busy share (``steps.per_step[i].busy_share``) is under 0.5 (Nsight's 50 % rule, per step).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import covered_before, merge, overlap_per_window, union_ns_by_group
from tb_llmdiag.metrics.context import Context, share
from tb_llmdiag.metrics.entry import COUNT, HIGHER, INDEX, LOWER, NEITHER, NS, SHARE, TEXT, Entry, Intro
from tb_llmdiag.metrics.host.ranges import inside, launched_inside, named_rows
from tb_llmdiag.metrics.host.source_lines import rows_source
from tb_llmdiag.metrics.steps.gaps import CAUSES, HOST_WAIT, IdleGaps, StepBreakdown
from tb_llmdiag.metrics.throughput.shapes import tokens_per_window
from tb_llmdiag.metrics.training.compile import COMPILE_PATTERN
from tb_llmdiag.model import Kind

I64 = NDArray[np.int64]
IDX = NDArray[np.intp]

LONG_GAP_NS = 500_000_000
LOW_UTIL_SHARE = 0.5


RECOMPILE_HINT = "torch.compile (re)compiles inside the step; keep shapes static or mark them dynamic"
HOST_COPY_HINT = "host-to-device copies on the critical path; pin memory and copy with non_blocking=True"
CUDNN_ATTENTION_HINT = (
    "cuDNN attention builds an execution plan for every new input shape; pad batches to a fixed length or a "
    "multiple of 64/128, pack sequences, or use the flash backend (torch.backends.cuda.enable_cudnn_sdp(False))"
)
CUDNN_CONVOLUTION_HINT = "cuDNN autotunes convolutions for every new input shape (cudnn.benchmark); keep shapes fixed"
PER_SHAPE_HINTS = (CUDNN_ATTENTION_HINT, CUDNN_CONVOLUTION_HINT)

#: (substring of a host operator's name, the events that must back the hint, why it keeps the GPU waiting and
#: what to do). First match wins; a hint is given only when its events are in the trace (``culprit_hint``):
#: ``compiles``: compile ranges (``metrics.training.compile.COMPILE_PATTERN``) start inside the operator's calls;
#: ``new_shapes``: recorded input shapes (token slots per step) change, and most of the steps holding
#: its slow calls (>= ``PER_SHAPE_MIN_MEAN_NS``) have token slots no earlier step had;
#: ``htod_copies``: host-to-device copies are launched inside its calls.
CULPRIT_HINTS: tuple[tuple[str, str, str], ...] = (
    ("cudnn_attention", "new_shapes", CUDNN_ATTENTION_HINT),
    ("cudnn_convolution", "new_shapes", CUDNN_CONVOLUTION_HINT),
    ("Torch-Compiled Region", "compiles", RECOMPILE_HINT),
    ("CompiledFunction", "compiles", RECOMPILE_HINT),
    ("TorchDynamo", "compiles", RECOMPILE_HINT),
    ("aten::to", "htod_copies", HOST_COPY_HINT),
    ("aten::copy_", "htod_copies", HOST_COPY_HINT),
)


#: Host operators that do work once per new input shape (plan building, autotuning, compiling). When their
#: calls are slow (PER_SHAPE_MIN_MEAN_NS) they are paying that per-shape cost, not their usual launch cost.
PER_SHAPE_OPS: tuple[str, ...] = (
    "cudnn_attention",
    "cudnn_convolution",
    "Torch-Compiled Region",
    "CompiledFunction",
    "TorchDynamo",
)
PER_SHAPE_MIN_MEAN_NS = 1_000_000

_NO_CULPRIT: dict[str, Any] = {
    "host_wait_top_ops": [],
    "host_wait_culprit": None,
    "host_wait_culprit_ns": None,
    "host_wait_culprit_share": None,
    "host_wait_culprit_mean_ns": None,
    "host_wait_culprit_hint": None,
    "host_wait_culprit_hint_events": None,
    "host_wait_culprit_source": None,
    "host_wait_per_shape_op": None,
    "host_wait_per_shape_source": None,
    "host_wait_per_shape_ns": 0,
    "host_wait_per_shape_share": 0.0,
}


def culprit_hint(ctx: Context, culprit: int) -> tuple[str | None, str | None]:
    """The hint for the host operator named ``culprit`` (a name id) and the events in the trace that back it, or
    (None, None) when no hint matches its name or its events are not in the trace (``CULPRIT_HINTS``)."""
    name = ctx.trace.events.names[culprit]
    gate, hint = next(((g, h) for needle, g, h in CULPRIT_HINTS if needle in name), (None, None))
    if gate is None:
        return None, None
    ops = ctx.cache.kinds(Kind.CPU_OP)
    calls = ops[ctx.trace.events.name_id[ops] == culprit]
    events = {"compiles": _compiles_inside, "new_shapes": _new_shapes, "htod_copies": _copies_inside}[gate](ctx, calls)
    return (hint, events) if events else (None, None)


def _compiles_inside(ctx: Context, calls: IDX) -> str | None:
    rows = named_rows(ctx, COMPILE_PATTERN, (Kind.ANNOTATION, Kind.CPU_OP, Kind.PYTHON))
    n = int(inside(ctx, rows, calls).sum())
    return f"{n} compile ranges start inside its calls" if n else None


def _copies_inside(ctx: Context, calls: IDX) -> str | None:
    dev = launched_inside(ctx, calls)
    names = ctx.trace.events.names
    ids, counts = np.unique(ctx.trace.events.name_id[dev], return_counts=True)
    n = sum(int(c) for i, c in zip(ids.tolist(), counts.tolist()) if "HtoD" in names[i])
    return f"{n} host-to-device copies are launched inside its calls" if n else None


def _new_shapes(ctx: Context, calls: IDX) -> str | None:
    st = ctx.steps
    if len(st) < 2:
        return None
    tokens = tokens_per_window(ctx.trace.events, st.host_starts, st.host_end_ns)
    if tokens is None or np.unique(tokens).size < 2:
        return None
    ev = ctx.trace.events
    slow = calls[ev.dur_ns[calls] >= PER_SHAPE_MIN_MEAN_NS]
    step = np.searchsorted(st.host_starts, ev.ts_ns[slow], side="right") - 1
    ok = step >= 0
    step = step[ok]
    hit = np.unique(step[ev.ts_ns[slow][ok] < st.host_end_ns[step]])
    if hit.size == 0:
        return None
    new = np.array([not np.isin(tokens[i], tokens[:i]).any() for i in hit.tolist()])  # a few steps
    if 2 * int(new.sum()) <= hit.size:  # most of them (the first step's shape is new by definition)
        return None
    return (
        f"{int(new.sum())} of the {hit.size} steps holding its slow calls have an input shape no earlier step had "
        f"(token slots per step: {np.unique(tokens).size} distinct values over {len(st)} steps)"
    )


def host_wait_culprits(ctx: Context, gaps: IdleGaps, *, top: int = 5) -> dict[str, Any]:
    """Which host operators ran while the GPU waited for the host (gaps of cause ``host_wait``).

    Per CPU operator name: the length of the union of its ranges (nested or concurrent calls of one name
    count once) within those gaps, so at most the host-wait time. ``host_wait_top_ops`` lists the ``top`` names by that time; ``host_wait_culprit`` is the most
    specific of the leaders: among names within 90 % of the largest overlap, the one with the shortest mean
    call (a leaf such as ``aten::_cudnn_attention_backward`` rather than its callers); with its overlap
    (``_ns``, ``_share``), mean call duration, and a hint from ``CULPRIT_HINTS`` when one matches and the events
    it names are in the trace (``host_wait_culprit_hint_events`` says which), and its user source line
    (``host_wait_culprit_source``, ``source_lines.rows_source``: the frame around its longest calls, through the
    forward operator where they run in the backward pass; null without ``with_stack`` frames).
    ``host_wait_per_shape_*``: the same overlap for the leading operator among the per-shape ones
    (``PER_SHAPE_OPS``, mean call >= ``PER_SHAPE_MIN_MEAN_NS``, and the events of its hint in the trace: compiles
    inside its calls or new input shapes at its slow calls): GPU idle time spent building plans or compiling for
    new input shapes (the largest such name, so nested callers are not added up).
    """
    ev = ctx.trace.events
    m = gaps.cause == HOST_WAIT
    ops = ctx.cache.kinds(Kind.CPU_OP)
    if not m.any() or ops.size == 0:
        return _NO_CULPRIT
    # per name, the union of its ranges (nested calls, or calls on parallel threads such as compiler
    # threads, count once) within the gaps: so a name's idle time never exceeds the host-wait time.
    # Read on a clock that runs only inside the gaps, a range [ts, end) becomes [at_ts, at_end) of the
    # same covered length, and unions keep their covered length; ranges outside every gap become empty.
    hw_s, hw_e = merge(gaps.start_ns[m], gaps.end_ns[m])
    nid = ev.name_id[ops]
    dur = ev.dur_ns[ops]
    cnt = np.bincount(nid, minlength=len(ev.names))
    mean = np.bincount(nid, weights=dur, minlength=len(ev.names)) / np.maximum(cnt, 1)
    del nid  # gathered again below
    # per-op temporaries are dropped as soon as used, and the two clocks read one after the other (covered_before, the
    # values covered_before_each gives both at once): this topic sets the report's peak memory
    ts = ev.ts_ns[ops]
    end = ts + dur
    del dur
    at_end = covered_before(hw_s, hw_e, end)
    del end
    at_ts = covered_before(hw_s, hw_e, ts)
    del ts
    nid = ev.name_id[ops]
    per = union_ns_by_group(nid, at_ts, at_end, len(ev.names))
    del at_ts, at_end
    if per.max() <= 0:
        return _NO_CULPRIT
    order = np.argsort(-per, kind="stable")[:top]
    leaders = np.flatnonzero(per >= 0.9 * per.max())
    culprit = int(leaders[np.argmin(mean[leaders])])
    slow = np.flatnonzero((mean >= PER_SHAPE_MIN_MEAN_NS) & (per > 0))  # a few names: match only those
    # per-shape work only where the trace shows it: compiles inside its calls, or new input shapes at its slow calls
    per_shape = [int(i) for i in slow if any(k in ev.names[i] for k in PER_SHAPE_OPS) and culprit_hint(ctx, int(i))[0]]
    shape_op = max(per_shape, key=lambda i: per[i]) if per_shape else None
    shape_ns = int(per[shape_op]) if shape_op is not None else 0
    return {
        "host_wait_top_ops": [
            {"name": ev.names[i], "idle_ns": int(per[i]), "share": share(int(per[i]), ctx.window_ns)}
            for i in order
            if per[i] > 0
        ],
        "host_wait_culprit": ev.names[culprit],
        "host_wait_culprit_ns": int(per[culprit]),
        "host_wait_culprit_share": share(int(per[culprit]), ctx.window_ns),
        "host_wait_culprit_mean_ns": int(mean[culprit]),
        **dict(zip(("host_wait_culprit_hint", "host_wait_culprit_hint_events"), culprit_hint(ctx, culprit))),
        "host_wait_culprit_source": rows_source(ctx, ops[nid == culprit]),
        "host_wait_per_shape_op": ev.names[shape_op] if shape_op is not None else None,
        "host_wait_per_shape_source": rows_source(ctx, ops[nid == shape_op]) if shape_op is not None else None,
        "host_wait_per_shape_ns": shape_ns,
        "host_wait_per_shape_share": share(shape_ns, ctx.window_ns),
    }


def idle_metrics(ctx: Context, bd: StepBreakdown) -> dict[str, Any]:
    """The ``idle`` topic (see the module docstring), from the gaps of the step breakdown."""
    if not bd.available:
        return {"available": False, "reason": "no device activity in the trace"}
    gaps = bd.gaps
    window = ctx.window_ns
    idle = int(gaps.dur_ns.sum())
    busy = int(overlap_per_window(ctx.work_s, ctx.work_e, ctx.win_s, ctx.win_e).sum())
    collective = window - idle - busy
    out: dict[str, Any] = {
        "available": True,
        "window_ns": window,
        "window_source": ctx.window_source,
        "busy_ns": busy,
        "busy_share": share(busy, window),
        "collective_ns": collective,
        "collective_share": share(collective, window),
        "idle_ns": idle,
        "idle_share": share(idle, window),
        "gap_count": len(gaps),
    }
    for code, name in enumerate(CAUSES):
        ns = int(gaps.dur_ns[gaps.cause == code].sum())
        out[f"{name}_ns"] = ns
        out[f"{name}_share"] = share(ns, window)
    out.update(host_wait_culprits(ctx, gaps))
    long = gaps.dur_ns >= LONG_GAP_NS
    out["long_gap_count"] = int(long.sum())
    out["long_gap_ns"] = int(gaps.dur_ns[long].sum())
    out["long_gap_max_ns"] = int(gaps.dur_ns[long].max()) if long.any() else 0
    out["long_gap_share"] = share(out["long_gap_ns"], window)
    low = bd.busy_share < LOW_UTIL_SHARE
    out["low_util_step_count"] = int(low.sum())
    out["low_util_steps"] = [int(i) for i in ctx.steps.index[low]]
    return out


# The registry's entries of the `idle` topic: one row per key (metrics/entry.py); metrics/registry.py collects them
# through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`idle` (metrics/steps/idle.py)",
    "Gap causes, tried in order (metrics/steps/gaps.py, `gap_causes`), decided once per whole gap; the per-step parts\n(`steps.per_step`), the tab's `/steps` rows and its timeline read that one result:\n\n1. `data_loader`: at least half of the gap overlaps host `enumerate(DataLoader)#...__next__` ranges.\n2. `sync`: the gap starts while the host is blocked in a synchronising call (`cuda|hip{Stream,Device,Event,Ctx}Synchronize`,\n   synchronous `cudaMemcpy`, `aten::_local_scalar_dense` / `item` / `nonzero` / `is_nonzero` / `equal`), or within\n   10 µs after it returns: the host drained the queue, then the GPU waits for it to refill.\n3. `host_wait`: the device event that ends the gap was submitted (its launch call, joined by correlation id,\n   ended) after the gap began, or no device event ends it: the GPU ran dry waiting for the host.\n4. `other`: the work that ends the gap was already queued (cross-stream waits, events), or no launch in the\n   whole trace joins a device event (no correlation ids: XPlane, some accelerators), so host waits cannot be\n   told apart.",
)

# a declared table, one entry per row: left as laid out
# fmt: off
#: the shared part of the definitions of `idle.host_wait_top_ops[]`'s fields
_TOP_OPS_ENTRY = (
    "`host_wait_top_ops` entry: the 5 host operator names (CPU ops) that ran longest during "
    "`host_wait` gaps: `name`, `idle_ns` (the union of the name's ranges within those gaps: nested "
    "calls, or calls on parallel threads such as XLA's compiler threads, count once, so it never "
    "exceeds `host_wait_ns`), `share` (/ window_ns)"
)

#: the definition shared by `idle.host_wait_per_shape_op`, `_ns` and `_share`
_CULPRIT_SOURCE = (
    "`file:line` of the user's code where the operator runs: the innermost user frame (`with_stack=True`) around "
    "its longest calls, and for calls inside a backward operator its forward operator's (the reader's `fwdbwd` "
    "link); the line holding most of their time; null without frames"
)
_PER_SHAPE = (
    "among CPU operators doing per-shape work (`idle.PER_SHAPE_OPS`: cuDNN attention / convolution, "
    "torch.compile regions) whose mean call is >= 1 ms (so they are building plans or compiling, not just "
    "launching), the one with the largest overlap with host-wait gaps: its name, that overlap (ns), and / "
    "window_ns. The largest single name, not a sum, so nested callers are not double counted. null / 0 "
    "when none"
)

#: the definition shared by `idle.low_util_steps[]` and `idle.low_util_step_count`
_LOW_UTIL = "steps whose `busy_share` (`steps.per_step[]`) < 0.5 (Nsight's 50 % rule, per step)"

ENTRIES: tuple[Entry, ...] = (
    ("idle.busy_ns", NS, HIGHER, 0.05, "busy", "length of the union of the device events other than collectives (kernels, memcpy, memset) inside the window (changed in report schema 3: collectives no longer count as busy)"),
    ("idle.collective_ns", NS, LOWER, 0.05, "communication only", "window time the device runs only collective kernels (neither busy nor idle); busy + collective + idle = window"),
    ("idle.collective_share", SHARE, LOWER, 0.1, "communication only share", "collective_ns / window_ns"),
    ("idle.busy_share", SHARE, HIGHER, 0.1, "busy share", "busy_ns / window_ns"),
    ("idle.data_loader_ns", NS, NEITHER, 0.05, "data loader",
     "idle time in `data_loader` gaps; the four causes sum to `idle_ns`"),
    ("idle.data_loader_share", SHARE, NEITHER, 0.1, "data loader share", "data_loader_ns / window_ns"),
    ("idle.gap_count", COUNT, LOWER, 0.02, "gap count",
     "idle gaps: maximal stretches of the window with no device event"),
    ("idle.host_wait_culprit", TEXT, NEITHER, 0, "host wait culprit",
     "the most specific of the leaders: among names within 90 % of the largest overlap, the one with the "
     "shortest mean call (a leaf such as `aten::_cudnn_attention_backward` rather than its callers); null "
     "when there is no `host_wait` gap"),
    ("idle.host_wait_culprit_hint", TEXT, NEITHER, 0, "host wait culprit hint",
     "why such an operation keeps the GPU waiting and what to do, from the table `idle.CULPRIT_HINTS`, given only "
     "when the events it names are in the trace (compile ranges inside its calls, new input shapes at its slow "
     "calls, host-to-device copies launched inside it); null otherwise"),
    ("idle.host_wait_culprit_hint_events", TEXT, NEITHER, 0, "hint's events",
     "the events in the trace that back `host_wait_culprit_hint` (how many compile ranges or copies inside its "
     "calls, or how many of the steps holding its slow calls have a new input shape); null without a hint"),
    ("idle.host_wait_culprit_mean_ns", NS, LOWER, 0.05, "host wait culprit mean", "its mean call duration"),
    ("idle.host_wait_culprit_ns", NS, LOWER, 0.05, "host wait culprit",
     "its time within `host_wait` gaps (as `idle_ns` above, so `_share` <= `host_wait_share` <= 1)"),
    ("idle.host_wait_culprit_share", SHARE, LOWER, 0.1, "host wait culprit share", "host_wait_culprit_ns / window_ns"),
    ("idle.host_wait_culprit_source", TEXT, NEITHER, 0, "host wait culprit source line", _CULPRIT_SOURCE),
    ("idle.host_wait_ns", NS, LOWER, 0.05, "host wait", "idle time in `host_wait` gaps"),
    ("idle.host_wait_per_shape_ns", NS, LOWER, 0.05, "host wait per shape", _PER_SHAPE),
    ("idle.host_wait_per_shape_op", TEXT, NEITHER, 0, "host wait per shape op", _PER_SHAPE),
    ("idle.host_wait_per_shape_share", SHARE, LOWER, 0.1, "host wait per shape share", _PER_SHAPE),
    ("idle.host_wait_per_shape_source", TEXT, NEITHER, 0, "host wait per shape source line", _CULPRIT_SOURCE),
    ("idle.host_wait_share", SHARE, LOWER, 0.1, "host wait share", "host_wait_ns / window_ns"),
    ("idle.idle_ns", NS, LOWER, 0.05, "idle", "window time without any device event (collectives included): window_ns - busy_ns - collective_ns"),
    ("idle.idle_share", SHARE, LOWER, 0.1, "idle share", "idle_ns / window_ns"),
    ("idle.long_gap_count", COUNT, LOWER, 0.02, "long gap count",
     "idle gaps of 500 ms or more (Nsight Systems' \"GPU gaps\" rule)"),
    ("idle.long_gap_max_ns", NS, LOWER, 0.05, "long gap max", "the longest of them"),
    ("idle.long_gap_ns", NS, LOWER, 0.05, "long gap", "their summed length"),
    ("idle.long_gap_share", SHARE, LOWER, 0.1, "long gap share", "long_gap_ns / window_ns"),
    ("idle.low_util_step_count", COUNT, LOWER, 0.02, "low util step count", _LOW_UTIL),
    ("idle.other_ns", NS, NEITHER, 0.05, "other", "idle time in `other` gaps"),
    ("idle.other_share", SHARE, NEITHER, 0.1, "other share", "other_ns / window_ns"),
    ("idle.sync_ns", NS, LOWER, 0.05, "sync", "idle time in `sync` gaps"),
    ("idle.sync_share", SHARE, LOWER, 0.1, "sync share", "sync_ns / window_ns"),
    ("idle.window_ns", NS, NEITHER, 0.05, "window", "length of the window (Common definitions)"),
    ("idle.window_source", TEXT, NEITHER, 0, "window source",
     "`steps`, `device` or `trace`: what the window is (Common definitions)"),
    ("idle.host_wait_top_ops[].idle_ns", NS, LOWER, 0.05, "host wait top op idle",
     "`idle_ns` of each " + _TOP_OPS_ENTRY),
    ("idle.host_wait_top_ops[].name", TEXT, NEITHER, 0, "host wait top op name",
     "`name` of each " + _TOP_OPS_ENTRY),
    ("idle.host_wait_top_ops[].share", SHARE, LOWER, 0.1, "host wait top op share",
     "`share` of each " + _TOP_OPS_ENTRY),
    ("idle.low_util_steps[]", INDEX, NEITHER, 0, "low util steps", _LOW_UTIL),
)
# fmt: on
