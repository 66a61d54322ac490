"""Job file generator: a multi-rank logdir of real trace files, shifted, perturbed and renamed.

    python bench/job_files.py OUT_DIR --ranks 64 [TRACE ...] [--keep-ms 60] [--seed 0]

Rank i is real rank (i mod k) of the given traces (default: the 2-GPU DDP straggler capture in
tests/data), written as ``OUT_DIR/rank{i}.1000000000.pt.trace.json.gz`` with ``distributedInfo.rank = i``
and ``world_size = --ranks``. Perturbation keeps every trace self-consistent: its clock is shifted by up to
+-``--skew-us`` and its time axis scaled by 1 +- ``--jitter`` about its first event (a uniformly faster or
slower rank: order, nesting and overlaps are unchanged). ``--keep-ms`` keeps only the events that start in
the first that many ms (smaller files for tests). ``bench/job_generator.py`` makes RankSummaries instead,
for the job level alone; this makes the files the per-rank step reads.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
DEFAULT_BASES = sorted((REPO / "tests" / "data" / "ddp_straggler").glob("rank*.pt.trace.json.gz"))


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        return json.load(f)


def perturbed(doc: dict[str, Any], *, rank: int, world: int, skew_us: float, scale: float,
              keep_us: float | None) -> dict[str, Any]:
    """A copy of ``doc`` as rank ``rank`` of ``world``, its time axis scaled and shifted (see the module doc)."""
    events = doc["traceEvents"]
    times = [e["ts"] for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    t0 = min(times) if times else 0.0
    out = []
    for e in events:
        ts = e.get("ts")
        if e.get("ph") == "M" or not isinstance(ts, (int, float)):
            out.append(e)
            continue
        if keep_us is not None and ts - t0 > keep_us:
            continue
        e2 = dict(e)
        e2["ts"] = round(t0 + (ts - t0) * scale + skew_us, 3)
        if isinstance(e.get("dur"), (int, float)):
            e2["dur"] = round(e["dur"] * scale, 3)
        out.append(e2)
    new = {k: v for k, v in doc.items() if k != "traceEvents"}
    dist = dict(new.get("distributedInfo") or {"backend": "nccl"})
    dist.update(rank=rank, world_size=world)
    new["distributedInfo"] = dist
    new["traceEvents"] = out
    return new


def write_job(out_dir: Path, ranks: int, bases: Sequence[Path] = (), *, seed: int = 0, skew_us: float = 500.0,
              jitter: float = 0.02, keep_ms: float | None = None) -> list[Path]:
    """Write ``ranks`` trace files into ``out_dir`` (created); their paths in rank order."""
    bases = list(bases) or DEFAULT_BASES
    docs = [load(p) for p in bases]
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(ranks):
        doc = perturbed(docs[r % len(docs)], rank=r, world=ranks, skew_us=rng.uniform(-skew_us, skew_us),
                        scale=1.0 + rng.uniform(-jitter, jitter), keep_us=None if keep_ms is None else keep_ms * 1e3)
        p = out_dir / f"rank{r}.1000000000.pt.trace.json.gz"
        with gzip.open(p, "wt", encoding="utf-8", compresslevel=1) as f:
            json.dump(doc, f, separators=(",", ":"))
        paths.append(p)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep-ms", type=float, default=None)
    a = ap.parse_args(argv)
    paths = write_job(a.out, a.ranks, a.traces, seed=a.seed, keep_ms=a.keep_ms)
    total = sum(p.stat().st_size for p in paths)
    print(f"{len(paths)} ranks -> {a.out} ({total / 1e6:.1f} MB compressed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
