"""Benchmark: a trace past the event bound stops early with one line, in bounded time and memory (#27 item 7).

    python bench/max_events.py [--events 10000000] [--out bench/data/events.json]

Writes a synthetic Kineto trace of ``--events`` events (one line per event: a step marker every 1,000 events,
launch + kernel pairs between), then runs ``llmdiag report`` on it in a fresh process (peak: VmHWM,
bench/peak_rss.py) with the default ``LLMDIAG_MAX_EVENTS`` (ingest/validate.py), and prints its exit code, the
message, wall seconds and peak memory; and the same report with the bound at 1/4 of the events and without it
(events + 1), for the cost per event the bound keeps away. The issue's figure: 10 M events (2 GB of JSON) took
15 s and 1.8 GB before the bound.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_RUN = """
import sys, time
sys.path.insert(0, BENCH)
from peak_rss import peak_rss_mb
from tb_llmdiag.cli import main
t = time.perf_counter()
code = main(["report", PATH])
print("RESULT", code, time.perf_counter() - t, peak_rss_mb())
"""


def write_trace(path: Path, events: int) -> None:
    """``events`` events, one per line: ProfilerStep#k every 1,000, else alternating launches and kernels."""
    with open(path, "w") as f:
        f.write('{"traceEvents": [\n')
        lines = []
        for i in range(events):
            ts = i * 2
            if i % 1000 == 0:
                lines.append(f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{i // 1000}","ts":{ts},"dur":1999,"pid":1,"tid":1}}')
            elif i % 2:
                lines.append(f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":{ts},"dur":1,"pid":1,"tid":1,"args":{{"correlation":{i}}}}}')
            else:
                lines.append(f'{{"ph":"X","cat":"kernel","name":"k{i % 7}","ts":{ts},"dur":1,"pid":0,"tid":7,"args":{{"device":0,"stream":7,"correlation":{i - 1}}}}}')
            if len(lines) == 100_000:
                f.write(",\n".join(lines) + ",\n")
                lines = []
        f.write(",\n".join(lines) + "\n]}\n")


def run(path: Path, max_events: int | None) -> tuple[int, float, float, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if max_events is not None:
        env["LLMDIAG_MAX_EVENTS"] = str(max_events)
    code = _RUN.replace("BENCH", repr(str(REPO / "bench"))).replace("PATH", repr(str(path)))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT"))
    _, rc, wall, peak = line.split()
    message = next((ln.strip() for ln in p.stdout.splitlines() if "error:" in ln), "")
    return int(rc), float(wall), float(peak), message


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--out", default=str(REPO / "bench" / "data" / "events.json"))
    ap.add_argument("--unbounded", action="store_true", help="also run with the bound above the trace (slow, big)")
    args = ap.parse_args()
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    if not path.exists() or path.stat().st_size == 0:
        write_trace(path, args.events)
    print(f"trace: {args.events:,} events, {path.stat().st_size / 1e9:.2f} GB ({time.perf_counter() - t:.1f} s to write)")
    cases = [("default bound", None), ("bound at 1/4 of the events", args.events // 4)]
    if args.unbounded:
        cases.append(("no bound (events + 1)", args.events + 1))
    for label, bound in cases:
        rc, wall, peak, message = run(path, bound)
        print(f"{label}: exit {rc}, {wall:.1f} s, peak {peak:,.0f} MiB; {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
