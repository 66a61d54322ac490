"""Benchmark: the whole report over crafted trace names against plain names of the same length (#27 item 3).

    python bench/crafted_names.py [--rounds 3]

Each case adds names to tests/data/gpu_compiled's trace (as a CPU op, an annotation, a runtime call and a
kernel: tests/fuzz/crafted.py) and times ``api.report`` in this process, the crafted and the plain case
interleaved round by round; prints the medians and crafted / plain (the issue's bound: 3x). Cases:
  compile marker   one name ``"_data: " * 150000`` (1 MB): metrics/training/compile.py's marker regex (66 s before the fix)
  kernel names     16 different 64 KiB names (1 MiB), each repeating a fragment some pattern starts with
``tests/fuzz/fuzz_names.py --report`` runs every literal of every pattern in the package.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "fuzz"))

from crafted import report_seconds  # noqa: E402
from test_crafted_names import FRAGMENTS, MIB, _names  # noqa: E402

CASES = {
    "compile marker (1 MB)": (["_data: " * 150000], ["a" * (7 * 150000)]),
    "16 kernel names (1 MiB)": ([(f"{i}" + f * (MIB // 16))[: MIB // 16] for i, f in enumerate(FRAGMENTS)], _names("a", 16, MIB // 16)),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    report_seconds(["a" * 1000])  # imports and first-use caches
    for label, (crafted, plain) in CASES.items():
        tc, tp = [], []
        for _ in range(args.rounds):
            tp.append(report_seconds(plain))
            tc.append(report_seconds(crafted))
        c, p = statistics.median(tc), statistics.median(tp)
        print(f"{label}: crafted {c:.2f} s, plain {p:.2f} s (medians of {args.rounds}): {c / p:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
