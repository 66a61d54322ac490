"""Time per user annotation (``record_function`` ranges) and the training stack the trace reveals.

Definitions (host ANNOTATION events whose start lies in the analysis window):
- ``top``: per name (``top`` names with most time): count, total_ns (sum of durations; nested or
  repeated ranges both count), share = the union of its ranges within the analysis window / window_ns (time
  counted once, so at most 1: #27 found 1.005 on a cut file whose ranges overlapped).
- ``optimizer_step_share``: union of ``Optimizer.step#...`` ranges / window_ns (R17: > 5 % on a LoRA run
  means more is trainable than intended). ``zero_grad_share`` likewise for ``Optimizer.zero_grad#``.
- ``stack``: ``lightning`` (Framework metadata or ``[pl]`` labels), ``hf_trainer`` (python frames in
  ``transformers/trainer.py``), ``accelerate`` (``accelerate/`` frames), ``torchtune`` (``torchtune/`` frames
  or ``recipes/``), else null. Used to word fixes in the user's stack (R20).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, in_windows, share, used_names
from tb_llmdiag.metrics.entry import COUNT, NEITHER, NS, SHARE, TEXT, Entry, Intro
from tb_llmdiag.model import Kind, Trace, kind_mask

#: (stack, substring of a host event name) checked in order.
STACK_MARKERS: tuple[tuple[str, str], ...] = (
    ("lightning", "[pl]"),
    ("lightning", "lightning/pytorch"),
    ("hf_trainer", "transformers/trainer.py"),
    ("torchtune", "torchtune/"),
    ("accelerate", "accelerate/"),
)


def detect_stack(trace: Trace) -> str | None:
    fw = str(trace.metadata.get("Framework", "")).lower()
    if "lightning" in fw:
        return "lightning"
    ev = trace.events
    if not len(ev.names):
        return None
    host = np.zeros(len(ev.names), bool)
    host[used_names(ev.name_id[kind_mask(ev.kind, (Kind.ANNOTATION, Kind.PYTHON, Kind.STEP))], len(ev.names))] = True
    names = [n for n, h in zip(ev.names, host) if h]
    for stack, marker in STACK_MARKERS:
        if any(marker in n for n in names):
            return stack
    return None


def annotation_metrics(ctx: Context, *, top: int = 15) -> dict[str, Any]:
    ev = ctx.trace.events
    rows = np.flatnonzero(ev.kind == Kind.ANNOTATION)
    rows = rows[in_windows(ev.ts_ns[rows], ctx.win_s, ctx.win_e)]
    nid = ev.name_id[rows]
    dur = ev.dur_ns[rows]
    per = np.bincount(nid, weights=dur, minlength=len(ev.names))
    cnt = np.bincount(nid, minlength=len(ev.names))
    order = np.argsort(-per, kind="stable")[:top]
    ts = ev.ts_ns[rows]

    def once_ns(i: int) -> int:  # the name's ranges merged, within the window
        mine = nid == i
        return int(overlap_per_window(ts[mine], ts[mine] + dur[mine], ctx.win_s, ctx.win_e).sum())

    table = [
        {
            "name": ev.names[i],
            "count": int(cnt[i]),
            "total_ns": int(per[i]),
            "share": share(once_ns(int(i)), ctx.window_ns),
        }
        for i in order
        if cnt[i] > 0
    ]

    def union_share(prefix: str) -> float | None:
        flag = np.fromiter((n.startswith(prefix) for n in ev.names), bool, len(ev.names))
        m = flag[nid] if nid.size else np.zeros(0, bool)
        s, e = merge(ev.ts_ns[rows][m], ev.ts_ns[rows][m] + dur[m])
        return share(int(overlap_per_window(s, e, ctx.win_s, ctx.win_e).sum()), ctx.window_ns)

    return {
        "available": True,
        "count": int(rows.size),
        "top": table,
        "optimizer_step_share": union_share("Optimizer.step#"),
        "zero_grad_share": union_share("Optimizer.zero_grad#"),
        "stack": detect_stack(ctx.trace),
    }


# The registry's entries of the `annotations` topic: one row per key (metrics/entry.py); metrics/registry.py collects
# them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = ("`annotations` (metrics/host/annotations.py)", "")

#: the shared part of the definitions of `annotations.top[]`'s fields
_TOP_ENTRY = (
    "`top` entry: per name (top 15 by time): `name`, `count`, `total_ns` (sum of durations: nested or repeated "
    "ranges all count), `share` (the union of its ranges within the window / window_ns: time counted once)"
)

ENTRIES: tuple[Entry, ...] = (
    (
        "annotations.count",
        COUNT,
        NEITHER,
        0.02,
        "count",
        "host user annotations (`record_function` ranges) in the window",
    ),
    (
        "annotations.optimizer_step_share",
        SHARE,
        NEITHER,
        0.1,
        "optimizer step share",
        "union of `Optimizer.step#...` ranges within the window / window_ns",
    ),
    (
        "annotations.stack",
        TEXT,
        NEITHER,
        0,
        "stack",
        "the training stack the trace reveals: `lightning` (`Framework` metadata or `[pl]` labels, "
        "`lightning/pytorch` frames), `hf_trainer` (`transformers/trainer.py` frames), `torchtune`, "
        "`accelerate`; null when unknown. Findings use it to word fixes",
    ),
    ("annotations.zero_grad_share", SHARE, NEITHER, 0.1, "zero grad share", "the same for `Optimizer.zero_grad#...`"),
    ("annotations.top[].count", COUNT, NEITHER, 0.02, "top count", "`count` of each " + _TOP_ENTRY),
    ("annotations.top[].name", TEXT, NEITHER, 0, "top name", "`name` of each " + _TOP_ENTRY),
    ("annotations.top[].share", SHARE, NEITHER, 0.1, "top share", "`share` of each " + _TOP_ENTRY),
    ("annotations.top[].total_ns", NS, NEITHER, 0.05, "top total", "`total_ns` of each " + _TOP_ENTRY),
)
