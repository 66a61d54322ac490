"""The MCP tool `anatomy` (issue #37 item 6), driven by the official MCP SDK's client over stdio against
`llmdiag mcp demo_logs`; every number checked against the CLI's own `--json` output of the same run.

The run's answer is the report's `metrics.anatomy` with its parts as a list, largest first; a step's is that step's
entry of each part's `step_time_ns`; the whole trace as a range is the summary's device-busy union, split among the
parts; errors (an unknown step, a step and times, an XLA run, a job, a step of the wrong type) are one-line tool
errors; every answer is within the default budget and carries the run's status and trust notes."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import pytest

from tracepaths import REPO

pytest.importorskip("mcp", reason="the [agent] extra (mcp) is not installed")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from tb_llmdiag.agent.fit import DEFAULT_BUDGET_BYTES  # noqa: E402

from test_mcp_server import SEED, cli_json  # noqa: E402

XLA, JOB = "jax_gpu_xplane", "ddp_straggler_2gpu"
BRIEF = ("time_ns", "share", "per_step_time_ns", "launches", "host_dispatch_ns", "dtype", "achieved_tflops",
         "peak_tflops", "efficiency_share", "efficiency_withheld", "identified_by", "identified_share", "top_ops")


async def _session(window_ns: int) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "tb_llmdiag.cli", "mcp", "demo_logs"],
                                   env={"PYTHONPATH": str(REPO)}, cwd=str(REPO))
    got: dict[str, Any] = {}
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                got["tools"] = {t.name: t for t in (await s.list_tools()).tools}
                calls = {
                    "run": {"run": SEED},
                    "step": {"run": SEED, "step": 2},
                    "range": {"run": SEED, "start_ns": 0, "end_ns": window_ns},
                    "detail": {"run": SEED, "detail": True},
                    "bad_step": {"run": SEED, "step": 99},
                    "both": {"run": SEED, "step": 1, "start_ns": 0},
                    "xla": {"run": XLA},
                    "job": {"run": JOB},
                    "typed": {"run": SEED, "step": "1"},
                }
                for key, args in calls.items():
                    res = await s.call_tool("anatomy", args)
                    got[key] = (res.is_error, res.content[0].text, res.structured_content)  # type: ignore[union-attr]
    return got


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return next(r for r in cli_json("report", f"demo_logs/{SEED}")["runs"] if r["run"] == SEED)


@pytest.fixture(scope="module")
def answers(report: dict[str, Any]) -> dict[str, Any]:
    return anyio.run(_session, report["summary"]["window_ns"])


def test_the_tool_is_listed_with_the_others_arguments(answers: dict[str, Any]) -> None:
    tool = answers["tools"]["anatomy"]
    assert tool.annotations.read_only_hint and tool.input_schema["required"] == ["run"]
    assert set(tool.input_schema["properties"]) == {"run", "step", "start_ns", "end_ns", "detail"}
    assert tool.input_schema["properties"]["step"] == answers["tools"]["top_activities"].input_schema["properties"]["step"]


def test_the_runs_parts_are_the_reports(answers: dict[str, Any], report: dict[str, Any]) -> None:
    is_error, text, doc = answers["run"]
    assert not is_error and len(text.encode("utf-8")) <= DEFAULT_BUDGET_BYTES and json.loads(text) == doc
    a = report["metrics"]["anatomy"]
    assert doc["status"] == report["status"] and doc["trust"]["read_state"] == report["read_state"]
    assert [p["name"] for p in doc["anatomy"]["parts"]] == sorted(a["parts"], key=lambda p: -a["parts"][p]["time_ns"])
    for p in doc["anatomy"]["parts"]:
        want = a["parts"][p["name"]]
        assert {k: p.get(k) for k in BRIEF} == {k: want.get(k) for k in BRIEF}, p["name"]
        assert p.get("backend") == want.get("backend")
    for k in ("busy_ns", "steps", "assigned_share", "other_share", "device", "by_evidence"):
        assert doc["anatomy"][k] == a[k], k
    _, text, detail = answers["detail"]
    assert {p["name"]: {k: v for k, v in p.items() if k != "name"} for p in detail["anatomy"]["parts"]} == a["parts"]
    assert detail["anatomy"]["step_index"] == a["step_index"]


def test_a_step_and_a_range(answers: dict[str, Any], report: dict[str, Any]) -> None:
    a = report["metrics"]["anatomy"]
    at = a["step_index"].index(2)
    _, text, doc = answers["step"]
    act = doc["activities"]
    row = next(r for r in report["metrics"]["steps"]["per_step"] if r["index"] == 2)
    assert (act["step"], act["start_ns"], act["end_ns"]) == (2, row["start_ns"], row["end_ns"])
    want = sorted(((n, f["step_time_ns"][at]) for n, f in a["parts"].items() if f["step_time_ns"][at] > 0),
                  key=lambda kv: -kv[1])
    assert [(p["name"], p["time_ns"]) for p in act["parts"]] == want
    assert act["parts_busy_ns"] == sum(t for _, t in want)
    assert [p["share"] for p in act["parts"]] == [t / act["parts_busy_ns"] for _, t in want]
    # the whole trace as a range: the summary's device-busy union (all devices and streams), split among the parts
    _, text, doc = answers["range"]
    act = doc["activities"]
    assert act["step"] is None and (act["start_ns"], act["end_ns"]) == (0, report["summary"]["window_ns"])
    assert abs(act["parts_busy_ns"] - report["summary"]["device_busy_ns"]) <= 1
    assert abs(sum(p["time_ns"] for p in act["parts"]) - act["parts_busy_ns"]) <= len(act["parts"])
    assert set(p["name"] for p in act["parts"]) <= set(a["parts"])


def test_errors_are_one_line(answers: dict[str, Any]) -> None:
    want = {
        "bad_step": "no step 99 in run seed_lora_qwen1.5b (steps: 0, 1, 2, 3)",
        "both": "give a step or a time range (start_ns, end_ns), not both",
        "xla": "no model parts for run jax_gpu_xplane: the model's parts are read from PyTorch (Kineto) traces' host "
        "call chains; this is an XLA trace",
        "job": "ddp_straggler_2gpu is a job: name one of its ranks (run/worker/span; see list_runs)",
        "typed": "Error executing tool anatomy: argument step: Input should be a valid integer (got '1')",
    }
    for key, line in want.items():
        is_error, text, _ = answers[key]
        assert is_error and "\n" not in text and text.endswith(line), (key, text)
