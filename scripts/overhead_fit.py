"""Fit the profiler-overhead model (tb_llmdiag/metrics/overhead.py MODEL, ROOM_SHARE) on real captures.

    PYTHONPATH=. python scripts/overhead_fit.py [tests/data/*/truth.json ...]

For every capture with a truth.json holding the profiled and unprofiled (``reference``) step times, reads the trace,
gets the per-step record counts and the host-wait room from the product, and grid-searches per-record costs that
minimise the largest error of the modelled share against the measured one, (profiled - unprofiled) / profiled
(profiled: ``active_median_host_ms``, unprofiled: ``reference.median_wall_ms``). Prints the fit and each capture's
error. The numbers it prints go into MODEL by hand (and tests/test_overhead.py checks them against the captures).
"""

from __future__ import annotations

import glob
import itertools
import json
import sys
from pathlib import Path

import numpy as np

from tb_llmdiag.ingest import load_trace
from tb_llmdiag.metrics import analyze
from tb_llmdiag.metrics.overhead import ROOM_CAUSES, model_ns


def features(truth_path: str) -> list[dict[str, float]]:
    truth = json.loads(Path(truth_path).read_text())
    out = []
    for r in truth.get("ranks", []):
        ref = r.get("reference") or {}
        prof = r.get("profiled") or {}
        if not ref.get("median_wall_ms") or not prof.get("active_median_host_ms"):
            continue
        for fn in r.get("trace_files", []):
            trace = load_trace(str(Path(truth_path).parent / fn))
            meta = dict(trace.metadata)
            meta.pop("unprofiled_step_ns", None)
            a = analyze(trace)
            ctx = a.context
            _, counts = model_ns(ctx, bool(meta.get("record_shapes")))
            room = float(np.median(sum(a.breakdown.part_ns(c) for c in ROOM_CAUSES)))
            p, u = prof["active_median_host_ms"] * 1e6, ref["median_wall_ms"] * 1e6
            out.append({"name": f"{Path(truth_path).parent.name}/rank{r['rank']}", "P": float(ctx.step_median_ns),
                        "measured": (p - u) / p, "room": room, "shapes": float(bool(meta.get("record_shapes"))),
                        **counts})
    return out


def share(x: dict[str, float], op: float, shp: float, rt: float, py: float, mem: float, room: float) -> float:
    cost = x["cpu_ops"] * (op + shp * x["shapes"]) + x["runtime_calls"] * rt + x["python_frames"] * py
    cost += x["memory_samples"] * mem
    return min(cost, x["room"] * room) / x["P"]


def main(paths: list[str]) -> None:
    rows = [f for p in paths for f in features(p)]
    grid = {
        "op": np.arange(0, 8.01, 0.5) * 1e3, "shp": [0.0], "rt": np.arange(0, 24.01, 1.0) * 1e3,
        "py": [1.0e3], "mem": np.arange(0, 4.01, 1.0) * 1e3, "room": [0.6, 0.7, 0.8, 0.9, 1.0],
    }
    best = None
    for combo in itertools.product(*grid.values()):
        err = np.array([share(x, *combo) - x["measured"] for x in rows])
        score = (float(np.sqrt(np.mean(err**2))), float(np.abs(err).max()))
        if best is None or score < best[0]:
            best = (score, combo, err)
    assert best is not None
    print("rms, max error:", best[0], "costs ns (op, shapes, runtime, python, memory), room share:", best[1])
    for x, e in zip(rows, best[2]):
        print(f"{x['name']:32s} measured {x['measured']:+.3f}  model {x['measured'] + e:+.3f}  error {e:+.3f}")


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(glob.glob("tests/data/*/truth.json")))
