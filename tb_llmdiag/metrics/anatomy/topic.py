"""The ``anatomy`` topic: the GPU's time by part of the model (attention, MLP, LoRA adapters, lm_head, loss, optimizer...).

Definitions (Kineto traces; ns; the analysis window of ``metrics.context``):
- Time: the device-busy union within the window (kernels, memcpys and memsets of every device and stream: the
  ``summary.device_busy_ns`` union, cut to the window) is allocated to the device events running in it: each instant
  of busy time is split equally among the events running then (``busy_shares``), so overlapping streams never count
  twice and the parts' ``time_ns`` add up to ``busy_ns`` exactly. ``kernel_ns`` is the plain sum of the part's event
  durations (overlap counts on each stream).
- Each device event goes to one part by the first evidence that names one (``anatomy_parts.py`` tables; chain through
  the host call forest, ``anatomy_chain.py``): a collective kernel is ``communication`` and a host<->device copy
  ``data_movement``; inside a LoRA module every kernel but the frozen layer's GEMM (a GEMM with no rank-sized
  dimension) is ``lora``; then the innermost ``nn.Module`` naming a part (``module``); the same through a backward
  operator's forward operator (``backward_link``: only where the reader links them, ``Trace.extra["fwd_links"]``:
  Kineto's ``fwdbwd`` flows, docs/performance.md); a compiled graph's annotation (``compiled_graph``: one entry per
  graph); the innermost annotation naming a part, directly or through the forward operator; the math SDPA's core
  (``op``: ``anatomy_causes.math_core``, its score GEMMs are no LoRA rank) is ``attention``; the recorded shapes
  (``shape``, for a GEMM, or a cast launched inside a GEMM operator: autocast's weight cast goes to the GEMM's part;
  a Linear weight, or in training any GEMM operand, with a dimension of at most 128 and at most 1/8 of the
  largest, is a LoRA rank; a GEMM with a dimension equal to the token embedding's vocabulary is ``lm_head``); the
  outermost operator naming a part (``op``); the kernel's name or ``classify.py`` category (``kernel``). A GEMM of a MoE
  kernel family under ``mlp`` evidence is ``moe``. Nothing else is forced into a part: it is ``other``, named by its
  top operators.
- Per part: ``time_ns``, ``share`` (of ``busy_ns``), ``per_step_time_ns`` (time / steps; null without steps),
  ``step_time_ns`` (its time in each step of ``step_index``: a device event's allocated time counts in the step whose
  start is the last at or before the event's start, the first step for an event starting before it; so each part's
  list adds up to its ``time_ns``; empty without steps),
  ``kernels`` (device events starting in the window), ``launches`` and ``host_dispatch_ns`` (the distinct runtime or
  driver calls that launched them, and their summed durations), ``casts_ns`` (time of kernels launched by
  ``aten::to`` / ``_to_copy`` / ``copy_`` / ``contiguous`` / ``clone``), ``categories`` (time by ``classify.py``
  category), ``identified_by`` (the evidence level that placed most of its time) and ``identified_share`` (that
  share), ``top_ops`` (the operators, or kernels when none, holding most of its time).
- FLOPs: ``metrics.throughput.shapes`` per operator with recorded shapes (GEMMs 2MKN, attention 4BHLSD forward and 2.5x that
  backward), counted once per operator on the part of its kernels; ``flop_kernel_ns`` is the summed duration of those
  operators' kernels; ``achieved_tflops`` = flops / flop_kernel_ns (the GEMMs' own speed while they run); ``dtype``
  the data type of most of that time (from kernel names, ``DTYPES``); ``peak_tflops`` the device's dense peak for it
  (``PEAKS_BY_DTYPE``); ``efficiency_share`` = achieved / peak, null with ``efficiency_withheld`` saying why.
  ``moved_bytes``: memcpy/memset payloads plus the counted operators' operand elements (inputs and output) times
  the data type's size (when known).
- ``attention`` adds ``backends`` (time by backend: ``flash``, ``cudnn``, ``efficient``, ``triton`` from kernel names,
  ``math`` for the math SDPA's core, ``eager`` for softmax and batched-GEMM kernels of an attention module) and
  ``backend`` (the one with the most).
- The figures the part rules read (``anatomy_causes.py``): per part ``fp32_gemm_ns``, ``flop_share``,
  ``launches_per_step``, ``efficiency_saving_ns`` / ``_share`` (the efficiency what-if at ``reference_tflops``, the
  trace's own GEMM speed), attention's ``core_*`` and ``fallback``; ``weight_casts_ns`` / ``_share``; the part leading
  each kind of time (``<kind>_part``, ``_words``, ``_share``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.classify import CATEGORIES, CATEGORY_CODE
from tb_llmdiag.metrics.anatomy.causes import (
    LEADER_WORDS,
    attention_core,
    core_flops,
    efficiency_whatif,
    fallback,
    fp32_gemm_weights,
    leaders,
    math_core,
)
from tb_llmdiag.metrics.anatomy.chain import Chains, NodeFeatures, gather, launch_chains, node_features
from tb_llmdiag.metrics.anatomy.parts import (
    BACKENDS,
    CAST_OPS,
    CATEGORY_PARTS,
    DTYPE_BYTES,
    DTYPES,
    EVIDENCE,
    EVIDENCE_CODE,
    PART_CODE,
    PARTS,
    graph_label,
    label_of,
    part_of_names,
    peaks_for,
)
from tb_llmdiag.metrics.anatomy.structure import ENTRIES as STRUCTURE_ENTRIES
from tb_llmdiag.metrics.anatomy.structure import graph_figures, logits_figures, moe_figures
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.entry import (
    BYTES,
    COUNT,
    FLAG,
    FLOP,
    HIGHER,
    INDEX,
    LOWER,
    NEITHER,
    NS,
    PER_STEP,
    SHARE,
    TEXT,
    TFLOP_PER_S,
    Entry,
    Intro,
)
from tb_llmdiag.metrics.throughput.shapes import op_flops, per_pair, token_embedding_calls
from tb_llmdiag.model import Kind

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
IDX = NDArray[np.intp]
TOP_OPS = 3
#: a GEMM dimension at most this, and at most 1/RANK_RATIO of the largest, is a LoRA rank
RANK_MAX = 128
RANK_RATIO = 8
CAST_OPS_RX = re.compile(CAST_OPS)
_GEMM_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::linear",
    "aten::matmul",
    "aten::_scaled_mm",
    "aten::bmm",
    "aten::baddbmm",
)


def busy_shares(s: I64, e: I64, win_s: I64, win_e: I64) -> F64:
    """Per interval [s, e): its share of the busy union within the windows, each instant split equally among the
    intervals open then. The shares add up to the length of (union of the intervals) within (the windows)."""
    if s.size == 0:
        return np.zeros(0)
    edges = np.sort(np.concatenate((s, e, win_s, win_e)))
    edges = edges[np.concatenate(([True], edges[1:] != edges[:-1]))]
    si, ei = np.searchsorted(edges, s), np.searchsorted(edges, e)
    m = edges.size
    open_n = np.cumsum(np.bincount(si, minlength=m) - np.bincount(ei, minlength=m))[:-1]
    seg = np.diff(edges).astype(np.float64)
    w = np.searchsorted(win_s, edges[:-1], side="right") - 1
    inwin = np.zeros(m - 1, bool)
    ok = w >= 0
    inwin[ok] = edges[:-1][ok] < win_e[w[ok]]
    weight = np.where((open_n > 0) & inwin, seg / np.maximum(open_n, 1), 0.0)
    cum = np.concatenate(([0.0], np.cumsum(weight)))
    return cum[ei] - cum[si]


@dataclass(frozen=True)
class PartRows:
    """What the topic decided per device row, kept in the analysis (``RowCache.keep``, name ``PART_ROWS``) for the
    views that draw a part's kernels or a range's parts (``traceview/anatomy.py``): ``rows`` (``Context.dev``), the
    part ``code`` of each (an index into ``labels``, whose last is ``other``), its allocated busy time ``w_ns``."""

    rows: IDX
    code: NDArray[np.int32]
    labels: tuple[str, ...]
    w_ns: F64


#: the name the topic keeps its ``PartRows`` under in the context's cache
PART_ROWS = "anatomy.part_rows"


def kept_part_rows(ctx: Context) -> PartRows | None:
    """The topic's ``PartRows`` of this analysis, or None when it was not computed (XLA traces, no device time)."""
    got = ctx.cache.kept(PART_ROWS)
    return got if isinstance(got, PartRows) else None


@dataclass(frozen=True)
class Model:
    """What the recorded shapes say about the model: the token embedding's vocabulary and width, the tokens of one
    forward pass, whether the run trains, whether it has MoE kernels (then a GEMM narrower than the hidden size may be
    an expert's, not a grouped-query projection)."""

    vocab: int | None
    hidden: int | None
    tokens: frozenset[int]
    training: bool
    moe: bool


def _model(ctx: Context) -> Model:
    ev = ctx.trace.events
    calls = token_embedding_calls(ev)
    vocab = hidden = None
    tokens: frozenset[int] = frozenset()
    if calls is not None:
        first = calls[0][:1]
        v = per_pair(ev, first, lambda _n, d: float(d[0][0]) if d and len(d[0]) == 2 else 0.0)
        h = per_pair(ev, first, lambda _n, d: float(d[0][1]) if d and len(d[0]) == 2 else 0.0)
        vocab = int(v[0]) if v.size and v[0] > 1 else None
        hidden = int(h[0]) if h.size and h[0] > 1 else None
        tokens = frozenset(int(x) for x in np.unique(calls[1]).tolist() if x > 0)
    names = ev.names
    training = "fwd_links" in ctx.trace.extra or any(n.startswith("autograd::engine::evaluate_function") for n in names)
    return Model(vocab, hidden, tokens, training, bool((ctx.dev_cat == CATEGORY_CODE["moe"]).any()))


def _gemm_dims(name: str, d: list[list[int]], training: bool) -> list[int]:
    """The dimensions of a 2-D GEMM's operands that can name its layer: a Linear's weight [out, in]; a matmul's
    operands in training (in inference its rows are the tokens, which may be few)."""
    if CAST_OPS_RX.match(name):  # a cast's input: read only for casts inside a GEMM operator (a weight [out, in])
        return list(d[0]) if d and len(d[0]) == 2 else []
    if name not in _GEMM_OPS:
        return []
    if name == "aten::linear":
        return list(d[1]) if len(d) > 1 and len(d[1]) == 2 else []
    ops = d[1:3] if name in ("aten::addmm", "aten::baddbmm") else d[:2]
    if not training and name not in ("aten::bmm", "aten::baddbmm"):
        return []
    return [x for op in ops for x in op[-2:]]


def _gemm_facts(ev: Any, rows: IDX, model: Model) -> tuple[F64, F64, F64]:
    """Per operator row with shapes: 1.0 where a GEMM has a LoRA-rank dimension; where one of its dimensions is the
    vocabulary; and the part its dimensions name (-1: none): the hidden size both ways is an attention projection,
    the hidden size and a wider one an MLP, the hidden size and a narrower one (without MoE kernels) a grouped-query
    projection (the token count left out)."""

    def rank(name: str, d: list[list[int]]) -> float:
        xs = [x for x in _gemm_dims(name, d, model.training) if x > 0]
        return float(bool(xs) and min(xs) <= RANK_MAX and min(xs) * RANK_RATIO <= max(xs))

    def vocab_hit(name: str, d: list[list[int]]) -> float:
        if not model.vocab or not (name in _GEMM_OPS or CAST_OPS_RX.match(name)):
            return 0.0
        return float(any(x == model.vocab for op in d for x in op[-2:]))

    def layer(name: str, d: list[list[int]]) -> float:
        h = model.hidden
        if h is None or name in ("aten::bmm", "aten::baddbmm"):
            return -1.0
        xs = {x for x in _gemm_dims(name, d, model.training) if x > 0 and x not in model.tokens}
        if h not in xs or len(xs) > 2 or model.vocab in xs:
            return -1.0
        other = max(xs - {h}, default=h)
        if other == h or (other < h and not model.moe):
            return float(PART_CODE["attention"])
        return float(PART_CODE["mlp"]) if other > h else -1.0

    return per_pair(ev, rows, rank), per_pair(ev, rows, vocab_hit), per_pair(ev, rows, layer)


def _operand_elements(name: str, d: list[list[int]]) -> float:
    """Input and output elements of a FLOP-counted operator (the bias of addmm left out)."""
    ops = (
        d[1:3]
        if name in ("aten::addmm", "aten::baddbmm")
        else d[:3]
        if "attention" in name or "attn" in name
        else d[:2]
    )
    if len(ops) < 2 or any(len(o) < 2 for o in ops[:2]):
        return 0.0
    inputs = sum(float(np.prod(o)) for o in ops)
    a, b = ops[0], ops[1]
    out = float(np.prod(a)) if len(ops) == 3 else float(np.prod(a[:-1])) * b[-1]
    return inputs + out


def _classify(
    ctx: Context,
    rows: IDX,
    ch: Chains,
    f: NodeFeatures,
    shape_facts: tuple[F64, F64, F64],
    moe_rows: NDArray[np.bool_],
    core: NDArray[np.bool_],
) -> tuple[NDArray[np.int32], NDArray[np.int8], list[str]]:
    """Per device row: its part code (``PARTS``, then compiled graphs, -1 for ``other``), the evidence code that
    placed it, and the compiled graphs' entry names (codes ``len(PARTS) + i``); ``moe_rows``: the MoE's router,
    dispatch and expert GEMMs by their shapes (``anatomy_structure.moe_figures``)."""
    ev = ctx.trace.events
    n = rows.size
    part = np.full(n, -1, np.int32)
    evid = np.full(n, -1, np.int8)

    def assign(mask: NDArray[np.bool_], value: NDArray[np.integer] | int, evidence: str) -> None:
        m = mask & (part < 0)
        if isinstance(value, np.ndarray):
            m &= value >= 0
            part[m] = value[m]
        else:
            part[m] = value
        evid[m] = EVIDENCE_CODE[evidence]

    node, fwd = ch.node, ch.fwd_node
    cat = ctx.dev_cat[np.searchsorted(ctx.dev, rows)] if rows is not ctx.dev else ctx.dev_cat
    gemm = cat == CATEGORY_CODE["gemm"]
    rank, vocab, layer = shape_facts
    assign(np.isin(rows, ctx.coll.row), PART_CODE["communication"], "kernel")
    names = ev.names
    kind = ev.kind[rows]
    uniq = np.unique(ev.name_id[rows]).astype(np.intp)
    hd = np.zeros(len(names), bool)
    hd[uniq] = [("HtoD" in names[i] or "DtoH" in names[i] or "HtoH" in names[i]) for i in uniq.tolist()]
    assign((kind == Kind.MEMCPY) & hd[ev.name_id[rows]], PART_CODE["data_movement"], "kernel")
    lora_mod = gather(f.lora, node, False)
    lora_fwd = gather(f.lora, fwd, False)
    adapter = ~gemm | (rank > 0)
    assign(lora_mod & adapter, PART_CODE["lora"], "module")
    assign(lora_fwd & adapter, PART_CODE["lora"], "backward_link")
    assign(np.ones(n, bool), gather(f.mod_part, node, -1).astype(np.int32), "module")
    assign(np.ones(n, bool), gather(f.mod_part, fwd, -1).astype(np.int32), "backward_link")
    graphs = gather(f.graph, node, -1)
    labels: list[str] = []
    for gid in np.unique(graphs[graphs >= 0]).tolist():
        label = graph_label(names[gid])
        code = len(PARTS) + (labels.index(label) if label in labels else len(labels))
        if label not in labels:
            labels.append(label)  # type: ignore[arg-type]
        assign(graphs == gid, code, "compiled_graph")
    assign(np.ones(n, bool), gather(f.ann_part, node, -1).astype(np.int32), "annotation")
    assign(np.ones(n, bool), gather(f.ann_part, fwd, -1).astype(np.int32), "backward_link")
    assign(core, PART_CODE["attention"], "op")  # the math SDPA's core: its score GEMMs are not a LoRA rank
    assign(moe_rows, PART_CODE["moe"], "shape")
    gemm |= weight_casts(ev, ch, f)  # a cast inside a GEMM operator (autocast's weight cast) goes to the GEMM's layer
    assign(gemm & (rank > 0), PART_CODE["lora"], "shape")
    assign(gemm & (vocab > 0), PART_CODE["lm_head"], "shape")
    assign(gemm, layer.astype(np.int32), "shape")
    assign(np.ones(n, bool), gather(f.op_part, node, -1).astype(np.int32), "op")
    assign(np.ones(n, bool), gather(f.op_part, fwd, -1).astype(np.int32), "op")
    k_part = np.full(len(names), -1, np.int32)
    k_part[uniq] = part_of_names(names, uniq, "kernel")
    by_cat = np.array([PART_CODE.get(CATEGORY_PARTS.get(c, ""), -1) for c in CATEGORIES], np.int32)
    kernel_part = np.where(k_part[ev.name_id[rows]] >= 0, k_part[ev.name_id[rows]], by_cat[cat])
    assign(np.ones(n, bool), kernel_part, "kernel")
    _by_neighbours(ev, rows, part, evid, ch.launch)
    part[(part == PART_CODE["mlp"]) & (kernel_part == PART_CODE["moe"])] = PART_CODE["moe"]  # a MoE's experts
    return part, evid, labels


def _casts(ev: Any, op: IDX) -> NDArray[np.bool_]:
    """Per device row: launched by a cast operator (``CAST_OPS``)."""
    cast_op = np.zeros(len(ev.names), bool)
    used = np.unique(ev.name_id[op[op >= 0]])
    cast_op[used] = [CAST_OPS_RX.match(ev.names[i]) is not None for i in used.tolist()]
    out: NDArray[np.bool_] = (op >= 0) & cast_op[ev.name_id[np.maximum(op, 0)]]
    return out


def weight_casts(ev: Any, ch: Chains, f: NodeFeatures) -> NDArray[np.bool_]:
    """Per device row: a cast launched inside a GEMM operator (``aten::linear > aten::to``)."""
    node = ch.node
    inside = gather(f.gemm_op, node, False)
    out: NDArray[np.bool_] = _casts(ev, ch.op_row) & inside
    return out


#: a kernel without a recorded launch takes the part its (previous, own, next) kernel names have elsewhere when at
#: least this share of their time there is in that part
NEIGHBOUR_AGREEMENT = 0.8


def _by_neighbours(ev: Any, rows: IDX, part: NDArray[np.int32], evid: NDArray[np.int8], launch: IDX) -> None:
    """Parts, in place, for the device events no evidence placed and whose launch the trace does not hold (work
    queued before the profiler started): the part of the same kernel between the same neighbours on its stream
    elsewhere in the trace, when that is unanimous enough (``NEIGHBOUR_AGREEMENT``, by count)."""
    n_names = len(ev.names) + 1
    target = (part < 0) & (launch < 0)
    if not target.any() or n_names > 1 << 20:
        return
    order = np.lexsort((ev.ts_ns[rows], ev.stream[rows], ev.device[rows]))
    nid = ev.name_id[rows][order].astype(np.int64)
    key = (np.roll(nid, 1) * n_names + nid) * n_names + np.roll(nid, -1)
    p = part[order]
    known = p >= 0
    if not known.any():
        return
    pairs, counts = np.unique(key[known] * 4096 + p[known], return_counts=True)
    k_of, p_of = np.divmod(pairs, 4096)
    keys, first, total = np.unique(k_of, return_index=True, return_counts=True)
    tot = np.add.reduceat(counts, first)
    best = np.maximum.reduceat(counts, first)
    # the part with the most rows per key: the pairs are sorted by (key, part); pick each key's largest count
    pick = np.zeros(keys.size, np.int64)
    for_key = np.repeat(np.arange(keys.size), total)
    is_best = counts == best[for_key]
    pick[for_key[is_best][::-1]] = p_of[is_best][::-1]  # the first part reaching the maximum wins
    sure = best >= NEIGHBOUR_AGREEMENT * tot
    t = np.flatnonzero(target[order])
    at = np.clip(np.searchsorted(keys, key[t]), 0, keys.size - 1)
    hit = (keys[at] == key[t]) & sure[at]
    part[order[t[hit]]] = pick[at[hit]]
    evid[order[t[hit]]] = EVIDENCE_CODE["kernel"]


def _per_code(code: NDArray[np.int32], n: int, weights: NDArray[Any] | None = None) -> F64:
    return np.bincount(code, weights=weights, minlength=n).astype(np.float64)[:n]


def _name_labels(names: tuple[str, ...], ids: NDArray[np.int32], table: Any) -> NDArray[np.int16]:
    """Per row: the index of the first ``table`` row matching its name (once per distinct name), -1 for none."""
    uniq = np.unique(ids)
    labels = [lab for lab, _ in table]
    full = np.full(len(names), -1, np.int16)
    for i in uniq.tolist():
        lab = label_of(table, names[i])
        if lab is not None:
            full[i] = labels.index(lab)
    return full[ids]


def _top_by_code(
    code: NDArray[np.int32], key: NDArray[np.int64], w: F64, names: tuple[str, ...], n: int
) -> list[list[dict[str, Any]]]:
    """Per code: the ``TOP_OPS`` names (``key``: name ids) holding the most of ``w``."""
    out: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    if code.size == 0:
        return out
    pair = code.astype(np.int64) * (len(names) + 1) + key
    uniq, inv = np.unique(pair, return_inverse=True)
    tot = np.bincount(inv, weights=w)
    c_of, k_of = np.divmod(uniq, len(names) + 1)
    order = np.lexsort((-tot, c_of))
    for j in order.tolist():
        c = int(c_of[j])
        if len(out[c]) < TOP_OPS and tot[j] > 0:
            out[c].append({"name": names[int(k_of[j])], "time_ns": int(round(tot[j]))})
    return out


def _flops(
    ctx: Context, rows: IDX, sr: IDX, code: NDArray[np.int32], n: int, inwin: NDArray[np.bool_]
) -> dict[str, Any]:
    """Per code: counted FLOPs, their kernels' time, the data type of most of that time, operand elements."""
    ev = ctx.trace.events
    frows, fl, _ = op_flops(ev)
    out = {"flops": np.zeros(n), "flop_kernel_ns": np.zeros(n), "dtype": [None] * n, "elements": np.zeros(n)}
    if frows.size == 0:
        return out
    pos = np.clip(np.searchsorted(frows, sr), 0, frows.size - 1)
    hit = (sr >= 0) & (frows[pos] == sr) & inwin
    hit &= fl[pos] > 0
    cat = ctx.dev_cat if rows is ctx.dev else ctx.dev_cat[np.searchsorted(ctx.dev, rows)]
    hit &= (cat == CATEGORY_CODE["gemm"]) | (cat == CATEGORY_CODE["attention"])  # its own kernels, not its copies
    if not hit.any():
        return out
    idx = np.flatnonzero(hit)
    ops, first = np.unique(sr[idx], return_index=True)
    op_code = code[idx[first]]
    op_pos = pos[idx[first]]
    out["flops"] = _per_code(op_code, n, fl[op_pos])
    out["flop_kernel_ns"] = _per_code(code[idx], n, ev.dur_ns[rows[idx]])
    out["elements"] = _per_code(op_code, n, per_pair(ev, ops, _operand_elements))
    dt = _name_labels(ev.names, ev.name_id[rows[idx]], DTYPES)
    per = np.zeros((n, len(DTYPES) + 1))  # the last column: kernels whose names do not say
    np.add.at(per, (code[idx], np.where(dt >= 0, dt, len(DTYPES))), ev.dur_ns[rows[idx]])
    best = np.argmax(per, axis=1)
    out["dtype"] = [DTYPES[int(best[c])][0] if per[c].max() > 0 and best[c] < len(DTYPES) else None for c in range(n)]
    return out


def _backends(
    ctx: Context, rows: IDX, part: NDArray[np.int32], ch: Chains, core: NDArray[np.bool_], w: F64
) -> dict[str, float]:
    """The attention part's time by backend (module docstring); marks the eager backend's rows in ``core`` too (in
    place), so the core attention's FLOPs count them."""
    ev = ctx.trace.events
    att = np.flatnonzero(part == PART_CODE["attention"])
    if att.size == 0:
        return {}
    cat = ctx.dev_cat[att] if rows is ctx.dev else ctx.dev_cat[np.searchsorted(ctx.dev, rows[att])]
    names = [b for b, _ in BACKENDS] + ["math", "eager"]
    lab = np.full(att.size, -1, np.int16)
    is_att = cat == CATEGORY_CODE["attention"]
    lab[is_att] = _name_labels(ev.names, ev.name_id[rows[att[is_att]]], BACKENDS)
    math = core[att]
    sr = ch.shape_row[att]
    bmm = np.zeros(att.size, bool)
    if (sr >= 0).any():
        bname = np.array([n in ("aten::bmm", "aten::baddbmm", "aten::matmul") for n in ev.names])
        bmm[sr >= 0] = bname[ev.name_id[sr[sr >= 0]]]
    eager = ((cat == CATEGORY_CODE["softmax"]) | ((cat == CATEGORY_CODE["gemm"]) & bmm)) & ~is_att
    lab[math & (lab < 0)] = len(BACKENDS)
    lab[eager & ~math & (lab < 0)] = len(BACKENDS) + 1
    core[att[lab == len(BACKENDS) + 1]] = True
    tot = np.bincount(lab[lab >= 0], weights=w[att][lab >= 0], minlength=len(names))
    return {names[i]: float(t) for i, t in enumerate(tot) if t > 0}


def _evidence(ctx: Context, rows: IDX) -> tuple[Chains, NodeFeatures, dict[str, Any] | None]:
    """The launch chains of ``rows`` through the host call forest, and the compiled graphs' figures
    (``anatomy_structure.graph_figures``), before this topic, the last early one to read the forest, releases it
    (``RowCache.forest``)."""
    try:
        forest = ctx.cache.forest()
        feats = node_features(forest, ctx.trace.events.names)
        ch = launch_chains(ctx, forest, feats, rows)
        return ch, feats, graph_figures(ctx, forest, rows, ch.launch)
    finally:
        ctx.cache.release_forest()


def anatomy_metrics(ctx: Context) -> dict[str, Any]:
    """The ``anatomy`` topic (module docstring)."""
    if ctx.trace.source_kind != "kineto":
        return {"available": False, "reason": "the model's parts are read from Kineto traces (host call chains)"}
    ev = ctx.trace.events
    rows = ctx.dev
    w = busy_shares(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows], ctx.win_s, ctx.win_e)
    busy = float(w.sum())
    if busy <= 0:
        ctx.cache.release_forest()
        return {"available": False, "reason": "no device activity in the analysis window"}
    ch, feats, graph_fig = _evidence(ctx, rows)
    sr = ch.shape_row
    facts = (np.zeros(rows.size), np.zeros(rows.size), np.full(rows.size, -1.0))
    model = _model(ctx)
    if (sr >= 0).any():
        u, inv = np.unique(sr[sr >= 0], return_inverse=True)
        for col, vals in zip(facts, _gemm_facts(ev, u, model)):
            col[sr >= 0] = vals[inv]
    moe_rows, moe = moe_figures(ctx, sr, w, model.hidden, model.tokens)
    core = math_core(ctx, rows, ch, feats)
    part, evid, graphs = _classify(ctx, rows, ch, feats, facts, moe_rows, core)
    labels = list(PARTS) + graphs + ["other"]
    n = len(labels)
    code = np.where(part >= 0, part, n - 1).astype(np.int32)
    ctx.cache.keep(PART_ROWS, PartRows(rows, code, tuple(labels), w))
    out = _describe(ctx, rows, ch, core, code, evid, w, labels)
    # the structure figures (metrics/anatomy/structure.py): a MoE's load, the loss over full logits, compiled graphs
    out["moe"] = moe
    out["logits"] = logits_figures(ctx, rows, sr, w, model.vocab, model.training)
    out["graphs"] = graph_fig
    # the part rules' figures (metrics/anatomy/causes.py): efficiency, the core attention, leaders, weight casts
    parts = out["parts"]
    out.update(efficiency_whatif(parts, ctx.window_ns))
    if "attention" in parts:
        flops = core_flops(ctx, rows, ch, core & (code == PART_CODE["attention"]))
        attention_core(parts["attention"], flops, out["reference_tflops"], ctx.window_ns, out["steps"], fallback(ev))
    out.update(leaders(parts, out["busy_ns"], out["steps"]))
    wc = float((w * weight_casts(ev, ch, feats)).sum())
    out["weight_casts_ns"] = int(round(wc))
    out["weight_casts_share"] = wc / ctx.window_ns if ctx.window_ns > 0 else None
    return out


def _step_times(ctx: Context, rows: IDX, code: NDArray[np.int32], w: F64, n: int) -> NDArray[np.int64]:
    """[part code, step]: the allocated time of the device events starting in each step (module docstring)."""
    ns = len(ctx.steps)
    if ns == 0:
        return np.zeros((n, 0), np.int64)
    at = np.clip(np.searchsorted(ctx.steps.start_ns, ctx.trace.events.ts_ns[rows], side="right") - 1, 0, ns - 1)
    tot = np.bincount(code.astype(np.int64) * ns + at, weights=w, minlength=n * ns)[: n * ns]
    return np.rint(tot.reshape(n, ns)).astype(np.int64)


def _part_figures(ctx: Context, rows: IDX, ch: Chains, code: NDArray[np.int32], w: F64, n: int) -> dict[str, Any]:
    """Per code: the figures that need no FLOPs (module docstring)."""
    ev = ctx.trace.events
    inwin = ctx.dev_in_win if rows is ctx.dev else np.ones(rows.size, bool)
    lrows = ch.launch
    has = inwin & (lrows >= 0)
    pairs = np.unique(code[has].astype(np.int64) * (len(ev) + 1) + lrows[has])
    p_code, p_row = np.divmod(pairs, len(ev) + 1)
    op = ch.op_row
    is_cast = _casts(ev, op)
    cat = ctx.dev_cat if rows is ctx.dev else ctx.dev_cat[np.searchsorted(ctx.dev, rows)]
    nc = len(CATEGORIES)
    by_cat = np.bincount(code.astype(np.int64) * nc + cat, weights=w, minlength=n * nc).reshape(n, nc)
    key = np.where(op >= 0, ev.name_id[np.maximum(op, 0)], ev.name_id[rows]).astype(np.int64)
    return {
        "time": _per_code(code, n, w),
        "kernel_ns": _per_code(code[inwin], n, ev.dur_ns[rows[inwin]]),
        "kernels": _per_code(code[inwin], n),
        "launches": _per_code(p_code.astype(np.int32), n),
        "dispatch": _per_code(p_code.astype(np.int32), n, ev.dur_ns[p_row]),
        "casts": _per_code(code, n, np.where(is_cast, w, 0.0)),
        "fp32_gemm": _per_code(code, n, fp32_gemm_weights(ctx, rows, w)),
        "moved": _per_code(
            code[inwin], n, np.maximum(ev.bytes[rows[inwin]], 0) * (ev.kind[rows[inwin]] != Kind.KERNEL)
        ),
        "by_cat": by_cat,
        "top": _top_by_code(code, key, w, ev.names, n),
        "inwin": inwin,
    }


def _device(ctx: Context) -> str | None:
    return ctx.trace.devices[0].name if ctx.trace.devices else None


def _efficiency(
    flops: float, kernel_ns: float, dtype: str | None, peaks: dict[str, float] | None, device: str | None
) -> dict[str, Any]:
    """Achieved TFLOP/s of a part's counted operators and its share of the device's peak, or why it is withheld."""
    achieved = flops / kernel_ns / 1e3 if flops > 0 and kernel_ns > 0 else None
    peak = peaks.get(dtype) if peaks is not None and dtype is not None else None
    why = None
    if achieved is None:
        why = "no operator with recorded shapes whose FLOPs are counted (record_shapes=True)"
    elif peaks is None:
        why = f"no peak known for the device ({device or 'unnamed'})"
    elif dtype is None:
        why = "the names of most of its GEMM time's kernels do not say their data type"
    elif peak is None:
        why = f"no {dtype} peak known for the device ({device})"
    eff = achieved / peak if achieved is not None and peak else None
    if eff is not None and eff > 1.0:  # over the peak: the shapes or the data type are not what ran
        eff, why = None, "the recorded shapes imply more than the device's peak for the data type"
    return {"achieved_tflops": achieved, "peak_tflops": peak, "efficiency_share": eff, "efficiency_withheld": why}


def _describe(
    ctx: Context,
    rows: IDX,
    ch: Chains,
    core: NDArray[np.bool_],
    code: NDArray[np.int32],
    evid: NDArray[np.int8],
    w: F64,
    labels: list[str],
) -> dict[str, Any]:
    n = len(labels)
    fig = _part_figures(ctx, rows, ch, code, w, n)
    fl = _flops(ctx, rows, ch.flop_row, code, n, fig["inwin"])
    busy = float(w.sum())
    steps = len(ctx.steps)
    ne = len(EVIDENCE)
    ev_known = evid >= 0
    per_ev = np.bincount(
        code[ev_known].astype(np.int64) * ne + evid[ev_known], weights=w[ev_known], minlength=n * ne
    ).reshape(n, ne)
    device = _device(ctx)
    peaks = peaks_for(device)
    by_step = _step_times(ctx, rows, code, w, n)
    parts: dict[str, Any] = {}
    for c, name in enumerate(labels):
        t = fig["time"][c]
        if t <= 0 and fig["kernels"][c] == 0:
            continue
        dtype = fl["dtype"][c]
        size = DTYPE_BYTES.get(dtype or "", 0)
        best = int(np.argmax(per_ev[c])) if per_ev[c].max() > 0 else -1
        cats = {
            CATEGORIES[k]: int(round(v)) for k, v in sorted(enumerate(fig["by_cat"][c]), key=lambda kv: -kv[1]) if v > 0
        }
        parts[name] = {
            "time_ns": int(round(t)),
            "share": t / busy,
            "per_step_time_ns": int(round(t / steps)) if steps else None,
            "step_time_ns": by_step[c].tolist(),
            "kernel_ns": int(fig["kernel_ns"][c]),
            "kernels": int(fig["kernels"][c]),
            "launches": int(fig["launches"][c]),
            "host_dispatch_ns": int(fig["dispatch"][c]),
            "casts_ns": int(round(fig["casts"][c])),
            "fp32_gemm_ns": int(round(fig["fp32_gemm"][c])),
            "flops": float(fl["flops"][c]) if fl["flops"][c] > 0 else None,
            "flop_kernel_ns": int(fl["flop_kernel_ns"][c]),
            "dtype": dtype,
            **_efficiency(float(fl["flops"][c]), float(fl["flop_kernel_ns"][c]), dtype, peaks, device),
            "moved_bytes": int(fig["moved"][c] + fl["elements"][c] * size),
            "identified_by": EVIDENCE[best] if best >= 0 and name != "other" else None,
            "identified_share": float(per_ev[c, best] / t) if best >= 0 and t > 0 and name != "other" else None,
            "categories": cats,
            "top_ops": fig["top"][c],
        }
    if "attention" in parts:
        backends = _backends(ctx, rows, np.where(code < len(PARTS), code, -1), ch, core, w)
        parts["attention"]["backends"] = {k: int(round(v)) for k, v in backends.items()}
        parts["attention"]["backend"] = max(backends, key=lambda k: backends[k]) if backends else None
    other = float(fig["time"][n - 1])
    by_level = per_ev.sum(axis=0)
    return {
        "available": True,
        "busy_ns": int(round(busy)),
        "steps": steps,
        "step_index": ctx.steps.index.tolist(),
        "assigned_share": 1.0 - other / busy,
        "other_share": other / busy,
        "device": device,
        "backward_links": int((ch.fwd_node >= 0).sum()),
        "by_evidence": {EVIDENCE[k]: float(v / busy) for k, v in enumerate(by_level) if v > 0},
        "parts": parts,
    }


#: the leading part per kind of time (anatomy_causes.leaders): three keys per kind
LEADER_ENTRIES: tuple[Entry, ...] = tuple(
    entry
    for kind, what in LEADER_WORDS.items()
    for entry in (
        (f"anatomy.{kind}_part", TEXT, NEITHER, 0, f"part with the most {what} (name)",
         f"the named part (`other` left out) with the most {what} (anatomy_causes.py); null when none"),
        (f"anatomy.{kind}_part_words", TEXT, NEITHER, 0, f"part with the most {what}",
         "that part as a sentence names it (`the LoRA adapters`, `the MLP`)"),
        (f"anatomy.{kind}_part_share", SHARE, NEITHER, 0.1, f"its share of the {what}",
         f"the share of all parts' {what} that part holds"),
    )
)  # fmt: skip


# The registry's entries of the `anatomy` topic: one row per key (metrics/entry.py); metrics/registry.py collects them
# through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`anatomy` (metrics/anatomy/topic.py, metrics/anatomy/parts.py, metrics/anatomy/chain.py)",
    "The GPU's busy time by part of the model: `embedding`, `attention`, `mlp`, `norms`, `lora`, `moe`, `lm_head`, "
    "`loss`, `optimizer`, `communication`, `data_movement`, one `compiled_graph:<id>` per compiled graph, and "
    "`other` (never forced into a part, named by its top operators). Each instant of the device-busy union in the "
    "window is split equally among the device events running then, so the parts add up to `busy_ns`. A device event "
    "goes to the part its strongest evidence names: `nn.Module` frames (`with_modules`), annotations, the same "
    "through a backward operator's forward operator (where the reader links them), a compiled graph's annotation, the "
    "recorded shapes (a LoRA rank, the vocabulary), operator names, kernel names. Kineto traces only.",
)

_P = "each part (`parts` is keyed by part name): "
# a declared table, one entry per row: left as laid out
# fmt: off
ENTRIES: tuple[Entry, ...] = (
    ("anatomy.available", FLAG, NEITHER, 0, "anatomy available", "false without device activity in the window, or on XLA traces (then `reason` says why)"),
    ("anatomy.reason", TEXT, NEITHER, 0, "anatomy reason", "why the topic is unavailable"),
    ("anatomy.busy_ns", NS, NEITHER, 0.05, "anatomy busy time", "the device-busy union (all devices and streams) within the analysis window: what the parts' `time_ns` add up to"),
    ("anatomy.steps", COUNT, NEITHER, 0, "anatomy steps", "profiled steps `per_step_time_ns` divides by"),
    ("anatomy.step_index[]", INDEX, NEITHER, 0, "step", "the profiled steps' indices (`steps.per_step[].index`), in time order: what each part's `step_time_ns` list follows"),
    ("anatomy.assigned_share", SHARE, HIGHER, 0.05, "busy time in a named part", "1 - `other_share`"),
    ("anatomy.other_share", SHARE, LOWER, 0.1, "busy time in no part", "`parts.other.time_ns` / `busy_ns`: device time no evidence places in a part"),
    ("anatomy.device", TEXT, NEITHER, 0, "anatomy device", "the device name the peaks are looked up for"),
    ("anatomy.backward_links", COUNT, NEITHER, 0.05, "device events linked to a forward operator", "device events launched under a backward operator linked to its forward operator (`Trace.extra['fwd_links']`: Kineto's `fwdbwd` flows; 0 without them)"),
    ("anatomy.by_evidence.*", SHARE, NEITHER, 0.1, "busy time by evidence", "the share of `busy_ns` each evidence level placed: `module`, `annotation`, `backward_link`, `compiled_graph`, `shape`, `op`, `kernel`"),
    ("anatomy.parts.*.time_ns", NS, NEITHER, 0.05, "part time", _P + "its allocated share of the busy union (overlapping events split each instant equally)"),
    ("anatomy.parts.*.share", SHARE, NEITHER, 0.1, "part share", _P + "`time_ns` / `busy_ns`"),
    ("anatomy.parts.*.per_step_time_ns", NS, NEITHER, 0.05, "part time per step", _P + "`time_ns` / steps; null without steps"),
    ("anatomy.parts.*.step_time_ns[]", NS, NEITHER, 0.05, "part time in the step", _P + "its time in each step of `step_index` (a device event's allocated time counts in the step it starts in; before the first step, in the first): the list adds up to `time_ns`"),
    ("anatomy.parts.*.kernel_ns", NS, NEITHER, 0.05, "part device time", _P + "plain sum of its device events' durations (overlap counted on each stream)"),
    ("anatomy.parts.*.kernels", COUNT, NEITHER, 0.05, "part device events", _P + "its kernels, memcpys and memsets starting in the window"),
    ("anatomy.parts.*.launches", COUNT, NEITHER, 0.05, "part launches", _P + "distinct runtime/driver calls that launched them (a graph launch counts once)"),
    ("anatomy.parts.*.host_dispatch_ns", NS, LOWER, 0.05, "part launch time", _P + "summed durations of those launch calls on the host"),
    ("anatomy.parts.*.casts_ns", NS, LOWER, 0.05, "part casts", _P + "time of its kernels launched by `aten::to`, `_to_copy`, `copy_`, `contiguous` or `clone`"),
    ("anatomy.parts.*.flops", FLOP, NEITHER, 0.02, "part flops", _P + "FLOPs of its operators with recorded shapes (`metrics.throughput.shapes` formulas), once per operator; null when none"),
    ("anatomy.parts.*.flop_kernel_ns", NS, NEITHER, 0.05, "part counted GEMM time", _P + "summed durations of the GEMM/attention kernels of those operators"),
    ("anatomy.parts.*.dtype", TEXT, NEITHER, 0, "part data type", _P + "the data type of most of that time, from kernel names (`fp8`, `bf16`, `fp16`, `tf32`, `fp32`); null when the names do not say"),
    ("anatomy.parts.*.achieved_tflops", TFLOP_PER_S, HIGHER, 0.05, "part achieved tflops", _P + "`flops` / `flop_kernel_ns` / 1e3: its GEMMs' speed while they run"),
    ("anatomy.parts.*.peak_tflops", TFLOP_PER_S, NEITHER, 0.05, "part peak tflops", _P + "the device's dense peak for `dtype` (`anatomy_parts.PEAKS_BY_DTYPE`: H100/H200/H800/GH200, A100/A800, MI300X); null when unknown"),
    ("anatomy.parts.*.efficiency_share", SHARE, HIGHER, 0.1, "part efficiency", _P + "`achieved_tflops` / `peak_tflops`; null with `efficiency_withheld`"),
    ("anatomy.parts.*.efficiency_withheld", TEXT, NEITHER, 0, "part efficiency withheld", _P + "why `efficiency_share` is null (no counted FLOPs, unknown device or data type, above the peak); null when shown"),
    ("anatomy.parts.*.moved_bytes", BYTES, NEITHER, 0.05, "part bytes", _P + "memcpy/memset payloads plus its counted operators' input and output elements x the data type's size (when known)"),
    ("anatomy.parts.*.identified_by", TEXT, NEITHER, 0, "part evidence", _P + "the evidence level that placed most of its time (`module` strongest ... `kernel` weakest); null for `other`"),
    ("anatomy.parts.*.identified_share", SHARE, NEITHER, 0.1, "part evidence share", _P + "the share of its time that level placed"),
    ("anatomy.parts.*.categories.*", NS, NEITHER, 0.05, "part time by kernel category", _P + "its time by `classify.py` category (gemm, attention, elementwise, copy...)"),
    ("anatomy.parts.*.top_ops[].name", TEXT, NEITHER, 0, "part top operator", _P + "the innermost operators launching most of its time (the kernel's name when no operator launched it)"),
    ("anatomy.parts.*.top_ops[].time_ns", NS, NEITHER, 0.05, "part top operator time", _P + "that operator's share of the part's time"),
    ("anatomy.parts.*.backends.*", NS, NEITHER, 0.05, "attention time by backend", "`attention` only: time by backend: `flash`, `cudnn`, `efficient`, `triton` (kernel names), `math` (`aten::_scaled_dot_product_attention_math`), `eager` (softmax and batched GEMMs of an attention module)"),
    ("anatomy.parts.*.backend", TEXT, NEITHER, 0, "attention backend", "`attention` only: the backend with the most time; null when none is recognised"),
    ("anatomy.parts.*.fp32_gemm_ns", NS, LOWER, 0.05, "part fp32 GEMM time", _P + "its time in fp32 GEMM kernels without tensor cores (`precision.is_fp32_math`)"),
    ("anatomy.parts.*.flop_share", SHARE, NEITHER, 0.1, "part FLOP share", _P + "its counted FLOPs over all counted FLOPs; null without any"),
    ("anatomy.parts.*.launches_per_step", PER_STEP, LOWER, 0.05, "part launches per step", _P + "`launches` / steps; null without steps"),
    ("anatomy.parts.*.efficiency_saving_ns", NS, LOWER, 0.05, "part time over the reference speed", _P + "its counted GEMM time less its FLOPs at `reference_tflops` (0 when faster); null without FLOPs or a reference"),
    ("anatomy.parts.*.efficiency_saving_share", SHARE, LOWER, 0.1, "part efficiency what-if", _P + "`efficiency_saving_ns` / the analysis window: the saving of running the part as fast as the trace's best GEMMs"),
    ("anatomy.parts.*.core_ns", NS, LOWER, 0.05, "core attention on a slow backend", "`attention` only: its time on the `math` and `eager` backends (score matrices materialised)"),
    ("anatomy.parts.*.core_per_step_ns", NS, LOWER, 0.05, "core attention on a slow backend per step", "`attention` only: `core_ns` / steps"),
    ("anatomy.parts.*.core_share", SHARE, LOWER, 0.1, "core attention share", "`attention` only: `core_ns` / `busy_ns`"),
    ("anatomy.parts.*.core_flops", FLOP, NEITHER, 0.02, "core attention flops", "`attention` only: FLOPs of the slow backend's score GEMMs, forward and backward; null when none are recorded"),
    ("anatomy.parts.*.core_fused_ns", NS, NEITHER, 0.05, "fused attention estimate", "`attention` only: `core_flops` at `reference_tflops`: what a fused kernel doing the same GEMMs would take (a causal one skips about half: errs long)"),
    ("anatomy.parts.*.core_saving_share", SHARE, LOWER, 0.1, "fused attention what-if", "`attention` only: (`core_ns` - `core_fused_ns`) / the analysis window; null without FLOPs or a reference"),
    ("anatomy.parts.*.fallback", TEXT, NEITHER, 0, "why not flash attention", "`attention` on the math backend only: what the recorded SDPA call's shapes say about the flash kernel (head dim, explicit mask), else that nothing recorded excludes it"),
    ("anatomy.reference_tflops", TFLOP_PER_S, HIGHER, 0.05, "reference GEMM speed", "the fastest `achieved_tflops` of a part holding >= 5 % of the counted FLOPs in a data type other than fp32: the speed this trace's own GEMMs reach; null when none"),
    ("anatomy.reference_part", TEXT, NEITHER, 0, "reference part (name)", "the part that reaches `reference_tflops`"),
    ("anatomy.reference_part_words", TEXT, NEITHER, 0, "reference part", "that part as a sentence names it"),
    ("anatomy.weight_casts_ns", NS, LOWER, 0.05, "casts inside GEMM operators", "casts launched inside a GEMM operator (`aten::linear > aten::to`: a weight stored in another dtype cast on every call, as autocast does); placed in the GEMM's part"),
    ("anatomy.weight_casts_share", SHARE, LOWER, 0.1, "casts inside GEMM operators share", "`weight_casts_ns` / the analysis window"),
    *LEADER_ENTRIES,
    ("anatomy.fp32_gemm_part_busy_share", SHARE, LOWER, 0.1, "fp32 part's share of busy time", "the fp32 GEMM time of `fp32_gemm_part` over `busy_ns`"),
    ("anatomy.fp32_gemm_part_dtype", TEXT, NEITHER, 0, "fp32 part's data type", "`fp32_gemm_part`'s `dtype`"),
    ("anatomy.fp32_gemm_part_tflops", TFLOP_PER_S, HIGHER, 0.05, "fp32 part's achieved tflops", "`fp32_gemm_part`'s `achieved_tflops`"),
    ("anatomy.fp32_gemm_part_saving_share", SHARE, LOWER, 0.1, "fp32 part's efficiency what-if", "`fp32_gemm_part`'s `efficiency_saving_share`"),
) + STRUCTURE_ENTRIES
# fmt: on
