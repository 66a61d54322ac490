"""The ``timeline`` and ``scalars`` subcommands (``llmdiag timeline RUN``, ``llmdiag scalars LOGDIR --out DIR``);
``tb_llmdiag/cli/__init__.py`` adds them to its parser. docs/timeline.md is their manual: ``api.timeline`` builds the
document, ``render.timeline_text`` prints it, and ``scalars`` writes each window's summary as the ``llm_diag/*``
TensorBoard scalars the capture helper writes while training (``tb_llmdiag.capture_scalars``), for runs captured
without it, into a folder of the user's choosing (never into the logdir unless told so)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from tb_llmdiag import api
from tb_llmdiag.capture_scalars import ScalarSink, helper_scalars, report_scalars
from tb_llmdiag.render.canonical_json import dumps
from tb_llmdiag.render.timeline_text import render_timeline, render_timeline_md


def _timeline(args: argparse.Namespace) -> int:
    form = "json" if args.json else args.format
    doc = api.timeline(args.path, workers=args.workers)
    sys.stdout.write(
        dumps(doc) + "\n" if form == "json" else render_timeline_md(doc) if form == "md" else render_timeline(doc)
    )
    return 0


def window_scalars(w: Mapping[str, Any], cost_share: float | None) -> dict[str, float]:
    """A timeline window's ``llm_diag/*`` scalars: the tags the helper writes, from the same numbers."""
    meta = {
        "step_ns": w.get("step_ns"),
        "tokens_per_step": w.get("tokens_per_step"),
        "cost": {"spent_share": w.get("cost_share_so_far", cost_share)},
        "trigger": w.get("trigger"),
    }
    summary = {
        "profiled_step_ns": w.get("profiled_step_ns"),
        "gpu_busy_share": w.get("gpu_busy_share"),
        "mfu_share": w.get("mfu_share"),
        "savings_share": {f["id"]: f["saving_share"] for f in w.get("findings") or [] if f.get("id")},
    }
    return {**helper_scalars(meta), **report_scalars(meta, summary)}


def _folder(out: str, s: Mapping[str, Any], several: bool) -> str:
    parts = [p for p in str(s.get("run") or "run").split("/") if p not in ("", ".", "..")] or ["run"]
    if several:
        parts.append(str(s.get("worker") or "worker").replace("/", "_"))
    return os.path.join(out, *parts)


def _scalars(args: argparse.Namespace) -> int:
    doc = api.timeline(args.logdir, workers=args.workers)
    runs = [s.get("run") for s in doc["series"]]
    written = 0
    for s in doc["series"]:
        folder = _folder(args.out, s, runs.count(s.get("run")) > 1)
        sink = ScalarSink(folder)
        for w in s.get("windows") or []:
            if isinstance(w.get("global_step"), int):
                sink.write(w["global_step"], window_scalars(w, None))
        sink.close()
        written += len(sink.written)
        print(f"{folder}: {len(sink.written)} scalars at {len(s.get('windows') or [])} windows")
    return 0 if written else 3


def add_commands(sub: Any) -> None:
    tl = sub.add_parser(
        "timeline", help="the windows of each run over the run: step, tokens/s, GPU busy, MFU, change points"
    )
    tl.add_argument("path", help="a logdir, a run folder or one window's trace")
    tl.add_argument("--json", action="store_true", help="print one JSON document (docs/timeline.md)")
    tl.add_argument("--format", choices=("text", "json", "md"), default="text", help="text (default), json or md")
    tl.add_argument("--workers", type=int, default=1, metavar="N", help="analyse on N local processes")
    tl.set_defaults(func=_timeline)
    sc = sub.add_parser(
        "scalars", help="write each window's summary as llm_diag/* TensorBoard scalars into DIR/<run> (not the logdir)"
    )
    sc.add_argument("logdir")
    sc.add_argument("--out", required=True, metavar="DIR", help="the folder to write event files in")
    sc.add_argument("--workers", type=int, default=1, metavar="N", help="analyse on N local processes")
    sc.set_defaults(func=_scalars)
