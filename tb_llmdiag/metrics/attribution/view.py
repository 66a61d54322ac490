"""The ``attribution`` topic's dict: chains of names, source lines and what kind of cause an activity is.

- ``chain_names``: a node's chain as a user reads it, in call order (outermost first): the user annotations, the
  deepest Python frame of the user's own code (``file.py(123): fn``), the outermost and the innermost operator,
  and the node itself when it is a runtime/driver call or a frame; at most ``MAX_CHAIN`` names.
- ``source_line``: the deepest frame of the chain outside torch, transformers and other installed packages
  (``host_tree.LIBRARY``), as ``file:line``; None without Python frames. ``node_source``: the same, but for a node
  inside a backward operator whose forward operator the reader linked (``Trace.extra["fwd_links"]``), the source of
  its calls through that link (``source_lines.rows_source``: the forward operator's user frame), where they have one.
- ``cause_kind`` of an idle activity (first that applies), from the names and counts in its subtree only:
  ``allocator`` (at least half of its idle time inside allocator calls: cudaMalloc/cudaFree/hipMalloc/...,
  ``empty_cache``); ``sync`` (inside a blocking call or a device value read: ``sync_api`` / ``sync_op``);
  ``dataloader`` (a DataLoader ``__next__``); ``compile`` (torch.compile / dynamo frames or ranges);
  ``outside`` (host time inside it but outside any recorded operator, runtime call or frame holds at least
  half); ``cpu_work`` (operators or frames that launch no device work hold at least half); else ``launch``
  (operators that launch device work, at their own pace: launch and dispatch cost).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.metrics.capture.overhead import MODEL, host_speed_scale, python_record_ns
from tb_llmdiag.metrics.context import NAME_PATTERNS, Context, share
from tb_llmdiag.metrics.host.source_lines import rows_source, under_backward
from tb_llmdiag.metrics.host.tree import HostForest, user_frame
from tb_llmdiag.model import Kind, kind_mask

ALLOCATOR = re.compile(
    r"^(?:cuda|hip)(?:Malloc|Free)(?:Async|Host|Managed)?(?:_v\d+)?$|^(?:cuda|hip)HostAlloc$"
    r"|^cuMem(?:Alloc|Free|Create|Release|Map|Unmap|AddressReserve|AddressFree)\w*$|[(:]\s*empty_cache\b|\bempty_cache$|_cuda_emptyCache"
)
_SYNC = re.compile(NAME_PATTERNS["sync_api"] + "|" + NAME_PATTERNS["sync_op"])
_SYNC_CALL = re.compile(NAME_PATTERNS["sync_api"])  # the blocking runtime calls themselves
_LOADER = re.compile(NAME_PATTERNS["dataloader"])
_COMPILE = re.compile(
    r"Torch-Compiled Region|CompiledFunction|TorchDynamo|torch/_dynamo/|torch/_inductor/|^dynamo$"
    r"|\(dynamo_timed\)|compile_fx|entire_frame_compile"
)
MAX_CHAIN = 6
PAUSE_NS = 1_000_000  # a pause of the host: GPU idle time of at least this long in code no event records
DOMINANT_SHARE = 0.5


@dataclass(frozen=True)
class Attribution:
    """The per-node totals behind the topic (kept for the findings' evidence and the tests)."""

    forest: HostForest
    idle_ns: int  # idle time attributed to launching threads (the whole idle time of the window)
    outside_ns: int  # idle time on a launching thread with no event open
    pause_ns: int  # the part of it in stretches of at least PAUSE_NS
    self_idle: NDArray[np.float64]  # per node
    idle: NDArray[np.float64]  # per node, inclusive
    calls: NDArray[np.int64]
    host_ns: NDArray[np.float64]
    busy_self: NDArray[np.float64]  # per node: device time of the device events whose launch call is this node
    busy: NDArray[np.float64]  # per node, inclusive
    launches: NDArray[np.float64]  # per node, inclusive: launch calls
    step_idle: NDArray[np.float64]  # per (node ranked in ``order``, step): inclusive idle of the top nodes
    order: NDArray[np.intp]  # the nodes ranked by inclusive idle (step markers left out), at most ``top``


def source_line(forest: HostForest, names: tuple[str, ...], node: int) -> str | None:
    """The deepest user frame on the node's chain, as ``file:line``."""
    for i in reversed(forest.path(node)):
        if forest.node_kind[i] == Kind.PYTHON:
            f = user_frame(names[int(forest.node_name[i])])
            if f is not None:
                return f"{f[0]}:{f[1]}"
    return None


def node_source(ctx: Context, forest: HostForest, node: int) -> str | None:
    """``source_line``, through the backward link where the node runs inside a backward operator (module docstring)."""
    names = ctx.trace.events.names
    if "fwd_links" in ctx.trace.extra and under_backward(names[int(forest.node_name[i])] for i in forest.path(node)):
        got = rows_source(ctx, forest.rows[forest.node == node].astype(np.intp))
        if got is not None:
            return got
    return source_line(forest, names, node)


def chain_names(forest: HostForest, names: tuple[str, ...], node: int) -> list[str]:
    """The node's chain as a user reads it (module docstring), outermost first."""
    path = forest.path(node)
    kinds = [int(forest.node_kind[i]) for i in path]
    nm = [names[int(forest.node_name[i])] for i in path]
    keep = [j for j, k in enumerate(kinds) if k == Kind.ANNOTATION]
    frames = [j for j, k in enumerate(kinds) if k == Kind.PYTHON and user_frame(nm[j]) is not None]
    keep += frames[-1:]
    ops = [j for j, k in enumerate(kinds) if k == Kind.CPU_OP]
    keep += ops[:1] + ops[-1:]
    if kinds and kinds[-1] in (Kind.RUNTIME, Kind.DRIVER, Kind.PYTHON, Kind.STEP):
        keep.append(len(path) - 1)
    out = [nm[j] for j in sorted(set(keep))]
    return out[:2] + out[-(MAX_CHAIN - 2) :] if len(out) > MAX_CHAIN else out


def subtree(forest: HostForest, node: int) -> np.ndarray:
    """The node and its descendants (node numbers grow level by level)."""
    inside = np.zeros(forest.n_nodes, bool)
    inside[node] = True
    for d in range(int(forest.node_depth[node]) + 1, int(forest.node_depth.max()) + 1):
        lvl = np.flatnonzero(forest.node_depth == d)
        inside[lvl] = inside[forest.node_parent[lvl]]
    return np.flatnonzero(inside)


def _matching(names: tuple[str, ...], ids: np.ndarray, rx: re.Pattern[str]) -> np.ndarray:
    """Whether each name id's name matches ``rx``: searched once per distinct name."""
    uniq, inv = np.unique(ids, return_inverse=True)
    hit = np.fromiter((rx.search(names[int(i)]) is not None for i in uniq), bool, count=uniq.size)
    return hit[inv.reshape(-1)]


def composition(ctx: Context, a: Attribution, node: int) -> dict[str, Any]:
    """What holds a node's idle time: per cause family, the self idle of its subtree's nodes (ns and calls)."""
    names = ctx.trace.events.names
    f = a.forest
    sub = subtree(f, node)
    nm = f.node_name[sub]
    kind = f.node_kind[sub]
    si = a.self_idle[sub]
    fams = {
        "allocator": _matching(names, nm, ALLOCATOR),
        "sync": _matching(names, nm, _SYNC) & np.isin(kind, (Kind.RUNTIME, Kind.DRIVER, Kind.CPU_OP)),
        "dataloader": _matching(names, nm, _LOADER),
        "compile": _matching(names, nm, _COMPILE),
    }
    # an annotation's or a step's own time, or a frame's with nothing below it: host code no operator records
    bare = np.isin(kind, (Kind.ANNOTATION, Kind.STEP)) | ((kind == Kind.PYTHON) & (a.launches[sub] == 0))
    no_launch = np.isin(kind, (Kind.CPU_OP, Kind.PYTHON)) & (a.launches[sub] == 0) & ~bare
    out = {k: (float(si[m].sum()), int(a.calls[sub][m].sum())) for k, m in fams.items()}
    out["outside"] = (float(si[bare].sum()), 0)
    out["cpu_work"] = (float(si[no_launch].sum()), int(a.calls[sub][no_launch].sum()))
    return out


def cause_kind(comp: dict[str, Any], total: float) -> str:
    """The kind of cause of an activity from its composition (module docstring)."""
    if total <= 0:
        return "launch"
    for k in ("allocator", "sync", "dataloader", "compile", "outside", "cpu_work"):
        if comp[k][0] >= 0.5 * total:
            return k
    return "launch"


def _node_row(ctx: Context, a: Attribution, node: int, step_idle: np.ndarray | None) -> dict[str, Any]:
    f, names = a.forest, ctx.trace.events.names
    chain = chain_names(f, names, node)
    n_steps = ctx.n_steps
    calls = int(a.calls[node])
    row: dict[str, Any] = {
        "name": names[int(f.node_name[node])],
        "kind": Kind(int(f.node_kind[node])).name.lower(),
        "chain_text": " > ".join(chain),
        "source": node_source(ctx, f, node),
        "idle_ns": int(a.idle[node]),
        "idle_share": share(float(a.idle[node]), ctx.window_ns),
        "self_idle_ns": int(a.self_idle[node]),
        "calls": calls,
        "calls_per_step": calls / n_steps if n_steps else None,
        "mean_call_ns": int(a.host_ns[node] / calls) if calls else None,
        "launches_per_step": float(a.launches[node]) / n_steps if n_steps else None,
        "busy_ns": int(a.busy[node]),
        "steps_hit": None,
    }
    if step_idle is not None and n_steps:
        row["steps_hit"] = int((step_idle >= 0.01 * np.maximum(ctx.steps.duration_ns, 1)).sum())
    return row


def _dominant(a: Attribution) -> int | None:
    """The deepest node holding at least DOMINANT_SHARE of the attributed idle."""
    if a.idle_ns <= 0:
        return None
    hold = np.flatnonzero(a.idle >= DOMINANT_SHARE * a.idle_ns)
    return int(hold[np.argmax(a.forest.node_depth[hold])]) if hold.size else None


def _spread(a: Attribution) -> int:
    """How many leaves (by self idle) it takes to hold half of the attributed idle."""
    si = np.sort(a.self_idle)[::-1]
    return int(np.searchsorted(np.cumsum(si), DOMINANT_SHARE * a.idle_ns) + 1) if si.size else 0


def _family_top(ctx: Context, a: Attribution, rx: re.Pattern[str]) -> tuple[float, int, int | None]:
    """Self idle and calls of the nodes whose name matches ``rx``, and the activity around the one holding most
    (its parent node, or itself at a root)."""
    names = ctx.trace.events.names
    f = a.forest
    hit = np.flatnonzero(_matching(names, f.node_name, rx)) if f.n_nodes else np.zeros(0, np.intp)
    if hit.size == 0:
        return 0.0, 0, None
    lead = int(hit[np.argmax(a.self_idle[hit])])
    up = int(f.node_parent[lead])
    return float(a.self_idle[hit].sum()), int(a.calls[hit].sum()), up if up >= 0 else lead


def _bare_top(a: Attribution, names: tuple[str, ...]) -> int | None:
    """The range (or frame) holding the most idle time in its own time, with nothing recorded below it, where that
    time is a pause: at least ``PAUSE_NS`` per call on average and most of the range's idle time (not Python
    dispatch spread between the operators it calls); data-loader and compile ranges are left to their own rules."""
    f = a.forest
    own = a.self_idle
    calls = np.maximum(a.calls, 1)
    bare = np.flatnonzero(
        np.isin(f.node_kind, (Kind.ANNOTATION, Kind.PYTHON)) & (own >= PAUSE_NS * calls) & (2 * own >= a.idle)
    )
    # the data loader's and the compiler's own ranges have their own rules (dataloader_stall, recompilation)
    bare = bare[~(_matching(names, f.node_name[bare], _LOADER) | _matching(names, f.node_name[bare], _COMPILE))]
    return int(bare[np.argmax(own[bare])]) if bare.size else None


def recording_cost_inside(ctx: Context, a: Attribution, node: int) -> float:
    """The profiler's modelled cost of recording the host records that start inside the calls of one call-tree node
    (every host record of its thread, installed packages' frames included): operators and runtime calls at
    ``metrics.capture.overhead.MODEL``'s costs x ``host_speed_scale``, the Python tracer's records at ``python_record_ns``
    (0.8 us, measured on captures with and without ``with_stack``, or the trace's median record cycle when shorter). It lands in the node's
    own time, so an unprofiled run spends that much less there. Reads only the events within the calls' span (no
    per-kind row list is kept)."""
    ev, f = ctx.trace.events, a.forest
    pos = np.flatnonzero(f.node == node)
    if pos.size == 0:
        return 0.0
    rows = f.rows[pos]
    starts, ends = ev.ts_ns[rows], f.end_ns[pos]
    lo, hi = np.searchsorted(ev.ts_ns, (int(starts.min()), int(ends.max())), side="left").tolist()
    kind, tid, ts = ev.kind[lo:hi], ev.tid[lo:hi], ev.ts_ns[lo:hi]
    groups = ((Kind.CPU_OP,), (Kind.RUNTIME, Kind.DRIVER), (Kind.PYTHON,))
    counts = [0.0, 0.0, 0.0]
    for t in np.unique(ev.tid[rows]).tolist():  # the node's threads: one, usually
        own = ev.tid[rows] == t
        for i, kinds in enumerate(groups):
            at = ts[kind_mask(kind, kinds) & (tid == t)]
            n = np.searchsorted(at, ends[own], side="left") - np.searchsorted(at, starts[own], side="right")
            counts[i] += float(np.maximum(n, 0).sum())
    ops, calls, py = counts
    shapes = MODEL.shapes_per_op_ns if ctx.trace.metadata.get("record_shapes") is True else 0.0
    scaled = ops * (MODEL.cpu_op_ns + shapes) + calls * MODEL.runtime_ns
    return scaled * host_speed_scale(ctx) + py * python_record_ns(ctx)


def describe(ctx: Context, a: Attribution, *, top: int) -> dict[str, Any]:
    """The topic's dict (``metrics.attribution.topic``'s docstring)."""
    f, names = a.forest, ctx.trace.events.names
    rank = {int(n): i for i, n in enumerate(a.order)}
    nodes = [_node_row(ctx, a, int(n), a.step_idle[rank[int(n)]] if a.step_idle.size else None) for n in a.order]
    dom = _dominant(a)
    # no activity dominates: the one holding the most idle time in its own time (a root frame such as
    # ``<module>`` holds everything inclusively and says nothing)
    lead = dom if dom is not None else (int(np.argmax(a.self_idle)) if a.order.size else None)
    out: dict[str, Any] = {
        "available": True,
        "idle_ns": a.idle_ns,
        "idle_share": share(a.idle_ns, ctx.window_ns),
        "outside_ns": a.outside_ns,
        "outside_share": share(a.outside_ns, ctx.window_ns),
        "threads_count": int(f.tids.size),
        "nodes_count": f.n_nodes,
        "frames": bool((f.node_kind == Kind.PYTHON).any()),
        "dominant": dom is not None,
        "spread_nodes": _spread(a) if dom is None else None,
    }
    out.update(_lead_fields(ctx, a, lead, _steps_of(ctx, a, lead, rank)))
    alloc_ns, alloc_calls, alloc_at = _family_top(ctx, a, ALLOCATOR)
    n_steps = ctx.n_steps
    out["allocator_idle_ns"] = int(alloc_ns)
    out["allocator_idle_share"] = share(alloc_ns, ctx.window_ns)
    out["allocator_calls_per_step"] = alloc_calls / n_steps if n_steps else None
    out["allocator_chain"] = " > ".join(chain_names(f, names, alloc_at)) if alloc_at is not None else None
    out["allocator_source"] = node_source(ctx, f, alloc_at) if alloc_at is not None else None
    sync_ns, sync_calls, sync_at = _family_top(ctx, a, _SYNC_CALL)
    out["sync_idle_ns"] = int(sync_ns)
    out["sync_idle_share"] = share(sync_ns, ctx.window_ns)
    out["sync_chain"] = " > ".join(chain_names(f, names, sync_at)) if sync_at is not None else None
    out["sync_source"] = node_source(ctx, f, sync_at) if sync_at is not None else None
    bare = _bare_top(a, names)
    bare_ns = float(a.self_idle[bare]) if bare is not None else 0.0
    # the larger pause of the host in code no operator records: a range's own time, or stretches with none open
    if bare is not None and bare_ns >= a.pause_ns:
        out["unrecorded_ns"], out["unrecorded_chain"] = int(bare_ns), " > ".join(chain_names(f, names, bare))
        out["unrecorded_source"] = node_source(ctx, f, bare)
        out["unrecorded_profiler_ns"] = min(int(bare_ns), int(recording_cost_inside(ctx, a, bare)))
    else:  # stretches with nothing open: nothing is recorded there, so the profiler adds nothing of its own
        out["unrecorded_ns"], out["unrecorded_chain"], out["unrecorded_source"] = a.pause_ns, None, None
        out["unrecorded_profiler_ns"] = 0
    out["unrecorded_share"] = share(out["unrecorded_ns"], ctx.window_ns)
    out["nodes"] = nodes
    # the operators that launch the GPU's work themselves: each launch call's device time on its parent node
    launched = np.flatnonzero(a.busy_self > 0)
    up = f.node_parent[launched]
    by_op = np.bincount(np.where(up >= 0, up, launched), weights=a.busy_self[launched], minlength=f.n_nodes)
    ops = np.flatnonzero(by_op > 0)
    ops = ops[np.argsort(-by_op[ops], kind="stable")[:top]]
    busy_total = float(a.busy_self.sum())
    out["busy"] = [
        {
            "name": names[int(f.node_name[i])],
            "chain_text": " > ".join(chain_names(f, names, int(i))),
            "source": node_source(ctx, f, int(i)),
            "busy_ns": int(by_op[i]),
            "busy_share": share(float(by_op[i]), busy_total),
            "calls": int(a.calls[i]),
        }
        for i in ops
    ]
    return out


def _steps_of(ctx: Context, a: Attribution, node: int | None, rank: dict[int, int]) -> np.ndarray | None:
    """Per step idle of a ranked node, None for others (their steps hit are not counted)."""
    return a.step_idle[rank[node]] if node in rank and a.step_idle.size else None


def _lead_fields(ctx: Context, a: Attribution, lead: int | None, step_idle: np.ndarray | None) -> dict[str, Any]:
    """``top_*``: the activity that holds the GPU's idle time: the dominant one, else the one holding the most in
    its own time."""
    if lead is None:
        return {
            k: None
            for k in (
                "top_name",
                "top_chain",
                "top_source",
                "top_kind",
                "top_share",
                "top_ns",
                "top_calls_per_step",
                "top_mean_call_ns",
                "top_launches_per_step",
                "top_steps_hit",
                "top_parts",
            )
        }
    row = _node_row(ctx, a, lead, step_idle)
    comp = composition(ctx, a, lead)
    return {
        "top_name": row["name"],
        "top_chain": row["chain_text"],
        "top_source": row["source"],
        "top_kind": cause_kind(comp, float(a.idle[lead])),
        "top_share": row["idle_share"],
        "top_ns": row["idle_ns"],
        "top_calls_per_step": row["calls_per_step"],
        "top_mean_call_ns": row["mean_call_ns"],
        "top_launches_per_step": row["launches_per_step"],
        "top_steps_hit": row["steps_hit"],
        "top_parts": {k: {"idle_ns": int(v[0]), "calls": v[1]} for k, v in comp.items()},
    }
