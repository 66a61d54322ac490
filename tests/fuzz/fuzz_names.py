"""Adversarial long names against every regex in the package (#27): no pattern may take more than linear time.

    python tests/fuzz/fuzz_names.py [--kib 16] [--report]

Every compiled ``re.Pattern`` reachable from a ``tb_llmdiag`` module's globals (inside tuples, lists and dicts
too) is searched over names built from its own text: each literal run of the pattern (``gemmSN_``,
``_data: ``, ``compile_id=``), repeated, alone and followed by a digit, a word character, a space or a
bracket, and the pattern's first literal followed by the rest repeated. A pattern is linear when searching a
name 4x longer costs at most ~4x (we flag > 8x, on the best of 3 runs, once the long search takes over 2 ms).
Prints one line per flagged (pattern, name) with the times; exit 1 if any.

``--report`` also runs the whole report over a real trace with one CPU op, annotation, runtime call and kernel
named by each literal of every pattern repeated to 1 MiB, and prints the slowest against a plain 1 MiB name (the
issue's bound: within 3x).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tb_llmdiag  # noqa: E402

_META = re.compile(r"\\[dDwWsSbBAZ]|\\.|[\[\](){}|?*+^$.]")


def patterns() -> dict[str, re.Pattern[Any]]:
    """Every compiled pattern in the package's module globals, by ``module.name[i]``."""
    found: dict[str, re.Pattern[Any]] = {}

    def walk(v: Any, where: str, depth: int) -> None:
        if isinstance(v, re.Pattern):
            found.setdefault(where, v)
        elif depth < 4 and isinstance(v, (tuple, list)):
            for i, x in enumerate(v):
                walk(x, f"{where}[{i}]", depth + 1)
        elif depth < 4 and isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{where}[{k!r}]", depth + 1)

    for mod in pkgutil.walk_packages(tb_llmdiag.__path__, "tb_llmdiag."):
        if mod.name.endswith("__main__"):
            continue
        try:
            m = importlib.import_module(mod.name)
        except Exception:  # noqa: BLE001 - optional extras (dask, mcp) may be missing
            continue
        for name, v in vars(m).items():
            walk(v, f"{mod.name}.{name}", 0)
    seen: set[int] = set()
    return {k: p for k, p in found.items() if not (id(p) in seen or seen.add(id(p)))}  # type: ignore[func-returns-value]


def literals(source: str) -> list[str]:
    """The literal runs of a pattern's text (escapes undone), longest first, at most 12."""
    runs = {r.replace("\\", "") for r in _META.split(source) if r and r.strip("\\")}
    return sorted(runs, key=len, reverse=True)[:12]


def names(source: str, size: int) -> Iterator[str]:
    """Adversarial names of about ``size`` characters built from the pattern's own text."""
    lits = literals(source) or ["a"]
    for lit in lits:
        for tail in ("", "0", "a", " ", "(", "<", "_", ":"):
            unit = lit + tail
            yield (unit * (size // len(unit) + 1))[:size]
        yield lit + "a" * size
        yield lit + "0" * size
        yield lit + " " * size
    first, rest = lits[0], "".join(lits[1:]) or "x"
    yield first + (rest * (size // len(rest) + 1))[:size]


def best(p: re.Pattern[Any], s: Any, runs: int = 3) -> float:
    out = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        p.search(s)
        out = min(out, time.perf_counter() - t)
    return out


def superlinear(p: re.Pattern[Any], kib: int) -> list[str]:
    flagged = []
    for name in names(p.pattern.decode("latin-1") if isinstance(p.pattern, bytes) else p.pattern, kib * 1024):
        short = name[: len(name) // 4]
        s, ln = (short.encode("latin-1", "replace"), name.encode("latin-1", "replace")) if isinstance(p.pattern, bytes) else (short, name)
        t_long = best(p, ln)
        if t_long > 0.002 and t_long > 8 * max(best(p, s), 1e-6):
            flagged.append(f"{name[:24]!r}... {len(short)} chars {best(p, s) * 1e3:.2f} ms, {len(name)} chars {t_long * 1e3:.2f} ms")
    return flagged


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kib", type=int, default=16)
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args()
    pats = patterns()
    bad = 0
    t0 = time.perf_counter()
    for where, p in sorted(pats.items()):
        for line in superlinear(p, args.kib):
            bad += 1
            print(f"SUPERLINEAR {where} /{p.pattern!s:.60}/: {line}")
    print(f"{len(pats)} patterns, {bad} superlinear (pattern, name) pairs, {time.perf_counter() - t0:.1f} s")
    if args.report:
        from crafted import report_seconds  # noqa: PLC0415 - tests/fuzz/crafted.py

        plain = report_seconds("a" * (1 << 20), runs=3)
        units = sorted({lit for p in pats.values() if isinstance(p.pattern, str) for lit in literals(p.pattern)})
        times = sorted(((report_seconds((u * ((1 << 20) // len(u) + 1))[: 1 << 20]), u) for u in units), reverse=True)
        print(f"report with a plain 1 MiB name: {plain:.2f} s; {len(units)} crafted 1 MiB names (each literal of every "
              f"pattern, repeated), slowest:")
        for t, u in times[:5]:
            print(f"  {t:.2f} s ({t / plain:.2f}x) {u!r} repeated")
        bad += times[0][0] > 3 * plain
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
