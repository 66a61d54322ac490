"""torch.compile compiling inside the profiled window (Kineto): how often, how long, in which steps, and why
when the trace shows it.

Definitions (host rows whose start lies in the analysis window):
- Compile ranges: host annotations / operators / Python frames of TorchDynamo and Inductor compiling
  (``COMPILE_PATTERN``: ``... (dynamo_timed)`` ranges, ``_compile.compile_inner``, ``entire_frame_compile``,
  ``compile_fx_inner``, ``fx_codegen_and_compile``, ``OutputGraph.call_user_compiler``,
  ``create_aot_dispatcher_function``, and the Python frames ``torch/_dynamo/convert_frame.py(...): _compile`` /
  ``torch/_inductor/compile_fx.py(...): compile_fx_inner``). Nested ranges merge per thread; ``count`` is the
  number of merged (outermost) ranges: one per compile. ``time_ns`` = their union within the window,
  ``share`` = time_ns / window_ns (the GPU waits while the host compiles: a share of step time).
- ``steps_hit``: indexes of the steps whose host window holds a compile start; ``steps_hit_share`` =
  len(steps_hit) / steps.
- ``regions``: the distinct ``Torch-Compiled Region: F/C`` annotations in the window (frame F, compile C of that
  frame: C > 0 is a recompile); ``max_recompile_index`` = the largest C.
- ``new_shape_steps``: the hit steps whose token slots (``metrics.shapes``: batch x padded length) differ from
  every earlier step's: the input shape changed there; ``cause`` = ``"new input shape"`` when every hit step but
  the first profiled one is such a step, else null (the trace does not record dynamo's recompile reasons).
- ``claims``: ``"idle"`` when at least half of the steps compile (the median step holds a compile), else
  ``"excess"`` (only some steps pay it).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, in_windows, share
from tb_llmdiag.metrics.ranges import named_rows, step_of
from tb_llmdiag.metrics.shapes import tokens_per_window
from tb_llmdiag.model import Kind

COMPILE_PATTERN = re.compile(
    r"\(dynamo_timed\)$"
    r"|^(?:_compile\.compile_inner|entire_frame_compile|compile_fx_inner|fx_codegen_and_compile|"
    r"OutputGraph\.call_user_compiler|create_aot_dispatcher_function)$"
    r"|^torch/_dynamo/convert_frame\.py\(\d+\): _compile$|^torch/_inductor/compile_fx\.py\(\d+\): compile_fx_inner$")
REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")


def compile_metrics(ctx: Context) -> dict[str, Any]:
    ev = ctx.trace.events
    rows = named_rows(ctx, COMPILE_PATTERN, (Kind.ANNOTATION, Kind.CPU_OP, Kind.PYTHON))
    rows = rows[in_windows(ev.ts_ns[rows], ctx.win_s, ctx.win_e)]
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    for tid in np.unique(ev.tid[rows]):
        r = rows[ev.tid[rows] == tid]
        s, e = merge(ev.ts_ns[r], ev.ts_ns[r] + ev.dur_ns[r])
        starts.append(s)
        ends.append(e)
    s = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    e = np.concatenate(ends) if ends else np.zeros(0, np.int64)
    time_ns = int(overlap_per_window(*merge(s, e), ctx.win_s, ctx.win_e).sum()) if s.size else 0
    pos = step_of(ctx, s)
    hit = sorted(set(int(p) for p in pos[pos >= 0]))
    regions = named_rows(ctx, REGION, (Kind.ANNOTATION, Kind.CPU_OP))
    regions = regions[in_windows(ev.ts_ns[regions], ctx.win_s, ctx.win_e)]
    names = sorted({ev.names[i] for i in np.unique(ev.name_id[regions])})
    compile_ids = [int(REGION.match(n).group(2)) for n in names]  # type: ignore[union-attr]
    tokens = tokens_per_window(ev, ctx.steps.start_ns, ctx.steps.host_end_ns) if len(ctx.steps) else None
    new_shape: list[int] = []
    if tokens is not None:
        for p in hit:
            if p > 0 and int(tokens[p]) not in {int(t) for t in tokens[:p]}:
                new_shape.append(int(ctx.steps.index[p]))
    later = [p for p in hit if p > 0]
    cause = "new input shape" if later and len(new_shape) == len(later) else None
    n = ctx.n_steps
    return {
        "available": True,
        "count": int(s.size),
        "time_ns": time_ns,
        "share": share(time_ns, ctx.window_ns) if s.size else 0.0,
        "longest_ns": int((e - s).max()) if s.size else 0,
        "steps_hit": [int(ctx.steps.index[p]) for p in hit],
        "steps_hit_share": len(hit) / n if n else None,
        "regions": names,
        "max_recompile_index": max(compile_ids) if compile_ids else None,
        "new_shape_steps": new_shape,
        "cause": cause,
        "claims": "idle" if n and len(hit) * 2 >= n else "excess",
    }
