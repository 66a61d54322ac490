"""Benchmark: the job-level analysis of many ranks, from their per-rank summaries.

    python bench/job_speed.py [--ranks 1000] [--steps 8] [--plant 637]

Builds the RankSummaries of the real DLRM ranks (../shared), makes ``--ranks`` of them with
``bench/job_generator.py`` (a planted straggler), serialises them to JSON text (what a cache would hold),
then measures, in this process:
  load     json.loads of that text + RankSummary.from_dict for every rank
  analyze  jobs.cross_rank.analyze_job (ranks, matching, waiting/transfer, straggler, attribution)
  findings jobs.report.job_metrics + job_findings
and prints each figure, the summaries' size (bytes per rank, all of them), the peak of Python-tracked
memory during load + analysis (tracemalloc, second run) and the process's peak RSS.
Targets (issue #11): load + analyze + findings < 5 s and < 500 MB for 1,000 ranks.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from job_generator import DLRM, base_summaries, generate  # noqa: E402
from peak_rss import peak_rss_mb  # noqa: E402

from tb_llmdiag.jobs.cross_rank import analyze_job  # noqa: E402
from tb_llmdiag.jobs.report import job_findings, job_metrics  # noqa: E402
from tb_llmdiag.jobs.rank_summary import RankSummary  # noqa: E402


def run(text: str) -> tuple[dict[str, float], list[dict[str, Any]], dict[str, Any]]:
    t0 = time.perf_counter()
    summaries = [RankSummary.from_dict(d) for d in json.loads(text)]
    t1 = time.perf_counter()
    job = analyze_job(summaries)
    t2 = time.perf_counter()
    metrics = job_metrics(job)
    found = job_findings(metrics)
    t3 = time.perf_counter()
    return {"load": t1 - t0, "analyze": t2 - t1, "findings": t3 - t2}, found, metrics


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--plant", type=int, default=637)
    a = ap.parse_args(argv)
    base = base_summaries(sorted(DLRM.glob("*.pt.trace.json.gz")))
    gen = generate(base, a.ranks, steps=a.steps, plant=a.plant)
    per_rank = sum(s.nbytes for s in gen) / len(gen)
    text = json.dumps([s.to_dict() for s in gen])
    n_coll = gen[0].n_collectives
    del gen
    gc.collect()
    times, found, metrics = run(text)
    tracemalloc.start()
    run(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    total = sum(times.values())
    print(f"ranks {a.ranks}  steps/rank {a.steps}  collectives/rank {n_coll}  (from {len(base)} real DLRM ranks)")
    print(f"summary size: {per_rank:.0f} B per rank in memory, {per_rank * a.ranks / 1e6:.1f} MB for all; "
          f"JSON {len(text) / a.ranks:.0f} B per rank, {len(text) / 1e6:.1f} MB")
    for k, v in times.items():
        print(f"  {k:<9}{v:7.3f} s")
    print(f"  total    {total:7.3f} s")
    print(f"straggler found: rank {metrics['straggler_rank']} (planted {a.plant}), cause {metrics['straggler_cause']}; "
          f"findings: {[f['id'] for f in found]}")
    rss_mb = peak_rss_mb()
    print(f"RESULT total={total:.3f}s traced_peak={peak / 1e6:.0f}MB peak_rss={rss_mb:.0f}MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
