"""Jobs at scale (#33 part 4): ranks in numeric order, the job at a glance (jobs/overview.py) against hand
computations, and the CLI text of a 1,024-rank job made by bench/job_generator.py from the real 2-GPU DDP
straggler capture (its planted straggler known): under 50 KB, one flag row per rank in rank order, the notable
ranks' reports in brief, every report with --all-ranks."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tb_llmdiag import api
from tb_llmdiag.ingest.discover import TraceFile, name_order
from tb_llmdiag.jobs.build import job_entry
from tb_llmdiag.jobs.overview import notable, outliers, percentiles
from tb_llmdiag.jobs.straggler import JobTables
from tb_llmdiag.render.text import FULL_RANKS, rank_ranges, render_report

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
DDP = REPO / "tests" / "data" / "ddp_straggler"


def test_names_sort_as_people_count() -> None:
    names = ["rank10", "rank2", "rank1", "rank0", "worker", "rank02", "node1_10", "node1_9", "node10_0"]
    assert sorted(names, key=name_order) == [
        "node1_9", "node1_10", "node10_0", "rank0", "rank1", "rank02", "rank2", "rank10", "worker",
    ]  # fmt: skip


def _tf(rank: int | None, worker: str) -> TraceFile:
    return TraceFile(run="job", worker=worker, span="1", path=f"/l/job/{worker}.pt.trace.json", source_kind="kineto",
                     size_bytes=1, mtime_ns=0, rank=rank)  # fmt: skip


def test_a_jobs_files_are_in_rank_order() -> None:
    members = [(_tf(10, "rank10"), None), (_tf(None, "b"), None), (_tf(2, "rank2"), None), (_tf(1, "rank1"), None)]
    entry = job_entry("job", "1", members)
    assert [f["rank"] for f in entry["files"]] == [1, 2, 10, None]
    assert rank_ranges([0, 1, 2, 3, 5, 7, 8, 10, 11, 12]) == "0-3, 5, 7, 8, 10-12"


def test_percentiles_across_ranks_per_step() -> None:
    grid = np.array([[1.0, 2.0], [3.0, np.nan], [5.0, 6.0], [7.0, 8.0]])
    # column 0: [1, 3, 5, 7]: p50 4, p90 at 0.9 x 3 = 2.7 -> 5 + 0.7 x 2 = 6.4; column 1 (NaN left out): [2, 6, 8]
    got = percentiles(grid)
    assert got["p50"] == [4.0, 6.0] and got["max"] == [7.0, 8.0]
    assert got["p90"] == pytest.approx([6.4, 7.6], abs=1e-12)
    assert percentiles(np.full((2, 1), np.nan)) == {"p50": [None], "p90": [None], "max": [None]}


def _tables(step: list[float], wait: list[float]) -> JobTables:
    col = np.array(step, dtype=np.float64)[:, None]
    zero = np.zeros_like(col)
    parts = {f: zero for f in JobTables.__dataclass_fields__}
    return JobTables(**{**parts, "step_ns": col, "exposed_waiting_ns": np.array(wait, np.float64)[:, None]})


def test_outliers_and_notable_ranks_by_hand() -> None:
    # mean steps 100 +- a little, rank 8 at 130; median 100, deviations' median (MAD) 0.5:
    # band = max(3 x 1.4826 x 0.5 = 2.2239, 2 % of 100 = 2) = 2.2239: 102 and 98 are inside, 130 is out
    step = [100, 101, 99, 100, 102, 98, 100, 100, 130, 100]
    wait = [5.0] * 10
    wait[6] = 9.0  # waiting: median 5, MAD 0 -> band = 2 % of the median step = 2: 9 > 7 waits long
    t = _tables(step, wait)
    ranks = tuple(range(10))
    assert outliers(t, ranks, straggler=3) == [
        {"rank": 3, "step_ns": 100.0, "step_vs_median_ratio": 1.0, "reasons": ["straggler"]},
        {"rank": 8, "step_ns": 130.0, "step_vs_median_ratio": 1.3, "reasons": ["slow step"]},
        {"rank": 6, "step_ns": 100.0, "step_vs_median_ratio": 1.0, "reasons": ["waits long"]},
    ]
    # the typical rank: nearest the median, ties to the lowest rank
    assert notable(np.array(step, np.float64), ranks, 3) == {"straggler_rank": 3, "slowest_rank": 8, "fastest_rank": 5, "typical_rank": 0}


@pytest.fixture(scope="module")
def big_report() -> dict:
    """A report of 1,024 ranks: the job from bench/job_generator.py's summaries of the real ranks (straggler
    planted at 637), each rank's run report a copy of the real rank's report renamed (what the cluster returns)."""
    from job_generator import generate

    files = sorted(DDP.glob("rank*.pt.trace.json.gz"))
    real = [api.analyze(tf, summary=True) for tf in api.discover(str(DDP)).files]
    assert [Path(a.report["path"]).name for a in real] == [f.name for f in files]
    summaries = generate([a.rank_summary for a in real], 1024, steps=2, plant=637)
    tfs = [_tf(i, f"rank{i}") for i in range(1024)]
    runs = []
    for i, tf in enumerate(tfs):
        rep = copy.deepcopy(real[i % 2].report)
        rep.update(run="job", rank=i, worker=tf.worker, path=tf.path)
        runs.append(rep)
    job = api.job_for_summaries("job", "1", [(tf, s.to_dict()) for tf, s in zip(tfs, summaries)])
    return {"root": "/l", "runs": runs, "jobs": [job], "warnings": []}


def test_the_1024_rank_job_prints_in_under_50_kb_with_a_row_per_rank(big_report: dict) -> None:
    job = big_report["jobs"][0]
    assert job["metrics"]["straggler_rank"] == 637 and job["view"]["notable"]["straggler_rank"] == 637
    assert job["view"]["outliers"][0]["rank"] == 637 and job["view"]["outliers"][0]["reasons"][0] == "straggler"
    text = render_report(big_report)
    assert len(text.encode()) < 50_000
    assert "== job job  span 1  (1024 ranks: 0-1023)" in text
    rows = re.findall(r"^ {3}\s*(\d+) +\S+ (?:ms|µs|s) +[-+]\d+\.\d%", text, re.MULTILINE)
    assert [int(r) for r in rows] == list(range(1024))  # every rank once, numerically
    row = next(line for line in text.splitlines() if re.match(r"^ {3}\s*637 ", line))
    assert row.endswith("straggler")
    roles = job["view"]["notable"]
    notable_ranks = sorted({r for r in roles.values() if r is not None})
    briefs = re.findall(r"^== job +worker rank(\d+) .*in brief\)$", text, re.MULTILINE)
    assert sorted(int(r) for r in briefs) == notable_ranks  # the notable ranks only, each once
    full = render_report(big_report, all_ranks=True)
    assert len(re.findall(r"^== job  worker rank\d+  span 1  \(kineto\)$", full, re.MULTILINE)) == 1024
    assert len(full) > 20 * len(text)


def test_a_handful_of_ranks_still_prints_every_report() -> None:
    rep = api.report(str(DDP))
    assert len(rep["jobs"][0]["files"]) <= FULL_RANKS
    assert render_report(rep) == render_report(rep, all_ranks=True)
    assert "notable ranks" not in render_report(rep)
