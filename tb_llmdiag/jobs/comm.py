"""One rank's communication separated from its compute, per step.

Definitions (W = a step window [start, end); unions are over all streams; lengths in ns):
- collective = device kernels ``collectives.find_collectives`` names; compute = every other kernel (memcpy and
  memset are neither: they count as device busy, not as compute that hides communication).
- ``collective_ns`` = |∪ collectives ∩ W|; ``compute_ns`` = |∪ compute ∩ W| (``gpu_busy`` without collectives).
- ``exposed_ns`` = |∪ collectives \\ ∪ compute| within W = |∪(collectives ∪ compute) ∩ W| - compute_ns: collective
  time no compute kernel overlaps on any stream. ``overlap_share`` = 1 - exposed / collective (null if no
  collective time).
- ``idle_ns`` = |W| - |∪ device events ∩ W|.
- host signals: ``dataloader_ns`` (DataLoader ``__next__`` ranges), ``sync_ns`` (blocking runtime calls:
  stream/device/event synchronize, synchronous memcpy), ``launch_ns`` (kernel-launch API calls), each |∪ ∩ W|;
  the name families are ``metrics.context.NAME_PATTERNS``.
- ``tokens``: token slots per step (``metrics.shapes.tokens_per_window``), -1 when shapes are not recorded.
- By kind: kernel time (sum of durations, waiting included), count, bytes (known sizes only) and
  ``busbw_lower_bound_bytes_per_s`` = known bytes / their kernel time x nccl-tests factor: a lower bound,
  since a rank's kernel time includes waiting for peers (the job level divides by transfer time instead).
Without steps the one window is [first device event start, last device event end).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.jobs.collectives import KINDS, Collectives, bus_bandwidth_bytes_per_s
from tb_llmdiag.metrics.context import RowCache
from tb_llmdiag.metrics.shapes import tokens_per_window
from tb_llmdiag.metrics.steps import Steps
from tb_llmdiag.model import DEVICE_KINDS, Kind, Trace, kind_mask

I64 = NDArray[np.int64]


@dataclass(frozen=True)
class StepBreakdown:
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
    tokens: I64

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


def windows(trace: Trace, steps: Steps) -> tuple[I64, I64]:
    """The step windows, or one window over all device activity when the trace has no steps."""
    if len(steps):
        return steps.start_ns.astype(np.int64), steps.end_ns.astype(np.int64)
    ev = trace.events
    dev = kind_mask(ev.kind, DEVICE_KINDS) & (ev.stream >= 0)
    if not dev.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (np.array([ev.ts_ns[dev].min()], np.int64), np.array([ev.end_ns[dev].max()], np.int64))


def _covered(s: I64, e: I64, ws: I64, we: I64) -> I64:
    return overlap_per_window(s, e, ws, we).astype(np.int64)


def _compute_blocks(trace: Trace, coll: Collectives) -> tuple[I64, I64]:
    """The merged intervals of compute kernels (every kernel on a device stream that is not a collective)."""
    ev = trace.events
    is_coll = np.zeros(len(ev), dtype=bool)
    is_coll[coll.row] = True
    comp = np.flatnonzero((ev.kind == Kind.KERNEL) & (ev.stream >= 0) & ~is_coll)
    return merge(ev.ts_ns[comp], ev.end_ns[comp])


def exposed_per_collective(trace: Trace, coll: Collectives) -> I64:
    """Per collective: its duration not overlapped by any compute kernel (on any stream), ns."""
    ks, ke = _compute_blocks(trace, coll)
    if len(coll) == 0:
        return np.zeros(0, np.int64)
    return (coll.dur_ns - overlap_per_window(ks, ke, coll.start_ns, coll.end_ns)).astype(np.int64)


def step_breakdown(trace: Trace, coll: Collectives, ws: I64, we: I64) -> StepBreakdown:
    """Per-window communication, compute, idle and host signals (definitions in the module docstring)."""
    ev = trace.events
    ws, we = np.asarray(ws, dtype=np.int64), np.asarray(we, dtype=np.int64)
    dev = np.flatnonzero(kind_mask(ev.kind, DEVICE_KINDS) & (ev.stream >= 0))
    cs, ce = merge(coll.start_ns, coll.end_ns)
    ks, ke = _compute_blocks(trace, coll)
    collective = _covered(cs, ce, ws, we)
    compute = _covered(ks, ke, ws, we)
    both = _covered(np.concatenate((cs, ks)), np.concatenate((ce, ke)), ws, we)
    busy = _covered(ev.ts_ns[dev], ev.end_ns[dev], ws, we)
    cache = RowCache(trace)

    def host(family: str) -> I64:
        rows = cache.family(family)
        return _covered(ev.ts_ns[rows], ev.end_ns[rows], ws, we)

    tokens = tokens_per_window(ev, ws, we)
    return StepBreakdown(
        start_ns=ws, end_ns=we, collective_ns=collective, compute_ns=compute, exposed_ns=both - compute,
        idle_ns=(we - ws) - busy, dataloader_ns=host("dataloader"), sync_ns=host("sync_api"),
        launch_ns=host("launch_api"),
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
        out.append({
            "kind": kind, "count": int(m.sum()), "kernel_ns": int(coll.dur_ns[m].sum()),
            "bytes": bytes_known if known.any() else None, "bytes_known_count": int(known.sum()),
            "busbw_lower_bound_bytes_per_s": bus_bandwidth_bytes_per_s(
                kind, bytes_known, int(coll.dur_ns[known].sum()), n or 0) if known.any() else None,
        })
    return sorted(out, key=lambda r: -r["kernel_ns"])


def _inside(ts: I64, ws: I64, we: I64) -> NDArray[np.bool_]:
    """Whether each time lies in some window [ws, we) (windows sorted by start, may overlap)."""
    if ws.size == 0:
        return np.zeros(ts.shape, dtype=bool)
    reach = np.maximum.accumulate(we)
    i = np.searchsorted(ws, ts, side="right") - 1
    return (i >= 0) & (ts < reach[np.clip(i, 0, None)])


def communication_metrics(trace: Trace, coll: Collectives, steps: Steps) -> dict[str, Any]:
    """The per-rank ``communication`` topic: totals over the step windows, shares of step time."""
    ws, we = windows(trace, steps)
    if ws.size == 0:
        return {"available": False, "reason": "no device activity"}
    if len(coll) == 0:
        return {"available": False, "reason": "no collective kernels (NCCL/RCCL, DeepEP, XLA) in the trace",
                "collective_count": 0}
    b = step_breakdown(trace, coll, ws, we)
    window = int((we - ws).sum())
    coll_ns, exposed = int(b.collective_ns.sum()), int(b.exposed_ns.sum())
    ranks = trace.distributed.world_size if trace.distributed else None
    return {
        "available": True,
        "collective_count": int(_inside(coll.start_ns, ws, we).sum()),
        "collective_ns": coll_ns, "collective_share": coll_ns / window if window else None,
        "compute_ns": int(b.compute_ns.sum()), "compute_share": int(b.compute_ns.sum()) / window if window else None,
        "exposed_ns": exposed, "exposed_share": exposed / window if window else None,
        "overlap_share": 1.0 - exposed / coll_ns if coll_ns else None,
        "by_kind": by_kind(coll, ws, we, ranks),
    }
