"""#25: `llmdiag rules` lists each rule id once with the platforms it applies to, then the job rules; a folder of
JSON files that are not traces is reported file by file ("not a trace"), never as a job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tb_llmdiag.findings.job import JOB_RULES
from tb_llmdiag.findings.table import RULES

REPO = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tb_llmdiag", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120, check=False)


def test_rules_lists_each_id_once_with_its_platforms_then_the_job_rules() -> None:
    doc = json.loads(run("rules", "--json").stdout)
    runs = [r for r in doc if r["level"] == "run"]
    jobs = [r for r in doc if r["level"] == "job"]
    assert [r["id"] for r in runs] == list(dict.fromkeys(r.id for r in RULES))  # once each, in table order
    assert [r["id"] for r in jobs] == [r.id for r in JOB_RULES] == [
        "straggler",
        "exposed_communication",
        "pipeline_stage_straggler",
        "pipeline_bubble",
        "slow_link_collectives",
    ]
    by_id = {r["id"]: r["platforms"] for r in runs}
    # a GPU and an XLA variant under one id: one entry, both platforms; a CUDA-launch rule: the GPU only
    assert by_id["recompilation"] == ["GPU (Kineto)", "XLA (XPlane)"] and by_id["host_bound"] == ["GPU (Kineto)"]
    assert by_id["host_transfer"] == ["XLA (XPlane)"]
    text = run("rules").stdout
    assert text.count("\n  recompilation ") == 1 and "Rules of a job" in text and "\n  straggler " in text


def test_unrelated_json_files_are_not_traces_and_no_job(tmp_path: Path) -> None:
    for i in range(4):
        (tmp_path / f"config{i}.json").write_text(json.dumps({"traceEvents": [], "seed": i}))
    for i in range(2):
        (tmp_path / f"metrics{i}.json").write_text(json.dumps({"schemaVersion": 1, "values": [i]}))
    res = run("report", str(tmp_path), "--json")
    doc = json.loads(res.stdout)
    assert doc["jobs"] == []  # was: "a 4-rank job that failed"
    assert len(doc["runs"]) == 6 and all(r["status"] == "error" for r in doc["runs"])
    errors = {Path(r["path"]).name: r["error"] for r in doc["runs"]}
    assert "no timed events" in errors["config0.json"] and "not a Chrome/Kineto trace" in errors["metrics0.json"]
    assert res.returncode == 4
    assert "== job" not in run("report", str(tmp_path)).stdout
