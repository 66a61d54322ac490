"""Crafted trace names cost no more than plain ones (#27 item 3): every regex over names is linear.

A second audit found one CPU op named ``"_data: " * 150000`` (1 MB) taking 66 s in metrics/training/compile.py's marker
regex, and long kernel names that all differ spending seconds in name matching. Each case here is the whole
report over a real trace (tests/data/gpu_compiled) with the crafted names added as a CPU op, an annotation, a
runtime call and a kernel, against the same trace with plain names of the same length, best of 3 runs each in
this process: the issue's bound is 3x (before the fix: 42 s against 0.5 s for the marker). ``bench/crafted_names.py``
prints the figures; ``tests/fuzz/fuzz_names.py`` covers every pattern in the package.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fuzz"))
from crafted import report_seconds  # noqa: E402

MIB = 1 << 20
#: 16 different 64 KiB kernel names each repeating a fragment some pattern starts with (1 MiB in all)
FRAGMENTS = ("gemv", "gemmSN_", "DataLoader", "_data: ", "triton_", "compile_id=", "Memcpy ", "(", "<", "::",
             "_Z", "1", "ncclDevKernel", "torch/_dynamo/convert_frame.py(", "Torch-Compiled Region: ", "size:")


def _names(unit: str, n: int, size: int) -> list[str]:
    return [(f"{i}{unit}" * (size // (len(unit) + 2) + 1))[:size] for i in range(n)]


@pytest.mark.parametrize("crafted,plain", [
    pytest.param(["_data: " * 150000], ["a" * (7 * 150000)], id="compile_marker_1MB"),
    pytest.param([(f"{i}" + f * (MIB // 16))[: MIB // 16] for i, f in enumerate(FRAGMENTS)], _names("a", 16, MIB // 16),
                 id="16_different_kernel_names_1MiB"),
])
def test_crafted_names_cost_at_most_3x_plain_names(crafted: list[str], plain: list[str]) -> None:
    report_seconds(plain)  # warm: imports and first-use caches
    t_plain = report_seconds(plain, runs=3)
    t_crafted = report_seconds(crafted, runs=3)
    assert t_crafted <= 3 * t_plain + 0.1, f"crafted {t_crafted:.2f} s, plain {t_plain:.2f} s"
