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
