"""The ``attribution`` topic: what the host does while the GPU waits, and which host code the GPU's work comes from.

Definitions (Kineto traces; ns; shares of the analysis window, as every ``*_share`` of step time):
- The host call forest (``metrics.host.tree``): every host event (operators, user annotations, Python frames,
  runtime and driver calls) with its enclosing event on its thread and its call-tree node (the chain of names
  from its root).
- GPU idle time (the idle gaps of ``metrics.steps.gaps``, every cause) is attributed to the host thread that launches
  the work ending the gap (the thread of the runtime call joined to the next device event by correlation id;
  gaps with no joinable launch go to the main thread: the one with the most launch calls in the window). An
  event's *inclusive* idle is the part of its thread's idle time inside [start, end); its *self* idle is that
  less its children's inclusive idle: the idle time during which it is the innermost event open. Idle time on
  a launching thread with no event open at all is ``outside_ns``; idle time inside a step marker
  (``ProfilerStep#N``) with nothing else open is the step node's self idle. Both are host time outside any
  recorded operator: Python code, ``gc``, sleeps, I/O (``outside_any_ns`` = the two).
- Per call-tree node: ``calls`` (events), ``host_ns`` (their summed durations), ``idle_ns`` (inclusive idle),
  ``self_idle_ns``, ``busy_ns`` (the durations of the device events launched from inside it, by correlation id;
  collectives left out: their time includes waiting for the other ranks),
  ``launches`` (launch calls inside it). ``nodes[]``: the ``top`` nodes by inclusive idle (step markers left
  out), each with its chain (``chain_text``: annotations, the deepest user frame, operators and the runtime call,
  ``attribution_view.chain_names``), steps hit (steps where its idle is >= 1 % of the step) and the median
  step's idle in it; ``busy[]``: the ``top`` operator nodes by the device time they launch, with the leading
  kernel category.
- ``dominant``: the deepest node holding at least half of the attributed idle time (``DOMINANT_SHARE``), with
  its chain, source line and what it is (``cause_kind``, ``attribution_view.cause_kind``); null when the idle
  time is spread over many activities (then ``spread_nodes`` says how many nodes hold half of it).
- ``other_threads[]``: per non-launching thread, its outermost activity most open during GPU idle time (what
  data-loader, pin-memory or compile threads do meanwhile).
- ``frames``: whether the trace records Python frames (``with_stack=True``); source lines need them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import covered_before_each, subtract
from tb_llmdiag.intervals import gaps as complement
from tb_llmdiag.metrics.attribution.view import PAUSE_NS, Attribution, describe
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.entry import COUNT, FLAG, LOWER, NEITHER, NS, PER_STEP, SHARE, TEXT, Entry, Intro
from tb_llmdiag.metrics.host.tree import HostForest
from tb_llmdiag.metrics.steps.gaps import StepBreakdown
from tb_llmdiag.model import Kind

CHUNK = 1 << 16  # host events per interval lookup: bounds the temporaries on big traces

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
IDX = NDArray[np.intp]


def _main_thread(ctx: Context, forest: HostForest) -> int:
    launch = ctx.cache.family("launch_api")
    tid = ctx.trace.events.tid[launch] if launch.size else ctx.trace.events.tid[forest.rows]
    if tid.size == 0:
        return 0
    vals, counts = np.unique(tid, return_counts=True)
    return int(np.searchsorted(forest.tids, vals[np.argmax(counts)]))


def _gap_threads(ctx: Context, forest: HostForest, ge: I64, main: int) -> NDArray[np.int32]:
    """The thread code of the launch of the device event that ends each gap, else ``main``."""
    out = np.full(ge.size, main, np.int32)
    dev_ts = ctx.host.dev_ts
    nxt = np.searchsorted(dev_ts, ge, side="left")
    ok = nxt < dev_ts.size
    launcher = np.full(ge.size, -1, np.intp)
    launcher[ok] = ctx.cache.launcher(ctx.dev)[nxt[ok]]
    hit = launcher >= 0
    tid = ctx.trace.events.tid[launcher[hit]]
    code = np.clip(np.searchsorted(forest.tids, tid), 0, max(forest.tids.size - 1, 0))
    known = forest.tids[code] == tid if forest.tids.size else np.zeros(tid.size, bool)
    out[np.flatnonzero(hit)[known]] = code[known]
    return out


def attribute(ctx: Context, bd: StepBreakdown, *, top: int = 8) -> Attribution | None:
    """The attribution of one trace (module docstring), or None without host events or device activity.

    Memory: nothing per host event beyond the forest. Each event's inclusive idle is worked out chunk by chunk
    and summed at once on its node and, negated, on its parent's node (the events of a thread nest, so a node's
    self idle is its events' inclusive idle less their children's); the top nodes' per-step idle is worked out
    again for their own events only (``_step_idle``)."""
    if not bd.available:
        return None
    forest = ctx.cache.forest()  # shared with the anatomy topic, which releases it (metrics/context.py)
    if len(forest) == 0:
        return None
    gs, ge = bd.gaps.start_ns, bd.gaps.end_ns
    gap_thread = _gap_threads(ctx, forest, ge, _main_thread(ctx, forest))
    nn = forest.n_nodes
    self_idle = np.zeros(nn, np.float64)
    outside = pauses = 0
    for c, blocks, lo, hi, incl in _inclusive(ctx, forest, gs, ge, gap_thread):
        node, par = forest.node[lo:hi], forest.parent[lo:hi]
        self_idle += np.bincount(node, weights=incl, minlength=nn)
        child = par >= 0
        self_idle -= np.bincount(forest.node[par[child]], weights=incl[child], minlength=nn)
        outside -= int(incl[~child].sum())
        if lo == int(forest.bounds[c]):  # once per thread: its idle time, and its pauses with no event open
            outside += int((blocks[1] - blocks[0]).sum())
            roots = _roots(forest, c)
            pauses += _pauses(blocks, ctx.trace.events.ts_ns[forest.rows[roots]], forest.end_ns[roots])
    np.maximum(self_idle, 0, out=self_idle)
    idle = forest.subtree_sum(self_idle)
    calls = np.bincount(forest.node, minlength=nn)
    host_ns = np.zeros(nn, np.float64)
    for lo in range(0, len(forest), CHUNK):  # bounded temporaries
        rows = forest.rows[lo : lo + CHUNK]
        host_ns += np.bincount(forest.node[lo : lo + CHUNK], weights=ctx.trace.events.dur_ns[rows], minlength=nn)
    busy_self, launches = _busy(ctx, forest)
    order = _ranked(forest, idle, top)
    return Attribution(
        forest=forest,
        idle_ns=int((ge - gs).sum()),
        outside_ns=max(outside, 0),
        pause_ns=pauses,
        self_idle=self_idle,
        idle=idle,
        calls=calls,
        host_ns=host_ns,
        busy_self=busy_self,
        busy=forest.subtree_sum(busy_self),
        launches=launches,
        step_idle=_step_idle(ctx, forest, gs, ge, gap_thread, order),
        order=order,
    )


def _roots(forest: HostForest, c: int) -> IDX:
    lo, hi = int(forest.bounds[c]), int(forest.bounds[c + 1])
    return lo + np.flatnonzero(forest.parent[lo:hi] < 0)


def _inclusive(
    ctx: Context, forest: HostForest, gs: I64, ge: I64, gap_thread: NDArray[np.int32], select: IDX | None = None
) -> Iterator[tuple[int, tuple[I64, I64], int, int, I64]]:
    """Per launching thread and chunk of its events: (thread code, its idle blocks, the chunk's positions lo:hi,
    each event's inclusive idle). With ``select`` (sorted positions), the chunk is ``select[lo:hi]`` instead."""
    ts = ctx.trace.events.ts_ns
    for c in np.unique(gap_thread).tolist():
        mine = gap_thread == c
        blocks = (gs[mine], ge[mine])
        t_lo, t_hi = int(forest.bounds[c]), int(forest.bounds[c + 1])
        if select is not None:
            t_lo, t_hi = np.searchsorted(select, (t_lo, t_hi)).tolist()
        if t_hi == t_lo:
            yield c, blocks, t_lo, t_lo, np.zeros(0, np.int64)
        for lo in range(t_lo, t_hi, CHUNK):  # bounded temporaries
            hi = min(lo + CHUNK, t_hi)
            pos = slice(lo, hi) if select is None else select[lo:hi]
            at_s, at_e = covered_before_each(*blocks, ts[forest.rows[pos]], forest.end_ns[pos])
            at_e -= at_s
            del at_s
            np.maximum(at_e, 0, out=at_e)
            yield c, blocks, lo, hi, at_e


def _pauses(blocks: tuple[I64, I64], root_s: I64, root_e: I64) -> int:
    """Idle time in stretches of at least ``PAUSE_NS`` with none of the thread's events open: the long gaps
    less the thread's roots, where both are long (only long pieces can make a long stretch: the sets stay small)."""
    gs, ge = blocks
    long = (ge - gs) >= PAUSE_NS
    if not long.any():
        return 0
    gs, ge = gs[long], ge[long]
    free_s, free_e = complement(root_s, root_e, int(gs[0]), int(ge[-1]))  # host time with no event open
    wide = (free_e - free_s) >= PAUSE_NS
    busy_s, busy_e = complement(free_s[wide], free_e[wide], int(gs[0]), int(ge[-1]))
    ps, pe = subtract(gs, ge, busy_s, busy_e)
    d = pe - ps
    return int(d[d >= PAUSE_NS].sum())


def _busy(ctx: Context, forest: HostForest) -> tuple[F64, F64]:
    """Per node: the device time launched by its events (self: the launch call's own node), and launch calls
    in its subtree."""
    ev = ctx.trace.events
    nn = forest.n_nodes
    pos_of_row = np.full(len(ev), -1, np.int32)
    pos_of_row[forest.rows] = np.arange(len(forest), dtype=np.int32)
    work = ctx.dev_in_win.copy()  # collectives are not work (their time includes waiting for peers)
    if len(ctx.coll):
        work &= ~np.isin(ctx.dev, ctx.coll.row)
    dev = ctx.dev[work]
    launcher = ctx.cache.launcher(ctx.dev)[work]
    hit = launcher >= 0
    pos = pos_of_row[launcher[hit]]
    ok = pos >= 0
    busy_self = np.bincount(forest.node[pos[ok]], weights=ev.dur_ns[dev[hit]][ok], minlength=nn).astype(np.float64)
    lrows = pos_of_row[ctx.cache.family("launch_api")]
    lrows = lrows[lrows >= 0]
    launches = forest.subtree_sum(np.bincount(forest.node[lrows], minlength=nn))
    return busy_self, launches


def _ranked(forest: HostForest, idle: F64, top: int) -> IDX:
    cand = np.flatnonzero((idle > 0) & (forest.node_kind != Kind.STEP))
    return cand[np.argsort(-idle[cand], kind="stable")[:top]]


def _step_idle(ctx: Context, forest: HostForest, gs: I64, ge: I64, gap_thread: NDArray[np.int32], order: IDX) -> F64:
    """Per (ranked node, step): the inclusive idle of the node's events that start in the step."""
    st = ctx.steps
    k = order.size
    if len(st) == 0 or k == 0:
        return np.zeros((k, len(st)))
    rank = np.full(forest.n_nodes, -1, np.intp)
    rank[order] = np.arange(k)
    sel = np.flatnonzero(rank[forest.node] >= 0)
    per = np.zeros(k * len(st), np.float64)
    for _, _, lo, hi, incl in _inclusive(ctx, forest, gs, ge, gap_thread, sel):
        pos = sel[lo:hi]
        ts = ctx.trace.events.ts_ns[forest.rows[pos]]
        step = np.searchsorted(st.start_ns, ts, side="right") - 1
        ok = (step >= 0) & (incl > 0)
        ok[ok] = ts[ok] < st.end_ns[step[ok]]
        per += np.bincount(rank[forest.node[pos[ok]]] * len(st) + step[ok], weights=incl[ok], minlength=k * len(st))
    return per.reshape(k, len(st))


def attribution_metrics(ctx: Context, bd: StepBreakdown, *, top: int = 8) -> dict[str, Any]:
    """The ``attribution`` topic (module docstring)."""
    if ctx.trace.source_kind != "kineto":
        return {"available": False, "reason": "host attribution reads Kineto traces (host events with threads)"}
    a = attribute(ctx, bd, top=top)
    if a is None:
        return {"available": False, "reason": "no device activity or no host events in the trace"}
    out = describe(ctx, a, top=top)
    ctx.cache.drop_forest_ends()  # the anatomy, next, reads the forest without them
    return out


# The registry's entries of the `attribution` topic; the job level's view of it (`job.straggler_activity*`,
# jobs/straggler.py) sits here too: one row per key (metrics/entry.py); metrics/registry.py collects them through
# the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`attribution` (metrics/attribution/topic.py)",
    "Every GPU idle gap is attributed to the host activity open on the thread that launches the work ending it "
    "(the call tree of annotations, Python frames, operators and runtime calls, `metrics/host/tree.py`); the "
    "GPU's work to the operators that launch it. An activity's chain reads outermost first: user annotations, "
    "the deepest frame of the user's own code, operators, the runtime call.",
)

#: the definition shared by `allocator_source`, `sync_source` and `unrecorded_source`
_SOURCE_LINE = "its user source line (`with_stack=True`), else null"
_S = "`straggler_cause_evidence` (from the ranks' attributions): "
_N = "each `nodes` entry: the 8 call-tree nodes holding the most GPU idle time (inclusive), "
_B = "each `busy` entry: the 8 operator nodes that launch the most GPU time themselves (their own launch calls), "

# a declared table, one entry per row: left as laid out
# fmt: off
ENTRIES: tuple[Entry, ...] = (
    ("attribution.available", FLAG, NEITHER, 0, "attribution available", "false when the trace has no device activity or no host events (then `reason` says why)"),
    ("attribution.reason", TEXT, NEITHER, 0, "attribution reason", "why the topic is unavailable"),
    ("attribution.idle_ns", NS, LOWER, 0.05, "attributed idle", "GPU idle time in the window, every gap attributed to one launching thread"),
    ("attribution.idle_share", SHARE, LOWER, 0.1, "attributed idle share", "`idle_ns` / window"),
    ("attribution.outside_ns", NS, LOWER, 0.05, "idle outside any event", "GPU idle time while the launching thread has no recorded event open at all"),
    ("attribution.outside_share", SHARE, LOWER, 0.1, "idle outside any event share", "`outside_ns` / window"),
    ("attribution.threads_count", COUNT, NEITHER, 0, "host threads", "host threads with recorded events"),
    ("attribution.nodes_count", COUNT, NEITHER, 0.05, "call-tree nodes", "distinct chains of names in the host call tree"),
    ("attribution.frames", FLAG, NEITHER, 0, "python frames", "whether the trace records Python frames (`with_stack=True`): source lines need them"),
    ("attribution.dominant", FLAG, NEITHER, 0, "one activity dominates", "whether one activity holds at least half of the GPU idle time (`top_*` is then the deepest such one)"),
    ("attribution.spread_nodes", COUNT, NEITHER, 0.1, "activities holding half the idle", "when no activity dominates: how many call-tree nodes (by their own idle time) it takes to hold half of it; null otherwise"),
    ("attribution.top_name", TEXT, NEITHER, 0, "top activity", "the activity holding the GPU's idle time: the dominant one, else the node holding the most in its own time (innermost open)"),
    ("attribution.top_chain", TEXT, NEITHER, 0, "top activity chain", "its chain: annotations, the user's deepest frame, operators, the runtime call (outermost first, ` > `)"),
    ("attribution.top_source", TEXT, NEITHER, 0, "top activity source line", "`file:line` of the deepest frame of the user's own code on its chain (needs `with_stack=True`); null without frames"),
    ("attribution.top_kind", TEXT, NEITHER, 0, "top activity kind", "what holds its idle time, from its own events: `allocator`, `sync`, `dataloader`, `compile`, `outside` (host code no operator records), `cpu_work` (operators or frames that launch nothing), `launch` (operators launching work at the host's pace)"),
    ("attribution.top_share", SHARE, LOWER, 0.1, "top activity idle share", "GPU idle time inside it / window"),
    ("attribution.top_ns", NS, LOWER, 0.05, "top activity idle", "GPU idle time inside it"),
    ("attribution.top_calls_per_step", PER_STEP, NEITHER, 0.05, "top activity calls per step", "its calls per profiled step"),
    ("attribution.top_mean_call_ns", NS, NEITHER, 0.1, "top activity mean call", "its mean call duration (host time)"),
    ("attribution.top_launches_per_step", PER_STEP, NEITHER, 0.05, "top activity launches per step", "kernel launch calls inside it per step"),
    ("attribution.top_steps_hit", COUNT, NEITHER, 0, "top activity steps hit", "steps in which its GPU idle time is at least 1 % of the step (null when it is not among `nodes`)"),
    ("attribution.top_parts.*.idle_ns", NS, LOWER, 0.05, "top activity idle by part", "its own-time idle inside allocator calls, blocking calls, the data loader, compiles, host code no operator records (`outside`), and operators/frames launching nothing (`cpu_work`)"),
    ("attribution.top_parts.*.calls", COUNT, NEITHER, 0.05, "top activity calls by part", "the calls of each part"),
    ("attribution.allocator_idle_ns", NS, LOWER, 0.05, "allocator idle", "GPU idle time while the host is inside allocator calls (cudaMalloc/cudaFree/hipMalloc/..., `empty_cache` frames)"),
    ("attribution.allocator_idle_share", SHARE, LOWER, 0.1, "allocator idle share", "`allocator_idle_ns` / window"),
    ("attribution.allocator_calls_per_step", PER_STEP, LOWER, 0.05, "allocator calls per step", "allocator calls per profiled step"),
    ("attribution.allocator_chain", TEXT, NEITHER, 0, "allocator chain", "the activity around the allocator call holding the most idle time"),
    ("attribution.allocator_source", TEXT, NEITHER, 0, "allocator source line", _SOURCE_LINE),
    ("attribution.sync_idle_ns", NS, LOWER, 0.05, "sync idle", "GPU idle time while the host is inside blocking runtime calls (cuda*Synchronize, blocking copies)"),
    ("attribution.sync_idle_share", SHARE, LOWER, 0.1, "sync idle share", "`sync_idle_ns` / window"),
    ("attribution.sync_chain", TEXT, NEITHER, 0, "sync chain", "the activity around the blocking call holding the most idle time (the operator that syncs: `aten::nonzero` under `aten::index`...)"),
    ("attribution.sync_source", TEXT, NEITHER, 0, "sync source line", _SOURCE_LINE),
    ("attribution.unrecorded_ns", NS, LOWER, 0.05, "unrecorded host time idle", "GPU idle time while the host pauses in code no operator, runtime call or frame records: the own time of the range (or frame) holding the most of it when that is at least 1 ms per call and most of its idle time, else the stretches of at least 1 ms with nothing open"),
    ("attribution.unrecorded_share", SHARE, LOWER, 0.1, "unrecorded host time idle share", "`unrecorded_ns` / window"),
    ("attribution.unrecorded_chain", TEXT, NEITHER, 0, "unrecorded host time chain", "the range or frame holding it; null for stretches with nothing open"),
    ("attribution.unrecorded_source", TEXT, NEITHER, 0, "unrecorded host time source line", _SOURCE_LINE),
    ("attribution.unrecorded_profiler_ns", NS, NEITHER, 0.05, "profiler cost inside it", "the profiler's modelled cost of recording the host records that start inside that range or frame (operators and runtime calls at `overhead.MODEL`'s cost per record x the host's speed scale; the Python tracer's records at `overhead.python_record_ns`: 0.8 us each, measured on captures with and without with_stack, or the trace's median record cycle when shorter; at most `unrecorded_ns`): the Python tracer's records inside a pure-Python function; 0 for stretches with nothing open"),
    ("attribution.nodes[].name", TEXT, NEITHER, 0, "node name", "`name` of " + _N + "the event's name"),
    ("attribution.nodes[].kind", TEXT, NEITHER, 0, "node kind", "`kind` of " + _N + "cpu_op, annotation, python, runtime, driver"),
    ("attribution.nodes[].chain_text", TEXT, NEITHER, 0, "node chain", "`chain_text` of " + _N + "its chain joined by ` > `"),
    ("attribution.nodes[].source", TEXT, NEITHER, 0, "node source line", "`source` of " + _N + "`file:line` of the user's deepest frame, else null"),
    ("attribution.nodes[].idle_ns", NS, LOWER, 0.05, "node idle", "`idle_ns` of " + _N + "GPU idle time inside it"),
    ("attribution.nodes[].idle_share", SHARE, LOWER, 0.1, "node idle share", "`idle_share` of " + _N + "`idle_ns` / window"),
    ("attribution.nodes[].self_idle_ns", NS, LOWER, 0.05, "node own idle", "`self_idle_ns` of " + _N + "GPU idle time while it is the innermost event open"),
    ("attribution.nodes[].calls", COUNT, NEITHER, 0.05, "node calls", "`calls` of " + _N + "its events"),
    ("attribution.nodes[].calls_per_step", PER_STEP, NEITHER, 0.05, "node calls per step", "`calls_per_step` of " + _N + "calls / steps"),
    ("attribution.nodes[].mean_call_ns", NS, NEITHER, 0.1, "node mean call", "`mean_call_ns` of " + _N + "mean duration of its calls"),
    ("attribution.nodes[].launches_per_step", PER_STEP, NEITHER, 0.05, "node launches per step", "`launches_per_step` of " + _N + "kernel launch calls inside it per step"),
    ("attribution.nodes[].busy_ns", NS, NEITHER, 0.05, "node GPU work", "`busy_ns` of " + _N + "device time of the work launched inside it"),
    ("attribution.nodes[].steps_hit", COUNT, NEITHER, 0, "node steps hit", "`steps_hit` of " + _N + "steps where its idle is >= 1 % of the step"),
    ("attribution.busy[].name", TEXT, NEITHER, 0, "launching op", "`name` of " + _B + "the operator"),
    ("attribution.busy[].chain_text", TEXT, NEITHER, 0, "launching op chain", "`chain_text` of " + _B + "its chain"),
    ("attribution.busy[].source", TEXT, NEITHER, 0, "launching op source line", "`source` of " + _B + "the user's deepest frame, else null"),
    ("attribution.busy[].busy_ns", NS, NEITHER, 0.05, "launched GPU time", "`busy_ns` of " + _B + "summed durations of the device events it launches"),
    ("attribution.busy[].busy_share", SHARE, NEITHER, 0.1, "launched GPU time share", "`busy_share` of " + _B + "of all launched device time"),
    ("attribution.busy[].calls", COUNT, NEITHER, 0.05, "launching op calls", "`calls` of " + _B + "its calls"),
    # the job level: what the straggler does that the others do not (jobs/straggler.py straggler_activity)
    ("job.straggler_cause_evidence.activity", TEXT, NEITHER, 0, "straggler activity", _S + "what the straggler does that the others do not: the chain of its attribution (host activity the GPU waits in, or that launches the GPU's work) with the largest excess over the median rank"),
    ("job.straggler_cause_evidence.activity_kind", TEXT, NEITHER, 0, "straggler activity kind", _S + "`idle` (GPU idle time inside it) or `busy` (GPU time launched from it)"),
    ("job.straggler_cause_evidence.activity_ns_per_step", NS, NEITHER, 0.05, "straggler activity per step", _S + "the straggler's time in that activity per step"),
    ("job.straggler_cause_evidence.activity_difference_ns_per_step", NS, NEITHER, 0.05, "straggler activity excess", _S + "straggler - median rank for that activity (a rank not listing it counts as 0: an upper bound)"),
)
# fmt: on
