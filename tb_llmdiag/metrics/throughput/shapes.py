"""Recorded input shapes (``record_shapes=True``): tokens per step and operator FLOPs.

Definitions:
- Shapes are Kineto's ``Input Dims`` strings (``[[4, 512], [151936, 1536]]``), parsed once per unique
  (operator name, shape) pair, then broadcast.
- Tokens of a forward pass: ``aten::embedding(weight [V, H], indices [B, L])`` gives B x L token slots
  (padding included). Only calls whose weight has the largest V seen (the token embedding, not e.g.
  position embeddings) count. Tokens of a step = sum over such calls whose start lies in the step's
  host window [start, host_end) (gradient-accumulation micro-batches add up).
- FLOPs (hardware FLOPs of the recorded operators, forward and backward alike, since backward GEMMs run
  through the same aten ops): mm [M,K]x[K,N] = 2MKN; addmm same; bmm/baddbmm [B,M,K]x[B,K,N] = 2BMKN;
  SDPA flash/efficient/cuDNN forward with q [B,H,L,D], k [B,H,S,D] = 4BHLSD (the full L x S score matrix;
  causal masking would halve it), its backward = 2.5x that; flash_attn's ops use q [B,L,H,D].
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.model import EventTable, Kind

Dims = Sequence[Sequence[int]]


def _parse(shape: str) -> list[list[int]] | None:
    try:
        v = json.loads(shape)
    except (ValueError, TypeError):
        return None
    if not isinstance(v, list):
        return None
    return [[int(x) for x in d if isinstance(x, (int, float))] if isinstance(d, list) else [] for d in v]


def parse_dims(shape: str) -> list[list[int]] | None:
    """A recorded ``Input Dims`` string as lists of ints (None when it is not a list)."""
    return _parse(shape)


def _prod(d: Sequence[int]) -> int:
    return math.prod(d) if d else 0


def _mm(d: Dims, a: int = 0) -> float:
    if len(d) > a + 1 and len(d[a]) == 2 and len(d[a + 1]) == 2:
        (m, k), (_, n) = d[a], d[a + 1]
        return 2.0 * m * k * n
    return 0.0


def _bmm(d: Dims, a: int = 0) -> float:
    if len(d) > a + 1 and len(d[a]) == 3 and len(d[a + 1]) == 3:
        (b, m, k), (_, _, n) = d[a], d[a + 1]
        return 2.0 * b * m * k * n
    return 0.0


def _sdpa(mult: float, bhld: bool) -> Callable[[Dims], float]:
    def f(d: Dims) -> float:
        if len(d) < 2 or len(d[0]) != 4 or len(d[1]) != 4:
            return 0.0
        if bhld:
            b, h, q_len, dd = d[0]
            s = d[1][2]
        else:
            b, q_len, h, dd = d[0]
            s = d[1][1]
        return mult * 4.0 * b * h * q_len * s * dd

    return f


#: operator name -> FLOPs from its Input Dims. Leaf ops only, so nothing is counted twice.
FLOP_FORMULAS: dict[str, Callable[[Dims], float]] = {
    "aten::mm": _mm,
    "aten::addmm": lambda d: _mm(d, 1),
    "aten::_scaled_mm": _mm,
    "aten::bmm": _bmm,
    "aten::baddbmm": lambda d: _bmm(d, 1),
    "aten::_scaled_dot_product_flash_attention": _sdpa(1.0, True),
    "aten::_scaled_dot_product_efficient_attention": _sdpa(1.0, True),
    "aten::_scaled_dot_product_cudnn_attention": _sdpa(1.0, True),
    "aten::_scaled_dot_product_flash_attention_backward": _sdpa(2.5, True),
    "aten::_scaled_dot_product_efficient_attention_backward": _sdpa(2.5, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": _sdpa(2.5, True),
    "flash_attn::_flash_attn_forward": _sdpa(1.0, False),
    "flash_attn::_flash_attn_backward": _sdpa(2.5, False),
}
MATMUL_OPS = frozenset(n for n in FLOP_FORMULAS if "attn" not in n and "attention" not in n)


def per_pair(
    ev: EventTable, rows: NDArray[np.intp], fn: Callable[[str, list[list[int]]], float]
) -> NDArray[np.float64]:
    """fn(name, dims) per row, evaluated once per unique (name_id, shape_id)."""
    if rows.size == 0:
        return np.zeros(0)
    key = ev.name_id[rows].astype(np.int64) * (len(ev.shapes) + 1) + (ev.shape_id[rows].astype(np.int64) + 1)
    uniq, inv = np.unique(key, return_inverse=True)
    vals = np.zeros(uniq.size)
    for j, k in enumerate(uniq):
        name_id, shape_id = divmod(int(k), len(ev.shapes) + 1)
        dims = _parse(ev.shapes[shape_id - 1]) if shape_id > 0 else None
        if dims is not None:
            vals[j] = fn(ev.names[name_id], dims)
    return vals[inv]


def op_rows(ev: EventTable, names: Any) -> NDArray[np.intp]:
    flag = np.fromiter((n in names for n in ev.names), dtype=bool, count=len(ev.names))
    if not len(ev.names):
        return np.zeros(0, np.intp)
    rows = np.flatnonzero(ev.shape_id >= 0)  # few: readers keep model.SHAPE_OPS shapes
    rows = rows[ev.kind[rows] == Kind.CPU_OP]
    return rows[flag[ev.name_id[rows]]]


def op_flops(ev: EventTable) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.bool_]]:
    """Rows of FLOP-counted CPU ops with recorded shapes, their FLOPs, and whether each is a matmul."""
    rows = op_rows(ev, FLOP_FORMULAS)
    flops = per_pair(ev, rows, lambda name, dims: FLOP_FORMULAS[name](dims))
    is_mm = (
        np.fromiter((n in MATMUL_OPS for n in ev.names), dtype=bool, count=len(ev.names))[ev.name_id[rows]]
        if rows.size
        else np.zeros(0, bool)
    )
    return rows, flops, is_mm


def token_embedding_calls(ev: EventTable) -> tuple[NDArray[np.intp], NDArray[np.float64]] | None:
    """Rows of the token embedding's calls (the largest vocabulary seen) and their token slots (B x L of the
    indices); None without shapes."""
    rows = op_rows(ev, ("aten::embedding",))
    if rows.size == 0:
        return None
    vocab = per_pair(ev, rows, lambda _n, d: float(d[0][0]) if d and len(d[0]) == 2 else 0.0)
    slots = per_pair(ev, rows, lambda _n, d: float(_prod(d[1])) if len(d) > 1 else 0.0)
    if vocab.size == 0 or vocab.max() <= 0:
        return None
    keep = vocab == vocab.max()
    return rows[keep], slots[keep]


def per_call_batch_length(ev: EventTable, rows: NDArray[np.intp]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """B and L of each embedding call's indices ``[B, L]`` (both 0 where the indices have another rank)."""

    def dim(d: list[list[int]], i: int) -> float:
        return float(d[1][i]) if len(d) > 1 and len(d[1]) == 2 else 0.0

    b = per_pair(ev, rows, lambda _n, d: dim(d, 0))
    n = per_pair(ev, rows, lambda _n, d: dim(d, 1))
    return b.astype(np.int64), n.astype(np.int64)


def _gemm_rows(name: str, d: Dims) -> float:
    """The M (rows) of a 2-D matmul's left operand (``addmm``'s first operand is the bias); -1 otherwise."""
    if name == "aten::addmm":
        d = d[1:]
    return float(d[0][0]) if d and len(d[0]) == 2 else -1.0


def token_batch_share(
    ev: EventTable, rows: NDArray[np.intp], flops: NDArray[np.float64], is_mm: NDArray[np.bool_]
) -> float | None:
    """The share of matmul FLOPs (``op_flops``) whose left operand has as many rows as a token-embedding call
    has token slots: an LLM's linear layers run on the [tokens, hidden] batch its embedding produced (near 1
    on LLM training, prefill and decode), while a diffusion transformer's GEMMs do not run on its text
    encoder's tokens (near 0). None without token-embedding calls or matmul FLOPs."""
    calls = token_embedding_calls(ev)
    total = float(flops[is_mm].sum()) if rows.size else 0.0
    if calls is None or total <= 0:
        return None
    m = per_pair(ev, rows, _gemm_rows)
    return float(flops[is_mm & np.isin(m, np.unique(calls[1]))].sum()) / total


def tokens_per_window(ev: EventTable, starts: NDArray[np.int64], ends: NDArray[np.int64]) -> NDArray[np.int64] | None:
    """Token slots (B x L of the token embedding's indices) per window [starts, ends); None without shapes."""
    calls = token_embedding_calls(ev)
    if calls is None:
        return None
    rows, slots = calls
    ts = ev.ts_ns[rows]
    out = np.zeros(len(starts), np.int64)
    for i in range(len(starts)):  # one pass per step (a handful), not per event
        m = (ts >= starts[i]) & (ts < ends[i])
        out[i] = int(slots[m].sum())
    return out
