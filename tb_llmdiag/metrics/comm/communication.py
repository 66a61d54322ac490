"""One rank's communication separated from its compute, per step.

Definitions (W = a step's window, see ``StepWindows``; unions are over all streams; lengths in ns):
- collective = device kernels ``collectives.find_collectives`` names; compute = every other kernel (memcpy and
  memset are neither: they count as device busy, not as compute that hides communication).
- ``collective_ns`` = |∪ collectives ∩ W|; ``compute_ns`` = |∪ compute ∩ W| (``gpu_busy`` without collectives).
- ``exposed_ns`` = |∪ collectives \\ ∪ compute| within W = |∪(collectives ∪ compute) ∩ W| - compute_ns: collective
  time no compute kernel overlaps on any stream. ``overlap_share`` = 1 - exposed / collective (null if no
  collective time).
- ``idle_ns`` = |W| - |∪ device events ∩ W|.
- host signals: ``dataloader_ns`` (DataLoader ``__next__`` ranges), ``sync_ns`` (blocking runtime calls:
  stream/device/event synchronize, synchronous memcpy), ``launch_ns`` (kernel-launch API calls), each |∪ ∩ W|;
  the name families are ``metrics.context.NAME_PATTERNS``. ``sync_in_collective_ns`` = |sync ranges ∩ ∪
  collectives| in the host window: host time blocked in a sync while the device runs a collective (waiting
  for peers or transferring), which per-rank findings should not blame on the sync itself.
- ``tokens``: token slots per step (``metrics.throughput.shapes.tokens_per_window``), -1 when shapes are not recorded.
- By kind: kernel time (sum of durations, waiting included), count, bytes (known sizes only) and
  ``busbw_lower_bound_bytes_per_s`` = known bytes / their kernel time x nccl-tests factor: a lower bound,
  since a rank's kernel time includes waiting for peers (the job level divides by transfer time instead).
Windows: ``StepWindows``: device figures per device window (from the first device event a step launched to
the first the next step launched), host figures and tokens per host window (the step marker). Without steps
the one window is [first device event start, last device event end).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.comm.collectives import KINDS, Collectives, bus_bandwidth_bytes_per_s
from tb_llmdiag.metrics.context import RowCache
from tb_llmdiag.metrics.entry import BYTES, COUNT, FLAG, LOWER, NEITHER, NS, SHARE, TEXT, Entry, Intro
from tb_llmdiag.metrics.steps.windows import Steps
from tb_llmdiag.metrics.throughput.shapes import tokens_per_window
from tb_llmdiag.model import DEVICE_KINDS, Kind, Trace, kind_mask

I64 = NDArray[np.int64]


@dataclass(frozen=True)
class CommBreakdown:
    """Per step (one row per window), ns. See the module docstring."""

    start_ns: I64
    end_ns: I64
    collective_ns: I64
    compute_ns: I64
    exposed_ns: I64
    idle_ns: I64
    dataloader_ns: I64
    sync_ns: I64
    launch_ns: I64
    sync_in_collective_ns: I64
    tokens: I64

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


@dataclass(frozen=True)
class StepWindows:
    """Per step: the host window [host_start, host_end) (the ProfilerStep marker) and the device window
    [start, end): from the first device event launched in the step to the first launched in the next one
    (the last step: to the end of the last device event it launched). Device windows are disjoint, so
    per-step device figures add up, and their length is the step period the GPU sees: with the GPU running
    behind the host, a marker's window extended to its GPU tail overlaps the next step's."""

    host_start_ns: I64
    host_end_ns: I64
    start_ns: I64
    end_ns: I64

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


def launch_step(
    trace: Trace, rows: NDArray[np.intp], host_start: I64, host_end: I64, cache: RowCache | None = None
) -> NDArray[np.int64]:
    """For device rows, the step whose host window holds the call that launched them (correlation id); -1
    when the launch is unknown, -2 when it is known and outside every step. ``cache``: the analysis' RowCache
    (``Context.cache``), whose launch join is then shared; a new one by default."""
    out = np.full(rows.shape, -1, np.int64)
    if rows.size == 0 or host_start.size == 0:
        return out
    launcher = (cache or RowCache(trace)).launcher(rows)
    ok = launcher >= 0
    t = trace.events.ts_ns[launcher[ok]]
    k = np.searchsorted(host_start, t, side="right") - 1
    inside = (k >= 0) & (t < host_end[np.clip(k, 0, None)])
    out[np.flatnonzero(ok)] = np.where(inside, k, -2)
    return out


def windows(trace: Trace, steps: Steps, cache: RowCache | None = None) -> StepWindows:
    """The step windows (see StepWindows), or one window over all device activity without steps (``cache``: as
    ``launch_step``'s; the windows are kept in it, computed once per analysis)."""
    if cache is None:
        return _windows(trace, steps, None)
    return cache.derived("communication.windows", (steps,), lambda: _windows(trace, steps, cache))


def _windows(trace: Trace, steps: Steps, cache: RowCache | None) -> StepWindows:
    ev = trace.events
    dev = np.flatnonzero(kind_mask(ev.kind, DEVICE_KINDS) & (ev.stream >= 0))
    if not len(steps):
        if dev.size == 0:
            z = np.zeros(0, np.int64)
            return StepWindows(z, z, z, z)
        lo, hi = np.array([ev.ts_ns[dev].min()], np.int64), np.array([ev.end_ns[dev].max()], np.int64)
        return StepWindows(lo, hi, lo, hi)
    hs, he = steps.host_starts.astype(np.int64), steps.host_end_ns.astype(np.int64)
    k = launch_step(trace, dev, hs, he, cache)
    n = len(steps)
    first = np.full(n, np.iinfo(np.int64).max, np.int64)
    last = np.full(n, -1, np.int64)
    np.minimum.at(first, k[k >= 0], ev.ts_ns[dev][k >= 0])
    np.maximum.at(last, k[k >= 0], ev.end_ns[dev][k >= 0])
    known = last >= 0
    start = np.where(known, first, hs)  # a step that launched nothing: its marker's window
    start = np.maximum.accumulate(start)
    end = np.append(start[1:], max(int(last[-1]) if known[-1] else int(steps.end_ns[-1]), int(start[-1])))
    return StepWindows(hs, he, start, end.astype(np.int64))


def window_of(t: I64, ws: I64, we: I64) -> I64:
    """Per time, the last window (by start) that holds it, -1 when none does: the step of a collective by its start
    (the ``comm_purpose`` topic, a rank's summary)."""
    if ws.size == 0:
        return np.full(t.shape, -1, np.int64)
    i = np.searchsorted(ws, t, side="right") - 1
    ok = (i >= 0) & (t < we[np.clip(i, 0, None)])
    return np.where(ok, i, -1).astype(np.int64)


def _covered(s: I64, e: I64, ws: I64, we: I64) -> I64:
    return overlap_per_window(s, e, ws, we).astype(np.int64)


def _compute_blocks(trace: Trace, coll: Collectives, cache: RowCache | None) -> tuple[I64, I64]:
    """The merged intervals of compute kernels (every kernel on a device stream that is not a collective); kept in
    ``cache`` (the breakdown and the exposed time per collective both read them)."""
    if cache is None:
        return _merged_compute(trace, coll)
    return cache.derived("communication.compute_blocks", (coll,), lambda: _merged_compute(trace, coll))


def _merged_compute(trace: Trace, coll: Collectives) -> tuple[I64, I64]:
    ev = trace.events
    is_coll = np.zeros(len(ev), dtype=bool)
    is_coll[coll.row] = True
    comp = np.flatnonzero((ev.kind == Kind.KERNEL) & (ev.stream >= 0) & ~is_coll)
    return merge(ev.ts_ns[comp], ev.end_ns[comp])


def exposed_per_collective(trace: Trace, coll: Collectives, cache: RowCache | None = None) -> I64:
    """Per collective: its time not overlapped by any compute kernel (on any stream) nor by a collective that started
    before it, ns. Collectives that overlap each other count once (the earlier one holds the shared time), so the
    sum over any set of collectives is never more than the time they span. ``cache``: as ``launch_step``'s; the
    figure is kept in it, computed once per analysis (the ``comm_purpose`` topic and the rank's summary read it)."""
    if cache is None:
        return _exposed_per_collective(trace, coll, None)
    return cache.derived(
        "communication.exposed_per_collective", (coll,), lambda: _exposed_per_collective(trace, coll, cache)
    )


def _exposed_per_collective(trace: Trace, coll: Collectives, cache: RowCache | None) -> I64:
    if len(coll) == 0:
        return np.zeros(0, np.int64)
    ks, ke = _compute_blocks(trace, coll, cache)
    order = np.argsort(coll.start_ns, kind="stable")
    s, e = coll.start_ns[order], coll.end_ns[order]
    reach = np.maximum.accumulate(np.concatenate(([np.iinfo(np.int64).min], e[:-1])))  # the earlier ones' end
    own_s = np.maximum(s, reach)
    own_e = np.maximum(e, own_s)
    out = np.empty(len(coll), np.int64)
    out[order] = (own_e - own_s) - overlap_per_window(ks, ke, own_s, own_e)
    return out


def comm_breakdown(
    trace: Trace,
    coll: Collectives,
    ws: I64,
    we: I64,
    host_ws: I64 | None = None,
    host_we: I64 | None = None,
    cache: RowCache | None = None,
) -> CommBreakdown:
    """Per-window communication, compute, idle (on the device windows [ws, we)) and host signals and tokens
    (on the host windows, by default the same); definitions in the module docstring. ``cache``: as
    ``launch_step``'s; the breakdown is kept in it, computed once per analysis for the same windows."""
    if cache is None:
        return _comm_breakdown(trace, coll, ws, we, host_ws, host_we, RowCache(trace))
    return cache.derived(
        "communication.comm_breakdown",
        (coll, ws, we, host_ws, host_we),
        lambda: _comm_breakdown(trace, coll, ws, we, host_ws, host_we, cache),
    )


def _comm_breakdown(
    trace: Trace, coll: Collectives, ws: I64, we: I64, host_ws: I64 | None, host_we: I64 | None, cache: RowCache
) -> CommBreakdown:
    ev = trace.events
    ws, we = np.asarray(ws, dtype=np.int64), np.asarray(we, dtype=np.int64)
    hws = ws if host_ws is None else np.asarray(host_ws, dtype=np.int64)
    hwe = we if host_we is None else np.asarray(host_we, dtype=np.int64)
    dev = np.flatnonzero(kind_mask(ev.kind, DEVICE_KINDS) & (ev.stream >= 0))
    cs, ce = merge(coll.start_ns, coll.end_ns)
    ks, ke = _compute_blocks(trace, coll, cache)
    collective = _covered(cs, ce, ws, we)
    compute = _covered(ks, ke, ws, we)
    both = _covered(np.concatenate((cs, ks)), np.concatenate((ce, ke)), ws, we)
    busy = _covered(ev.ts_ns[dev], ev.end_ns[dev], ws, we)

    def host(family: str) -> I64:
        rows = cache.family(family)
        return _covered(ev.ts_ns[rows], ev.end_ns[rows], hws, hwe)

    sync = cache.family("sync_api")
    ss, se = merge(ev.ts_ns[sync], ev.end_ns[sync])
    # host blocked in a sync while the device runs a collective: |sync ∩ coll| = |sync| + |coll| - |sync ∪ coll|
    sync_coll = (
        _covered(ss, se, hws, hwe)
        + _covered(cs, ce, hws, hwe)
        - _covered(np.concatenate((ss, cs)), np.concatenate((se, ce)), hws, hwe)
    )

    tokens = tokens_per_window(ev, hws, hwe)
    return CommBreakdown(
        start_ns=ws,
        end_ns=we,
        collective_ns=collective,
        compute_ns=compute,
        exposed_ns=both - compute,
        idle_ns=(we - ws) - busy,
        dataloader_ns=host("dataloader"),
        sync_ns=host("sync_api"),
        launch_ns=host("launch_api"),
        sync_in_collective_ns=sync_coll,
        tokens=tokens.astype(np.int64) if tokens is not None else np.full(ws.shape, -1, np.int64),
    )


def by_kind(coll: Collectives, ws: I64, we: I64, ranks: int | None) -> list[dict[str, Any]]:
    """Collective kernel time, count and bytes per kind, for collectives starting inside a window."""
    inside = _inside(coll.start_ns, ws, we)
    out = []
    for code in np.unique(coll.kind[inside]).tolist():
        m = inside & (coll.kind == code)
        known = m & (coll.bytes >= 0)
        kind = KINDS[code]
        gs = coll.group_size[known]
        n = int(gs.max()) if gs.size and gs.max() > 0 else ranks
        bytes_known = int(coll.bytes[known].sum())
        out.append(
            {
                "kind": kind,
                "count": int(m.sum()),
                "kernel_ns": int(coll.dur_ns[m].sum()),
                "bytes": bytes_known if known.any() else None,
                "bytes_known_count": int(known.sum()),
                "busbw_lower_bound_bytes_per_s": bus_bandwidth_bytes_per_s(
                    kind, bytes_known, int(coll.dur_ns[known].sum()), n or 0
                )
                if known.any()
                else None,
            }
        )
    return sorted(out, key=lambda r: -r["kernel_ns"])


def _inside(ts: I64, ws: I64, we: I64) -> NDArray[np.bool_]:
    """Whether each time lies in some window [ws, we) (windows sorted by start, may overlap)."""
    if ws.size == 0:
        return np.zeros(ts.shape, dtype=bool)
    reach = np.maximum.accumulate(we)
    i = np.searchsorted(ws, ts, side="right") - 1
    return (i >= 0) & (ts < reach[np.clip(i, 0, None)])


def communication_metrics(
    trace: Trace, coll: Collectives, steps: Steps, cache: RowCache | None = None
) -> dict[str, Any]:
    """The per-rank ``communication`` topic: totals over the step windows, shares of step time (``cache``: as
    ``launch_step``'s)."""
    w = windows(trace, steps, cache)
    ws, we = w.start_ns, w.end_ns
    if ws.size == 0:
        return {"available": False, "reason": "no device activity"}
    if len(coll) == 0:
        return {
            "available": False,
            "reason": "no collective kernels (NCCL/RCCL, DeepEP, XLA) in the trace",
            "collective_count": 0,
        }
    b = comm_breakdown(trace, coll, ws, we, w.host_start_ns, w.host_end_ns, cache)
    window = int((we - ws).sum())
    coll_ns, exposed = int(b.collective_ns.sum()), int(b.exposed_ns.sum())
    ranks = trace.distributed.world_size if trace.distributed else None
    return {
        "available": True,
        "collective_count": int(_inside(coll.start_ns, ws, we).sum()),
        "collective_ns": coll_ns,
        "collective_share": coll_ns / window if window else None,
        "compute_ns": int(b.compute_ns.sum()),
        "compute_share": int(b.compute_ns.sum()) / window if window else None,
        "exposed_ns": exposed,
        "exposed_share": exposed / window if window else None,
        "sync_in_collective_ns": int(b.sync_in_collective_ns.sum()),
        "overlap_share": 1.0 - exposed / coll_ns if coll_ns else None,
        "by_kind": by_kind(coll, ws, we, ranks),
    }


# The registry's entries of the `communication` topic: one row per key (metrics/entry.py); metrics/registry.py
# collects them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`communication` (metrics/comm/communication.py, metrics/comm/collectives.py)",
    "Per rank, collective kernels separated from compute (report schema 3 on; before, collectives counted "
    "as GPU busy). Unavailable on traces without collectives. The job level (`jobs`, docs/jobs.md) "
    "splits a rank's collective time into waiting for peers and transfer.",
)

_BY_KIND = (
    "per collective kind (`all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `send_recv`, "
    "`broadcast`, ...: `metrics.comm.collectives.KINDS`) of the collectives starting inside a step window"
)
ENTRIES: tuple[Entry, ...] = (
    (
        "communication.available",
        FLAG,
        NEITHER,
        0,
        "available",
        "false when the trace has no device activity or no collective kernel (then `reason` says which)",
    ),
    ("communication.reason", TEXT, NEITHER, 0, "reason", "why the topic is unavailable"),
    (
        "communication.collective_count",
        COUNT,
        NEITHER,
        0.02,
        "collectives",
        "collective kernels (NCCL/RCCL `ncclKernel*`/`ncclDevKernel*`, DeepEP dispatch/combine, multimem/custom "
        "all-reduce, XLA collectives) starting inside a step window",
    ),
    (
        "communication.collective_ns",
        NS,
        LOWER,
        0.05,
        "collective time",
        "length of the union of collective kernels within the step windows (the device window of each step: from "
        "the first device event it launched to the first the next step launched)",
    ),
    ("communication.collective_share", SHARE, LOWER, 0.1, "collective share", "collective_ns / step windows' length"),
    (
        "communication.compute_ns",
        NS,
        NEITHER,
        0.05,
        "compute time",
        "length of the union of the other kernels (compute; memcpy/memset excluded) within the step windows",
    ),
    ("communication.compute_share", SHARE, NEITHER, 0.1, "compute share", "compute_ns / step windows' length"),
    (
        "communication.exposed_ns",
        NS,
        LOWER,
        0.05,
        "exposed communication",
        "collective time no compute kernel overlaps on any stream: the length of the union of collectives and compute, less compute_ns, within the "
        "step windows; a rank's exposed time includes waiting for peers (the job level splits waiting from transfer)",
    ),
    (
        "communication.exposed_share",
        SHARE,
        LOWER,
        0.1,
        "exposed communication share",
        "exposed_ns / step windows' length",
    ),
    (
        "communication.overlap_share",
        SHARE,
        NEITHER,
        0.1,
        "overlap share",
        "1 - exposed_ns / collective_ns: the part of collective time compute hides; null without collective time",
    ),
    (
        "communication.sync_in_collective_ns",
        NS,
        NEITHER,
        0.05,
        "sync in collective",
        "host time blocked in a synchronising runtime call while the device runs a collective, within the step "
        "markers' host windows",
    ),
    ("communication.by_kind[].kind", TEXT, NEITHER, 0, "kind", _BY_KIND),
    ("communication.by_kind[].count", COUNT, NEITHER, 0.02, "count", "collectives of the kind, " + _BY_KIND),
    (
        "communication.by_kind[].kernel_ns",
        NS,
        LOWER,
        0.05,
        "kernel time",
        "summed kernel durations of the kind (waiting for peers included), " + _BY_KIND,
    ),
    (
        "communication.by_kind[].bytes",
        BYTES,
        NEITHER,
        0.02,
        "bytes",
        "message bytes of the collectives whose size the trace states (`In msg nelems` x dtype size, from the NCCL "
        "args); null when none does (never guessed)",
    ),
    (
        "communication.by_kind[].bytes_known_count",
        COUNT,
        NEITHER,
        0.02,
        "sized collectives",
        "how many collectives of the kind state their size",
    ),
    (
        "communication.by_kind[].busbw_lower_bound_bytes_per_s",
        "bytes_per_s",
        NEITHER,
        0.1,
        "bus bandwidth (lower bound)",
        "nccl-tests bus bandwidth: known bytes / their kernel time x the kind's factor (all-reduce 2(n-1)/n, "
        "all-gather and reduce-scatter (n-1)/n, ...; n = group size, else the world size); a lower bound since a "
        "rank's kernel time includes waiting (the job level divides by transfer time); null when sizes are unknown",
    ),
)
