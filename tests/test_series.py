"""Over the run (#34), the analysis side: the reader keeps a window's `llmdiag_window`, windows group into a series in
step order, change points fall at the right windows with what changed, a triggered window's one-off slowdown is a
transient, the capture's cost is the helper's ledger; `llmdiag timeline` and `llmdiag scalars`, the MCP answer.

GIVEN eight windows of the H200 rerun (tests/data/over_run_h200, every 100 steps and two triggered ones, out of 18:
sequence length doubled at step 650, the allocator thrashed from 1050, a slow data shard at 1234-1241; helper/over_run_truth.json says
what was planted and holds the helper's window list), and windows written here by the capture helper on the CPU with
a fake clock (a step of 20 ms, 30 ms and twice the tokens from step 45, eight slow steps of 250 ms at 70-77).
THEN the numbers are those of the raw files (read here with gzip + json) and of the planted truth.
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import time

import pytest

from tb_llmdiag import api
from tb_llmdiag.cli import main as cli_main
from tb_llmdiag.errors import RunNotFound

HERE = os.path.dirname(os.path.abspath(__file__))
H200 = os.path.join(HERE, "data", "over_run_h200")


def raw_window(path: str) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)["llmdiag_window"]


def h200_files() -> list[str]:
    return sorted(os.path.join(H200, n) for n in os.listdir(H200) if n.endswith(".pt.trace.json.gz"))


@pytest.fixture(scope="module")
def h200_doc() -> dict:
    return api.timeline(H200)


STEPS = [601, 653, 701, 1001, 1101, 1201, 1237, 1301]


def test_the_report_keeps_the_window_object_as_written():
    for path in h200_files()[:2]:
        raw = raw_window(path)
        kept = api.report(path)["runs"][0]["window"]
        assert {k: v for k, v in raw.items() if v is not None} == kept


def test_the_h200_windows_form_one_series_in_step_order(h200_doc):
    truth = json.load(open(os.path.join(H200, "helper", "over_run_truth.json")))
    (s,) = h200_doc["series"]
    assert (s["run"], s["worker"], s["source"]) == ("over_run_h200", "rank0", "helper")
    assert s["series"] == raw_window(h200_files()[0])["series"]
    assert [w["global_step"] for w in s["windows"]] == STEPS
    reasons = {w["window_steps"][0]: w["reason"] for w in truth["windows"]}
    assert [w["reason"] for w in s["windows"]] == [reasons[g] for g in STEPS]
    by_step = {raw_window(p)["global_step"]: raw_window(p) for p in h200_files()}
    for w in s["windows"]:
        raw = by_step[w["global_step"]]
        if w["reason"] == "triggered":  # the slow steps from the trigger on and its profiled steps (this run's
            # helper wrote no steps after the window into its object yet)
            slow = [t for st, t in zip(raw["before_steps"], raw["before_step_ns"]) if st >= raw["trigger"]["step"]]
            assert "after_step_ns" not in raw and w["step_source"] == "slowdown_profiled"
            assert w["step_ns"] == statistics.median(slow + raw["profiled_step_ns"])
        else:
            assert w["step_source"] == "unprofiled_before"
            assert w["step_ns"] == statistics.median(raw["before_step_ns"])
    # tokens a step: batch x length, the length doubled from step 650 (the triggered window's from its trace)
    tokens = truth["planted"]["tokens_per_step"]
    assert [w["tokens_per_step"] for w in s["windows"]] == [tokens[0]] + [tokens[1]] * 7
    assert s["triggered"] == [1, 6]


def test_the_planted_changes_show_at_the_windows_after_them(h200_doc):
    planted = json.load(open(os.path.join(H200, "helper", "over_run_truth.json")))["planted"]
    (s,) = h200_doc["series"]
    got = [(c["kind"], c["from_step"], c["at_step"]) for c in s["changes"]]
    # sequence length doubled at 650: the triggered window at 653 (slow steps 650, 651); the thrash from 1050: the
    # window at 1101; the slow shard 1234-1241: the triggered window at 1237, undone at 1301
    assert planted["seq_len_doubles_at_step"] == 650 and planted["allocator_thrash_from_step"] == 1050
    assert planted["slow_steps"] == list(range(1234, 1242))
    assert got == [("shift", 601, 653), ("shift", 1001, 1101), ("transient", 1201, 1237)]
    seq, thrash, slow = s["changes"]
    assert [seq["tokens_per_step_before"], seq["tokens_per_step_after"]] == planted["tokens_per_step"]
    assert seq["change_share"] > 0.9  # twice the tokens: about twice the step
    assert 0.05 < thrash["change_share"] < 0.2
    assert "allocator_churn" in [f["id"] for f in thrash["what_changed"]["findings_new"]]
    assert "the bottleneck moved from" in thrash["what_changed"]["verdict"]
    trig = s["windows"][6]["slowdown"]
    assert trig["slow_steps"] == [1234, 1235] and trig["recorded_slow_steps"] == trig["recorded_steps"] == 3
    assert slow["change_share"] > 0.9  # 150 ms of host sleep on a ~155 ms step
    assert s["noise"]["band_share"] == 0.05


def test_the_capture_cost_is_the_helpers_ledger(h200_doc):
    cost = h200_doc["series"][0]["cost"]
    last = raw_window(h200_files()[-1])["cost"]  # the window at 1301: the ledger so far
    assert cost["spent_ns"] == last["spent_ns"] and cost["elapsed_ns"] == last["elapsed_ns"]
    assert cost["spent_share"] == last["spent_share"] < cost["budget_share"] == 0.02
    assert cost["windows"] == 8 and cost["skipped_steps"] == []


def test_timeline_cli_text_markdown_json(capsys):
    assert cli_main(["timeline", H200]) == 0
    text = capsys.readouterr().out
    assert "change at step 1101 (against step 1001)" in text and "one-off at step 1237" in text
    assert cli_main(["timeline", H200, "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# Over the run") and "| 1237 | triggered |" in md
    assert cli_main(["timeline", H200, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "timeline" and [w["global_step"] for w in doc["series"][0]["windows"]] == STEPS


def test_scalars_cli_writes_what_tensorboard_reads(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert cli_main(["scalars", H200, "--out", str(tmp_path)]) == 0
    ea = EventAccumulator(str(tmp_path / "over_run_h200"))
    ea.Reload()
    tags = set(ea.Tags()["scalars"])
    assert {"llm_diag/step_ms", "llm_diag/tokens_per_s", "llm_diag/gpu_busy_share", "llm_diag/mfu_share"} <= tags
    assert [e.step for e in ea.Scalars("llm_diag/step_ms")] == STEPS
    by_step = {raw_window(p)["global_step"]: raw_window(p) for p in h200_files()}
    got = {e.step: e.value for e in ea.Scalars("llm_diag/step_ms")}
    assert got[1101] == pytest.approx(statistics.median(by_step[1101]["before_step_ns"]) / 1e6, rel=1e-6)
    assert [e.step for e in ea.Scalars("llm_diag/trigger_step_ms")] == [653, 1237]


def test_mcp_timeline_answer_is_brief_and_within_budget():
    from tb_llmdiag.agent.fit import DEFAULT_BUDGET_BYTES, dumps
    from tb_llmdiag.agent.timeline import timeline
    from tb_llmdiag.agent.workspace import Workspace

    ans = timeline(Workspace(os.path.dirname(H200)), "over_run_h200")
    assert len(dumps(ans).encode()) <= DEFAULT_BUDGET_BYTES
    (s,) = ans["series"]
    shift = [c for c in s["changes"] if c["at_step"] == 1101][0]
    assert "allocator_churn" in shift["what_changed"]["findings_new"]
    named = [w.get("name") for w in s.get("windows", [])]
    assert all(n is None or n.startswith("over_run_h200/rank0/") for n in named)
    with pytest.raises(RunNotFound):
        timeline(Workspace(os.path.dirname(H200)), "no_such_run")


# --- windows written here --------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        return self.now


def _train_planted(tmp_path) -> str:
    """90 steps; 20 ms then 30 ms and twice the tokens from 45; 250 ms at 70-77 (module docstring)."""
    torch = pytest.importorskip("torch")
    from tb_llmdiag.capture import profile_run

    clock = FakeClock()
    prof = profile_run(tmp_path, "cpu", every=20, trigger=3.0, cooldown_steps=30, budget=1.0, analyze=False, rank=0,
                       clock=clock)  # fmt: skip
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 50))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with prof:
        for i in range(90):
            length = 32 if i < 45 else 64
            x = torch.randint(0, 50, (2, length))
            torch.nn.functional.cross_entropy(model(x).view(-1, 50), x.view(-1)).backward()
            opt.step()
            opt.zero_grad()
            planted_ns = 250_000_000 if 70 <= i <= 77 else 20_000_000 if i < 45 else 30_000_000
            if 70 <= i <= 77:
                time.sleep(0.25)
            clock.now += planted_ns
            prof.step(tokens=2 * length)
    return str(tmp_path / "cpu")


def test_cpu_windows_change_point_and_transient(tmp_path):
    run = _train_planted(tmp_path)
    doc = api.timeline(run)
    (s,) = doc["series"]
    windows = s["windows"]
    assert [(w["reason"], w["global_step"]) for w in windows] == [
        ("first", 11), ("periodic", 21), ("periodic", 41), ("periodic", 61), ("triggered", 73), ("periodic", 81)
    ]  # fmt: skip
    assert [w["step_ns"] for w in windows[:4]] == [20_000_000, 20_000_000, 20_000_000, 30_000_000]
    assert [w["tokens_per_step"] for w in windows] == [64, 64, 64, 128, 128, 128]
    # the triggered window: opened after slow steps 70, 71 (warm-up 72, recorded 73-75, timed after it 76-78): its
    # level is the slow steps and those after it, 250 ms x 4 and 30 ms; the window at 81 is back at 30 ms
    trig = windows[4]
    assert trig["step_source"] == "slowdown" and trig["step_ns"] == 250_000_000
    # judged against the median of the last 50 unprofiled steps: still mostly the 20 ms ones before step 45
    assert trig["slowdown"]["slow_steps"] == [70, 71] and trig["slowdown"]["median_ns"] == 20_000_000
    assert trig["slowdown"]["recorded_steps"] == 3 and trig["slowdown"]["recorded_slow_steps"] == 3  # real sleeps
    assert s["triggered"] == [4]
    changes = [(c["kind"], c["from_step"], c["at_step"]) for c in s["changes"]]
    assert changes == [("shift", 41, 61), ("transient", 61, 73)]
    assert s["changes"][0]["change_share"] == pytest.approx(0.5)
    assert s["changes"][0]["what_changed"]["work"]["ratio"] == 2.0
    assert s["changes"][1]["change_share"] == pytest.approx(250 / 30 - 1)
    assert s["noise"]["band_share"] == 0.05  # the fake clock's steps do not spread
