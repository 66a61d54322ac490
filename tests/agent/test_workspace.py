"""The agent's logdir (`Workspace`): names and paths inside it only; answers cut to their budget (`fit`)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from tracepaths import REPO

from tb_llmdiag.agent.fit import dumps, fit, size
from tb_llmdiag.agent.workspace import OutsideLogdir, Workspace
from tb_llmdiag.errors import NoTracesFound, RunNotFound

SEED = "seed_lora_qwen1.5b"


@pytest.fixture()
def logdir(tmp_path: Path) -> Path:
    # GIVEN a logdir with one run, a file beside it outside, and links in the logdir pointing out of it
    root = tmp_path / "logs"
    shutil.copytree(REPO / "demo_logs" / SEED, root / SEED)
    secret = tmp_path / "outside" / "secret.pt.trace.json"
    secret.parent.mkdir()
    secret.write_text('{"traceEvents": []}')
    os.symlink(secret.parent, root / "escape")
    return root


def test_paths_resolve_inside_the_logdir_only(logdir: Path) -> None:
    ws = Workspace(str(logdir))
    assert ws.target(SEED).name == SEED
    assert ws.target(f"./{SEED}").name == SEED  # a path to the run folder names its trace
    trace = next((logdir / SEED).glob("rank0*.json.gz"))
    assert ws.target(str(trace)).files[0].path.endswith(trace.name)
    for outside in ("..", "../outside/secret.pt.trace.json", "/etc", "escape", "escape/secret.pt.trace.json"):
        with pytest.raises(OutsideLogdir, match="outside the logdir"):
            ws.inside(outside)
    with pytest.raises(OutsideLogdir, match=r"^\.\./outside: outside the logdir .*logs this server was started on"):
        ws.target("../outside")
    with pytest.raises(RunNotFound, match=r"no run named 'nope' \(runs: "):
        ws.target("nope")


@pytest.mark.parametrize("follow", ["0", "1"])
def test_a_discovered_link_out_of_the_logdir_is_never_read(logdir: Path, monkeypatch, follow: str) -> None:
    # GIVEN a trace-named link out of the logdir; the user's opt-in to following links (the tab's) or not
    monkeypatch.setenv("LLMDIAG_FOLLOW_LINKS", follow)
    os.symlink(logdir.parent / "outside" / "secret.pt.trace.json", logdir / SEED / "escape.pt.trace.json")
    ws = Workspace(str(logdir))
    linked = [tf for tf in ws.index().files if "escape" in tf.path]
    # discovery lists it (as the tab does; following links, the linked folder's trace too)
    assert {tf.path.split("/logs/")[1] for tf in linked} == (
        {f"{SEED}/escape.pt.trace.json"} | ({"escape/secret.pt.trace.json"} if follow == "1" else set()))
    # THEN each report is an error entry saying why, with nothing of the target in it; a path to it is refused
    for tf in linked:
        rep, summary = ws.report(tf)
        assert summary is None and (rep["status"], rep["read_state"], rep["summary"]) == ("error", None, None)
        assert rep["error"] == (f"{os.path.basename(tf.path)} is a link to a file outside the logdir; not read (this "
                                "server reads only files inside the logdir it was started on)")
    with pytest.raises(OutsideLogdir):
        ws.inside(f"{SEED}/escape.pt.trace.json")
    with pytest.raises(OutsideLogdir):
        ws.loaded(ws.target(f"{SEED}/escape.pt.trace.json"))


def test_a_logdir_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NoTracesFound, match="not a directory"):
        Workspace(str(tmp_path / "missing"))


def test_fit_keeps_what_fits_and_says_what_it_left_out() -> None:
    small = {"a": [1, 2, 3]}
    assert fit(small, 100, "h") is small
    # GIVEN 50 ranked items of ~100 bytes and a name of 1000 characters, over a 2000-byte budget
    big = {"verdict": "v" * 300, "rows": [{"name": f"r{i}", "pad": "x" * 90} for i in range(50)],
           "top": [{"name": "k" * 1000}, {"name": "short"}]}
    got = fit(big, 2000, "ask with detail=true")
    assert size(got) <= 2000
    assert got["verdict"] == "v" * 300  # sentences are never cut
    assert got["top"][0]["name"] == "k" * 239 + "…" and got["top"][1]["name"] == "short"
    kept = len(got["rows"])
    assert [r["name"] for r in got["rows"]] == [f"r{i}" for i in range(kept)]  # the first (most important) kept
    assert got["truncated"] == {"budget_bytes": 2000, "omitted": {"rows": 50 - kept}, "strings_cut": 1,
                                "hint": "ask with detail=true"}
    assert json.loads(dumps(got)) == got
    assert dumps({"x": float("nan")}) == '{"x":null}'


def test_a_finding_on_a_trace_with_python_stacks_names_its_source_line(tmp_path: Path) -> None:
    # GIVEN a real trace recorded with with_stack=True (TraceLens's H100 Qwen capture), its host_sync finding
    from tracepaths import shared_trace

    from tb_llmdiag.agent.answers import explain_finding

    src = shared_trace("external/AMD-AGI_TraceLens/h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    (tmp_path / "qwen").mkdir()
    shutil.copy(src, tmp_path / "qwen" / "h100.pt.trace.json.gz")
    got = explain_finding(Workspace(str(tmp_path)), "qwen", "host_sync")
    # THEN the longest sync's Python stack is given, innermost first, and the line is the first frame of the
    # program's own code (past the built-in and torch/ frames)
    assert got["culprit"] == "cudaDeviceSynchronize"
    assert got["source"]["frames"][:3] == ["<built-in function _cuda_synchronize>", "torch/cuda/__init__.py(975): synchronize",
                                           "moca/library/profiling/profile.py(34): run_torch_profiler"]
    assert got["source"]["line"] == "moca/library/profiling/profile.py(34): run_torch_profiler"


def test_each_findings_step_column_is_a_per_step_column() -> None:
    from tb_llmdiag import api
    from tb_llmdiag.findings.table import RULES
    from tb_llmdiag.metrics.registry import metric

    parts = {r.id: r.step_part for r in RULES if r.step_part is not None}
    assert parts == {"host_bound": "host_wait_ns", "slow_host_op": "host_wait_ns", "variable_shapes": "host_wait_ns",
                     "host_sync": "sync_ns", "dataloader_stall": "data_loader_ns",
                     "exposed_communication": "collective_ns", "accumulation_without_no_sync": "collective_ns",
                     "tensor_parallel_communication": "collective_ns", "fsdp_without_prefetch": "collective_ns",
                     "expert_all_to_all": "collective_ns", "decode_launch_bound": "host_wait_ns"}
    assert all(metric(f"steps.per_step[].{col}") is not None for col in parts.values())
    # the agent finds a finding's rule through the front door: the run's platform picks it
    assert api.catalogue.rule_of("host_sync", {"run": {"platform": "cuda"}}).step_part == "sync_ns"
    assert api.catalogue.rule_of("no_such_finding", {}) is None
