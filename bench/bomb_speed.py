"""Benchmark: how fast and in how much memory a gzip bomb is refused, against the floor of inflating it.

    python bench/bomb_speed.py [--repeat 3] [--mib 1024]

Writes the two bombs of tests/test_bad_inputs.py (one 1 GiB JSON string; 1 GiB of events on one line; ~1 MB
and ~3 MB of gzip) to a temporary folder and times, each in a fresh subprocess (peak: VmHWM, bench/peak_rss.py):
  refuse  ``llmdiag report BOMB``: exit code, wall and CPU seconds, peak memory.
  floor   inflating the same file's first N bytes with zlib in 2 MiB blocks, N = what the reader's bound lets it
          inflate (``MAX_INFLATE_RATIO`` x the compressed size, at least
          ``MIN_INFLATED_BYTES``), so the least work that noticing the bomb takes.
Prints the median and best of the runs and refuse/floor. The issue's target (#17): < 2 s and < 300 MB.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVENT = b'{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"pid":0,"tid":7},'

_REFUSE = """
import sys, time
sys.path.insert(0, BENCH)
from peak_rss import peak_rss_mb
from tb_llmdiag.cli import main
t, c0 = time.perf_counter(), time.process_time()
code = main(["report", PATH])
print("RESULT", code, time.perf_counter() - t, time.process_time() - c0, peak_rss_mb())
"""
_FLOOR = """
import sys, time, zlib
sys.path.insert(0, BENCH)
from peak_rss import peak_rss_mb
from tb_llmdiag.ingest import source
t, c0 = time.perf_counter(), time.process_time()
size = __import__("os").path.getsize(PATH)
limit = min(source.MAX_INFLATED_BYTES, max(source.MIN_INFLATED_BYTES, int(source.MAX_INFLATE_RATIO * size)))
d, done = zlib.decompressobj(16 + zlib.MAX_WBITS), 0
with open(PATH, "rb") as f:
    while done < limit:
        block = f.read(1 << 21)
        if not block:
            break
        done += len(d.decompress(block, 1 << 21))
        while d.unconsumed_tail and done < limit:
            done += len(d.decompress(d.unconsumed_tail, 1 << 21))
print("RESULT 0", time.perf_counter() - t, time.process_time() - c0, peak_rss_mb())
"""


def write_bombs(folder: Path, mib: int) -> dict[str, Path]:
    """The two bombs of tests/test_bad_inputs.py, ``mib`` MiB inflated each."""
    bodies = {"one-string": b" " * (1 << 20), "events": EVENT * ((1 << 20) // len(EVENT))}
    out = {}
    for name, body in bodies.items():
        path = folder / f"{name}.pt.trace.json.gz"
        with gzip.open(path, "wb", compresslevel=9) as f:
            f.write(b'{"traceEvents": [' + (b'{"ph": "X", "name": "' if name == "one-string" else b""))
            for _ in range(mib):
                f.write(body)
            f.write(b'"}]}' if name == "one-string" else b'{"ph":"i"}]}')
        out[name] = path
    return out


def run(code: str, path: Path) -> tuple[int, float, float, float]:
    prog = f"BENCH = {str(REPO / 'bench')!r}\nPATH = {str(path)!r}\n" + code
    proc = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=600, cwd=REPO)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    _, rc, wall, cpu, peak = line.split()
    return int(rc), float(wall), float(cpu), float(peak)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mib", type=int, default=1024, help="inflated size of each bomb, MiB (default 1024)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bombs = write_bombs(Path(tmp), args.mib)
        print(
            f"{'bomb':<11} {'gz MB':>6} {'job':<7} {'exit':>4} {'median s':>9} {'best s':>7} {'cpu s':>6} "
            f"{'peak MB':>8} {'x floor':>8}"
        )
        for name, path in bombs.items():
            runs = {
                job: [run(code, path) for _ in range(args.repeat)]
                for job, code in (("floor", _FLOOR), ("refuse", _REFUSE))
            }
            floor_best = min(r[1] for r in runs["floor"])
            for job, rs in runs.items():
                wall = [r[1] for r in rs]
                print(
                    f"{name:<11} {path.stat().st_size / 1e6:>6.2f} {job:<7} {rs[0][0]:>4} {statistics.median(wall):>9.2f} "
                    f"{min(wall):>7.2f} {statistics.median(r[2] for r in rs):>6.2f} {max(r[3] for r in rs):>8.0f} "
                    f"{min(wall) / floor_best:>8.2f}"
                )
            refuse = runs["refuse"]
            print(
                f"RESULT bomb={name} exit={refuse[0][0]} best={min(r[1] for r in refuse):.2f}s "
                f"peak={max(r[3] for r in refuse):.0f}MB floor_best={floor_best:.2f}s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
