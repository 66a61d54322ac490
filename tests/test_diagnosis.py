"""Ranking by estimated saving, the what-if line, and id de-duplication across rule tables."""

from __future__ import annotations

from tb_llmdiag.findings.diagnosis import diagnose, what_if
from tb_llmdiag.findings.engine import Fix, Rule, rank
from tb_llmdiag.findings.gpu import GPU_RULES
from tb_llmdiag.findings.structs import Finding, JobFinding, from_json
from tb_llmdiag.findings.whatif import apply_in_sequence
from tb_llmdiag.jsonsafe import jsonable


def f(id_: str, share: float | None, ns: int | None, severity: str | None = None) -> Finding:
    saving = None if share is None else {"share": share, "ns": ns}
    return from_json(Finding, {"id": id_, "severity": severity, "saving": saving, "title": id_, "summary": "",
                               "evidence": {}, "source": None, "fix": {"text": "t", "pytorch": "p", "hf_trainer": "h"},
                               "docs": None, "metric": None, "value": None, "threshold": None})


def test_the_sequence_decides_severity_and_rank() -> None:
    # GIVEN findings as the engine gives them (each one's own saving; severity not decided yet) on a 100 ns step,
    # half of it busy: the idle pool is 50 ns, the device pool 50 ns
    fix = Fix("t", "p", "h")
    rules = (Rule(id="a", title="a", metric=None, fix=fix, claims="idle"),
             Rule(id="b", title="b", metric=None, fix=fix, severity="high"),
             Rule(id="c", title="c", metric=None, fix=fix, claims="idle"),
             Rule(id="d", title="d", metric=None, fix=fix),
             Rule(id="e", title="e", metric=None, fix=fix, claims="device"))
    metrics = {"steps": {"mean_ns": 100, "median_ns": 100}, "idle": {"busy_share": 0.5}}
    found = [f("a", 0.05, 5), f("b", None, None, "high"), f("c", 0.3, 30), f("d", None, None), f("e", 0.0, 0)]
    got, _ = jsonable(apply_in_sequence(found, metrics, rules))
    # THEN c applies first (the larger own saving): 0.3 x 100 / 50 = 60 % of the idle pool, 30 ns: high; a then
    # takes 0.05 x 100 / 50 = 10 % of the 20 ns left, 2 ns: low (5 % alone); e takes nothing: low; b and d have no
    # saving: their rule's fixed severity, else low; ranked by severity, then saving, no saving last in its severity
    assert [(x["id"], x["severity"], (x["saving"] or {}).get("ns")) for x in got] == [
        ("c", "high", 30), ("b", "high", None), ("a", "low", 2), ("e", "low", 0), ("d", "low", None)]


def test_rank_orders_job_findings_by_value() -> None:
    def job(id_: str, value: float | None) -> JobFinding:
        return JobFinding(id=id_, title=id_, summary="", metric="m", value=value, threshold=0.1, evidence={}, fix="f",
                          what_if=None)

    got = rank([job("a", 0.1), job("b", 0.3), job("c", None), job("d", 0.3)])
    assert [x.id for x in got] == ["b", "d", "a", "c"]


def test_what_if_uses_the_first_finding_with_a_saving_in_the_median_step() -> None:
    # rules without a ``claims`` pool have no saving in sequence; a table of one idle rule has
    fix = Fix("t", "p", "h")
    r = (Rule(id="x", title="x", metric="a.x", above=0, fix=fix, claims="idle", saving="a.x"),)
    metrics = {"steps": {"mean_ns": 100, "median_ns": 80}, "idle": {"busy_share": 0.5}, "a": {"x": 0.25}}
    _, wi = jsonable(diagnose(metrics, rules=r))
    # mean step 100 = regular part 80 (busy 40, idle 40) + excess 20; r = 25 / 40 of the idle pool;
    # the median step's idle is 40 too: 25 off 80
    assert (wi["finding_id"], wi["step_ns"], wi["step_ns_if_fixed"], wi["compute_floor_ns"]) == ("x", 80, 55, 40)
    assert wi["bound"] is True and wi["basis"] == "median_step"
    assert jsonable(what_if([f("x", None, None)], {"steps": {"available": False}})) is None


def test_diagnose_end_to_end_on_metrics() -> None:
    # GIVEN a run that waits on the data loader (30 %) and launches (12 %), with pageable copies, GPU busy half the time
    metrics = {
        "steps": {"available": True, "mean_ns": 200_000_000, "median_ns": 200_000_000},
        "kernels": {"available": True, "device_events": 100},
        "dataloader": {"available": True, "stall_share": 0.30},
        "idle": {"available": True, "host_wait_share": 0.12, "busy_share": 0.5},
        "memcpy": {"available": True, "htod_pageable_count": 4, "pageable_htod_share": 0.001},
    }
    findings, wi = jsonable(diagnose(metrics))
    assert [x["id"] for x in findings] == ["dataloader_stall", "host_bound", "pageable_memcpy"]
    # severity from the saving shown (#25): host-bound adds 9.58 ms of the 200 ms step (4.8 %) once the loader is
    # fixed: low, as the 80 µs of the pageable copies
    assert [x["severity"] for x in findings] == ["high", "low", "low"]
    # idle pool 100 ms: causes first, the loader takes 60 % of it (60 ms), pageable copies 0.2 % of the 40 ms
    # left (80 µs); then the symptom, host-bound, 24 % of the 39.92 ms left (9.5808 ms): in sequence, never added
    assert findings[0]["saving"] == {"basis": "median_step", "step_ns": 200_000_000, "ns": 60_000_000, "share": 0.30,
                                     "step_ns_if_fixed": 140_000_000, "pool": "idle", "bound_by": "cause",
                                     "unprofiled_ns": None,  # no unprofiled steps, no activity the trace places it in
                                     "step_basis": "profiled", "profiled": None}  # no profiler cost known
    assert findings[1]["saving"]["ns"] == 9_580_800 and findings[1]["saving"]["share"] == 9_580_800 / 200_000_000
    assert findings[2]["saving"]["ns"] == 80_000
    assert (wi["finding_id"], wi["step_ns"], wi["step_ns_if_fixed"]) == ("dataloader_stall", 200_000_000, 140_000_000)
    assert wi["all"]["step_ns_if_fixed"] == 200_000_000 - 60_000_000 - 80_000 - 9_580_800
    assert wi["all"]["compute_floor_ns"] == 100_000_000


def test_overlapping_idle_causes_never_go_below_the_compute_floor() -> None:
    # GIVEN three causes that each claim nearly all idle time of a GPU busy 10 % of the step
    fix = Fix("t", "p", "h")
    rules = tuple(Rule(id=k, title=k, metric=f"a.{k}", above=0, fix=fix, claims="idle", saving=f"a.{k}")
                  for k in ("p", "q", "r"))
    metrics = {"steps": {"mean_ns": 1000, "median_ns": 1000}, "idle": {"busy_share": 0.1},
               "a": {"p": 0.9, "q": 0.8, "r": 0.7}}
    findings, wi = jsonable(diagnose(metrics, rules=rules))
    assert sum(x["saving"]["share"] for x in findings) <= 0.9 + 1e-12
    assert wi["all"]["step_ns_if_fixed"] == 100 == wi["all"]["compute_floor_ns"]
    # the first takes all of the idle pool it claims (900 ns); the two after it find nothing left
    assert [(x["id"], x["saving"]["ns"]) for x in findings] == [("p", 900), ("q", 0), ("r", 0)]


def test_causes_of_some_steps_only_leave_the_median_step_alone() -> None:
    fix = Fix("t", "p", "h")
    rules = (Rule(id="o", title="o", metric="a.o", above=0, fix=fix, claims="excess", saving="a.o"),)
    metrics = {"steps": {"mean_ns": 1000, "median_ns": 400}, "idle": {"busy_share": 0.2}, "a": {"o": 0.6}}
    findings, wi = jsonable(diagnose(metrics, rules=rules))
    # its saving is of the mean step (the median step has none of it), and the what-if is its own
    s = findings[0]["saving"]
    assert (s["basis"], s["step_ns"], s["ns"], s["step_ns_if_fixed"]) == ("mean_step", 1000, 600, 400)
    assert (wi["finding_id"], wi["basis"], wi["step_ns"], wi["step_ns_if_fixed"]) == ("o", "mean_step", 1000, 400)
    # one basis per run (#36): "all" is of the mean step too, as every saving is
    assert (wi["all"]["step_ns"], wi["all"]["step_ns_if_fixed"], wi["mean_step_ns_if_all_fixed"]) == (1000, 400, 400)


def test_later_rule_with_the_same_id_replaces_the_earlier() -> None:
    fix = Fix("t", "p", "h")
    r1 = Rule(id="dup", title="gpu", metric="a.x", above=0, fix=fix, saving="a.x")
    r2 = Rule(id="dup", title="xla", metric="b.x", above=0, fix=fix, saving="b.x")
    findings, _ = jsonable(diagnose({"a": {"x": 0.1}, "b": {"x": 0.2}, "steps": {"mean_ns": 10}}, rules=(r1, r2)))
    assert [(x["id"], x["title"]) for x in findings] == [("dup", "xla")]


def test_nothing_fires_on_empty_metrics() -> None:
    assert diagnose({}) == ([], None)
    assert len(GPU_RULES) >= 12
