"""Job file generator: a multi-rank logdir of real trace files, shifted, perturbed and renamed.

    python bench/job_files.py OUT_DIR --ranks 64 [TRACE ...] [--keep-ms 60] [--seed 0]

Rank i is real rank (i mod k) of the given traces (default: the 2-GPU DDP straggler capture in
tests/data), written as ``OUT_DIR/rank{i}.1000000000.pt.trace.json.gz`` with ``distributedInfo.rank = i``
and ``world_size = --ranks``. Perturbation keeps every trace self-consistent: its clock is shifted by up to
+-``--skew-us`` and its time axis scaled by 1 +- ``--jitter`` about its first event (a uniformly faster or
slower rank: order, nesting and overlaps are unchanged). ``--keep-ms`` keeps only the events that start in
the first that many ms (smaller files for tests). ``--plant R``: rank R is a copy of trace ``--plant-from``
(default 1: the capture's real straggler, rank 1 of ddp_straggler, which gets 2x the tokens) and every other
rank a copy of the remaining traces: in every collective R is the real last arrival and the others wait as
the capture's rank 0 did, so the job's straggler is known (R, cause: more tokens). ``bench/job_generator.py``
makes RankSummaries instead, for the job level alone; this makes the files the per-rank step reads.

Each base trace is serialised once as text templates with its times left out (``Template``); a rank is the
templates joined with its own times (~0.15 s per 9 MB rank instead of ~1 s through ``json.dump``).
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


class Template:
    """A trace as text with its event times left out: ``text(rank, world, skew_us, scale)`` is the JSON of
    ``perturbed(doc, ...)`` (same events, same times to the ns; keys in another order), without a json.dump."""

    def __init__(self, doc: dict[str, Any], keep_us: float | None) -> None:
        events = doc["traceEvents"]
        times = [e["ts"] for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
        self.t0 = min(times) if times else 0.0
        self.head = {k: v for k, v in doc.items() if k != "traceEvents"}
        self.parts: list[str] = []  # per event: its JSON (a timed one's without ts/dur and the closing brace)
        self.ts: list[float | None] = []  # None: an event kept as it is (metadata, no time)
        self.dur: list[float | None] = []
        for e in events:
            ts = e.get("ts")
            if e.get("ph") == "M" or not isinstance(ts, (int, float)):
                self.parts.append(json.dumps(e, separators=(",", ":")))
                self.ts.append(None)
                self.dur.append(None)
                continue
            if keep_us is not None and ts - self.t0 > keep_us:
                continue
            rest = json.dumps({k: v for k, v in e.items() if k not in ("ts", "dur")}, separators=(",", ":"))[:-1]
            self.parts.append(rest + ("," if len(rest) > 1 else ""))
            self.ts.append(ts - self.t0)
            d = e.get("dur")
            self.dur.append(d if isinstance(d, (int, float)) else None)

    def text(self, *, rank: int, world: int, skew_us: float, scale: float) -> str:
        head = dict(self.head)
        dist = dict(head.get("distributedInfo") or {"backend": "nccl"})
        dist.update(rank=rank, world_size=world)
        head["distributedInfo"] = dist
        t0 = self.t0 + skew_us
        body = ",".join(
            p
            if ts is None
            else f'{p}"ts":{round(t0 + ts * scale, 3)}' + (f',"dur":{round(d * scale, 3)}}}' if d is not None else "}")
            for p, ts, d in zip(self.parts, self.ts, self.dur)
        )
        return json.dumps(head, separators=(",", ":"))[:-1] + (',' if head else '') + f'"traceEvents":[{body}]}}'


def write_job(out_dir: Path, ranks: int, bases: Sequence[Path] = (), *, seed: int = 0, skew_us: float = 500.0,
              jitter: float = 0.02, keep_ms: float | None = None, plant: int | None = None,
              plant_from: int = 1) -> list[Path]:
    """Write ``ranks`` trace files into ``out_dir`` (created); their paths in rank order (module docstring)."""
    bases = list(bases) or DEFAULT_BASES
    keep_us = None if keep_ms is None else keep_ms * 1e3
    templates = [Template(load(p), keep_us) for p in bases]
    others = [t for i, t in enumerate(templates) if plant is None or i != plant_from] or templates
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(ranks):
        t = templates[plant_from] if r == plant else others[r % len(others)]
        text = t.text(rank=r, world=ranks, skew_us=rng.uniform(-skew_us, skew_us),
                      scale=1.0 + rng.uniform(-jitter, jitter))
        p = out_dir / f"rank{r}.1000000000.pt.trace.json.gz"
        with gzip.open(p, "wb", compresslevel=1) as f:
            f.write(text.encode())
        paths.append(p)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep-ms", type=float, default=None)
    ap.add_argument("--plant", type=int, default=None, help="this rank is a copy of --plant-from (the straggler)")
    ap.add_argument("--plant-from", type=int, default=1)
    a = ap.parse_args(argv)
    paths = write_job(a.out, a.ranks, a.traces, seed=a.seed, keep_ms=a.keep_ms, plant=a.plant,
                      plant_from=a.plant_from)
    total = sum(p.stat().st_size for p in paths)
    print(f"{len(paths)} ranks -> {a.out} ({total / 1e6:.1f} MB compressed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
