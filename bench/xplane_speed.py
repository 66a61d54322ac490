"""Benchmark: reading an XPlane capture into columns vs the bare protobuf parse, measured in the same run.

    python bench/xplane_speed.py [XPLANE_PB] [--repeat 5]

Measured, in this one process, alternately, after one warm-up read of each (which builds the message classes):
  floor   the file's bytes read and parsed as one XSpace message by the same protobuf classes the reader uses
          (``ingest/xplane/schema.py``): the least work that reading the file takes.
  read    ``read_xplane(path)``: the same bytes into the event columns (planes, lines, stats, steps, flows).
Prints the best and median of each, the ratio read / floor, and a RESULT line. Nothing is asserted here: a test
only checks that the bench runs (tests/test_bench.py); the ratio is for a person to read.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tb_llmdiag.ingest.xplane.reader import read_xplane  # noqa: E402
from tb_llmdiag.ingest.xplane.schema import message_classes  # noqa: E402

DEFAULT = REPO.parent / "shared" / "traces" / "xplane" / "torch_xla_cpu"


def _path(arg: str | None) -> Path:
    p = Path(arg) if arg else DEFAULT
    if p.is_dir():
        found = sorted(p.rglob("*.xplane.pb"))
        if not found:
            raise SystemExit(f"no .xplane.pb under {p}")
        p = found[0]
    return p


def floor(path: Path) -> int:
    space = message_classes()["XSpace"].FromString(path.read_bytes())
    return sum(len(line.events) for plane in space.planes for line in plane.lines)


def read(path: Path) -> int:
    return len(read_xplane(str(path)).events)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", help="an .xplane.pb file or a folder holding one")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    path = _path(args.path)
    n_raw, n_rows = floor(path), read(path)  # warm-up: message classes built, files in the page cache
    times: dict[str, list[float]] = {"floor": [], "read": []}
    gc.collect()
    for _ in range(max(1, args.repeat)):
        for name, fn in (("floor", floor), ("read", read)):
            t = time.perf_counter()
            fn(path)
            times[name].append(time.perf_counter() - t)
    print(f"{path.name}: {path.stat().st_size / 1e6:.2f} MB, {n_raw} XEvents, {n_rows} event rows")
    print(f"  {'job':<6} {'best s':>8} {'median s':>9}")
    for name, ts in times.items():
        print(f"  {name:<6} {min(ts):8.3f} {statistics.median(ts):9.3f}")
    best, med = min(times["read"]) / min(times["floor"]), statistics.median(times["read"]) / statistics.median(times["floor"])
    print(f"RESULT read={min(times['read']):.3f}s floor={min(times['floor']):.3f}s best_ratio={best:.2f} "
          f"median_ratio={med:.2f} repeat={len(times['read'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
