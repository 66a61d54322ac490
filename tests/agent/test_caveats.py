"""#36: the agent's default answers (no ``detail``) carry what a user of the tab reads beside a finding: its caveat,
the profiler's own share of the profiled step, and the slowest step, within the default budget (8 KB)."""

from __future__ import annotations

from pathlib import Path

from tb_llmdiag import api
from tb_llmdiag.agent import answers
from tb_llmdiag.agent.fit import DEFAULT_BUDGET_BYTES, size
from tb_llmdiag.agent.workspace import Workspace

DEMO = Path(__file__).resolve().parents[2] / "demo_logs"
SEED = "seed_lora_qwen1.5b"


def test_diagnose_carries_the_caveat_the_profiler_share_and_the_slowest_step() -> None:
    ws = Workspace(str(DEMO))
    got = answers.diagnose(ws, SEED)
    (rep,) = [r for r in api.report(str(DEMO / SEED))["runs"]]
    assert size(got) <= DEFAULT_BUDGET_BYTES and "truncated" not in got
    # the top finding's caveat, as the report words it; a repeated caveat names the finding that says it first
    first = rep["findings"][0]
    assert first["caveat"] and got["findings"][0]["caveat"] == first["caveat"]
    repeated = [f["id"] for f in rep["findings"][1:] if f.get("caveat") == first["caveat"]]
    assert repeated and all(f["caveat"] == f"as for {first['id']}" for f in got["findings"] if f["id"] in repeated)
    # the profiler's share of the profiled step, from the capture topic
    cap = rep["metrics"]["capture"]
    assert got["trust"]["profiler"]["profiler_overhead_share"] == cap["profiler_overhead_share"] > 0
    # the slowest step: the longest of the per-step durations, and its excess over the median step (lower median)
    rows = rep["metrics"]["steps"]["per_step"]
    durs = sorted(r["duration_ns"] for r in rows)
    slow = max(rows, key=lambda r: r["duration_ns"])
    assert got["steps"]["slowest"]["index"] == slow["index"] == 0
    assert got["steps"]["slowest"]["duration_ns"] == durs[-1]
    assert got["steps"]["slowest"]["over_median_ns"] == durs[-1] - durs[(len(durs) - 1) // 2]


def test_explain_finding_carries_the_caveat_and_the_profiler_share() -> None:
    ws = Workspace(str(DEMO))
    got = answers.explain_finding(ws, SEED, "host_bound")
    (rep,) = api.report(str(DEMO / SEED))["runs"]
    f = next(x for x in rep["findings"] if x["id"] == "host_bound")
    assert got["finding"]["caveat"] == f["caveat"] and "profiler" in f["caveat"]
    assert got["profiler"]["profiler_overhead_share"] == rep["metrics"]["capture"]["profiler_overhead_share"]
    assert size(got) <= DEFAULT_BUDGET_BYTES
