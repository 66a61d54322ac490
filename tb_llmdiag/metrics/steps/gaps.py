"""Device idle gaps, each with one cause, and the per-step busy/idle breakdown built from them.

Definitions (ns; "window" = the analysis window, the union of the step windows, see ``metrics.context``):
- An idle gap is a maximal stretch of the window with no device event (kernel, memcpy, memset; all devices
  and streams: ``Context.busy_s/busy_e``). Each gap gets one cause, decided once over the whole gap and
  tried in this order:
  1. ``data_loader``: at least half of the gap overlaps host DataLoader ``__next__`` ranges;
  2. ``sync``: the gap starts while the host is blocked in a synchronising call (cuda*/hip*Synchronize,
     blocking copies such as cudaMemcpy / hipMemcpyWithStream, ``aten::_local_scalar_dense`` / ``item`` /
     ``nonzero``), or within ``sync_slack_ns`` after it returns, or at least half of the gap is spent inside
     one: the host drained the queue and the GPU then waits for the host to refill it;
  3. ``host_wait``: the device event that ends the gap was submitted (its launch call ended) after the
     gap began, or no device event ends it: the device ran dry waiting for the host to launch work;
  4. ``other``: the work that ends the gap was already queued (cross-stream waits, events, clock
     jitter), or no launch in the trace can be joined to a device event (no correlation ids: XPlane, some
     accelerators), so host waits cannot be told apart.
- Collectives (NCCL/RCCL, DeepEP, XLA collective kernels, ``metrics.comm.collectives``) are never busy compute: a
  stretch where the device runs only collectives is neither idle nor busy but ``collective``.
- The step breakdown (``StepBreakdown``): per step, ``busy_ns`` = the union of the device events other than
  collectives within [start, end), ``collective_ns`` = the device busy union within [start, end) that only
  collectives cover (communication no other device work hides), and, per
  cause, the part of the gaps of that cause within [start, end). A gap that crosses a step boundary keeps
  the cause of the whole gap and is split at the boundary, so the parts of a step sum to its duration.
  This one result feeds the report (``steps.per_step``, the outlier causes, ``idle.low_util_steps``), the
  tab's ``/steps`` rows and the gaps the step timeline draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import overlap_per_window, subtract
from tb_llmdiag.metrics.context import Context, HostSignals
from tb_llmdiag.metrics.steps.windows import Steps

I64 = NDArray[np.int64]

#: Cause codes are indices into this tuple.
CAUSES: tuple[str, ...] = ("host_wait", "sync", "data_loader", "other")
HOST_WAIT, SYNC, DATA_LOADER, OTHER = range(4)


@dataclass(frozen=True)
class IdleGaps:
    """Idle gaps as columns: [start_ns, end_ns) and a cause code (index into ``cause_names``), sorted by start."""

    start_ns: I64
    end_ns: I64
    cause: NDArray[np.uint8]
    cause_names: tuple[str, ...] = CAUSES

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    @property
    def dur_ns(self) -> I64:
        return self.end_ns - self.start_ns

    @staticmethod
    def empty() -> IdleGaps:
        return IdleGaps(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint8))


def gap_causes(gs: I64, ge: I64, host: HostSignals, *, sync_slack_ns: int = 10_000) -> NDArray[np.uint8]:
    """Cause code per whole gap [gs, ge) (see the module docstring for the order of tests)."""
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
        # or at least half of the gap is spent inside one (a blocking copy entered just after the gap began)
        in_sync |= 2 * overlap_per_window(host.sync_s, host.sync_e, gs, ge) >= (ge - gs)
        out[in_sync] = SYNC
    # data loader: at least half of the gap overlaps the loader
    if host.dl_s.size:
        ov = overlap_per_window(host.dl_s, host.dl_e, gs, ge)
        out[2 * ov >= (ge - gs)] = DATA_LOADER
    return out


def classify(busy_s: I64, busy_e: I64, win_s: I64, win_e: I64, host: HostSignals) -> IdleGaps:
    """The idle gaps within sorted, disjoint windows [win_s, win_e) around the merged busy intervals, each with
    its cause (``gap_causes``)."""
    gs, ge = subtract(np.asarray(win_s, np.int64), np.asarray(win_e, np.int64), busy_s, busy_e)
    return IdleGaps(gs, ge, gap_causes(gs, ge, host))


@dataclass(frozen=True)
class StepBreakdown:
    """Per step: device busy time and idle time by cause (module docstring), with the gaps behind them.

    ``available`` is False when the trace has no device activity: then there are no gaps and no parts.
    """

    steps: Steps
    gaps: IdleGaps  # every idle gap of the analysis window, cause decided over the whole gap
    available: bool
    busy_ns: I64  # per step: device busy without the collectives
    idle_ns: I64  # per step and cause: shape (len(steps), len(CAUSES))
    collective_ns: I64  # per step: device time only collectives cover

    def part_ns(self, cause: str) -> I64:
        """Idle ns of one cause per step."""
        return self.idle_ns[:, CAUSES.index(cause)]

    @property
    def busy_share(self) -> NDArray[np.float64]:
        """Per step: busy_ns / duration (0 for an empty step)."""
        d = self.steps.duration_ns
        return np.where(d > 0, self.busy_ns / np.maximum(d, 1), 0.0)

    def rows(self) -> list[dict[str, Any]]:
        """One dict per step: the step window (``index``, ``name``, ``start_ns``, ``host_end_ns``, ``end_ns``,
        ``duration_ns``) and, when ``available``, ``busy_ns``, ``collective_ns`` and ``<cause>_ns`` (else None)."""
        st = self.steps
        rows: list[dict[str, Any]] = []
        for i in range(len(st)):
            row: dict[str, Any] = {
                "index": int(st.index[i]),
                "name": st.names[i],
                "start_ns": int(st.start_ns[i]),
                "host_end_ns": int(st.host_end_ns[i]),
                "end_ns": int(st.end_ns[i]),
                "duration_ns": int(st.end_ns[i] - st.start_ns[i]),
                "busy_ns": int(self.busy_ns[i]) if self.available else None,
                "collective_ns": int(self.collective_ns[i]) if self.available else None,
            }
            for c, name in enumerate(CAUSES):
                row[f"{name}_ns"] = int(self.idle_ns[i, c]) if self.available else None
            rows.append(row)
        return rows


def step_breakdown(ctx: Context) -> StepBreakdown:
    """The gaps of the analysis window and the per-step breakdown of ``ctx`` (module docstring)."""
    st = ctx.steps
    n = len(st)
    if ctx.dev.size == 0:
        z = np.zeros(n, np.int64)
        return StepBreakdown(st, IdleGaps.empty(), False, z, np.zeros((n, len(CAUSES)), np.int64), z)
    gaps = classify(ctx.busy_s, ctx.busy_e, ctx.win_s, ctx.win_e, ctx.host)
    busy = overlap_per_window(ctx.busy_s, ctx.busy_e, st.start_ns, st.end_ns).astype(np.int64)
    work = overlap_per_window(ctx.work_s, ctx.work_e, st.start_ns, st.end_ns).astype(np.int64)
    idle = np.zeros((n, len(CAUSES)), np.int64)
    if n:
        for code in range(len(CAUSES)):
            m = gaps.cause == code
            if m.any():
                idle[:, code] = overlap_per_window(gaps.start_ns[m], gaps.end_ns[m], st.start_ns, st.end_ns)
    return StepBreakdown(st, gaps, True, work, idle, busy - work)
