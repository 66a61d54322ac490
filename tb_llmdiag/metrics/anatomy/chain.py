"""The ``anatomy`` topic's evidence per device event: what the host call forest says about the code that launched it.

Contract (no I/O, no per-event Python):
- ``node_features(forest, names, kinds)``: per call-tree node (``metrics.host.tree``), inherited down the tree one depth
  level at a time: the part of the innermost ``nn.Module`` frame whose class names one (a MoE block keeps its part for
  the modules inside it), whether a LoRA module (a LoRA class, or a Linear inside a Linear: PEFT's wrapper around its
  ``base_layer``, ``lora_A``, ``lora_B``) encloses it, the part of the innermost annotation naming one, the innermost
  compiled graph's annotation, the part of the *outermost* operator naming one (``aten::cross_entropy_loss`` decides for
  the ``aten::to`` inside it), whether a backward operator encloses it, and whether an operator with recorded shapes or
  ``aten::_scaled_dot_product_attention_math`` (or the backward of its softmax, ``SafeSoftmaxBackward``) does, and
  whether a GEMM operator does.
- ``launch_chains(ctx, forest, rows)``: per device row, its launch call (by correlation id), that call's node, and by
  walking up the launch call's own ancestors (events, not nodes: one node holds every ``MmBackward0`` of a step): the
  innermost operator, the innermost operator with recorded shapes, and, under a backward operator, the node of the
  forward operator a reader linked it to (``Trace.extra["fwd_links"]``: the backward operators' rows over their forward
  operators' rows, from Kineto's ``fwdbwd`` flows; ``source_lines.forward_of``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.metrics.anatomy.parts import PART_CODE, STICKY_PARTS, graph_label, module_flags, part_of_names
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.host.source_lines import BACKWARD, forward_of
from tb_llmdiag.metrics.host.tree import HostForest
from tb_llmdiag.metrics.throughput.shapes import FLOP_FORMULAS
from tb_llmdiag.model import SHAPE_OPS, EventTable, Kind

IDX = NDArray[np.intp]
I16 = NDArray[np.int16]
_MATH_SDPA = "aten::_scaled_dot_product_attention_math"
_POSITIONS_CHUNK = 1 << 16  # forest positions written per step (_positions)
#: the operators whose kernels are GEMMs (a cast inside one is the weight's or the input's)
GEMM_OPS = frozenset(
    ("aten::mm", "aten::addmm", "aten::linear", "aten::matmul", "aten::_scaled_mm", "aten::bmm", "aten::baddbmm")
)
#: the math SDPA's own softmax (``aten::_safe_softmax``) has this backward: only the math path runs it
_MATH_SOFTMAX_BACKWARD = "SafeSoftmaxBackward"


def gather(col: NDArray[Any], idx: NDArray[np.integer], empty: Any) -> NDArray[Any]:
    """``col[idx]`` where ``idx >= 0``, ``empty`` elsewhere; all ``empty`` when ``col`` has nothing to take (a trace
    of kernels alone: no operator node)."""
    if col.size == 0:
        return np.full(idx.shape, empty)
    out: NDArray[Any] = np.where(idx >= 0, col[np.maximum(idx, 0)], empty)
    return out


@dataclass(frozen=True)
class NodeFeatures:
    mod_part: I16  # per node: the innermost module part, -1
    lora: NDArray[np.bool_]  # inside a LoRA module
    ann_part: I16  # the innermost annotation part, -1
    graph: NDArray[np.int32]  # the innermost compiled graph's annotation (a name id), -1
    op_part: I16  # the outermost operator part, -1
    backward: NDArray[np.bool_]  # inside a backward operator
    shaped: NDArray[np.bool_]  # inside an operator whose shapes the reader keeps
    math_sdpa: NDArray[np.bool_]  # inside aten::_scaled_dot_product_attention_math or its SafeSoftmaxBackward
    gemm_op: NDArray[np.bool_]  # inside a GEMM operator (``GEMM_OPS``: a cast there is a weight's, as autocast does)


def _per_name(names: tuple[str, ...], ids: IDX, kinds: NDArray[np.uint8]) -> dict[str, NDArray[Any]]:
    """Each node's own evidence, by its name (evaluated once per distinct name)."""
    n = len(names)
    uniq = np.unique(ids)
    out: dict[str, NDArray[Any]] = {}
    for key, table, kind in (
        ("mod", "module", Kind.PYTHON),
        ("ann", "annotation", Kind.ANNOTATION),
        ("op", "op", Kind.CPU_OP),
    ):
        mine = np.unique(ids[kinds == kind])  # each table reads the names of its kind of node only
        full = np.full(n, -1, np.int16)
        full[mine] = part_of_names(names, mine, table)
        out[key] = full[ids]
    is_mod, linear, lora = module_flags(names, uniq)
    for key, flag in (("is_mod", is_mod), ("linear", linear), ("lora", lora)):
        full_b = np.zeros(n, bool)
        full_b[uniq] = flag
        out[key] = full_b[ids]
    graph = np.full(n, -1, np.int32)
    text = [(i, names[i]) for i in uniq.tolist()]
    for i, name in text:
        if graph_label(name) is not None:
            graph[i] = i
    out["graph"] = graph[ids]
    for key, test in (
        ("bwd", lambda s: BACKWARD.search(s) is not None),
        ("shaped", lambda s: SHAPE_OPS.search(s) is not None),
        ("math", lambda s: s == _MATH_SDPA or _MATH_SOFTMAX_BACKWARD in s),
        ("gemm", lambda s: s in GEMM_OPS),
    ):
        full_b = np.zeros(n, bool)
        full_b[uniq] = np.fromiter((test(s) for _, s in text), bool, count=len(text))
        out[key] = full_b[ids]
    return out


def node_features(forest: HostForest, names: tuple[str, ...]) -> NodeFeatures:
    """Per call-tree node (module docstring). Nodes are numbered level by level, so one pass per depth fills each
    level from its parents."""
    nn = forest.n_nodes
    own = _per_name(names, forest.node_name.astype(np.intp), forest.node_kind)
    kind = forest.node_kind
    for key, k in (("mod", Kind.PYTHON), ("ann", Kind.ANNOTATION), ("op", Kind.CPU_OP)):
        own[key] = np.where(kind == k, own[key], -1).astype(np.int16)
    is_mod = own["is_mod"] & (kind == Kind.PYTHON)
    f = NodeFeatures(
        np.full(nn, -1, np.int16),
        np.zeros(nn, bool),
        np.full(nn, -1, np.int16),
        np.full(nn, -1, np.int32),
        np.full(nn, -1, np.int16),
        np.zeros(nn, bool),
        np.zeros(nn, bool),
        np.zeros(nn, bool),
        np.zeros(nn, bool),
    )
    in_linear = np.zeros(nn, bool)  # the innermost module is Linear-like
    sticky = np.isin(np.arange(len(PART_CODE)), [PART_CODE[p] for p in STICKY_PARTS])
    depth = forest.node_depth
    bounds = np.searchsorted(depth, np.arange(int(depth.max()) + 2 if nn else 1))
    for d in range(bounds.size - 1):
        lvl = np.arange(bounds[d], bounds[d + 1])
        par = forest.node_parent[lvl]
        has = par >= 0
        pp = np.where(has, par, 0)

        def up(col: NDArray[Any], empty: Any, pp: IDX = pp, has: NDArray[np.bool_] = has) -> NDArray[Any]:
            out: NDArray[Any] = np.where(has, col[pp], empty)
            return out

        p_mod = up(f.mod_part, -1)
        keep = (p_mod >= 0) & sticky[np.maximum(p_mod, 0)]
        f.mod_part[lvl] = np.where((own["mod"][lvl] >= 0) & ~keep, own["mod"][lvl], p_mod)
        m = is_mod[lvl]
        f.lora[lvl] = up(f.lora, False) | (m & own["lora"][lvl]) | (m & own["linear"][lvl] & up(in_linear, False))
        in_linear[lvl] = np.where(m, own["linear"][lvl], up(in_linear, False))
        f.ann_part[lvl] = np.where(own["ann"][lvl] >= 0, own["ann"][lvl], up(f.ann_part, -1))
        f.graph[lvl] = np.where(own["graph"][lvl] >= 0, own["graph"][lvl], up(f.graph, -1))
        p_op = up(f.op_part, -1)
        f.op_part[lvl] = np.where(p_op >= 0, p_op, own["op"][lvl])
        f.backward[lvl] = up(f.backward, False) | own["bwd"][lvl]
        f.shaped[lvl] = up(f.shaped, False) | (own["shaped"][lvl] & (kind[lvl] == Kind.CPU_OP))
        f.math_sdpa[lvl] = up(f.math_sdpa, False) | own["math"][lvl]
        f.gemm_op[lvl] = up(f.gemm_op, False) | (own["gemm"][lvl] & (kind[lvl] == Kind.CPU_OP))
    return f


@dataclass(frozen=True)
class Chains:
    launch: IDX  # per device row: its launch call's row, -1
    node: IDX  # the launch call's node, -1
    op_row: IDX  # the innermost operator around the launch call, -1
    shape_row: IDX  # the innermost operator with recorded shapes around it, -1
    fwd_node: IDX  # under a backward operator: the node of its forward operator, -1
    flop_row: IDX  # the innermost operator with shapes whose FLOPs ``metrics.throughput.shapes`` counts, -1


def _walk(
    forest: HostForest,
    ev: EventTable,
    counted: NDArray[np.bool_],
    links: NDArray[np.int32] | None,
    pos: IDX,
    need_shape: NDArray[np.bool_],
    need_fwd: NDArray[np.bool_],
) -> tuple[IDX, IDX, IDX, IDX]:
    """Up the ancestors of the events at forest positions ``pos``: the innermost operator, the innermost operator
    with shapes and the innermost FLOP-counted one (``counted``: by name id; where ``need_shape``), the forward row
    linked to the innermost backward operator (where ``need_fwd``)."""
    n = pos.size
    op, shp, flop, fwd = (np.full(n, -1, np.intp) for _ in range(4))
    cur = pos.astype(np.intp)
    live = np.flatnonzero(cur >= 0)
    while live.size:
        c = cur[live]
        r = forest.rows[c]
        is_op = ev.kind[r] == Kind.CPU_OP
        hit = is_op & (op[live] < 0)
        op[live[hit]] = r[hit]
        shaped = is_op & (ev.shape_id[r] >= 0)
        hit = shaped & (shp[live] < 0)
        shp[live[hit]] = r[hit]
        hit = shaped & (flop[live] < 0) & counted[ev.name_id[r]]
        flop[live[hit]] = r[hit]
        if links is not None:
            link = forward_of(links, r)
            hit = (link >= 0) & (fwd[live] < 0)
            fwd[live[hit]] = link[hit]
        cur[live] = forest.parent[c]
        more = (op[live] < 0) | (need_shape[live] & ((shp[live] < 0) | (flop[live] < 0)))
        more |= need_fwd[live] & (fwd[live] < 0)
        live = live[more & (cur[live] >= 0)]
    return op, shp, flop, fwd


def launch_chains(ctx: Context, forest: HostForest, feats: NodeFeatures, rows: IDX) -> Chains:
    """Per device row of ``rows`` (module docstring)."""
    ev = ctx.trace.events
    launch = ctx.cache.launcher(rows)
    k = rows.size
    has = np.flatnonzero(launch >= 0)
    if has.size == 0 or len(forest) == 0:
        return Chains(launch, *(np.full(k, -1, np.intp) for _ in range(5)))
    uniq, inv = np.unique(launch[has], return_inverse=True)
    pos = _positions(forest, len(ev), uniq)
    ok = pos >= 0
    u_node = gather(forest.node, np.where(ok, pos, -1), -1).astype(np.intp)
    safe = np.maximum(u_node, 0)
    need_shape = ok & feats.shaped[safe]
    links = ctx.trace.extra.get("fwd_links")
    need_fwd = ok & feats.backward[safe] & (links is not None)
    counted = np.fromiter((n in FLOP_FORMULAS for n in ev.names), bool, count=len(ev.names))
    u_op, u_shape, u_flop, u_fwd = _walk(forest, ev, counted, links, np.where(ok, pos, -1), need_shape, need_fwd)
    fwd = np.flatnonzero(u_fwd >= 0)
    f_pos = np.full(u_fwd.shape, -1, np.intp)
    if fwd.size:
        f_pos[fwd] = _positions(forest, len(ev), u_fwd[fwd])
    u_fwd_node = gather(forest.node, f_pos, -1).astype(np.intp)
    # the per-row results are made once the walk is done (its temporaries, on top of the kept call forest, set the
    # anatomy topic's peak memory)
    node, op_row, shape_row, fwd_node, flop_row = (np.full(k, -1, np.intp) for _ in range(5))
    node[has], op_row[has], shape_row[has], fwd_node[has] = u_node[inv], u_op[inv], u_shape[inv], u_fwd_node[inv]
    flop_row[has] = u_flop[inv]
    return Chains(launch, node, op_row, shape_row, fwd_node, flop_row)


def _positions(forest: HostForest, n_rows: int, rows: IDX) -> IDX:
    """The forest position of each of ``rows`` (events of the trace's ``n_rows``), -1 for an event not in it. The row
    -> position table is made for the call and dropped, not held through the walk up the ancestors."""
    pos_of_row = np.full(n_rows, -1, np.int32)
    for lo in range(0, len(forest), _POSITIONS_CHUNK):  # bounded temporaries: the positions and the indices cast
        hi = min(lo + _POSITIONS_CHUNK, len(forest))
        pos_of_row[forest.rows[lo:hi]] = np.arange(lo, hi, dtype=np.int32)
    return pos_of_row[rows].astype(np.intp)
