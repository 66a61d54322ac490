"""Sync storms and step-edge syncs: what host syncs cost, told apart from a harness's step-edge synchronize.

Definitions (blocking runtime calls, ``context.NAME_PATTERNS["sync_api"]``, whose start lies in a step's host
window):
- ``syncs_per_step``: the median over steps of their count.
- A *loop*: per step, the longest run of syncs each starting within ``LOOP_GAP_NS`` (2 ms) of the previous one's
  end; ``loop_syncs_per_step`` (median over steps of its count) and ``loop_host_ns`` (median of its span,
  first start to last end: the host time of the loop). ``storm``: loop_syncs_per_step >= ``STORM_MIN`` (16).
- ``trigger_op``: the syncing operator the loop's syncs run under (``aten::item``, ``aten::nonzero``...), and
  ``after_op``: the operator that most often ends last before each of them (``aten::linalg_vector_norm`` for
  ``p.grad.norm().item()`` per parameter); null without operators.
- ``loop_idle_share``: GPU idle time inside the loops' spans, each cut to its step's window and counted once where
  they overlap, / window_ns: the time the storm costs the GPU (a sync running past its step no longer counts the
  time after it: #27 found shares of 24-66).
- Step-edge syncs: blocking calls made outside any syncing operator (``torch.cuda.synchronize()``) with no kernel
  launch on their thread between them and their step's host start, or between them and its host end: a
  benchmark harness timing the step. ``edge_syncs``, ``edge_blocked_ns`` (their summed duration).
- ``saving_share`` = max(loop_idle_share if storm else 0, min((host_sync.blocked_ns - edge_blocked_ns) /
  window_ns, idle share - data-loader share)): what removing the syncs could save, the step-edge ones excluded
  (they are the harness's, not the training's).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, in_windows
from tb_llmdiag.metrics.entry import COUNT, FLAG, LOWER, NEITHER, NS, PER_STEP, SHARE, TEXT, Entry, Intro
from tb_llmdiag.metrics.host.ranges import inside, step_of
from tb_llmdiag.model import Kind

LOOP_GAP_NS = 2_000_000
STORM_MIN = 16


def _loops(ts: np.ndarray, te: np.ndarray, pos: np.ndarray, n: int) -> list[tuple[int, int, int, int]]:
    """Per step (position), its longest loop: (step, first row, last row (inclusive), count), rows ts-sorted."""
    out = []
    for p in range(n):  # a handful of steps
        idx = np.flatnonzero(pos == p)
        if idx.size == 0:
            continue
        brk = np.flatnonzero(ts[idx[1:]] - te[idx[:-1]] > LOOP_GAP_NS) + 1
        bounds = np.concatenate(([0], brk, [idx.size]))
        k = int(np.argmax(np.diff(bounds)))
        out.append((p, int(idx[bounds[k]]), int(idx[bounds[k + 1] - 1]), int(bounds[k + 1] - bounds[k])))
    return out


def sync_storm_metrics(ctx: Context, host_sync: dict[str, Any], idle: dict[str, Any]) -> dict[str, Any]:
    ev = ctx.trace.events
    api = ctx.cache.family("sync_api")
    api = api[in_windows(ev.ts_ns[api], ctx.win_s, ctx.win_e)]
    ops = ctx.cache.family("sync_op")
    pos = step_of(ctx, ev.ts_ns[api])
    n = ctx.n_steps
    counts = np.bincount(pos[pos >= 0], minlength=n) if n else np.zeros(0, np.int64)
    ts, te = ev.ts_ns[api], ev.ts_ns[api] + ev.dur_ns[api]
    loops = _loops(ts, te, pos, n) if n else []
    loop_counts = [c for *_, c in loops] + [0] * (n - len(loops))
    spans = [(int(ts[a]), int(te[b])) for _, a, b, _ in loops]
    loop_sync = float(np.median(loop_counts)) if n else 0.0
    storm = loop_sync >= STORM_MIN
    trigger = after = None
    loop_idle = 0
    if storm and spans:
        p = np.array([q for q, *_ in loops], np.intp)
        ss = np.maximum(np.array([s for s, _ in spans], np.int64), ctx.steps.start_ns[p])
        se = np.minimum(np.array([e for _, e in spans], np.int64), ctx.steps.end_ns[p])
        ss, se = merge(ss[se > ss], se[se > ss])
        loop_idle = int((se - ss).sum() - overlap_per_window(ctx.busy_s, ctx.busy_e, ss, se).sum())
        in_loop = np.zeros(api.size, bool)
        for _, a, b, _ in loops:
            in_loop[a : b + 1] = True
        lops = ops[in_windows(ev.ts_ns[ops], ss, se)]
        names = Counter(ev.names[i] for i in ev.name_id[lops] if ev.names[i] != "aten::_local_scalar_dense")
        trigger = names.most_common(1)[0][0] if names else ("aten::_local_scalar_dense" if lops.size else None)
        if trigger is not None:
            heads = lops[np.array([ev.names[i] == trigger for i in ev.name_id[lops]], bool)]
            after = _after_op(ctx, heads)
    # step-edge syncs: outside any syncing operator, no launch between them and the step's host start or end
    edge = api[~inside(ctx, api, ops)] if ops.size else api
    edge_blocked = 0
    n_edge = 0
    if edge.size and n:
        launches = ctx.cache.family("launch_api")
        lts = np.sort(ev.ts_ns[launches])
        p = step_of(ctx, ev.ts_ns[edge])
        ok = p >= 0
        e_rows, p = edge[ok], p[ok]
        before = np.searchsorted(lts, ev.ts_ns[e_rows]) - np.searchsorted(lts, ctx.steps.start_ns[p])
        after_n = np.searchsorted(lts, ctx.steps.host_end_ns[p]) - np.searchsorted(
            lts, ev.ts_ns[e_rows] + ev.dur_ns[e_rows]
        )
        at_edge = (before == 0) | (after_n == 0)
        n_edge = int(at_edge.sum())
        edge_blocked = int(ev.dur_ns[e_rows[at_edge]].sum())
    window = ctx.window_ns
    saving = None
    if idle.get("available") and host_sync.get("available") and window > 0:
        blocked = max(0, int(host_sync.get("blocked_ns") or 0) - edge_blocked)
        base = min(blocked / window, max(0.0, (idle.get("idle_share") or 0.0) - (idle.get("data_loader_share") or 0.0)))
        saving = max(loop_idle / window if storm else 0.0, base)
    return {
        "available": True,
        "syncs_per_step": float(np.median(counts)) if n else None,
        "loop_syncs_per_step": loop_sync if n else None,
        "loop_host_ns": int(np.median([e - s for s, e in spans] + [0] * (n - len(spans)))) if n else None,
        "storm": bool(storm),
        "trigger_op": trigger,
        "after_op": after,
        "loop_idle_share": loop_idle / window if window > 0 else None,
        "edge_syncs": n_edge,
        "edge_blocked_ns": edge_blocked,
        "saving_share": saving,
    }


def _after_op(ctx: Context, heads: np.ndarray) -> str | None:
    """The CPU operator that most often ends last before each of ``heads`` on the same thread (not a sync op)."""
    ev = ctx.trace.events
    cpu = ctx.cache.kinds(Kind.CPU_OP)
    sync_names = {"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero", "aten::equal"}
    keep = np.fromiter((n not in sync_names for n in ev.names), dtype=bool, count=len(ev.names))
    cpu = cpu[keep[ev.name_id[cpu]]] if cpu.size else cpu
    found: Counter[str] = Counter()
    for tid in np.unique(ev.tid[heads]):
        c = cpu[ev.tid[cpu] == tid]
        if c.size == 0:
            continue
        end = ev.ts_ns[c] + ev.dur_ns[c]
        o = np.argsort(end, kind="stable")
        c, end = c[o], end[o]
        h = heads[ev.tid[heads] == tid]
        j = np.searchsorted(end, ev.ts_ns[h], side="right") - 1
        found.update(ev.names[i] for i in ev.name_id[c[j[j >= 0]]])
    return found.most_common(1)[0][0] if found else None


# The registry's entries of the `sync_storm` topic: one row per key (metrics/entry.py); metrics/registry.py collects
# them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`sync_storm` (metrics/host/sync_storm.py)",
    "Loops of host syncs inside a step, and step-edge synchronize calls of a timing harness; "
    "`saving_share` is what `host_sync` reads.",
)

ENTRIES: tuple[Entry, ...] = (
    (
        "sync_storm.syncs_per_step",
        PER_STEP,
        LOWER,
        0.05,
        "blocking calls per step",
        "median over steps of the blocking runtime calls in the step's host window",
    ),
    (
        "sync_storm.loop_syncs_per_step",
        PER_STEP,
        LOWER,
        0.05,
        "syncs in the loop per step",
        "median over steps of the longest run of syncs each within 2 ms of the previous one",
    ),
    (
        "sync_storm.loop_host_ns",
        NS,
        LOWER,
        0.05,
        "loop host time per step",
        "median over steps of that run's span (first start to last end)",
    ),
    ("sync_storm.storm", FLAG, NEITHER, 0, "sync storm", "loop_syncs_per_step >= 16"),
    ("sync_storm.trigger_op", TEXT, NEITHER, 0, "syncing op", "the syncing operator the loop's syncs run under"),
    (
        "sync_storm.after_op",
        TEXT,
        NEITHER,
        0,
        "op before each sync",
        "the operator that most often ends last before each of them (e.g. `aten::linalg_vector_norm`)",
    ),
    (
        "sync_storm.loop_idle_share",
        SHARE,
        LOWER,
        0.1,
        "GPU idle in the loop",
        "GPU idle time inside the loops' spans / window_ns (0 without a storm)",
    ),
    (
        "sync_storm.edge_syncs",
        COUNT,
        NEITHER,
        0.02,
        "step-edge syncs",
        "blocking calls outside any syncing op with no launch between them and their step's start or end (a harness)",
    ),
    ("sync_storm.edge_blocked_ns", NS, NEITHER, 0.05, "step-edge sync time", "their summed duration"),
    (
        "sync_storm.saving_share",
        SHARE,
        LOWER,
        0.1,
        "sync saving",
        "max(loop_idle_share if storm, min((host_sync.blocked_ns - edge_blocked_ns) / window_ns, idle share - "
        "data-loader share)): what removing the syncs could save, step-edge ones excluded",
    ),
)
