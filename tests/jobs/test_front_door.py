"""Jobs through api.report: which files make a job, and a job of traces that are not ranks."""

from __future__ import annotations

import shutil
from pathlib import Path

from tracepaths import TEST_DATA
from tb_llmdiag import api


def test_two_single_gpu_traces_in_one_run_are_not_a_job_of_ranks(tmp_path: Path) -> None:
    src = next((TEST_DATA / "gpu_seed").glob("*.pt.trace.json.gz"))
    run = tmp_path / "logs" / "two"
    run.mkdir(parents=True)
    shutil.copy(src, run / "rank0.1.pt.trace.json.gz")
    shutil.copy(src, run / "rank1.2.pt.trace.json.gz")
    rep = api.report(str(tmp_path / "logs"))
    (job,) = rep["jobs"]
    assert job["status"] == "error" and "0 of 2 traces could be analysed as ranks" in job["error"]
    assert [f["status"] for f in job["files"]] == ["error", "error"] and job["view"] is None
    assert [r["status"] for r in rep["runs"]] == ["ok", "ok"]  # each trace's own report stands


def test_a_missing_rank_is_stated(tmp_path: Path) -> None:
    """Rank 1 of a 2-rank job alone with a copy named rank3: ranks are read from distributedInfo (1, 1): the
    duplicate is stated, and the job needs two distinct ranks."""
    src = next((TEST_DATA / "ddp_straggler").glob("rank1*.pt.trace.json.gz"))
    run = tmp_path / "logs" / "job"
    run.mkdir(parents=True)
    shutil.copy(src, run / "rank1.1.pt.trace.json.gz")
    shutil.copy(src, run / "rank3.2.pt.trace.json.gz")
    (job,) = api.report(str(tmp_path / "logs"))["jobs"]
    assert any("rank 1 appears twice" in n for n in job["notes"]), job["notes"]
    assert any("ranks missing: 0" in n for n in job["notes"]), job["notes"]
