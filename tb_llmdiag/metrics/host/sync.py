"""Host synchronisation: calls that make the host wait for the device, and the GPU idle they cause.

Definitions (host events whose start lies in the analysis window):
- ``sync_calls``: runtime/driver calls that block until the device drains (cudaStreamSynchronize,
  cudaDeviceSynchronize, cudaEventSynchronize, synchronous cudaMemcpy, hip/cu equivalents); per API:
  count, total_ns, max_ns. ``sync_calls_per_step``.
- ``item_calls``: ``aten::_local_scalar_dense`` (what ``.item()``, ``float(t)``, ``if t:`` run) on device
  tensors, i.e. calls that issue a runtime call (a CPU scalar's ``.item()`` syncs nothing and is not
  counted); ``nonzero_calls``: ``aten::nonzero`` likewise (data-dependent output size). Per step likewise.
- ``syncs_per_step``: sync sites per step: blocking API calls, plus syncing operators that wrap none.
- ``blocked_ns``: length of the union of all those ranges within the window, less the time the device runs a
  collective meanwhile (``in_collective_ns``: the host then waits for peers or the transfer, which the
  ``communication`` topic and the job level account for, not the sync); ``blocked_share`` = blocked_ns /
  window_ns; ``longest_ns``: the longest single range.
- ``longest_call``: the name of that longest range's call; ``longest_call_kind``: ``"blocking copy"`` (a
  synchronous ``*Memcpy*``: it waits until the device has finished all queued work, then copies),
  ``"synchronize"`` (a ``*Synchronize`` call) or ``"device value read"`` (an operator such as ``.item()``);
  null without syncs.
- ``idle_after_sync_ns`` / ``idle_after_sync_share``: GPU idle gaps of cause ``sync`` (``metrics.idle``):
  what the GPU saw right after the syncs.
- ``saving_share`` = min(blocked_share, idle_share - idle.data_loader_share): what removing the syncs could
  save at most. Model: without syncs the host would never wait, so the step would take about
  max(step - blocked, GPU busy); the difference from the step is min(blocked, idle). A host-bound step
  loses its blocked time (the host could have been launching); a GPU-bound one only its idle time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, in_windows, per_step, share, touches_device
from tb_llmdiag.metrics.entry import COUNT, LOWER, NEITHER, NS, PER_STEP, SHARE, TEXT, Entry, Intro


def host_sync_metrics(ctx: Context, idle: dict[str, Any]) -> dict[str, Any]:
    ev = ctx.trace.events
    api = ctx.cache.family("sync_api")
    api = api[in_windows(ev.ts_ns[api], ctx.win_s, ctx.win_e)]
    ops = ctx.cache.family("sync_op")
    ops = ops[in_windows(ev.ts_ns[ops], ctx.win_s, ctx.win_e)]
    op_names = np.array([ev.names[i] for i in ev.name_id[ops]], dtype=object) if ops.size else np.zeros(0, object)
    item = int((op_names == "aten::_local_scalar_dense").sum())
    nonzero = int((op_names == "aten::nonzero").sum())
    # a sync site: each blocking API call, plus each syncing operator that wraps none (nested ops count once)
    leaf_ops = ops[~touches_device(ctx.cache, ops, family="sync_api")] if ops.size else ops
    outer = {"aten::item", "aten::is_nonzero", "aten::equal"}  # they wrap _local_scalar_dense
    leaf_ops = leaf_ops[[ev.names[i] not in outer for i in ev.name_id[leaf_ops]]] if leaf_ops.size else leaf_ops
    sites = int(api.size) + int(leaf_ops.size)
    rows = np.concatenate((api, ops))
    bs, be = merge(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows])
    blocked_all = int(overlap_per_window(bs, be, ctx.win_s, ctx.win_e).sum())
    in_coll = 0
    if len(ctx.coll):
        cs, ce = merge(ctx.coll.start_ns, ctx.coll.end_ns)
        us, ue = merge(np.concatenate((bs, cs)), np.concatenate((be, ce)))
        union = int(overlap_per_window(us, ue, ctx.win_s, ctx.win_e).sum())
        coll_ns = int(overlap_per_window(cs, ce, ctx.win_s, ctx.win_e).sum())
        in_coll = blocked_all + coll_ns - union  # |blocked ∩ collectives| within the window
    blocked = blocked_all - in_coll
    per_api: list[dict[str, Any]] = []
    for nid in np.unique(ev.name_id[api]):
        m = ev.name_id[api] == nid
        d = ev.dur_ns[api][m]
        per_api.append(
            {"name": ev.names[int(nid)], "count": int(m.sum()), "total_ns": int(d.sum()), "max_ns": int(d.max())}
        )
    per_api.sort(key=lambda r: -r["total_ns"])
    longest = int(np.argmax(ev.dur_ns[rows])) if rows.size else -1
    longest_call = ev.names[int(ev.name_id[rows[longest]])] if rows.size else None
    kind = (
        None
        if longest_call is None
        else "device value read"
        if longest >= api.size
        else "blocking copy"
        if "Memcpy" in longest_call
        else "synchronize"
    )
    idle_ns = idle.get("sync_ns") if idle.get("available") else None
    blocked_share = share(blocked, ctx.window_ns)
    saving = None
    if idle.get("available") and blocked_share is not None:
        saving = min(blocked_share, max(0.0, (idle.get("idle_share") or 0.0) - (idle.get("data_loader_share") or 0.0)))
    return {
        "available": True,
        "sync_calls": int(api.size),
        "sync_calls_per_step": per_step(int(api.size), ctx),
        "item_calls": item,
        "item_calls_per_step": per_step(item, ctx),
        "nonzero_calls": nonzero,
        "syncs_per_step": per_step(sites, ctx),
        "blocked_ns": int(blocked),
        "blocked_share": blocked_share,
        "in_collective_ns": int(in_coll),
        "in_collective_share": share(in_coll, ctx.window_ns),
        "longest_ns": int(ev.dur_ns[rows].max()) if rows.size else 0,
        "longest_call": longest_call,
        "longest_call_kind": kind,
        "by_api": per_api,
        "idle_after_sync_ns": idle_ns,
        "idle_after_sync_share": share(idle_ns, ctx.window_ns),
        "saving_share": saving,
    }


# The registry's entries of the `host_sync` topic: one row per key (metrics/entry.py); metrics/registry.py collects
# them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = ("`host_sync` (metrics/host/sync.py)", "")

# a declared table, one entry per row: left as laid out
# fmt: off
#: the shared part of the definitions of `host_sync.by_api[]`'s fields
_BY_API_ENTRY = "`by_api` entry: per sync API: `name`, `count`, `total_ns`, `max_ns`"

ENTRIES: tuple[Entry, ...] = (
    ("host_sync.blocked_ns", NS, LOWER, 0.05, "blocked",
     "length of the union of those ranges within the window (host time spent waiting), less `in_collective_ns` (changed in report schema 3)"),
    ("host_sync.in_collective_ns", NS, NEITHER, 0.05, "blocked in collective",
     "host time blocked in a sync while the device runs a collective kernel (waiting for peers or the transfer): not counted in `blocked_ns`, so `host_sync` never blames a sync for it"),
    ("host_sync.in_collective_share", SHARE, NEITHER, 0.1, "blocked in collective share", "in_collective_ns / window_ns"),
    ("host_sync.blocked_share", SHARE, LOWER, 0.1, "blocked share", "blocked_ns / window_ns"),
    ("host_sync.idle_after_sync_ns", NS, LOWER, 0.05, "idle after sync",
     "`idle.sync_ns`: the GPU idle right after syncs"),
    ("host_sync.idle_after_sync_share", SHARE, LOWER, 0.1, "idle after sync share", "`idle.sync_share`"),
    ("host_sync.item_calls", COUNT, NEITHER, 0.02, "item calls",
     "`aten::_local_scalar_dense` (what `.item()`, `float(t)`, `if t:` run) on device tensors: calls that "
     "issue a runtime call on their thread. A CPU scalar's `.item()` (an optimizer's step count) syncs "
     "nothing and is not counted"),
    ("host_sync.item_calls_per_step", PER_STEP, NEITHER, 0.05, "item calls per step", "item_calls / steps"),
    ("host_sync.longest_ns", NS, LOWER, 0.05, "longest", "the longest single range"),
    ("host_sync.longest_call", TEXT, NEITHER, 0, "longest call", "the name of the call of the longest range"),
    ("host_sync.longest_call_kind", TEXT, NEITHER, 0, "longest call kind",
     "`blocking copy` (a synchronous `*Memcpy*`: it waits for all queued device work, then copies), "
     "`synchronize` (a `*Synchronize` call) or `device value read` (an operator such as `.item()`)"),
    ("host_sync.nonzero_calls", COUNT, NEITHER, 0.02, "nonzero calls",
     "`aten::nonzero` calls that reach the device (data-dependent output size)"),
    ("host_sync.saving_share", SHARE, LOWER, 0.1, "saving share",
     "min(`blocked_share`, `idle.idle_share` - `idle.data_loader_share`): the most removing the syncs "
     "could save. Model: without syncs the host never waits, so a step takes about max(step - blocked, GPU "
     "busy); the difference is min(blocked, idle). A host-bound step loses its blocked time (the host "
     "could have been launching); a GPU-bound one only its idle time"),
    ("host_sync.sync_calls", COUNT, LOWER, 0.02, "sync calls",
     "blocking runtime/driver calls in the window: `cuda/hip {Stream,Device,Event,Ctx}Synchronize`, "
     "`cuStreamSynchronize`..., synchronous `cudaMemcpy`/`cuMemcpy*`"),
    ("host_sync.sync_calls_per_step", PER_STEP, LOWER, 0.05, "sync calls per step", "sync_calls / steps"),
    ("host_sync.syncs_per_step", PER_STEP, LOWER, 0.05, "syncs per step",
     "sync sites per step: blocking API calls, plus syncing operators that wrap none (`aten::item` / "
     "`is_nonzero` wrapping `_local_scalar_dense` count once)"),
    ("host_sync.by_api[].count", COUNT, NEITHER, 0.02, "sync api count",
     "`count` of each " + _BY_API_ENTRY),
    ("host_sync.by_api[].max_ns", NS, NEITHER, 0.05, "sync api max",
     "`max_ns` of each " + _BY_API_ENTRY),
    ("host_sync.by_api[].name", TEXT, NEITHER, 0, "sync api name",
     "`name` of each " + _BY_API_ENTRY),
    ("host_sync.by_api[].total_ns", NS, NEITHER, 0.05, "sync api total",
     "`total_ns` of each " + _BY_API_ENTRY),
)

# fmt: on
