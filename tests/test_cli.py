"""`llmdiag report`: text and JSON output, exit codes, one-line errors, no tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tb_llmdiag.cli import main
from tracepaths import REPO, shared_trace

RESNET0 = "kineto_resnet50/resnet50_num_workers_0"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "tb_llmdiag", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_json_report_is_strict_json_with_schema(tmp_path: Path) -> None:
    proc = run_cli("report", str(shared_trace(RESNET0)), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert doc["schema"] == 3 and doc["tool"]["name"] == "tb_llmdiag"
    assert [(r["run"], r["worker"], r["span"], r["status"]) for r in doc["runs"]] == [
        ("resnet50_num_workers_0", "worker0", "1", "ok"), ("resnet50_num_workers_0", "worker0", "2", "ok")]
    run = doc["runs"][0]
    assert [s["index"] for s in run["metrics"]["steps"]["per_step"]] == [5, 6, 7, 8, 9, 10]
    assert run["findings"][0]["id"] == "dataloader_stall"


def test_text_report_lists_steps_and_findings() -> None:
    proc = run_cli("report", str(shared_trace(RESNET0)))
    assert proc.returncode == 0
    assert "steps: 6 (ProfilerStep markers)" in proc.stdout and "dataloader_stall" in proc.stdout


def test_exit_codes(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path / "missing")]) == 3
    assert "no such file or directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 3
    assert "no profiler traces found" in capsys.readouterr().err
    # one good and one broken trace: the good one is reported, the exit code says a trace was unreadable
    logdir = tmp_path / "logs"
    (logdir / "good").mkdir(parents=True)
    shutil.copy(shared_trace("hta/triton_example/triton_example.json.gz"), logdir / "good" / "w.1.pt.trace.json.gz")
    (logdir / "bad").mkdir()
    (logdir / "bad" / "w.1.pt.trace.json").write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "na')
    code = main(["report", str(logdir)])
    out = capsys.readouterr()
    assert code == 4
    assert "error: the JSON ends early at byte 52 (file truncated?); no complete event before it" in out.out
    assert "== good" in out.out
    assert out.err.count("\n") == 1 and "Traceback" not in out.err


def test_no_traceback_for_a_foreign_file(tmp_path: Path) -> None:
    f = tmp_path / "notes.json"
    f.write_text("[1, 2, 3]")
    proc = run_cli("report", str(f))
    assert proc.returncode == 4 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("llmdiag: ") and proc.stderr.count("\n") == 1


def test_a_job_prints_its_section_before_the_ranks() -> None:
    """A folder with one trace per rank: the job section comes first and names the straggler with its cause (the
    same figures as the JSON's jobs[] entry); then each rank's own section. A single-rank run gets no job."""
    job_dir = REPO / "demo_logs" / "ddp_straggler_2gpu"
    text = run_cli("report", str(job_dir))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    first_job = next(i for i, l in enumerate(lines) if l.startswith("== job ddp_straggler_2gpu"))
    first_rank = next(i for i, l in enumerate(lines) if l.startswith("== ddp_straggler_2gpu  worker"))
    assert first_job < first_rank
    doc = json.loads(run_cli("report", str(job_dir), "--json").stdout)
    (job,) = doc["jobs"]
    m = job["metrics"]
    assert m["straggler_rank"] == 1 and m["straggler_cause"] == "more_tokens"
    assert "1. The other ranks wait in their collectives for one rank" in text.stdout and "(rule straggler)" in text.stdout
    assert "straggler rank 1; cause more tokens per step" in text.stdout  # labels and words, never keys (#25, #36)
    assert [f["rank"] for f in job["files"]] == [0, 1] and len(doc["runs"]) == 2
    single = json.loads(run_cli("report", str(shared_trace(RESNET0)), "--json").stdout)
    assert single["jobs"] == []  # two spans of one worker are not ranks
