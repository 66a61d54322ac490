"""Shared per-trace inputs of the metric topics, computed once by ``compute_metrics``.

Contract:
- ``Context.build(trace, steps)`` picks the rows every topic needs (device events, host runtime calls,
  host syncs, data-loader ranges) and the analysis window; topics read it and never mutate it.
- The analysis window is the union of the step windows (steps overlap when a step's GPU tail runs past the
  next step's host start). Without steps it is [first device event start, last device event end), or the
  whole trace when there is no device activity. Every ``*_share`` "of step time" divides by its length.
- Name-dependent flags are computed once per unique name (``NAME_PATTERNS``), then broadcast by ``name_id``.
- Computed once here and shared: the device-busy union (``busy_s``/``busy_e``: every consumer, the idle
  gaps, the step breakdown, the timeline and the summary, reads it), the host signals (``HostSignals``), the
  collectives (``coll``, ``metrics.comm.collectives``) and the busy union without them (``work_s``/``work_e``:
  device time spent on anything but a collective, what ``gpu_busy`` counts).
- Row selections several topics need (rows of some kinds, name families, the launch join by correlation id)
  live in ``Context.cache`` (a ``RowCache``), computed on first use, so none runs twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.classify import category_codes
from tb_llmdiag.intervals import merge
from tb_llmdiag.metrics.comm.collectives import Collectives, find_collectives
from tb_llmdiag.metrics.gpu.graphs import GRAPH_LAUNCH, GraphReplays, graph_replays, replay_queued_end
from tb_llmdiag.metrics.host.tree import HostForest
from tb_llmdiag.metrics.steps.windows import Steps
from tb_llmdiag.model import DEVICE_KINDS, Kind, Trace, kind_mask

I64 = NDArray[np.int64]
IDX = NDArray[np.intp]

#: Host-side name families, by regex (case-sensitive; applied to host rows only).
NAME_PATTERNS: dict[str, str] = {
    # runtime/driver calls that block the host until the device drains: CUDA and HIP synchronize calls, the
    # blocking (non-Async) copies (``hipMemcpyWithStream`` is PyTorch-on-ROCm's blocking copy: .item(), .cpu(),
    # .tolist()), and the driver-level equivalents
    "sync_api": r"^(?:cuda|hip)(?:Stream|Device|Event|Ctx)Synchroni[sz]e$|^cu(?:Stream|Ctx|Event)Synchronize$"
    r"|^(?:cuda|hip)Memcpy(?:WithStream|2D|3D|DtoH|HtoD|FromSymbol|ToSymbol)?$"
    r"|^cuMemcpy(?:DtoH|HtoD|2D|3D)?(?:_v2)?$",
    # operators that read a device value on the host (.item(), nonzero, bool(tensor)); RowCache.family keeps only
    # calls that issue a runtime call (a CPU tensor's .item() syncs nothing)
    "sync_op": r"^aten::(?:_local_scalar_dense|item|nonzero|is_nonzero|equal)$",
    # runtime/driver calls that submit device work (MTIA: ``runFunction - job_prep_and_submit_for_execution``)
    "launch_api": r"^(?:cuda|hip)(?:LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|GraphLaunch)(?:_ptsz|_v\d+)?$|^cuLaunch|^hip(?:Ext)?ModuleLaunchKernel$|^cudaLaunch"
    r"|^runFunction\b",
    # torch DataLoader iterator steps (record_function emitted by torch.utils.data when profiling)
    # (``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``): ``DataLoader`` then ``__next__``; the
    # lookahead pins the first ``DataLoader`` so a name repeating it is scanned once (#27: linear)
    "dataloader": r"^(?=((?s:.*?)DataLoader))\1(?s:.*)__next__",
}
_COMPILED = {k: re.compile(v) for k, v in NAME_PATTERNS.items()}

HOST_KINDS_FOR = {
    "sync_api": (Kind.RUNTIME, Kind.DRIVER),
    "sync_op": (Kind.CPU_OP,),
    "launch_api": (Kind.RUNTIME, Kind.DRIVER),
    "dataloader": (Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON),
}


def used_names(name_id: NDArray[np.int32], n_names: int) -> NDArray[np.intp]:
    """Distinct name ids among rows (``np.unique`` by counting: O(n), no hashing or sorting)."""
    return np.flatnonzero(np.bincount(name_id, minlength=n_names)) if name_id.size else np.zeros(0, np.intp)


def name_in(name_id: NDArray[np.int32], ids: IDX, n_names: int) -> NDArray[np.bool_]:
    """Whether each row's name id is one of ``ids``: one vectorised comparison per id when there are a few
    (a family usually matches a handful of names), else a per-name table."""
    if ids.size <= 8:
        out = np.zeros(name_id.shape, dtype=bool)
        for i in ids.tolist():
            out |= name_id == i
        return out
    flag = np.zeros(n_names, dtype=bool)
    flag[ids] = True
    return flag[name_id]


def _family_rows(cache: RowCache, family: str) -> IDX:
    """Row indices of host events of a name family, restricted to the kinds it applies to."""
    rows = cache.rows_named(_COMPILED[family], *HOST_KINDS_FOR[family])
    if family == "sync_op":  # only those that reach the device (see touches_device)
        rows = rows[touches_device(cache, rows)]
    return rows


_T = TypeVar("_T")


@dataclass(frozen=True)
class RowCache:
    """Row selections of one trace that several topics need, each computed on first use and kept, so a kind
    mask, a name-family scan or the launch join runs once per trace (``Context.cache``). Rows are ts-sorted indices into ``trace.events``."""

    trace: Trace
    _memo: dict[tuple[str, object], IDX] = field(default_factory=dict, repr=False, compare=False)
    _names: dict[tuple[int, ...], IDX] = field(default_factory=dict, repr=False, compare=False)
    _launchers: dict[int, tuple[IDX, IDX]] = field(default_factory=dict, repr=False, compare=False)
    _derived: dict[str, tuple[tuple[object, ...], Any]] = field(default_factory=dict, repr=False, compare=False)

    def derived(self, name: str, inputs: tuple[object, ...], compute: Callable[[], _T]) -> _T:
        """``compute()``, kept under ``name`` while it is asked for the same ``inputs`` (the same objects: they are
        held, so their ids are not reused), so that a value two consumers derive from the same inputs is computed once
        per trace: the step windows and communication breakdown of the ``communication`` topic, which the rank's
        summary (``jobs.rank_summary``) reads too."""
        got = self._derived.get(name)
        if got is not None and len(got[0]) == len(inputs) and all(a is b for a, b in zip(got[0], inputs)):
            return got[1]
        value = compute()
        self._derived[name] = (inputs, value)
        return value

    _kept: dict[str, object] = field(default_factory=dict, repr=False, compare=False)

    def keep(self, name: str, value: object) -> None:
        """Keep a topic's per-row result for the views above the metrics (the ``anatomy`` topic's part of each
        device row, ``metrics.anatomy.topic.PartRows``): held as long as the analysis is."""
        self._kept[name] = value

    def kept(self, name: str) -> object | None:
        """What a topic kept under ``name`` (``keep``), or None."""
        return self._kept.get(name)

    _forest: list[HostForest] = field(default_factory=list, repr=False, compare=False)

    def forest(self) -> HostForest:
        """The host call forest (``metrics.host.tree``), built on first use and kept until ``release_forest``: the
        early topics that read it (``attribution``, ``anatomy``) build it once, and the last of them releases it."""
        if not self._forest:
            self._forest.append(HostForest.build(self.trace))
        return self._forest[0]

    def release_forest(self) -> None:
        self._forest.clear()

    def drop_forest_ends(self) -> None:
        """Once the attribution, the one reader of the forest's per-position ends (``HostForest.end_ns``), is done: the
        kept forest without them (an empty column: a read of one fails), as the anatomy walks its parents and nodes
        only (2.2 MB on the 191 MB bench trace, held under the anatomy's walk otherwise)."""
        if self._forest:
            self._forest[0] = replace(self._forest[0], end_ns=np.zeros(0, np.int64))

    def kinds(self, *kinds: int) -> IDX:
        """Rows whose kind is one of ``kinds``."""
        key = ("kinds", tuple(sorted(int(k) for k in kinds)))
        if key not in self._memo:
            self._memo[key] = np.flatnonzero(kind_mask(self.trace.events.kind, kinds))
        return self._memo[key]

    def names_of(self, *kinds: int) -> tuple[NDArray[np.int32], IDX]:
        """The name ids of ``kinds(*kinds)``'s rows, and the distinct ones among them (``used_names``, kept:
        only the per-row ids are gathered again, so the cache holds no per-row array)."""
        key = tuple(sorted(int(k) for k in kinds))
        nid = self.trace.events.name_id[self.kinds(*kinds)]
        if key not in self._names:
            self._names[key] = used_names(nid, len(self.trace.events.names))
        return nid, self._names[key]

    def rows_named(self, rx: re.Pattern[str], *kinds: int) -> IDX:
        """``kinds(*kinds)``'s rows whose name matches ``rx`` (searched once per distinct name among them); the
        rows' name ids are gathered only when some name matches."""
        rows = self.kinds(*kinds)
        if rows.size == 0:
            return rows
        key = tuple(sorted(int(k) for k in kinds))
        nid = self.names_of(*kinds)[0] if key not in self._names else None
        names = self.trace.events.names
        used = self._names[key]
        hit = used[np.fromiter((rx.search(names[i]) is not None for i in used), dtype=bool, count=used.size)]
        if hit.size == 0:
            return rows[:0]
        return rows[name_in(self.trace.events.name_id[rows] if nid is None else nid, hit, len(names))]

    def family(self, family: str) -> IDX:
        """Rows of host events of a name family (a key of ``NAME_PATTERNS``), of the kinds it applies to."""
        key = ("family", family)
        if key not in self._memo:
            self._memo[key] = _family_rows(self, family)
        return self._memo[key]

    def launcher(self, rows: IDX) -> IDX:
        """Per row, the runtime/driver call with the same correlation id (the call that launched it), or -1.
        Kept per ``rows`` array (read-only): the topics ask it again and again for ``Context.dev``."""
        known = self._launchers.get(id(rows))
        if known is not None and known[0] is rows:  # the array itself is held, so its id is not reused
            return known[1]
        out = self._launcher(rows)
        out.flags.writeable = False
        self._launchers[id(rows)] = (rows, out)
        return out

    def _launcher(self, rows: IDX) -> IDX:
        ev = self.trace.events
        out = np.full(rows.size, -1, dtype=np.intp)
        if ("launch_join", None) not in self._memo:
            host = self.kinds(Kind.RUNTIME, Kind.DRIVER)
            host = host[ev.correlation[host] >= 0]
            host = host[np.argsort(ev.correlation[host], kind="stable")]
            self._memo[("launch_join", None)] = host
            self._memo[("launch_corr", None)] = ev.correlation[host]
        host = self._memo[("launch_join", None)]
        if host.size == 0 or rows.size == 0:
            return out
        h_corr = self._memo[("launch_corr", None)]
        c = ev.correlation[rows]
        pos = np.clip(np.searchsorted(h_corr, c), 0, h_corr.size - 1)
        hit = (h_corr[pos] == c) & (c >= 0)
        out[hit] = host[pos[hit]]
        return out


def touches_device(cache: RowCache, rows: IDX, *, family: str | None = None) -> NDArray[np.bool_]:
    """Whether each host range contains a runtime/driver call (of ``family`` when given) on the same thread.

    ``aten::_local_scalar_dense`` on a CPU tensor (``.item()`` of a CPU scalar, e.g. an optimizer's step
    count) launches nothing and syncs nothing; on a device tensor it issues a copy and a synchronize.
    """
    ev = cache.trace.events
    out = np.zeros(rows.size, dtype=bool)
    if rows.size == 0:
        return out
    rt = cache.family(family) if family is not None else cache.kinds(Kind.RUNTIME, Kind.DRIVER)
    if rt.size == 0:
        return out
    for tid in np.unique(ev.tid[rows]):  # a handful of threads
        mine = ev.tid[rows] == tid
        ts = np.sort(ev.ts_ns[rt[ev.tid[rt] == tid]])
        if ts.size == 0:
            continue
        lo = np.searchsorted(ts, ev.ts_ns[rows[mine]], side="left")
        hi = np.searchsorted(ts, ev.ts_ns[rows[mine]] + ev.dur_ns[rows[mine]], side="left")
        out[mine] = hi > lo
    return out


def in_windows(ts: I64, win_s: I64, win_e: I64) -> NDArray[np.bool_]:
    """Whether each time falls inside one of the sorted, disjoint windows [s, e)."""
    if win_s.size == 0:
        return np.zeros(ts.shape, dtype=bool)
    # the end of the last window starting at or before each time; a time before every window is compared with an end
    # below every time. Two per-time arrays at most (the index, then the ends): on the 191 MB bench trace's 227,000
    # operators a selection of the times in windows left five, and set the report's peak memory
    ends = np.searchsorted(win_s, ts, side="right")
    ends = np.concatenate(([np.iinfo(np.int64).min], win_e)).astype(np.int64, copy=False)[ends]
    return np.asarray(ts) < ends


@dataclass(frozen=True)
class HostSignals:
    """Host-side intervals and launch joins that explain idle gaps (``metrics.steps.gaps``): merged synchronising calls
    (``sync_api`` + ``sync_op``), merged DataLoader ranges, and per device event its start and the end of the
    call that launched it. Built once per analysis, in ``Context.build``."""

    sync_s: I64
    sync_e: I64
    dl_s: I64
    dl_e: I64
    dev_ts: I64  # device event starts, sorted
    dev_launch_end: I64  # end of the launch call of each device event, -1 when not joinable

    @staticmethod
    def of(cache: RowCache, graph: GraphReplays | None = None) -> HostSignals:
        """From the trace's events, through the rows ``cache`` (``Context.cache``) shares with the topics; the events
        a graph replays after its first one count as queued (``metrics.gpu.graphs``)."""
        ev = cache.trace.events
        sync = np.concatenate((cache.family("sync_api"), cache.family("sync_op")))
        sync_s, sync_e = merge(ev.ts_ns[sync], ev.ts_ns[sync] + ev.dur_ns[sync])
        dl = cache.family("dataloader")
        dl_s, dl_e = merge(ev.ts_ns[dl], ev.ts_ns[dl] + ev.dur_ns[dl])
        dev = cache.kinds(*DEVICE_KINDS)
        launch = cache.launcher(dev)
        hit = launch >= 0
        launch_end = np.full(dev.size, -1, dtype=np.int64)
        launch_end[hit] = ev.ts_ns[launch[hit]] + ev.dur_ns[launch[hit]]
        if graph is not None and graph.count:
            launch_end = replay_queued_end(ev.ts_ns[dev], launch_end, graph.is_graph, graph.replay)
        return HostSignals(sync_s, sync_e, dl_s, dl_e, ev.ts_ns[dev], launch_end)


@dataclass(frozen=True)
class Context:
    trace: Trace
    steps: Steps
    dev: IDX  # rows of device events (kernel, memcpy, memset), ts-sorted
    dev_cat: NDArray[np.uint8]  # classify.CATEGORIES code per dev row
    busy_s: I64  # merged device busy intervals (all devices, all streams)
    busy_e: I64
    win_s: I64  # analysis window (merged step windows), sorted and disjoint
    win_e: I64
    window_source: str  # "steps" | "device" | "trace"
    dev_in_win: NDArray[np.bool_]  # dev rows whose start lies in the window
    cache: RowCache  # shared row selections (kind rows, name families, launch join)
    host: HostSignals  # host intervals and launch joins behind the idle causes
    coll: Collectives  # collective kernels (NCCL/RCCL, DeepEP, XLA collectives)
    work_s: I64  # merged device busy intervals without the collectives
    work_e: I64
    graph: GraphReplays  # per dev row: replayed by a CUDA/HIP graph (``metrics.gpu.graphs``)

    @property
    def window_ns(self) -> int:
        return int((self.win_e - self.win_s).sum())

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @property
    def step_median_ns(self) -> int | None:
        return int(np.median(self.steps.duration_ns)) if len(self.steps) else None

    @staticmethod
    def build(trace: Trace, steps: Steps) -> Context:
        ev = trace.events
        cache = RowCache(trace)
        dev = cache.kinds(*DEVICE_KINDS)
        dev_cat = category_codes(ev.names, ev.kind[dev], ev.name_id[dev])
        busy_s, busy_e = merge(ev.ts_ns[dev], ev.ts_ns[dev] + ev.dur_ns[dev])
        if len(steps):
            win_s, win_e = merge(steps.start_ns, steps.end_ns)
            source = "steps"
        elif busy_s.size:
            win_s, win_e = busy_s[:1].copy(), busy_e[-1:].copy()
            source = "device"
        elif len(ev):
            win_s = np.array([int(ev.ts_ns.min())], np.int64)
            win_e = np.array([int(ev.end_ns.max())], np.int64)
            source = "trace"
        else:
            win_s = win_e = np.zeros(0, np.int64)
            source = "trace"
        dev_in_win = in_windows(ev.ts_ns[dev], win_s, win_e)
        coll = find_collectives(trace)
        graph = graph_replays(
            trace, dev, cache.launcher(dev), cache.rows_named(GRAPH_LAUNCH, Kind.RUNTIME, Kind.DRIVER)
        )
        if len(coll):
            work = dev[~np.isin(dev, coll.row)]
            work_s, work_e = merge(ev.ts_ns[work], ev.ts_ns[work] + ev.dur_ns[work])
        else:
            work_s, work_e = busy_s, busy_e
        return Context(
            trace=trace,
            steps=steps,
            dev=dev,
            dev_cat=dev_cat,
            busy_s=busy_s,
            busy_e=busy_e,
            win_s=win_s,
            win_e=win_e,
            window_source=source,
            dev_in_win=dev_in_win,
            cache=cache,
            host=HostSignals.of(cache, graph),
            coll=coll,
            work_s=work_s,
            work_e=work_e,
            graph=graph,
        )


def share(part: float | int | None, whole: float | int | None) -> float | None:
    """part / whole, or None when either is unknown or whole is 0."""
    if part is None or whole is None or whole <= 0:
        return None
    return float(part) / float(whole)


def per_step(total: float | int, ctx: Context) -> float | None:
    return float(total) / ctx.n_steps if ctx.n_steps else None
