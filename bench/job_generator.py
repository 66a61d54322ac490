"""Job generator: many ranks made from the RankSummaries of real ranks, shifted, perturbed and renamed.

    python bench/job_generator.py [TRACE ...] --ranks 1000 --steps 8 --out /tmp/job.json

Rank i copies real rank (i mod k), its single profiled step repeated ``--steps`` times back to back.
Perturbations keep the physics of a collective (every rank leaves it together): each copy's clock is
shifted by up to +-``--skew-us`` (durations are unchanged by that), its compute per step scaled by
1 +- ``--jitter``, and each collective's duration by at most the same factor but never below the base
job's transfer (the minimum duration across the real ranks), so the real last arrival stays the shortest.
``--plant R`` makes rank R the straggler: its collectives take half the base transfer (it arrives last
everywhere; the others wait the difference) and its compute is ``--plant-compute-us`` longer per step.
Without traces it reads the 8 DLRM ranks from ../shared.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tb_llmdiag.ingest import load_trace  # noqa: E402
from tb_llmdiag.jobs.rank_summary import RankSummary, summarize_rank  # noqa: E402
from tb_llmdiag.metrics.steps.windows import find_steps  # noqa: E402

DLRM = REPO.parent / "shared" / "traces" / "external" / "facebookresearch_param" / "dlrm_kineto"


def base_summaries(paths: Sequence[Path]) -> list[RankSummary]:
    """The real ranks' summaries, one per trace."""
    out = []
    for p in paths:
        t = load_trace(str(p))
        out.append(summarize_rank(t, find_steps(t), label=p.name))
    return sorted(out, key=lambda s: (s.rank is None, s.rank or 0))


def _repeat_steps(s: RankSummary, steps: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The rank's steps and collectives tiled ``steps`` times, each copy one step length later."""
    period = int((s.steps["end_ns"] - s.steps["start_ns"]).max()) if s.n_steps else 1
    k = np.arange(steps)
    st = {c: np.tile(v, steps) for c, v in s.steps.items()}
    shift = np.repeat(k * period, s.n_steps)
    for c in ("host_start_ns", "start_ns", "end_ns"):
        st[c] = st[c] + shift
    st["index"] = st["index"] + np.repeat(k, s.n_steps) * max(s.n_steps, 1)
    co = {c: np.tile(v, steps) for c, v in s.collectives.items()}
    cshift = np.repeat(k * period, s.n_collectives)
    co["start_ns"] = co["start_ns"] + cshift
    co["end_ns"] = co["end_ns"] + cshift
    co["step"] = (co["step"] + np.repeat(k, s.n_collectives) * s.n_steps).astype(np.int32)
    return st, co


def generate(base: Sequence[RankSummary], ranks: int, *, steps: int = 8, seed: int = 0, skew_us: float = 500.0,
             jitter: float = 0.02, plant: int | None = None, plant_compute_us: float = 10000.0) -> list[RankSummary]:
    """``ranks`` RankSummaries made from ``base`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n_coll = min(b.n_collectives for b in base)
    durs = np.stack([(b.collectives["end_ns"] - b.collectives["start_ns"])[:n_coll] for b in base])
    transfer = durs.min(axis=0)  # per base collective
    tiled = [_repeat_steps(b, steps) for b in base]
    out = []
    for i in range(ranks):
        b = base[i % len(base)]
        st, co = ({c: v.copy() for c, v in d.items()} for d in tiled[i % len(base)])
        skew = int(rng.uniform(-skew_us, skew_us) * 1e3)
        scale = 1.0 + rng.uniform(-jitter, jitter, size=st["compute_ns"].size)
        st["compute_ns"] = (st["compute_ns"] * scale).astype(np.int64)
        dur = co["end_ns"] - co["start_ns"]
        floor = np.tile(np.pad(transfer, (0, b.n_collectives - n_coll), constant_values=0), steps)
        dur = np.maximum((dur * (1.0 + rng.uniform(0, jitter, size=dur.size))).astype(np.int64), floor)
        if plant is not None and i == plant:
            dur = np.maximum(floor // 2, 1)
            st["compute_ns"] = st["compute_ns"] + int(plant_compute_us * 1e3)
        co["start_ns"] = co["end_ns"] - dur
        co["exposed_ns"] = np.minimum(co["exposed_ns"], dur)
        for c in ("host_start_ns", "start_ns", "end_ns"):
            st[c] = st[c] + skew
        for c in ("start_ns", "end_ns"):
            co[c] = co[c] + skew
        out.append(RankSummary(rank=i, rank_source="distributed_info", label=f"gen_rank{i}_from_{b.label}",
                               world_size=ranks, steps=st, collectives=co, pg_names=b.pg_names,
                               top_finding_ids=b.top_finding_ids))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--ranks", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plant", type=int, default=None)
    ap.add_argument("--out", type=Path, required=True, help="JSON file: a list of RankSummary dicts")
    a = ap.parse_args(argv)
    paths = a.traces or sorted(DLRM.glob("*.pt.trace.json.gz"))
    gen = generate(base_summaries(paths), a.ranks, steps=a.steps, seed=a.seed, plant=a.plant)
    a.out.write_text(json.dumps([s.to_dict() for s in gen]))
    print(f"{len(gen)} ranks from {len(paths)} real ones -> {a.out} ({a.out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
