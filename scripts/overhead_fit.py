"""Fit the profiler-overhead model (tb_llmdiag/metrics/capture/overhead.py MODEL, ROOM_SHARE) on real captures.

    PYTHONPATH=. python scripts/overhead_fit.py [tests/data/*/truth.json ...]

For every capture with a truth.json holding the profiled and unprofiled (``reference``) step times, reads the trace,
gets the per-step record counts, the host's speed scale, Kineto's overhead rows and the host-wait room from the
product (the cost is computed as ``metrics.capture.overhead.model_ns`` does), and grid-searches per-record costs that
minimise the largest error of the modelled share against the measured one, (profiled - unprofiled) / profiled
(profiled: ``active_median_host_ms``, unprofiled: ``reference.median_wall_ms``). Prints the fit and each capture's
error. The numbers it prints go into MODEL by hand (and tests/test_overhead.py checks them against the captures).
"""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

import numpy as np

from tb_llmdiag.ingest import load_trace
from tb_llmdiag.metrics import analyze
from tb_llmdiag.metrics.capture.overhead import ROOM_CAUSES, model_ns


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
            # the product's cost is (counts x MODEL) x speed_scale + Kineto's overhead rows (counts holds all three)
            _, counts = model_ns(ctx, bool(meta.get("record_shapes")))
            room = float(np.median(sum(a.breakdown.part_ns(c) for c in ROOM_CAUSES)))
            p, u = prof["active_median_host_ms"] * 1e6, ref["median_wall_ms"] * 1e6
            out.append({"name": f"{Path(truth_path).parent.name}/rank{r['rank']}", "P": float(ctx.step_median_ns),
                        "measured": (p - u) / p, "room": room, "shapes": float(bool(meta.get("record_shapes"))),
                        **counts})
    return out


#: the grid searched, ns per record (room: the share of the host-wait room the cost fills)
GRID = {
    "op": np.arange(0, 8.01, 0.5) * 1e3,
    "shp": np.arange(0, 4.01, 1.0) * 1e3,
    "rt": np.arange(0, 24.01, 1.0) * 1e3,
    "py": np.array([0.0, 0.25, 0.5, 1.0, 2.0, 4.0]) * 1e3,
    "mem": np.arange(0, 4.01, 1.0) * 1e3,
    "room": np.array([0.3, 0.4, 0.5, 0.6, 0.8, 1.0]),
}


def main(paths: list[str]) -> None:
    rows = [f for p in paths for f in features(p)]
    col = {k: np.array([x[k] for x in rows]) for k in rows[0] if k != "name"}
    # every combination at once: one axis per cost, the captures on the last axis
    g = np.meshgrid(*GRID.values(), indexing="ij", sparse=True)
    op, shp, rt, py, mem, room = (a[..., None] for a in g)
    cost = col["cpu_ops"] * (op + shp * col["shapes"]) + col["runtime_calls"] * rt + col["python_frames"] * py
    cost = (cost + col["memory_samples"] * mem) * col["speed_scale"] + col["overhead_rows_ns"]
    err = np.minimum(cost, col["room"] * room) / col["P"] - col["measured"]
    rms = np.sqrt((err**2).mean(axis=-1))
    best = np.unravel_index(int(np.argmin(rms)), rms.shape)
    combo = [float(v[i]) for v, i in zip(GRID.values(), best)]
    e = err[best]
    print(f"rms {rms[best]:.3f}, max {np.abs(e).max():.3f}; costs ns (op, shapes, runtime, python, memory), room share:",
          combo)
    for x, d in zip(rows, e):
        print(f"{x['name']:32s} measured {x['measured']:+.3f}  model {x['measured'] + d:+.3f}  error {d:+.3f}")


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(glob.glob("tests/data/*/truth.json")))
