"""`llmdiag compare` / `check` on the command line: selecting runs, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tb_llmdiag.cli import main
from tracepaths import REPO

DEMO = REPO / "demo_logs"


def test_a_logdir_side_needs_run_and_says_which(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(DEMO), str(DEMO / "fixed_lora_qwen1.5b")]) == 2
    err = capsys.readouterr().err
    # a run with several traces (the 2-rank DDP job) is listed as run/worker/span
    runs = "ddp_straggler_2gpu/rank0/1, ddp_straggler_2gpu/rank1/1, fixed_lora_qwen1.5b, jax_gpu_xplane, seed_lora_qwen1.5b"
    assert err == (f"llmdiag: BEFORE {DEMO} holds 5 runs ({runs}); pick one with --run NAME "
                   "(a whole job: --run ddp_straggler_2gpu)\n")
    assert main(["compare", str(DEMO), str(DEMO), "--before-run", "nope"]) == 5
    assert f"no run named 'nope' (runs: {runs})" in capsys.readouterr().err
    # the run of a job names the job: it compares as a job (tests/compare/test_job_compare.py)
    assert main(["compare", str(DEMO), str(DEMO), "--run", "ddp_straggler_2gpu", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["level"], doc["before"]["rank_count"], doc["after"]["ranks"]) == ("job", 2, ["0", "1"])


def test_run_selectors_pick_one_run_each(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(DEMO), str(DEMO), "--before-run", "seed_lora_qwen1.5b",
                 "--after-run", "fixed_lora_qwen1.5b/rank0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["before"]["run"], doc["after"]["run"]) == ("seed_lora_qwen1.5b", "fixed_lora_qwen1.5b")
    assert doc["verdict"].startswith("AFTER is 4.9x faster in tokens/s")


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixed = str(DEMO / "fixed_lora_qwen1.5b")
    assert main(["compare", str(tmp_path / "missing"), fixed]) == 3
    capsys.readouterr()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "w.1.pt.trace.json").write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "na')
    assert main(["check", str(bad), "--baseline", fixed]) == 4
    err = capsys.readouterr().err
    assert err.startswith(f"llmdiag: CANDIDATE {bad} (run bad) could not be analysed: ") and err.count("\n") == 1
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": 0, "tool": {"name": "tb_llmdiag"}, "runs": []}))
    assert main(["check", fixed, "--baseline", str(old)]) == 4
    assert "saved report has schema 0; this llmdiag compares schemas 1, 2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["check", fixed, "--baseline", fixed, "--tolerance", "no.such_key=5%"])
    assert exc.value.code == 2
    assert "'no.such_key' is not a metric key" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["check", fixed, "--baseline", fixed, "--max-regression", "five"])
    assert exc.value.code == 2


def test_json_is_strict_and_check_exit_code_in_a_real_process(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "tb_llmdiag", "check", str(DEMO / "seed_lora_qwen1.5b"),
                           "--baseline", str(DEMO / "fixed_lora_qwen1.5b"), "--json"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert doc["kind"] == "check" and doc["passed"] is False
    assert doc["regressions"][0]["key"] == "headline.tokens_per_s"
    assert doc["compare"]["before"]["run"] == "fixed_lora_qwen1.5b"
