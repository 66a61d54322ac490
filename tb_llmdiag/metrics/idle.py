"""GPU busy and idle time within the analysis window, and why the GPU was idle.

Definitions (ns; "window" = the union of the step windows, see ``metrics.context``):
- busy = length of the union of all device events (kernels, memcpys, memsets; all devices and streams)
  inside the window; ``busy_share = busy_ns / window_ns``. idle = window - busy.
- An idle gap is a maximal stretch of the window with no device event. Each gap gets one cause, tried in
  this order:
  1. ``data_loader``: at least half of the gap overlaps host DataLoader ``__next__`` ranges;
  2. ``sync``: the gap starts while the host is blocked in a synchronising call (cuda*Synchronize,
     cudaMemcpy, ``aten::_local_scalar_dense`` / ``item`` / ``nonzero``), or within ``sync_slack_ns`` after
     it returns: the host drained the queue and the GPU then waits for the host to refill it;
  3. ``host_wait``: the device event that ends the gap was submitted (its launch call ended) after the
     gap began, or no device event ends it: the device ran dry waiting for the host to launch work;
  4. ``other``: the work that ends the gap was already queued (cross-stream waits, events, clock
     jitter), or no launch in the trace can be joined to a device event (no correlation ids: XPlane, some
     accelerators), so host waits cannot be told apart.
- ``step_breakdown``: per step (lists aligned with ``steps.indexes``), ``busy_ns`` and the idle ns of each
  cause within [start, end) of that step.
- ``host_wait_top_ops`` / ``host_wait_culprit``: the host operators running during ``host_wait`` gaps
  (``host_wait_culprits``).
- Long gaps: gaps of at least 500 ms (Nsight Systems' "GPU gaps" rule). Low-utilisation steps: steps
  whose own busy share is under 0.5 (Nsight's 50 % rule, per step).

``gap_causes(starts, ends, HostSignals.of(trace))`` is the columnar API the timeline also uses;
``classify_idle`` finds and classifies the gaps within windows, ``classify_gaps`` returns cause names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import covered_before_each, merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, RowCache, share
from tb_llmdiag.model import DEVICE_KINDS, Kind, Trace, kind_mask

I64 = NDArray[np.int64]

#: Cause codes are indices into this tuple.
CAUSES: tuple[str, ...] = ("host_wait", "sync", "data_loader", "other")
HOST_WAIT, SYNC, DATA_LOADER, OTHER = range(4)

LONG_GAP_NS = 500_000_000
LOW_UTIL_SHARE = 0.5


@dataclass(frozen=True)
class IdleGaps:
    """Idle gaps as columns: [start_ns, end_ns) and a cause code (index into ``cause_names``)."""

    start_ns: I64
    end_ns: I64
    cause: NDArray[np.uint8]
    cause_names: tuple[str, ...] = CAUSES

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    @property
    def dur_ns(self) -> I64:
        return self.end_ns - self.start_ns


def subtract(a_s: I64, a_e: I64, b_s: I64, b_e: I64) -> tuple[I64, I64]:
    """A minus B for two sets of sorted, disjoint [start, end) intervals, as sorted disjoint intervals."""
    if a_s.size == 0:
        return a_s.copy(), a_e.copy()
    pos = np.concatenate((a_s, a_e, b_s, b_e)).astype(np.int64)
    na, nb = a_s.size, b_s.size
    da = np.concatenate((np.ones(na, np.int64), -np.ones(na, np.int64), np.zeros(2 * nb, np.int64)))
    db = np.concatenate((np.zeros(2 * na, np.int64), np.ones(nb, np.int64), -np.ones(nb, np.int64)))
    order = np.argsort(pos, kind="stable")
    pos, a, b = pos[order], np.cumsum(da[order]), np.cumsum(db[order])
    seg_s, seg_e = pos[:-1], pos[1:]
    keep = (a[:-1] > 0) & (b[:-1] <= 0) & (seg_e > seg_s)
    return merge(seg_s[keep], seg_e[keep])


@dataclass(frozen=True)
class HostSignals:
    """Host-side intervals and launch joins that explain idle gaps (see the module docstring)."""

    sync_s: I64
    sync_e: I64
    dl_s: I64
    dl_e: I64
    dev_ts: I64           # device event starts, sorted
    dev_launch_end: I64   # end of the launch call of each device event, -1 when not joinable

    @staticmethod
    def of(trace: Trace, cache: RowCache | None = None) -> HostSignals:
        """From the trace's events; ``cache`` (``Context.cache``) shares rows the topics also read."""
        ev = trace.events
        cache = cache or RowCache(trace)
        sync = np.concatenate((cache.family("sync_api"), cache.family("sync_op")))
        sync_s, sync_e = merge(ev.ts_ns[sync], ev.ts_ns[sync] + ev.dur_ns[sync])
        dl = cache.family("dataloader")
        dl_s, dl_e = merge(ev.ts_ns[dl], ev.ts_ns[dl] + ev.dur_ns[dl])
        dev = cache.kinds(*DEVICE_KINDS)
        launch = cache.launcher(dev)
        hit = launch >= 0
        launch_end = np.full(dev.size, -1, dtype=np.int64)
        launch_end[hit] = ev.ts_ns[launch[hit]] + ev.dur_ns[launch[hit]]
        return HostSignals(sync_s, sync_e, dl_s, dl_e, ev.ts_ns[dev], launch_end)


def gap_causes(gs: I64, ge: I64, host: HostSignals, *, sync_slack_ns: int = 10_000) -> NDArray[np.uint8]:
    """Cause code per gap [gs, ge) (see the module docstring for the order of tests)."""
    gs, ge = np.asarray(gs, np.int64), np.asarray(ge, np.int64)
    out = np.full(gs.size, OTHER, dtype=np.uint8)
    if gs.size == 0:
        return out
    # host_wait / other: who submitted the event that ends the gap, and when
    nxt = np.searchsorted(host.dev_ts, ge, side="left")
    has_next = nxt < host.dev_ts.size
    launch_end = np.full(gs.size, -1, np.int64)
    launch_end[has_next] = host.dev_launch_end[nxt[has_next]]
    if (host.dev_launch_end >= 0).any():  # without any launch join (XPlane, no correlation ids) we cannot tell
        waited = (~has_next) | (launch_end >= gs)
        out[waited] = HOST_WAIT
    # sync: the gap starts inside a synchronising call (or just after it returns)
    if host.sync_s.size:
        j = np.searchsorted(host.sync_s, gs, side="right") - 1
        ok = j >= 0
        in_sync = np.zeros(gs.size, dtype=bool)
        in_sync[ok] = gs[ok] <= host.sync_e[j[ok]] + sync_slack_ns
        out[in_sync] = SYNC
    # data loader: at least half of the gap overlaps the loader
    if host.dl_s.size:
        ov = overlap_per_window(host.dl_s, host.dl_e, gs, ge)
        out[2 * ov >= (ge - gs)] = DATA_LOADER
    return out


def classify_idle(trace: Trace, win_s: I64, win_e: I64, *, min_gap_ns: int = 0,
                  host: HostSignals | None = None) -> IdleGaps:
    """Idle gaps of the device within the windows [win_s, win_e), each with its cause.

    Args:
        trace: the trace (device events are all of Kind KERNEL/MEMCPY/MEMSET, merged across streams).
        win_s, win_e: sorted, disjoint windows (e.g. merged step windows); times as in ``trace.events``.
        min_gap_ns: drop gaps shorter than this (totals in ``idle_metrics`` use every gap).
        host: precomputed ``HostSignals.of(trace)``, to share across calls.
    Returns:
        ``IdleGaps(start_ns, end_ns, cause, cause_names=CAUSES)``, sorted by start.
    """
    ev = trace.events
    dev = kind_mask(ev.kind, DEVICE_KINDS)
    busy_s, busy_e = merge(ev.ts_ns[dev], ev.end_ns[dev])
    return _classify(trace, busy_s, busy_e, np.asarray(win_s, np.int64), np.asarray(win_e, np.int64),
                     min_gap_ns=min_gap_ns, host=host)


def _classify(trace: Trace, busy_s: I64, busy_e: I64, win_s: I64, win_e: I64, *, min_gap_ns: int,
              host: HostSignals | None) -> IdleGaps:
    gs, ge = subtract(win_s, win_e, busy_s, busy_e)
    keep = (ge - gs) >= max(min_gap_ns, 1)
    gs, ge = gs[keep], ge[keep]
    cause = gap_causes(gs, ge, host or HostSignals.of(trace))
    return IdleGaps(gs, ge, cause)


def classify_gaps(trace: Trace, starts: Any, ends: Any) -> list[str]:
    """Cause name (one of ``CAUSES``) for each given gap [starts[i], ends[i]); used by the timeline."""
    codes = gap_causes(np.asarray(starts, np.int64), np.asarray(ends, np.int64), HostSignals.of(trace))
    return [CAUSES[c] for c in codes]


_RECOMPILE_HINT = "torch.compile (re)compiles inside the step; keep shapes static or mark them dynamic"
_HOST_COPY_HINT = "host-to-device copies on the critical path; pin memory and copy with non_blocking=True"

#: (substring of a host operator's name, why it keeps the GPU waiting and what to do). First match wins.
CULPRIT_HINTS: tuple[tuple[str, str], ...] = (
    ("cudnn_attention", "cuDNN attention builds an execution plan for every new input shape; pad batches to a "
                        "fixed length or a multiple of 64/128, pack sequences, or use the flash backend "
                        "(torch.backends.cuda.enable_cudnn_sdp(False))"),
    ("cudnn_convolution", "cuDNN autotunes convolutions for every new input shape (cudnn.benchmark); keep shapes fixed"),
    ("Torch-Compiled Region", _RECOMPILE_HINT),
    ("CompiledFunction", _RECOMPILE_HINT),
    ("TorchDynamo", _RECOMPILE_HINT),
    ("aten::to", _HOST_COPY_HINT),
    ("aten::copy_", _HOST_COPY_HINT),
)


#: Host operators that do work once per new input shape (plan building, autotuning, compiling). When their
#: calls are slow (PER_SHAPE_MIN_MEAN_NS) they are paying that per-shape cost, not their usual launch cost.
PER_SHAPE_OPS: tuple[str, ...] = ("cudnn_attention", "cudnn_convolution", "Torch-Compiled Region",
                                  "CompiledFunction", "TorchDynamo")
PER_SHAPE_MIN_MEAN_NS = 1_000_000

_NO_CULPRIT: dict[str, Any] = {"host_wait_top_ops": [], "host_wait_culprit": None, "host_wait_culprit_ns": None,
                               "host_wait_culprit_share": None, "host_wait_culprit_mean_ns": None,
                               "host_wait_culprit_hint": None, "host_wait_per_shape_op": None,
                               "host_wait_per_shape_ns": 0, "host_wait_per_shape_share": 0.0}


def union_ns_by_group(group: NDArray[np.integer], starts: I64, ends: I64, n_groups: int) -> NDArray[np.float64]:
    """Per group id 0..n_groups-1, the length of the union of its [start, end) intervals, as float64 (exact
    below 2**53). Empty and negative intervals add nothing. Fastest when starts are sorted (ts-sorted rows)."""
    s = np.asarray(starts, np.int64)
    e = np.maximum(ends, s)  # a negative interval becomes an empty one: it adds nothing
    if s.size == 0:
        return np.zeros(n_groups)
    group = np.asarray(group)
    # by group, then start: a stable sort by group of start-sorted rows (numpy's stable sort is a radix
    # sort for 16-bit keys, ~7x faster than np.lexsort on name ids)
    by_start = None if bool((s[1:] >= s[:-1]).all()) else np.argsort(s, kind="stable")
    key = group if by_start is None else group[by_start]
    key = key.astype(np.uint16 if int(group.min()) >= 0 and int(group.max()) < 2**16 else np.int64)
    order = np.argsort(key, kind="stable")
    g = key[order]
    if by_start is not None:
        order = by_start[order]
    s, e = s[order], e[order]
    del order, key  # dropped early: with 10^6 operators this function sets the report's peak memory
    first = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
    lo, span = int(s.min()), int(e.max() - s.min()) + 1
    if (int(g[-1]) + 1) * span < 2**62:
        # running max of ends within each group in one pass: lift each group above all earlier ones
        off = np.multiply(g, np.int64(span), dtype=np.int64)
        reach = e - lo
        reach += off
        np.maximum.accumulate(reach, out=reach)
        reach -= off
        del off
        reach += lo
    else:  # pragma: no cover - needs ~1e5 names over hours of trace
        reach = np.concatenate([np.maximum.accumulate(part) for part in np.split(e, first[1:])])
    # each interval adds what it reaches past everything before it in its group
    before = np.empty_like(reach)
    before[1:] = reach[:-1]
    before[first] = s[first]
    np.maximum(before, s, out=before)
    reach -= before
    out = np.zeros(n_groups)
    out[g[first]] = np.add.reduceat(reach, first)
    return out


def culprit_hint(name: str) -> str | None:
    return next((hint for needle, hint in CULPRIT_HINTS if needle in name), None)


def host_wait_culprits(ctx: Context, gaps: IdleGaps, *, top: int = 5) -> dict[str, Any]:
    """Which host operators ran while the GPU waited for the host (gaps of cause ``host_wait``).

    Per CPU operator name: the length of the union of its ranges (nested or concurrent calls of one name
    count once) within those gaps, so at most the host-wait time. ``host_wait_top_ops`` lists the ``top`` names by that time; ``host_wait_culprit`` is the most
    specific of the leaders: among names within 90 % of the largest overlap, the one with the shortest mean
    call (a leaf such as ``aten::_cudnn_attention_backward`` rather than its callers); with its overlap
    (``_ns``, ``_share``), mean call duration, and a hint from ``CULPRIT_HINTS`` when one matches.
    ``host_wait_per_shape_*``: the same overlap for the leading operator among the per-shape ones
    (``PER_SHAPE_OPS``, mean call >= ``PER_SHAPE_MIN_MEAN_NS``): GPU idle time spent building plans or
    compiling for new input shapes (the largest such name, so nested callers are not added up).
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
    ts = ev.ts_ns[ops]
    end = ts + dur
    del dur  # per-op temporaries are dropped as soon as used: this topic sets the report's peak memory
    at_ts, at_end = covered_before_each(hw_s, hw_e, ts, end)
    del ts, end
    per = union_ns_by_group(nid, at_ts, at_end, len(ev.names))
    del at_ts, at_end
    if per.max() <= 0:
        return _NO_CULPRIT
    order = np.argsort(-per, kind="stable")[:top]
    leaders = np.flatnonzero(per >= 0.9 * per.max())
    culprit = int(leaders[np.argmin(mean[leaders])])
    slow = np.flatnonzero((mean >= PER_SHAPE_MIN_MEAN_NS) & (per > 0))  # a few names: match only those
    per_shape = [int(i) for i in slow if any(k in ev.names[i] for k in PER_SHAPE_OPS)]
    shape_op = max(per_shape, key=lambda i: per[i]) if per_shape else None
    shape_ns = int(per[shape_op]) if shape_op is not None else 0
    return {
        "host_wait_top_ops": [{"name": ev.names[i], "idle_ns": int(per[i]), "share": share(int(per[i]), ctx.window_ns)}
                              for i in order if per[i] > 0],
        "host_wait_culprit": ev.names[culprit],
        "host_wait_culprit_ns": int(per[culprit]),
        "host_wait_culprit_share": share(int(per[culprit]), ctx.window_ns),
        "host_wait_culprit_mean_ns": int(mean[culprit]),
        "host_wait_culprit_hint": culprit_hint(ev.names[culprit]),
        "host_wait_per_shape_op": ev.names[shape_op] if shape_op is not None else None,
        "host_wait_per_shape_ns": shape_ns,
        "host_wait_per_shape_share": share(shape_ns, ctx.window_ns),
    }


def idle_metrics(ctx: Context, host: HostSignals) -> tuple[dict[str, Any], IdleGaps]:
    """The ``idle`` topic (see the module docstring) and the classified gaps behind it."""
    if ctx.dev.size == 0:
        return {"available": False, "reason": "no device activity in the trace"}, IdleGaps(
            np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint8))
    gaps = _classify(ctx.trace, ctx.busy_s, ctx.busy_e, ctx.win_s, ctx.win_e, min_gap_ns=0, host=host)
    window = ctx.window_ns
    idle = int(gaps.dur_ns.sum())
    busy = window - idle
    out: dict[str, Any] = {
        "available": True,
        "window_ns": window,
        "window_source": ctx.window_source,
        "busy_ns": busy,
        "busy_share": share(busy, window),
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
    if ctx.n_steps:
        st = ctx.steps
        step_busy = overlap_per_window(ctx.busy_s, ctx.busy_e, st.start_ns, st.end_ns)
        per = np.where(st.duration_ns > 0, step_busy / np.maximum(st.duration_ns, 1), 0.0)
        out["step_busy_share"] = [float(x) for x in per]
        breakdown = {"busy_ns": [int(x) for x in step_busy]}
        for code, name in enumerate(CAUSES):
            m = gaps.cause == code
            ov = overlap_per_window(gaps.start_ns[m], gaps.end_ns[m], st.start_ns, st.end_ns)
            breakdown[f"{name}_ns"] = [int(x) for x in ov]
        out["step_breakdown"] = breakdown
        low = per < LOW_UTIL_SHARE
        out["low_util_step_count"] = int(low.sum())
        out["low_util_steps"] = [int(i) for i in st.index[low]]
    else:
        out["step_busy_share"] = []
        out["step_breakdown"] = {}
        out["low_util_step_count"] = 0
        out["low_util_steps"] = []
    return out, gaps
