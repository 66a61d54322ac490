"""Check #24's "done when" for the profiler's cost on captures made by examples/captures/single_gpu.sh (trust batch).

    PYTHONPATH=. python scripts/trust_check.py CAPTURES_DIR [CAPTURES_DIR ...]

For every ``<dir>/<capture>/truth.json`` (its trace files beside it) prints, per rank's trace:
- ``measured``: the measured share of the profiled step that is the profiler's own cost, (profiled median -
  unprofiled median) / profiled median, from truth.json (profiled: the recorded steps' host time; unprofiled:
  ``reference.median_wall_ms``: for batches 3-4 (capture_run.py) the reference steps after the profiler stopped, which
  on host-bound jobs run slower than the job ever runs unprofiled (docs/captures_5.md); for batch 5 (overhead_run.py)
  the pristine blocks timed before any profiler ran in the process);
- ``with``: ``capture.profiler_overhead_share`` as the product reports the trace, with the capture helper's metadata
  (which steps it used: after or before the window), its error against ``measured`` and whether it is within 0.05;
- ``before``: the same with only the helper's steps before the window (what the helper of batch 3 wrote), for
  comparison;
- ``without``: the same with every unprofiled field removed (the trace's own estimate), its error and whether it is
  within 0.15;
- ``flags``: the capture topic's problems that concern the estimate (``unprofiled_disagrees``).
Exits 1 when a trace misses either tolerance, 0 otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from tb_llmdiag.ingest import load_trace
from tb_llmdiag.metrics import analyze

WITH_TOLERANCE = 0.05
WITHOUT_TOLERANCE = 0.15
HELPER_KEYS = (
    "unprofiled_step_ns",
    "unprofiled_source",
    "unprofiled_when",
    "unprofiled_before_step_ns",
    "unprofiled_after_step_ns",
)


def _share(trace: Any, meta: dict[str, Any]) -> dict[str, Any]:
    return analyze(dataclasses.replace(trace, metadata=meta)).metrics["capture"]


def check(truth_path: Path) -> list[dict[str, Any]]:
    truth = json.loads(truth_path.read_text())
    rows = []
    for r in truth.get("ranks", []):
        prof, ref = r.get("profiled") or {}, r.get("reference") or {}
        p, u = prof.get("active_median_host_ms"), ref.get("median_wall_ms")
        if not p or not u:
            continue
        for fn in r.get("trace_files", []):
            path = truth_path.parent / fn
            trace = load_trace(str(path))
            plain = {k: v for k, v in trace.metadata.items() if k not in HELPER_KEYS}
            with_cap = _share(trace, dict(trace.metadata))
            without_cap = _share(trace, plain)
            before = trace.metadata.get("unprofiled_before_step_ns") or []  # as the reader read them
            before_cap = (
                _share(
                    trace,
                    {
                        **plain,
                        "unprofiled_step_ns": before,
                        "unprofiled_when": "before_window",
                        "unprofiled_source": "llmdiag_unprofiled_step_ns",
                    },
                )
                if before
                else None
            )
            rows.append(
                {
                    "name": f"{truth_path.parent.name}/rank{r.get('rank', 0)}",
                    "profiled_ms": p,
                    "unprofiled_ms": u,
                    "helper_after_ms": (
                        statistics.median(r["helper_unprofiled"]["after_step_ns"]) / 1e6
                        if (r.get("helper_unprofiled") or {}).get("after_step_ns")
                        else None
                    ),
                    "helper_before_ms": statistics.median(before) / 1e6 if before else None,
                    "measured": (p - u) / p,
                    "with": with_cap["profiler_overhead_share"],
                    "with_95": with_cap.get("profiler_overhead_share_95"),
                    "with_basis": f"{with_cap['overhead_basis']}/{trace.metadata.get('unprofiled_when', '-')}",
                    "before": before_cap["profiler_overhead_share"] if before_cap else None,
                    "without": without_cap["profiler_overhead_share"],
                    "flags": [q["kind"] for q in with_cap["problems"] if q["kind"] == "unprofiled_disagrees"],
                }
            )
    return rows


def _interval(ci: list[float] | None, measured: float) -> str:
    """The report's 95 % interval and whether the measured share lies in it ('in' / 'out')."""
    if not ci:
        return "-"
    return f"{ci[0]:.2f}-{ci[1]:.2f} {'in' if ci[0] - 1e-9 <= measured <= ci[1] + 1e-9 else 'out'}"


def _f(x: float | None, fmt: str) -> str:
    width = int("".join(c for c in fmt.split(".")[0] if c.isdigit()) or 0)
    return f"{'-':>{width}}" if x is None else format(x, fmt)


def main(dirs: list[str]) -> int:
    truths = sorted(p for d in dirs for p in Path(d).glob("*/truth.json"))
    if not truths:
        print(f"no */truth.json under {dirs}")
        return 1
    print(
        f"{'capture':30s} {'prof ms':>8s} {'unprof':>8s} {'after':>7s} {'before':>7s} {'measured':>8s} | "
        f"{'with':>6s} {'err':>6s} {'<=.05':5s} {'95 % interval':15s} {'basis':28s} | {'before':>6s} {'err':>6s} | "
        f"{'without':>7s} {'err':>6s} {'<=.15':5s} | flags"
    )
    bad = 0
    for truth in truths:
        for x in check(truth):
            m = x["measured"]
            ew = None if x["with"] is None else x["with"] - m
            eb = None if x["before"] is None else x["before"] - m
            eo = None if x["without"] is None else x["without"] - m
            ok_w = ew is not None and abs(ew) <= WITH_TOLERANCE
            ok_o = eo is not None and abs(eo) <= WITHOUT_TOLERANCE
            bad += (not ok_w) + (not ok_o)
            print(
                f"{x['name']:30s} {x['profiled_ms']:8.2f} {x['unprofiled_ms']:8.2f} {_f(x['helper_after_ms'], '7.2f')} "
                f"{_f(x['helper_before_ms'], '7.2f')} {m:+8.3f} | {_f(x['with'], '+6.3f')} {_f(ew, '+6.3f')} "
                f"{'ok' if ok_w else 'MISS':5s} {_interval(x['with_95'], m):15s} {x['with_basis']:28s} | {_f(x['before'], '+6.3f')} {_f(eb, '+6.3f')} | "
                f"{_f(x['without'], '+7.3f')} {_f(eo, '+6.3f')} {'ok' if ok_o else 'MISS':5s} | {','.join(x['flags'])}"
            )
    print(f"{bad} misses (with metadata: within {WITH_TOLERANCE}; without: within {WITHOUT_TOLERANCE})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["tests/data"]))
