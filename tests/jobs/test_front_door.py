"""Jobs through api.report: which files make a job, and a job of traces that are not ranks."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tracepaths import TEST_DATA
from tb_llmdiag import api
from tb_llmdiag.metrics.comm import communication
from tb_llmdiag.metrics.comm import purpose as comm_purpose


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


def test_a_rank_s_summary_reads_what_the_analysis_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    """#32: a rank's step windows, communication breakdown, compute blocks and collective purposes are computed once
    per analysis, by the ``communication`` and ``comm_purpose`` topics; the rank's summary (``jobs/rank_summary.py``)
    reads them from the analysis's RowCache (before: compute blocks 3 times, purposes twice)."""
    calls: Counter[str] = Counter()
    for mod, name in (
        (communication, "_windows"),
        (communication, "_comm_breakdown"),
        (communication, "_merged_compute"),
        (comm_purpose, "_classify"),
    ):

        def counted(*a: Any, _real: Any = getattr(mod, name), _name: str = name, **k: Any) -> Any:
            calls[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(mod, name, counted)
    # GIVEN one rank of a two-rank DDP job, WHEN it is analysed with its summary
    tf = api.discover(str(TEST_DATA / "ddp_balanced")).files[0]
    got = api.analyze(tf, summary=True)
    # THEN it has a summary with its collectives, and each figure behind it was computed once
    assert got.rank_summary is not None and len(got.rank_summary.collectives["kind"]) > 0
    assert calls == {"_windows": 1, "_comm_breakdown": 1, "_merged_compute": 1, "_classify": 1}
