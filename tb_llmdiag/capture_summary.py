"""Finishing an over-the-run capture's window away from the training loop: `python -m tb_llmdiag.capture_summary`.

The training process (`tb_llmdiag.capture_series`) exports each window's raw Kineto JSON to a hidden file and hands
it here, in a process of its own, with the window's metadata: this process writes the final trace file
(`capture_export.write_window`: the metadata inserted at the top level, gzipped, named as
`torch.profiler.tensorboard_trace_handler` names it, renamed into place when complete) and, unless told not to, reads
it with the report engine (`api.report`, the numbers the tab and the CLI show) and prints its summary as one JSON
line. So the training process pays only for the profiler's own export; the gzip and the analysis run on another core
while it trains, and the summary becomes scalars when it is ready (`capture_scalars`).

Input (stdin, one JSON object): `raw`, `out_dir`, `worker`, `use_gzip`, `keys` (top-level key -> value, in order),
`analyze`. Output (stdout, one JSON line): `{"path": ..., "summary": {...}}`, or `{"error": ...}`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

from tb_llmdiag.capture_export import write_window


def summary_of(report: dict[str, Any]) -> dict[str, Any] | None:
    """The per-window summary from a one-file report: its run's median step, GPU-busy share, token slots a step
    and each finding's saving share; None when the report has no analysed run."""
    runs = [r for r in report.get("runs", []) if r.get("status") == "ok" and r.get("headline")]
    if not runs:
        return None
    run = runs[0]
    head = run["headline"]
    step_ns, tps = head.get("step_median_ns"), head.get("tokens_per_s")
    tokens = tps * step_ns / 1e9 if isinstance(tps, (int, float)) and isinstance(step_ns, (int, float)) else None
    savings = {}
    for f in run.get("findings") or []:
        share = (f.get("saving") or {}).get("share")
        if isinstance(share, (int, float)) and f.get("id"):
            savings[str(f["id"])] = float(share)
    return {
        "profiled_step_ns": step_ns,
        "gpu_busy_share": head.get("gpu_busy_share"),
        "mfu_share": head.get("mfu_share"),
        "tokens_per_step": tokens,
        "savings_share": savings,
        "finding_ids": [str(f.get("id")) for f in run.get("findings") or []],
    }


def finish(spec: dict[str, Any]) -> dict[str, Any]:
    """Write the window's trace file from its raw export and, when `spec["analyze"]`, summarize it."""
    raw = spec["raw"]
    keys = list(spec["keys"].items())
    try:
        path = write_window(
            lambda dst: os.replace(raw, dst),
            spec["out_dir"],
            spec["worker"],
            keys[0][0],
            keys[0][1],
            use_gzip=bool(spec.get("use_gzip", True)),
            extra=dict(keys[1:]),
        )
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(raw)
    out: dict[str, Any] = {"path": path}
    if spec.get("analyze", True):
        from tb_llmdiag import api

        out["summary"] = summary_of(api.report(path))
    return out


def main() -> int:
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)  # below the training process when they share cores
    try:
        result = finish(json.load(sys.stdin))
    except Exception as e:  # noqa: BLE001  (the training process reads the error; it never stops training)
        result = {"error": f"{type(e).__name__}: {e}"}
    sys.stdout.write(json.dumps(result, allow_nan=False, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
