"""Activation checkpointing: forward operators re-run inside the backward pass (recompute).

Definitions (host rows whose start lies in the analysis window):
- Backward ranges: ``autograd::engine::evaluate_function: ...`` operators (the autograd engine running one
  backward node).
- Recompute ops: forward-only operators (``FORWARD_ONLY``: ``aten::linear``, ``aten::embedding``,
  ``aten::scaled_dot_product_attention``, ``aten::layer_norm``, ``aten::rms_norm``, ``aten::silu``,
  ``aten::gelu``: their backward runs other operators) that start inside a backward range of the same thread:
  the forward is being recomputed. ``recompute_ops``, ``recompute_ops_per_step``.
- ``checkpoint_frames``: rows naming torch.utils.checkpoint (``CheckpointFunction``, Python frames in
  ``torch/utils/checkpoint.py``): the reentrant variant and stacks show it by name.
- ``on``: recompute ops per step >= 1, or checkpoint frames in the window.
- Recompute spans: per backward range holding recompute ops, from the first one's start to the last one's end
  (the re-run forward of a checkpointed block, its elementwise ops included). ``recompute_host_ns``: their
  union; ``recompute_device_ns``: the union of the device events launched inside them.
- ``recompute_share`` = max(recompute_host_ns, recompute_device_ns) / window_ns: what turning checkpointing off
  could save at most (the forward done a second time, on the host when the step is launch-bound, else on the
  GPU); ``claims`` = ``idle`` when the host time is the larger, else ``device``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tb_llmdiag.intervals import merge
from tb_llmdiag.metrics.context import Context, in_windows, per_step, share
from tb_llmdiag.metrics.entry import COUNT, FLAG, LOWER, NEITHER, NS, PER_STEP, SHARE, TEXT, Entry, Intro
from tb_llmdiag.metrics.host.ranges import busy_ns, inside, launched_in_spans, named_rows
from tb_llmdiag.model import Kind

BACKWARD = re.compile(r"^autograd::engine::evaluate_function: ")
FORWARD_ONLY = re.compile(r"^aten::(?:linear|embedding|scaled_dot_product_attention|layer_norm|rms_norm|silu|gelu)$")
FRAMES = re.compile(r"CheckpointFunction|torch/utils/checkpoint\.py")


def checkpointing_metrics(ctx: Context) -> dict[str, Any]:
    ev = ctx.trace.events
    bwd = named_rows(ctx, BACKWARD, (Kind.CPU_OP,))
    fwd = named_rows(ctx, FORWARD_ONLY, (Kind.CPU_OP,))
    fwd = fwd[in_windows(ev.ts_ns[fwd], ctx.win_s, ctx.win_e)]
    rec = fwd[inside(ctx, fwd, bwd)]
    frames = named_rows(ctx, FRAMES, (Kind.CPU_OP, Kind.PYTHON, Kind.ANNOTATION))
    frames = frames[in_windows(ev.ts_ns[frames], ctx.win_s, ctx.win_e)]
    rps = per_step(int(rec.size), ctx) if ctx.n_steps else float(rec.size)
    s, e, tid = _spans(ctx, rec, bwd)
    ms, me = merge(s, e) if s.size else (s, e)
    host_ns = int((me - ms).sum()) if s.size else 0
    dev_ns = busy_ns(ctx, launched_in_spans(ctx, s, e, tid))
    return {
        "available": True,
        "recompute_ops": int(rec.size),
        "recompute_ops_per_step": rps,
        "checkpoint_frames": int(frames.size),
        "on": bool((rps or 0) >= 1 or frames.size > 0),
        "recompute_host_ns": host_ns,
        "recompute_device_ns": dev_ns,
        "recompute_share": share(max(host_ns, dev_ns), ctx.window_ns) if ctx.window_ns else None,
        "claims": "idle" if host_ns > dev_ns else "device",
    }


def _spans(ctx: Context, rec: np.ndarray, bwd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (thread, merged backward range) holding recompute ops: first start, last end, thread."""
    ev = ctx.trace.events
    if rec.size == 0:
        z = np.zeros(0, np.int64)
        return z, z.copy(), z.copy()
    out_s, out_e, out_t = [], [], []
    for tid in np.unique(ev.tid[rec]):
        b = bwd[ev.tid[bwd] == tid]
        bs, _ = merge(ev.ts_ns[b], ev.ts_ns[b] + ev.dur_ns[b])
        r = rec[ev.tid[rec] == tid]
        key = np.searchsorted(bs, ev.ts_ns[r], side="right") - 1
        order = np.argsort(key, kind="stable")
        key, r = key[order], r[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        out_s.append(np.minimum.reduceat(ev.ts_ns[r], first))
        out_e.append(np.maximum.reduceat(ev.ts_ns[r] + ev.dur_ns[r], first))
        out_t.append(np.full(first.size, tid, np.int64))
    return np.concatenate(out_s), np.concatenate(out_e), np.concatenate(out_t)


# The registry's entries of the `checkpointing` topic: one row per key (metrics/entry.py); metrics/registry.py
# collects them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`checkpointing` (metrics/training/checkpointing.py)",
    "Activation checkpointing seen as forward-only operators re-run inside "
    "`autograd::engine::evaluate_function` (backward) ranges.",
)

ENTRIES: tuple[Entry, ...] = (
    (
        "checkpointing.recompute_ops",
        COUNT,
        LOWER,
        0.02,
        "recompute ops",
        "forward-only operators (linear, embedding, SDPA, layer/RMS norm, SiLU, GELU) inside backward ranges",
    ),
    (
        "checkpointing.recompute_ops_per_step",
        PER_STEP,
        LOWER,
        0.05,
        "recompute ops per step",
        "recompute_ops / steps (the count without steps)",
    ),
    (
        "checkpointing.checkpoint_frames",
        COUNT,
        NEITHER,
        0.02,
        "checkpoint frames",
        "rows naming torch.utils.checkpoint (`CheckpointFunction`, `torch/utils/checkpoint.py` frames)",
    ),
    ("checkpointing.on", FLAG, NEITHER, 0, "checkpointing on", "recompute ops per step >= 1 or checkpoint frames seen"),
    (
        "checkpointing.recompute_host_ns",
        NS,
        LOWER,
        0.05,
        "recompute host time",
        "union of the recompute spans: per backward range holding recompute ops, first one's start to last one's end",
    ),
    (
        "checkpointing.recompute_device_ns",
        NS,
        LOWER,
        0.05,
        "recompute GPU time",
        "union of the device events launched inside the recompute spans",
    ),
    (
        "checkpointing.recompute_share",
        SHARE,
        LOWER,
        0.1,
        "recompute share",
        "max(recompute_host_ns, recompute_device_ns) / window_ns: what turning checkpointing off could save at most",
    ),
    (
        "checkpointing.claims",
        TEXT,
        NEITHER,
        0,
        "claims",
        "`idle` when the recompute's host time is the larger (a launch-bound step), else `device` (docs/whatif.md)",
    ),
)
