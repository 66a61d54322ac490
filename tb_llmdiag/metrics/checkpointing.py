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
- ``recompute_device_ns``: the union of the device events launched from inside the recompute ops;
  ``recompute_share`` = recompute_device_ns / window_ns: what turning checkpointing off could save at most
  (the forward's work done a second time).
"""

from __future__ import annotations

import re
from typing import Any

from tb_llmdiag.metrics.context import Context, in_windows, per_step, share
from tb_llmdiag.metrics.ranges import busy_ns, inside, launched_inside, named_rows
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
    dev_ns = busy_ns(ctx, launched_inside(ctx, rec))
    return {
        "available": True,
        "recompute_ops": int(rec.size),
        "recompute_ops_per_step": rps,
        "checkpoint_frames": int(frames.size),
        "on": bool((rps or 0) >= 1 or frames.size > 0),
        "recompute_device_ns": dev_ns,
        "recompute_share": share(dev_ns, ctx.window_ns) if ctx.window_ns else None,
    }
