"""The ``anatomy`` topic's structure figures (#37): what the model's structure costs, where the recorded shapes and the
host call forest show it. Three sections, each null when the trace does not show what it needs:

- ``moe``: a MoE whose experts run as batched GEMMs over per-expert buffers (``aten::bmm`` / ``baddbmm`` with operands
  ``[E, C, H] x [E, H, F]``: E experts, C rows each, H the model's hidden size, C neither H nor F), and its router (a
  GEMM ``[T, H] x [H, E]``, T a token count of the forward pass; ``aten::topk`` over ``[T, E]``). ``experts`` = E;
  ``max_tokens_per_expert`` = the median C of the forward GEMMs (each expert's buffer holds C rows: the busiest
  expert's load where the experts are padded to it); ``assignments`` = A, the token-to-expert assignments (the index
  of ``aten::index_copy`` / ``index_add`` ``[.., A]``, or ``aten::bincount`` / ``histc`` ``[A]``, with A = k x T,
  1 <= k <= E), ``top_k`` = A / T, ``mean_tokens_per_expert`` = A / E, ``imbalance_ratio`` = max / mean (null
  without A). Device time per step (the anatomy's busy shares, ``time_ns``): ``expert_per_step_ns`` (the expert
  GEMMs, forward and backward: every bmm with E leading and a capacity C among its dimensions), ``router_per_step_ns``
  (the router's GEMMs and top-k), ``dispatch_per_step_ns`` (the index_copy / index_add / bincount that permute tokens
  to experts and back), ``padded_per_step_ns`` = the expert GEMMs' time x (1 - mean / C) of each (the rows above the
  mean load: the work a balanced router would not do), ``saving_share`` = padded time / the window.
- ``logits``: the loss over the vocabulary's full logits (training; the vocabulary V of the token embedding, at least
  ``VOCAB_MIN``): operators other than GEMMs whose first operand ends in V with at least ``MIN_LOGIT_ROWS`` rows
  (log-softmax forward and backward, NLL, the casts and copies of the logits). ``vocab``; ``logits_elements`` (the
  largest such operand); ``logits_dtype`` (of the log-softmax kernels' names: ``LOGITS_DTYPES``) and
  ``logits_bytes`` (elements x its size); ``vocab_work_per_step_ns`` (their kernels' time), ``casts_per_step_ns``
  (the casts and copies among them), ``softmax_pass_per_step_ns`` (the forward log-softmax: the one pass over the
  logits a fused chunked linear + cross-entropy keeps); ``saving_share`` = (vocab work - that pass) / the window.
- ``graphs``: torch.compile's regions and graphs (the annotations ``Torch-Compiled Region: F/C``,
  ``## Call CompiledFxGraph <hash> ##``, ``CompiledFunction``): ``regions_per_step``, ``graph_calls_per_step``,
  ``autograd_graphs_per_step`` (``CompiledFunction`` forward calls), ``breaks_per_step`` (regions entered inside
  another region on the same thread: dynamo's resume functions after a graph break), ``break_op`` (the operator that
  reads a device value, ``BREAK_OPS``, most often called inside a region but outside any graph call: the
  data-dependent op the graph breaks at), ``break_ops_per_step``, ``break_source`` (its user frame, ``file:line``,
  where ``with_stack`` recorded one), ``between_graphs_idle_per_step_ns`` (the device's idle gaps, within the window,
  from the end of one graph call's work to the start of another graph call's: the cost of leaving and re-entering
  the compiled code) and ``between_graphs_share`` (of the window). Null without compiled graph calls.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import covered_before, merge
from tb_llmdiag.metrics.anatomy.parts import label_of
from tb_llmdiag.metrics.attribution.view import source_line
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.entry import BYTES, COUNT, LOWER, NEITHER, NS, PER_STEP, RATIO, SHARE, TEXT, Entry
from tb_llmdiag.metrics.host.tree import HostForest
from tb_llmdiag.metrics.throughput.shapes import per_pair
from tb_llmdiag.model import Kind

IDX = NDArray[np.intp]
F64 = NDArray[np.float64]
BMM_OPS = ("aten::bmm", "aten::baddbmm")
GEMM2_OPS = ("aten::mm", "aten::addmm", "aten::matmul")
DISPATCH_OPS = ("aten::index_copy", "aten::index_copy_", "aten::index_add", "aten::index_add_")
COUNT_OPS = ("aten::bincount", "aten::histc")
CAST_NAMES = ("aten::to", "aten::_to_copy", "aten::copy_")
SOFTMAX_FWD = ("aten::_log_softmax", "aten::log_softmax")
#: a vocabulary at least this large makes the loss over full logits worth a look
VOCAB_MIN = 32_000
#: a logits operand has at least this many rows (token positions): the loss of a training step, not a sampler's row
MIN_LOGIT_ROWS = 64
#: the log-softmax kernels' names -> the logits' data type (PyTorch's ``cunn_SoftMaxForward<ILP, scalar, accscalar,
#: outscalar, ...>``)
LOGITS_DTYPES: tuple[tuple[str, str], ...] = (
    ("fp32", r"SoftMax\w*<\d+, float, float"),
    ("bf16", r"SoftMax\w*<\d+, c10::BFloat16"),
    ("fp16", r"SoftMax\w*<\d+, c10::Half"),
)
DTYPE_SIZE = {"fp32": 4, "bf16": 2, "fp16": 2}
REGION = re.compile(r"^Torch-Compiled Region: \d+/\d+$")
GRAPH_CALL = re.compile(r"^## Call CompiledFxGraph \w+ ##$")
#: host operators that read a device value (a sync): the data-dependent ops a graph breaks at
BREAK_OPS = re.compile(r"^aten::(?:_local_scalar_dense|item|nonzero|is_nonzero|unique\w*|masked_select|equal)$")


def _dims2(d: list[list[int]], name: str) -> list[list[int]]:
    return d[1:3] if name == "aten::addmm" else d[:2]


def _expert_form(hidden: int) -> tuple[Any, Any]:
    """(E of a forward-form expert GEMM ``[E, C, H] x [E, H, F]``, else 0; its C)."""

    def ok(name: str, d: list[list[int]]) -> tuple[int, int] | None:
        if name not in BMM_OPS:
            return None
        ab = _dims2(d, name)
        if len(ab) < 2:
            return None
        a, b = ab
        if len(a) != 3 or len(b) != 3 or a[0] != b[0] or a[0] < 2 or a[2] != b[1] or b[1] != hidden:
            return None
        if a[1] in (hidden, b[2]) or a[1] <= a[0]:
            return None
        return int(a[0]), int(a[1])

    def e_of(name: str, d: list[list[int]]) -> float:
        r = ok(name, d)
        return float(r[0]) if r else 0.0

    def c_of(name: str, d: list[list[int]]) -> float:
        r = ok(name, d)
        return float(r[1]) if r else 0.0

    return e_of, c_of


def _mode(values: F64) -> int | None:
    v = values[values > 0].astype(np.int64)
    if v.size == 0:
        return None
    u, c = np.unique(v, return_counts=True)
    return int(u[np.argmax(c)])


def _moe_pairs(ev: Any, rows: IDX, hidden: int, tokens: frozenset[int]) -> dict[str, Any] | None:
    """Per shaped operator row of ``rows``: the experts' capacity dimension (0: not an expert GEMM), router, dispatch
    flags; and E, A, T. None without expert GEMMs."""
    e_of, c_of = _expert_form(hidden)
    e_vals = per_pair(ev, rows, e_of)
    n_exp = _mode(e_vals)
    if n_exp is None:
        return None
    caps = {int(c) for c in per_pair(ev, rows, c_of)[e_vals == n_exp].tolist()}
    fwd_caps = sorted(int(c) for c in per_pair(ev, rows, c_of)[e_vals == n_exp].tolist())

    def cap_of(name: str, d: list[list[int]]) -> float:
        ab = _dims2(d, name)
        if name not in BMM_OPS or len(ab) < 2:
            return 0.0
        a, b = ab
        if len(a) != 3 or len(b) != 3 or a[0] != n_exp or b[0] != n_exp:
            return 0.0
        return float(next((x for x in (a[1], a[2], b[1]) if x in caps), 0))

    def router(name: str, d: list[list[int]]) -> float:
        if name == "aten::topk":
            return float(bool(d) and len(d[0]) == 2 and d[0][1] == n_exp and d[0][0] in tokens)
        if name == "aten::linear":
            return float(len(d) > 1 and list(d[1]) == [n_exp, hidden])
        ab = _dims2(d, name)
        if name not in GEMM2_OPS or len(ab) < 2 or len(ab[0]) != 2 or len(ab[1]) != 2:
            return 0.0
        # [T, H] x [H, E] and its backward: [T, E] x [E, H], [E, T] x [T, H]
        dims = sorted([*ab[0], *ab[1]])
        forms = ((t, t, n_exp, hidden) for t in tokens)
        forms2 = ((t, n_exp, n_exp, hidden) for t in tokens)
        forms3 = ((t, hidden, hidden, n_exp) for t in tokens)
        return float(any(dims == sorted(f) for f in (*forms, *forms2, *forms3)))

    def assigned(name: str, d: list[list[int]]) -> float:
        if name in DISPATCH_OPS and len(d) > 2 and len(d[2]) == 1:
            return float(d[2][0])
        if name in COUNT_OPS and d and len(d[0]) == 1:
            return float(d[0][0])
        return 0.0

    a_vals = per_pair(ev, rows, assigned)
    n_assign = None
    n_tokens = None
    for a in sorted({int(x) for x in a_vals[a_vals > 0].tolist()}, reverse=True):
        t = next((t for t in sorted(tokens, reverse=True) if a % t == 0 and 1 <= a // t <= n_exp), None)
        if t is not None:
            n_assign, n_tokens = a, t
            break
    return {
        "experts": n_exp,
        "caps": fwd_caps,
        "cap": per_pair(ev, rows, cap_of),
        "router": per_pair(ev, rows, router) > 0,
        "dispatch": a_vals > 0,
        "assignments": n_assign,
        "tokens": n_tokens,
    }


def moe_figures(
    ctx: Context, shape_row: IDX, w: F64, hidden: int | None, tokens: frozenset[int]
) -> tuple[NDArray[np.bool_], dict[str, Any] | None]:
    """Per device row whether it is the MoE's (router, dispatch, experts), and the ``moe`` section (module docstring)."""
    n = shape_row.size
    none = np.zeros(n, bool)
    has = shape_row >= 0
    if hidden is None or not has.any():
        return none, None
    ev = ctx.trace.events
    u, inv = np.unique(shape_row[has], return_inverse=True)
    p = _moe_pairs(ev, u, hidden, tokens)
    if p is None:
        return none, None
    cap = np.zeros(n)
    cap[has] = p["cap"][inv]
    router = np.zeros(n, bool)
    router[has] = p["router"][inv]
    dispatch = np.zeros(n, bool)
    dispatch[has] = p["dispatch"][inv]
    expert = cap > 0
    steps = max(len(ctx.steps), 1)
    a, e = p["assignments"], p["experts"]
    mean = a / e if a else None
    max_tokens = float(np.median(p["caps"])) if p["caps"] else None
    padded = float((w[expert] * (1.0 - mean / cap[expert]).clip(0.0, 1.0)).sum()) if mean else None
    window = ctx.window_ns
    return expert | router | dispatch, {
        "experts": e,
        "tokens": p["tokens"],
        "assignments": a,
        "top_k": a // p["tokens"] if a and p["tokens"] else None,
        "max_tokens_per_expert": max_tokens,
        "mean_tokens_per_expert": mean,
        "imbalance_ratio": max_tokens / mean if mean and max_tokens else None,
        "expert_per_step_ns": int(round(w[expert].sum() / steps)),
        "router_per_step_ns": int(round(w[router & ~expert].sum() / steps)),
        "dispatch_per_step_ns": int(round(w[dispatch & ~expert & ~router].sum() / steps)),
        "padded_per_step_ns": int(round(padded / steps)) if padded is not None else None,
        "saving_share": padded / window if padded is not None and window > 0 else None,
    }


def logits_figures(
    ctx: Context, rows: IDX, shape_row: IDX, w: F64, vocab: int | None, training: bool
) -> dict[str, Any] | None:
    """The ``logits`` section (module docstring); None without a vocabulary-sized loss."""
    has = shape_row >= 0
    if not training or vocab is None or vocab < VOCAB_MIN or not has.any():
        return None
    ev = ctx.trace.events
    u, inv = np.unique(shape_row[has], return_inverse=True)

    def elements(name: str, d: list[list[int]]) -> float:
        if name in BMM_OPS or name in GEMM2_OPS or name in ("aten::linear", "aten::embedding") or not d:
            return 0.0
        sizes = [int(np.prod(o[:-1])) for o in d if len(o) > 1 and o[-1] == vocab]
        rows_ = max(sizes, default=0)
        return float(rows_ * vocab) if rows_ >= MIN_LOGIT_ROWS else 0.0

    el = np.zeros(rows.size)
    el[has] = per_pair(ev, u, elements)[inv]
    hit = el > 0
    if not hit.any():
        return None
    names = ev.names
    op_name = np.array([names[i] for i in ev.name_id[np.maximum(shape_row, 0)].tolist()], dtype=object)
    cast = hit & np.isin(op_name, CAST_NAMES)
    fwd = hit & np.isin(op_name, SOFTMAX_FWD)
    kid = np.unique(ev.name_id[rows[fwd]])
    dtypes = Counter(label_of(LOGITS_DTYPES, names[i]) for i in kid.tolist())
    dtypes.pop(None, None)
    dtype = dtypes.most_common(1)[0][0] if dtypes else None
    steps = max(len(ctx.steps), 1)
    vocab_ns, pass_ns = float(w[hit].sum()), float(w[fwd].sum())
    window = ctx.window_ns
    n_el = int(el.max())
    return {
        "vocab": vocab,
        "logits_elements": n_el,
        "logits_dtype": dtype,
        "logits_bytes": n_el * DTYPE_SIZE[dtype] if dtype else None,
        "vocab_work_per_step_ns": int(round(vocab_ns / steps)),
        "casts_per_step_ns": int(round(float(w[cast].sum()) / steps)),
        "softmax_pass_per_step_ns": int(round(pass_ns / steps)),
        "saving_share": max(vocab_ns - pass_ns, 0.0) / window if window > 0 else None,
    }


def _nested(ts: NDArray[np.int64], end: NDArray[np.int64], tid: NDArray[Any]) -> NDArray[np.bool_]:
    """Per interval: whether it starts inside an earlier interval of the same thread."""
    order = np.lexsort((ts, tid))
    out = np.zeros(ts.size, bool)
    t, s, e = tid[order], ts[order], end[order]
    for k in np.unique(t).tolist():
        m = np.flatnonzero(t == k)
        if m.size < 2:
            continue
        prev_end = np.maximum.accumulate(e[m])[:-1]
        out[order[m[1:]]] = s[m[1:]] < prev_end
    return out


def _call_of(ev: Any, calls: IDX, launch: IDX) -> IDX:
    """Per launch row (-1: none): the graph call (an index into ``calls``) whose range on the same thread holds it."""
    out = np.full(launch.size, -1, np.intp)
    ok = launch >= 0
    lt, ltid = ev.ts_ns[np.maximum(launch, 0)], ev.tid[np.maximum(launch, 0)]
    for k in np.unique(ev.tid[calls]).tolist():
        c = calls[ev.tid[calls] == k]
        c = c[np.argsort(ev.ts_ns[c], kind="stable")]
        m = np.flatnonzero(ok & (ltid == k))
        i = np.searchsorted(ev.ts_ns[c], lt[m], side="right") - 1
        good = (i >= 0) & (lt[m] <= ev.ts_ns[c[np.maximum(i, 0)]] + ev.dur_ns[c[np.maximum(i, 0)]])
        out[m[good]] = _index_in(calls, c[i[good]])
    return out


def _index_in(calls: IDX, picked: IDX) -> IDX:
    order = np.argsort(calls)
    return order[np.searchsorted(calls[order], picked)]


def _covered(
    s: NDArray[np.int64], e: NDArray[np.int64], a: NDArray[np.int64], b: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Per interval [a, b): its length covered by the sorted, disjoint blocks [s, e)."""
    out: NDArray[np.int64] = covered_before(s, e, b) - covered_before(s, e, a)
    return out


def _between_graphs(ctx: Context, rows: IDX, call: IDX) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The device's idle gaps, cut to the window, from one graph call's work to another's (module docstring)."""
    ev = ctx.trace.events
    bs, be = ctx.busy_s, ctx.busy_e
    empty = np.zeros(0, np.int64)
    if bs.size < 2 or ctx.win_s.size == 0:
        return empty, empty
    ts, end = ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]
    iv = np.searchsorted(bs, ts, side="right") - 1
    ok = iv >= 0
    iv, ts, end, call = iv[ok], ts[ok], end[ok], call[ok]
    last = np.full(bs.size, -1, np.intp)
    first = np.full(bs.size, -1, np.intp)
    o = np.lexsort((end, iv))
    last[iv[o]] = call[o]  # the last-ending row of each busy interval wins
    o = np.lexsort((-ts, iv))
    first[iv[o]] = call[o]  # the first-starting row wins
    a, b = last[:-1], first[1:]
    inter = (a >= 0) & (b >= 0) & (a != b)
    gs, ge = be[:-1][inter], bs[1:][inter]
    w = np.searchsorted(ctx.win_s, gs, side="right") - 1
    keep = w >= 0
    gs, ge, w = gs[keep], ge[keep], w[keep]
    return gs, np.minimum(ge, ctx.win_e[w]).clip(min=gs)


def _broken_spans(ev: Any, regions: IDX, nested: NDArray[np.bool_]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The merged spans of the outermost regions that hold a nested (resumed) region on their thread: the compiled
    frames a graph break split."""
    top, inner = regions[~nested], regions[nested]
    hold = np.zeros(top.size, bool)
    for k in np.unique(ev.tid[inner]).tolist():
        t = np.flatnonzero(ev.tid[top] == k)
        t = t[np.argsort(ev.ts_ns[top[t]], kind="stable")]
        i = np.searchsorted(ev.ts_ns[top[t]], ev.ts_ns[inner[ev.tid[inner] == k]], side="right") - 1
        hold[t[i[i >= 0]]] = True
    s = ev.ts_ns[top[hold]]
    return merge(s, s + ev.dur_ns[top[hold]])


def graph_figures(ctx: Context, forest: HostForest, rows: IDX, launch: IDX) -> dict[str, Any] | None:
    """The ``graphs`` section (module docstring); None without compiled graph calls in the window."""
    ev = ctx.trace.events
    names = ev.names
    is_region = np.fromiter((REGION.match(n) is not None for n in names), bool, count=len(names))
    is_call = np.fromiter((GRAPH_CALL.match(n) is not None for n in names), bool, count=len(names))
    is_fn = np.fromiter((n == "CompiledFunction" for n in names), bool, count=len(names))
    is_break = np.fromiter((BREAK_OPS.match(n) is not None for n in names), bool, count=len(names))
    host = np.flatnonzero(np.isin(ev.kind, (Kind.ANNOTATION, Kind.CPU_OP)))
    host = host[(ev.ts_ns[host] >= ctx.win_s[0]) & (ev.ts_ns[host] < ctx.win_e[-1])] if ctx.win_s.size else host[:0]
    nid = ev.name_id[host]
    calls, regions = host[is_call[nid]], host[is_region[nid]]
    if calls.size == 0:
        return None
    steps = max(len(ctx.steps), 1)
    nested = _nested(ev.ts_ns[regions], ev.ts_ns[regions] + ev.dur_ns[regions], ev.tid[regions])
    # operators that read a device value inside a region and outside every graph call
    brk = host[is_break[nid] & (ev.kind[host] == Kind.CPU_OP)]
    in_region = _call_of(ev, regions, brk) >= 0 if regions.size else np.zeros(brk.size, bool)
    in_call = _call_of(ev, calls, brk) >= 0
    brk = brk[in_region & ~in_call]
    break_op, source = None, None
    if brk.size:
        ids, cnt = np.unique(ev.name_id[brk], return_counts=True)
        top = int(ids[np.argmax(cnt)])
        break_op = names[top]
        brk = brk[ev.name_id[brk] == top]
        pos = np.flatnonzero(forest.rows == brk[0]) if len(forest) else np.zeros(0, np.intp)
        source = source_line(forest, names, int(forest.node[pos[0]])) if pos.size else None
    call = _call_of(ev, calls, launch)
    gs, ge = _between_graphs(ctx, rows, call)
    between = float((ge - gs).sum())
    # the GPU's idle time while the host runs a broken frame (its graphs, the code between them, the resumed
    # regions), and the gaps between graphs elsewhere (the backward's graphs, one per forward graph)
    fs, fe = _broken_spans(ev, regions, nested)
    fs, fe = merge(np.clip(fs, ctx.win_s[0], ctx.win_e[-1]), np.clip(fe, ctx.win_s[0], ctx.win_e[-1]))
    in_frames = float((fe - fs).sum() - _covered(ctx.busy_s, ctx.busy_e, fs, fe).sum()) if fs.size else 0.0
    outside = float((ge - gs - _covered(fs, fe, gs, ge)).sum()) if fs.size else between
    broken = in_frames + outside if nested.any() else 0.0
    window = ctx.window_ns
    return {
        "regions_per_step": regions.size / steps,
        "graph_calls_per_step": calls.size / steps,
        "autograd_graphs_per_step": int(is_fn[nid].sum()) / steps,
        "breaks_per_step": int(nested.sum()) / steps,
        "break_op": break_op,
        "break_ops_per_step": brk.size / steps,
        "break_source": source,
        "between_graphs_idle_per_step_ns": int(round(between / steps)),
        "between_graphs_share": between / window if window > 0 else None,
        "broken_idle_per_step_ns": int(round(broken / steps)),
        "broken_share": broken / window if window > 0 else None,
    }


# the registry's rows of these figures (metrics/entry.py); anatomy.py's ENTRIES end with them
# fmt: off
ENTRIES: tuple[Entry, ...] = (
    ("anatomy.moe.experts", COUNT, NEITHER, 0, "experts", "the experts E of a MoE whose experts run as batched GEMMs `[E, C, H] x [E, H, F]` (null section: none seen)"),
    ("anatomy.moe.tokens", COUNT, NEITHER, 0, "tokens routed", "tokens T of one MoE layer's forward (a token count of the forward pass dividing the assignments)"),
    ("anatomy.moe.assignments", COUNT, NEITHER, 0, "token-expert assignments", "A = top_k x T, the index length of the dispatch (`index_copy` / `index_add` / `bincount`); null when no dispatch shape is recorded"),
    ("anatomy.moe.top_k", COUNT, NEITHER, 0, "experts per token", "A / T"),
    ("anatomy.moe.max_tokens_per_expert", RATIO, NEITHER, 0.05, "tokens per expert (busiest)", "the median rows C of the forward expert GEMMs: each expert's buffer holds C rows, the busiest expert's load where experts are padded to it"),
    ("anatomy.moe.mean_tokens_per_expert", RATIO, NEITHER, 0.05, "tokens per expert (mean)", "A / E"),
    ("anatomy.moe.imbalance_ratio", RATIO, LOWER, 0.1, "expert load imbalance", "max / mean tokens per expert; null without the assignments"),
    ("anatomy.moe.expert_per_step_ns", NS, NEITHER, 0.05, "expert GEMMs per step", "device time per step of the expert GEMMs, forward and backward (bmm's with E leading and a capacity among their dimensions)"),
    ("anatomy.moe.router_per_step_ns", NS, NEITHER, 0.05, "router per step", "device time per step of the router's GEMMs ([T, H] x [H, E]) and top-k"),
    ("anatomy.moe.dispatch_per_step_ns", NS, NEITHER, 0.05, "token permutation per step", "device time per step of the dispatch and combine (`index_copy`, `index_add`, `bincount`)"),
    ("anatomy.moe.padded_per_step_ns", NS, LOWER, 0.05, "padded expert work per step", "the expert GEMMs' time per step x (1 - mean / C) of each: the rows above the mean load"),
    ("anatomy.moe.saving_share", SHARE, LOWER, 0.1, "balanced-load saving", "the padded expert work / the analysis window: what a balanced router could save"),
    ("anatomy.logits.vocab", COUNT, NEITHER, 0, "vocabulary", "the token embedding's vocabulary V (training runs with V >= 32,000 only; null section otherwise)"),
    ("anatomy.logits.logits_elements", COUNT, NEITHER, 0.05, "logits elements", "the largest non-GEMM operand ending in V with at least 64 rows: the full logits"),
    ("anatomy.logits.logits_dtype", TEXT, NEITHER, 0, "logits data type", "the log-softmax kernels' data type (`fp32`: logits upcast before the loss); null when the names do not say"),
    ("anatomy.logits.logits_bytes", BYTES, LOWER, 0.05, "logits memory", "logits elements x the data type's size: one copy of the full logits"),
    ("anatomy.logits.vocab_work_per_step_ns", NS, LOWER, 0.05, "vocabulary-wide work per step", "device time per step of the non-GEMM operators over the full logits (log-softmax forward/backward, NLL, casts, copies)"),
    ("anatomy.logits.casts_per_step_ns", NS, LOWER, 0.05, "logits casts per step", "the casts and copies of the logits among them"),
    ("anatomy.logits.softmax_pass_per_step_ns", NS, NEITHER, 0.05, "log-softmax pass per step", "the forward log-softmax's time per step: the pass over the logits a fused chunked loss keeps"),
    ("anatomy.logits.saving_share", SHARE, LOWER, 0.1, "fused-loss saving", "(vocabulary-wide work - the log-softmax pass) / the analysis window"),
    ("anatomy.graphs.regions_per_step", PER_STEP, LOWER, 0.05, "compiled regions per step", "`Torch-Compiled Region` entries per step (null section: no compiled graph calls)"),
    ("anatomy.graphs.graph_calls_per_step", PER_STEP, LOWER, 0.05, "compiled graphs per step", "`## Call CompiledFxGraph` calls per step"),
    ("anatomy.graphs.autograd_graphs_per_step", PER_STEP, LOWER, 0.05, "autograd graphs per step", "`CompiledFunction` forward calls per step (each with its backward graph)"),
    ("anatomy.graphs.breaks_per_step", PER_STEP, LOWER, 0.05, "graph breaks per step", "regions entered inside another region on the same thread per step: dynamo's resume functions after a graph break"),
    ("anatomy.graphs.break_op", TEXT, NEITHER, 0, "graph break op", "the device-value read (`.item()`, `nonzero`...) most often called inside a region outside every graph call"),
    ("anatomy.graphs.break_ops_per_step", PER_STEP, LOWER, 0.05, "graph break ops per step", "its calls per step"),
    ("anatomy.graphs.break_source", TEXT, NEITHER, 0, "graph break source", "its user frame (`file:line`, with_stack captures); null otherwise"),
    ("anatomy.graphs.between_graphs_idle_per_step_ns", NS, LOWER, 0.05, "idle between graphs per step", "the device's idle gaps per step from one graph call's work to another's"),
    ("anatomy.graphs.between_graphs_share", SHARE, LOWER, 0.1, "idle between graphs", "that idle time / the analysis window"),
    ("anatomy.graphs.broken_idle_per_step_ns", NS, LOWER, 0.05, "idle in broken graphs per step", "per step: the device's idle time while the host runs a compiled frame a graph break split (the outermost region holding a resumed one: its graphs, the code between them), plus the gaps between graphs outside such frames (the backward's)"),
    ("anatomy.graphs.broken_share", SHARE, LOWER, 0.1, "idle in broken graphs", "that idle time / the analysis window: what removing the breaks could save at most"),
)
# fmt: on
