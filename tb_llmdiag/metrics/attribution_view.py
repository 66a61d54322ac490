"""The ``attribution`` topic's dict: chains of names, source lines and what kind of cause an activity is.

- ``chain_names``: a node's chain as a user reads it: the user annotations (step markers left out), the deepest
  Python frame of the user's own code (``file.py(123): fn``), the outermost and the innermost operator, and the
  runtime/driver call at the bottom, outermost first.
- ``source_line``: the deepest frame of the chain outside torch, transformers and other installed packages
  (``USER_FRAME``), as ``file:line``; None without Python frames.
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
from typing import TYPE_CHECKING, Any

import numpy as np

from tb_llmdiag.metrics.context import NAME_PATTERNS, Context, share
from tb_llmdiag.model import Kind

if TYPE_CHECKING:
    from tb_llmdiag.metrics.attribution import Attribution
    from tb_llmdiag.metrics.host_tree import HostForest

ALLOCATOR = re.compile(
    r"^(?:cuda|hip)(?:Malloc|Free)(?:Async|Host|Managed)?(?:_v\d+)?$|^(?:cuda|hip)HostAlloc$"
    r"|^cuMem(?:Alloc|Free|Create|Release|Map|Unmap|AddressReserve|AddressFree)\w*$|[(:]\s*empty_cache\b|\bempty_cache$"
)
_SYNC = re.compile(NAME_PATTERNS["sync_api"] + "|" + NAME_PATTERNS["sync_op"])
_LOADER = re.compile(NAME_PATTERNS["dataloader"])
_COMPILE = re.compile(r"Torch-Compiled Region|CompiledFunction|TorchDynamo|torch/_dynamo/|torch/_inductor/")
_FRAME = re.compile(r"^(?P<file>[^()]+\.py)\((?P<line>\d+)\): ?(?P<fn>.*)$")
#: a frame outside the user's code: installed packages and the profiling harness
LIBRARY = re.compile(
    r"(?:^|/)(?:torch|transformers|peft|accelerate|trl|datasets|tokenizers|numpy|triton|deepspeed|lightning|"
    r"pytorch_lightning|tb_llmdiag|contextlib|threading|functools|typing|importlib)/|site-packages|dist-packages"
    r"|^<|/lib/python3|^python3\.\d+/"
)
MAX_CHAIN = 6
DOMINANT_SHARE = 0.5
DOMINANT_SHARE = 0.5


def user_frame(name: str) -> tuple[str, int, str] | None:
    """(file, line, function) of a Python frame of the user's code, else None."""
    m = _FRAME.match(name)
    if m is None or LIBRARY.search(m["file"]):
        return None
    return m["file"], int(m["line"]), m["fn"]


def source_line(forest: HostForest, names: tuple[str, ...], node: int) -> str | None:
    """The deepest user frame on the node's chain, as ``file:line``."""
    for i in reversed(forest.path(node)):
        if forest.node_kind[i] == Kind.PYTHON:
            f = user_frame(names[int(forest.node_name[i])])
            if f is not None:
                return f"{f[0]}:{f[1]}"
    return None


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
    return np.fromiter((rx.search(names[int(i)]) is not None for i in ids), bool, count=ids.size)


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
        "chain": chain,
        "chain_text": " > ".join(chain),
        "source": source_line(f, names, node),
        "idle_ns": int(a.idle[node]),
        "idle_share": share(float(a.idle[node]), ctx.window_ns),
        "self_idle_ns": int(a.self_idle[node]),
        "calls": calls,
        "calls_per_step": calls / n_steps if n_steps else None,
        "mean_call_ns": int(a.host_ns[node] / calls) if calls else None,
        "host_ns": int(a.host_ns[node]),
        "launches_per_step": float(a.launches[node]) / n_steps if n_steps else None,
        "busy_ns": int(a.busy[node]),
        "steps_hit": None,
        "step_median_idle_ns": None,
    }
    if step_idle is not None and n_steps:
        dur = ctx.steps.duration_ns
        row["steps_hit"] = int((step_idle >= 0.01 * np.maximum(dur, 1)).sum())
        row["step_median_idle_ns"] = int(np.median(step_idle))
    return row


def _dominant(a: Attribution) -> int | None:
    """The deepest node (step markers left out) holding at least DOMINANT_SHARE of the attributed idle."""
    if a.idle_ns <= 0:
        return None
    f = a.forest
    hold = np.flatnonzero((a.idle >= DOMINANT_SHARE * a.idle_ns) & (f.node_kind != Kind.STEP))
    return int(hold[np.argmax(f.node_depth[hold])]) if hold.size else None


def _spread(a: Attribution) -> int:
    """How many leaves (by self idle, step markers left out) it takes to hold half of the attributed idle."""
    si = np.sort(a.self_idle[a.forest.node_kind != Kind.STEP])[::-1]
    return int(np.searchsorted(np.cumsum(si), DOMINANT_SHARE * a.idle_ns) + 1) if si.size else 0


def describe(ctx: Context, a: Attribution, *, top: int) -> dict[str, Any]:
    """The topic's dict (``metrics.attribution``'s docstring)."""
    f, names = a.forest, ctx.trace.events.names
    rank = {int(n): i for i, n in enumerate(a.order)}
    nodes = [_node_row(ctx, a, int(n), a.step_idle[rank[int(n)]] if a.step_idle.size else None) for n in a.order]
    dom = _dominant(a)
    dominant = None
    if dom is not None:
        comp = composition(ctx, a, dom)
        dominant = _node_row(ctx, a, dom, None)
        dominant["cause_kind"] = cause_kind(comp, float(a.idle[dom]))
        dominant["parts"] = {k: {"idle_ns": int(v[0]), "calls": v[1]} for k, v in comp.items()}
    step_self = float(a.self_idle[f.node_kind == Kind.STEP].sum())
    outside_any = a.outside_ns + int(step_self)
    ops = np.flatnonzero((a.busy > 0) & (f.node_kind == Kind.CPU_OP))
    ops = ops[np.argsort(-a.busy[ops], kind="stable")[:top]]
    busy_total = float(a.busy_self.sum())
    frames = bool((f.node_kind == Kind.PYTHON).any())
    return {
        "available": True,
        "idle_ns": a.idle_ns,
        "idle_share": share(a.idle_ns, ctx.window_ns),
        "outside_ns": a.outside_ns,
        "outside_any_ns": outside_any,
        "outside_any_share": share(outside_any, ctx.window_ns),
        "threads_count": int(f.tids.size),
        "nodes_count": f.n_nodes,
        "frames": frames,
        "nodes": nodes,
        "dominant": dominant,
        "spread_nodes": _spread(a) if dominant is None else None,
        "busy": [
            {
                "name": names[int(f.node_name[i])],
                "chain": chain_names(f, names, int(i)),
                "chain_text": " > ".join(chain_names(f, names, int(i))),
                "source": source_line(f, names, int(i)),
                "busy_ns": int(a.busy[i]),
                "busy_share": share(float(a.busy[i]), busy_total),
                "calls": int(a.calls[i]),
            }
            for i in ops
        ],
        "other_threads": [],
    }
