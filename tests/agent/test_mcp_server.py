"""`llmdiag mcp demo_logs` driven by the official MCP SDK's own client over stdio (issue #26).

The server runs as a subprocess (`python -m tb_llmdiag.cli mcp demo_logs`); every number it answers is checked
against the CLI's own `--json` output of the same logdir, read at test time (never a number written here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import anyio
import pytest

from tracepaths import REPO

mcp = pytest.importorskip("mcp", reason="the [agent] extra (mcp) is not installed")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from tb_llmdiag.agent.fit import DEFAULT_BUDGET_BYTES  # noqa: E402
from tb_llmdiag.metrics.labels import chain_words  # noqa: E402

SEED, FIXED = "seed_lora_qwen1.5b", "fixed_lora_qwen1.5b"
TOOLS = {"list_runs", "diagnose", "explain_finding", "top_activities", "anatomy", "compare", "check", "timeline"}
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tb_llmdiag.cli", *args], capture_output=True, text=True, env=ENV,
                          cwd=REPO, timeout=300)


def cli_json(*args: str) -> Any:
    proc = cli(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


async def session_answers() -> dict[str, Any]:
    """One MCP session over stdio: every call the test judges, recorded as (is_error, text, structured)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "tb_llmdiag.cli", "mcp", "demo_logs"],
                                   env={"PYTHONPATH": str(REPO)}, cwd=str(REPO))
    got: dict[str, Any] = {}
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                got["tools"] = (await s.list_tools()).tools

                async def call(key: str, tool: str, **args: Any) -> Any:
                    res = await s.call_tool(tool, args)
                    text = res.content[0].text  # type: ignore[union-attr]
                    got[key] = (res.is_error, text, res.structured_content)
                    return res.structured_content

                await call("list_runs", "list_runs")
                await call("diagnose", "diagnose", run=SEED)
                explained = await call("explain", "explain_finding", run=SEED, finding="host_bound")
                await call("activities", "top_activities", run=SEED, step=explained["focus_step"])
                await call("compare", "compare", before=SEED, after=FIXED)
                await call("check", "check", candidate=FIXED, baseline=SEED)
                await call("job", "diagnose", run="ddp_straggler_2gpu")
                await call("unknown", "diagnose", run="nope")
                await call("outside", "diagnose", run="../README.md")
                await call("outside_abs", "top_activities", run=str(REPO / "tests"))
                await call("bad_step", "top_activities", run=SEED, step=99)
                await call("timeline", "timeline", run=SEED)
                await call("timeline_unknown", "timeline", run="nope")
                resources = (await s.list_resources()).resources
                got["resources"] = {str(r.uri) for r in resources}
                for uri in ("llmdiag://registry", "llmdiag://findings"):
                    got[uri] = json.loads((await s.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
    return got


@pytest.fixture(scope="module")
def answers() -> dict[str, Any]:
    return anyio.run(session_answers)


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return cli_json("report", "demo_logs")


def seed_run(report: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in report["runs"] if r["run"] == SEED)


def test_the_tools_are_listed_with_json_schemas(answers: dict[str, Any]) -> None:
    tools = {t.name: t for t in answers["tools"]}
    assert set(tools) == TOOLS
    assert tools["diagnose"].input_schema["required"] == ["run"]
    assert tools["top_activities"].input_schema["properties"]["step"]["anyOf"][0]["type"] == "integer"
    assert tools["explain_finding"].input_schema["required"] == ["run", "finding"]
    assert all(t.annotations.read_only_hint for t in tools.values())


def test_every_answer_is_json_under_its_bound(answers: dict[str, Any]) -> None:
    for key in ("list_runs", "diagnose", "explain", "activities", "compare", "check", "job", "timeline"):
        is_error, text, structured = answers[key]
        assert not is_error, (key, text)
        assert len(text.encode("utf-8")) <= DEFAULT_BUDGET_BYTES, key
        assert json.loads(text, parse_constant=lambda c: pytest.fail(f"{key}: {c} in JSON")) == structured


def test_the_timeline_of_a_one_trace_run_is_its_report(answers: dict[str, Any], report: dict[str, Any]) -> None:
    (series,) = answers["timeline"][2]["series"]
    assert (series["run"], series["source"], series["changes"], series["cost"]) == (SEED, "schedule", [], None)
    (w,) = series["windows"]
    run = seed_run(report)
    assert w["profiled_step_ns"] == run["headline"]["step_median_ns"]
    assert w["top_finding"]["id"] == run["findings"][0]["id"] and w["name"] == SEED
    is_error, text, _ = answers["timeline_unknown"]
    assert is_error and "no run 'nope'" in text


def test_the_seed_runs_top_finding_and_saving_equal_the_clis(answers: dict[str, Any], report: dict[str, Any]) -> None:
    cli_top = seed_run(report)["findings"][0]
    assert cli_top["id"] == "host_bound"
    listed = next(r for r in answers["list_runs"][2]["runs"] if r["name"] == SEED)
    assert listed["top_finding"]["id"] == "host_bound" and listed["top_finding"]["saving"] == cli_top["saving"]
    diag = answers["diagnose"][2]
    # every ranked finding, each saving brief: what it takes off which step, and the profiled step's beside it (#37)
    assert [f["id"] for f in diag["findings"]] == [f["id"] for f in seed_run(report)["findings"]]
    s = cli_top["saving"]
    assert diag["findings"][0]["saving"] == {
        "basis": s["basis"],
        "step_basis": "without_profiler",
        "step_ns": s["step_ns"],
        "ns": s["ns"],
        "share": s["share"],
        "profiled": {"step_ns": s["profiled"]["step_ns"], "ns": s["profiled"]["ns"]},
    }
    assert diag["findings"][0]["evidence"] == cli_top["evidence"]
    assert diag["what_if"]["statement"] == seed_run(report)["what_if"]["statement"]


def test_top_activities_of_the_findings_step_names_its_host_op(answers: dict[str, Any], report: dict[str, Any]) -> None:
    run = seed_run(report)
    # host_bound names the activity the attribution finds holding the idle time (issue #23): its innermost name
    host_op = run["metrics"]["attribution"]["top_chain"].split(" > ")[-1]
    assert chain_words(host_op) in run["findings"][0]["evidence"]["host_is"]  # the op in words (#36)
    explained = answers["explain"][2]
    assert explained["culprit"] == host_op and explained["ranges"]
    # the step shown is the median step, the basis of the saving (the lower middle of an even count)
    rows = run["metrics"]["steps"]["per_step"]
    by_duration = sorted(rows, key=lambda r: r["duration_ns"])
    assert explained["focus_step"] == by_duration[(len(rows) - 1) // 2]["index"]
    act = answers["activities"][2]["activities"]
    assert act["step"] == explained["focus_step"]
    assert host_op in [op["name"] for op in act["host"]["cpu_op"]]  # among the step's busiest host ops
    # the GPU's split of the step is the report's own row for it
    row = next(r for r in rows if r["index"] == act["step"])
    assert (act["start_ns"], act["end_ns"]) == (row["start_ns"], row["end_ns"])
    for key in ("busy_ns", "collective_ns", "host_wait_ns", "sync_ns", "data_loader_ns", "other_ns"):
        assert act["gpu"][key] == row[key], key


def test_compare_and_check_give_the_clis_verdict(answers: dict[str, Any]) -> None:
    doc = cli_json("compare", f"demo_logs/{SEED}", f"demo_logs/{FIXED}")
    got = answers["compare"][2]
    assert got["verdict"] == doc["verdict"]
    assert got["findings"]["resolved"] == [
        {k: f.get(k) for k in ("id", "saving_share_before", "saving_share_after", "note")}
        for f in doc["findings"]["resolved"]]
    kept = {r["key"]: r for r in got["metrics"]}
    for row in doc["metrics"]:
        if row["key"] in kept:
            assert (kept[row["key"]]["before"], kept[row["key"]]["after"]) == (row["before"], row["after"])
    proc = cli("check", f"demo_logs/{FIXED}", "--baseline", f"demo_logs/{SEED}")
    chk = answers["check"][2]
    assert chk["exit_code"] == proc.returncode and chk["passed"] is (proc.returncode == 0)


def test_a_job_is_diagnosed_as_the_cli_reports_it(answers: dict[str, Any], report: dict[str, Any]) -> None:
    job = next(j for j in report["jobs"] if j["run"] == "ddp_straggler_2gpu")
    got = answers["job"][2]
    assert got["level"] == "job" and [f["id"] for f in got["findings"]] == [f["id"] for f in job["findings"]]
    assert got["findings"][0]["evidence"] == job["findings"][0]["evidence"]


def test_user_errors_are_tool_errors_with_the_clis_line(answers: dict[str, Any]) -> None:
    is_error, text, _ = answers["unknown"]
    proc = cli("compare", "demo_logs", "demo_logs", "--run", "nope")
    cli_line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 5 and is_error  # RunNotFound
    # the same one line after its role prefix: "no run named 'nope' (runs: ...)"
    assert text.split(": ", 2)[-1] == cli_line.split(": ", 2)[-1]
    assert "no run named 'nope' (runs: " in text and "\n" not in text
    for key in ("outside", "outside_abs"):
        is_error, text, _ = answers[key]
        assert is_error and "outside the logdir" in text and str(REPO / "demo_logs") in text, text
    is_error, text, _ = answers["bad_step"]
    assert is_error and "no step 99 in run seed_lora_qwen1.5b (steps: 0, 1, 2, 3)" in text


def test_the_registry_and_finding_catalogue_are_resources(answers: dict[str, Any]) -> None:
    assert answers["resources"] == {"llmdiag://registry", "llmdiag://findings"}
    keys = {m["key"] for m in answers["llmdiag://registry"]["metrics"]}
    assert {"findings[].saving.share", "activities.host.*[].time_ns", "steps.per_step[].host_wait_ns"} <= keys
    ids = {f["id"] for f in answers["llmdiag://findings"]["runs"]}
    assert {"host_bound", "dataloader_stall"} <= ids
    assert {f["id"] for f in answers["llmdiag://findings"]["jobs"]} == {
        "straggler",
        "exposed_communication",
        "pipeline_stage_straggler",
        "pipeline_bubble",
        "slow_link_collectives",
    }


def test_without_the_sdk_the_command_says_so_in_one_line() -> None:
    code = ("import sys; sys.modules['mcp'] = None\n"
            "from tb_llmdiag.cli import main; sys.exit(main(['mcp', 'demo_logs']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("llmdiag: llmdiag mcp needs the Python package 'mcp', which is not installed: "
                           "pip install '.[agent]' in a clone of the repository (the package's [agent] extra)\n")
