"""Host ranges by name and what lies inside them: shared by the cause topics (compile, optimizer,
checkpointing, outliers, sync_storm).

- ``named_rows(ctx, pattern, kinds)``: host rows of the given kinds whose name matches a regex (evaluated
  once per unique name), ts-sorted.
- ``inside(ctx, rows, outer)``: whether each row starts inside one of the ``outer`` ranges of the same thread.
- ``launched_inside(ctx, outer)``: device rows whose launching runtime call (by correlation id) starts inside
  ``outer`` ranges: the device work those host ranges submitted.
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import merge
from tb_llmdiag.metrics.context import Context, in_windows

IDX = NDArray[np.intp]


def named_rows(ctx: Context, pattern: str | re.Pattern[str], kinds: tuple[int, ...]) -> IDX:
    return ctx.cache.rows_named(re.compile(pattern) if isinstance(pattern, str) else pattern, *kinds)


def inside(ctx: Context, rows: IDX, outer: IDX) -> NDArray[np.bool_]:
    """Whether each of ``rows`` starts inside one of the ``outer`` ranges on the same thread (the outer range's
    own row counts as inside itself when it is in both)."""
    ev = ctx.trace.events
    out = np.zeros(rows.size, dtype=bool)
    if rows.size == 0 or outer.size == 0:
        return out
    outer_tid = ev.tid[outer]
    threads = np.unique(outer_tid)  # a handful
    row_tid = ev.tid[rows] if threads.size > 1 else None  # gathered once for several threads
    for tid in threads:
        o = outer[outer_tid == tid]
        s, e = merge(ev.ts_ns[o], ev.ts_ns[o] + ev.dur_ns[o])
        mine = (ev.tid[rows] if row_tid is None else row_tid) == tid
        out[mine] = in_windows(ev.ts_ns[rows[mine]], s, e)
    return out


def launched_inside(ctx: Context, outer: IDX) -> IDX:
    """Device rows (of ``ctx.dev``) whose launch call starts inside the ``outer`` host ranges."""
    if outer.size == 0 or ctx.dev.size == 0:
        return ctx.dev[:0]
    launcher = ctx.cache.launcher(ctx.dev)
    has = launcher >= 0
    dev = ctx.dev[has]
    return dev[inside(ctx, launcher[has], outer)]


def launched_in_spans(ctx: Context, s: NDArray[np.int64], e: NDArray[np.int64], tid: NDArray[np.int64]) -> IDX:
    """Device rows whose launch call starts inside one of the spans [s, e) of thread ``tid``."""
    ev = ctx.trace.events
    if s.size == 0 or ctx.dev.size == 0:
        return ctx.dev[:0]
    launcher = ctx.cache.launcher(ctx.dev)
    has = launcher >= 0
    dev, la = ctx.dev[has], launcher[has]
    keep = np.zeros(dev.size, dtype=bool)
    for t in np.unique(tid):
        ms, me = merge(s[tid == t], e[tid == t])
        mine = ev.tid[la] == t
        keep[mine] = in_windows(ev.ts_ns[la[mine]], ms, me)
    return dev[keep]


def busy_ns(ctx: Context, rows: IDX) -> int:
    """Length of the union of the rows' intervals."""
    ev = ctx.trace.events
    if rows.size == 0:
        return 0
    s, e = merge(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows])
    return int((e - s).sum())


def step_of(ctx: Context, ts: NDArray[np.int64]) -> NDArray[np.intp]:
    """Per time, the position of the step whose host window [start, host_end) holds it, or -1."""
    st = ctx.steps
    out = np.full(ts.shape, -1, dtype=np.intp)
    if len(st) == 0 or ts.size == 0:
        return out
    order = np.argsort(st.start_ns, kind="stable")
    s = st.start_ns[order]
    if len(st) <= _STEP_SLICES and bool((ts[1:] >= ts[:-1]).all()):
        # sorted times (a kind's rows): each step holds one run of them, [its start, the next start or its host
        # end): found by two binary searches per step, not one per time
        lo = np.searchsorted(ts, s, side="left")
        hi = np.searchsorted(ts, np.minimum(np.append(s[1:], s[-1]), st.host_end_ns[order]), side="left")
        hi[-1] = np.searchsorted(ts, st.host_end_ns[order[-1]], side="left")
        for j, a, b in zip(order.tolist(), lo.tolist(), hi.tolist()):
            if b > a:
                out[a:b] = j
        return out
    i = np.searchsorted(s, ts, side="right") - 1
    ok = i >= 0
    j = order[np.clip(i, 0, None)]
    ok &= ts < st.host_end_ns[j]
    out[ok] = j[ok]
    return out


#: step_of fills per step (a Python loop) up to this many steps, else searches per time
_STEP_SLICES = 4096
