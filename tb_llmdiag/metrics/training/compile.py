"""torch.compile compiling inside the profiled window (Kineto): how often, how long, in which steps, and why
when the trace shows it.

Definitions (host rows whose start lies in the analysis window):
- Compile ranges: host annotations / operators / Python frames of TorchDynamo and Inductor compiling
  (``COMPILE_PATTERN``: ``... (dynamo_timed)`` ranges, ``_compile.compile_inner``, ``entire_frame_compile``,
  ``compile_fx_inner``, ``fx_codegen_and_compile``, ``OutputGraph.call_user_compiler``,
  ``create_aot_dispatcher_function``, and the Python frames ``torch/_dynamo/convert_frame.py(...): _compile`` /
  ``torch/_inductor/compile_fx.py(...): compile_fx_inner``). Nested ranges merge per thread. ``compiled_ids``:
  the compile ids ``F/C`` of dynamo's ``..._data: compile_id=F/C`` markers (recorded only while compiling);
  ``count``: their number, else (older torch, no markers) the number of merged ranges. ``time_ns`` = their union within the window,
  ``share`` = time_ns / window_ns (the GPU waits while the host compiles: a share of step time).
- ``steps_hit``: indexes of the steps whose host window holds a compile start; ``steps_hit_share`` =
  len(steps_hit) / steps.
- ``regions``: the distinct compile ids ``F/C`` in the window, from ``Torch-Compiled Region: F/C`` annotations and
  the ``compile_id=F/C`` of dynamo's ``..._data`` markers (frame F, compile C of that frame: C > 0 is a
  recompile); ``max_recompile_index`` = the largest C.
- ``new_shape_steps`` (only when every step's token slots are known, > 0: a compiled graph hides
  ``aten::embedding``): the hit steps whose token slots (``metrics.throughput.shapes``: batch x padded length) differ from
  every earlier step's and from every step that did not compile: the input shape changed there (a first
  profiled step counts only when some step did not compile); ``cause`` = ``"new input shape"`` when every hit
  step is such a step, else ``NOT_RECORDED`` (the trace does not record dynamo's recompile reasons); null without
  a compile in a step.
- ``claims``: ``"idle"`` when at least half of the steps compile (the median step holds a compile), else
  ``"excess"`` (only some steps pay it).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, in_windows, share
from tb_llmdiag.metrics.entry import COUNT, INDEX, LOWER, NEITHER, NS, SHARE, TEXT, Entry, Intro
from tb_llmdiag.metrics.host.ranges import named_rows, step_of
from tb_llmdiag.metrics.throughput.shapes import tokens_per_window
from tb_llmdiag.model import Kind

COMPILE_PATTERN = re.compile(
    r"\(dynamo_timed\)$"
    r"|^(?:_compile\.compile_inner|entire_frame_compile|compile_fx_inner|fx_codegen_and_compile|"
    r"OutputGraph\.call_user_compiler|create_aot_dispatcher_function)$"
    r"|^torch/_dynamo/convert_frame\.py\(\d+\): _compile$|^torch/_inductor/compile_fx\.py\(\d+\): compile_fx_inner$"
)
NOT_RECORDED = (
    "not recorded in the trace (dynamo recompiles a frame when a guard fails: most often a new input "
    "shape with dynamic=False, else a new dtype, device or grad mode)"
)
#: ``_data: ...compile_id=F/C``. The lookahead pins the first ``_data: `` (a lookahead does not backtrack), so a
#: name repeating ``_data: `` is scanned once, not once per repeat (#27: was quadratic, 66 s for 1 MB).
MARKER = re.compile(r"^(?=((?s:.*?)_data: ))\1(?s:.*)compile_id=(\d+/\d+)\b")
REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$|compile_id=(\d+)/(\d+)\b")


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
    markers = named_rows(ctx, MARKER, (Kind.ANNOTATION, Kind.CPU_OP))
    markers = markers[in_windows(ev.ts_ns[markers], ctx.win_s, ctx.win_e)]
    compiled_ids = sorted({MARKER.search(ev.names[i]).group(2) for i in np.unique(ev.name_id[markers])})  # type: ignore[union-attr]
    s = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    e = np.concatenate(ends) if ends else np.zeros(0, np.int64)
    time_ns = int(overlap_per_window(*merge(s, e), ctx.win_s, ctx.win_e).sum()) if s.size else 0
    pos = step_of(ctx, s)
    hit = sorted(set(int(p) for p in pos[pos >= 0]))
    regions = named_rows(ctx, REGION, (Kind.ANNOTATION, Kind.CPU_OP))
    regions = regions[in_windows(ev.ts_ns[regions], ctx.win_s, ctx.win_e)]
    ids = set()
    for i in np.unique(ev.name_id[regions]):
        g = REGION.search(ev.names[i]).groups()  # type: ignore[union-attr]
        ids.add(f"{g[0]}/{g[1]}" if g[0] is not None else f"{g[2]}/{g[3]}")
    names = sorted(ids)
    compile_ids = [int(x.split("/")[1]) for x in names]
    tokens = tokens_per_window(ev, ctx.steps.start_ns, ctx.steps.host_end_ns) if len(ctx.steps) else None
    new_shape: list[int] = []
    if tokens is not None and (tokens > 0).all():  # a compiled graph hides aten::embedding: then shapes are unknown
        calm = {int(tokens[q]) for q in range(len(tokens)) if q not in hit}
        for p in hit:
            seen = {int(t) for t in tokens[:p]} | calm
            if (p > 0 or calm) and int(tokens[p]) not in seen:
                new_shape.append(int(ctx.steps.index[p]))
    cause = "new input shape" if hit and len(new_shape) == len(hit) else (NOT_RECORDED if hit else None)
    n = ctx.n_steps
    return {
        "available": True,
        "count": len(compiled_ids) if compiled_ids else int(s.size),
        "compiled_ids": compiled_ids,
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


# The registry's entries of the `compile` topic: one row per key (metrics/entry.py); metrics/registry.py collects them
# through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`compile` (metrics/training/compile.py)",
    "torch.compile (TorchDynamo / Inductor) compiling inside the window: `... (dynamo_timed)` ranges, "
    "`compile_fx_inner`, `fx_codegen_and_compile`, `_compile.compile_inner` and their Python frames.",
)

ENTRIES: tuple[Entry, ...] = (
    (
        "compile.count",
        COUNT,
        LOWER,
        0.02,
        "compiles",
        "compile ids of dynamo's `..._data: compile_id=F/C` markers in the window; without markers the merged ranges",
    ),
    ("compile.compiled_ids[]", TEXT, NEITHER, 0, "compiled ids", "the `F/C` ids compiled inside the window"),
    ("compile.time_ns", NS, LOWER, 0.05, "compile time", "union of the compile ranges within the window"),
    ("compile.share", SHARE, LOWER, 0.1, "compile share", "time_ns / window_ns"),
    ("compile.longest_ns", NS, LOWER, 0.05, "longest compile", "the longest merged compile range"),
    ("compile.steps_hit[]", INDEX, NEITHER, 0, "steps with a compile", "steps whose host window holds a compile start"),
    ("compile.steps_hit_share", SHARE, LOWER, 0.1, "share of steps compiling", "len(steps_hit) / steps"),
    (
        "compile.regions[]",
        TEXT,
        NEITHER,
        0,
        "compiled regions",
        "distinct `Torch-Compiled Region: F/C` annotations (frame F, its compile C; C > 0 is a recompile)",
    ),
    (
        "compile.max_recompile_index",
        INDEX,
        NEITHER,
        0,
        "highest compile id",
        "the largest C of the compiled regions; null when none is recorded",
    ),
    (
        "compile.new_shape_steps[]",
        INDEX,
        NEITHER,
        0,
        "new-shape steps",
        "hit steps whose token slots (batch x padded length) differ from every earlier step's and every step without "
        "a compile; empty when some step's token slots are unknown",
    ),
    (
        "compile.cause",
        TEXT,
        NEITHER,
        0,
        "cause",
        "`new input shape` when every hit step has a new shape, else a sentence saying the trace does not record it; "
        "null without a compile in a step",
    ),
    (
        "compile.claims",
        TEXT,
        NEITHER,
        0,
        "claims",
        "`idle` when at least half of the steps compile (the median step holds one), else `excess` (docs/whatif.md)",
    ),
)
