"""Job rules are rules of the one findings engine (issue #22): ``findings/job.py`` over a job's flat metrics,
evaluated, ranked and held back by ``findings/engine.py``; the metrics here are written by hand, so every
expected value is read off the dict above it."""

from __future__ import annotations

from tb_llmdiag.findings.engine import Fix, Rule, evaluate, fires, rank, verdict
from tb_llmdiag.findings.job import EXPOSED_FIXES, JOB_RULES, STRAGGLER_FIXES, held_back
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.jsonsafe import jsonable

WHAT_IF = {"step_ns": 1000.0, "step_after_ns": 800.0, "bound": "upper", "assumes": "the straggler on time"}
EXPOSED_WHAT_IF = {"step_ns": 1000.0, "step_after_ns": 700.0, "bound": "upper", "assumes": "all hidden"}


def job(**over: object) -> dict:
    """A 2-rank job: rank 1 makes the others wait 20 % of the step in 4 of 5 steps, 12 % at its lower bound;
    exposed transfer 30 % of the step, all-gather leading."""
    m = {
        "common_step_count": 5,
        "job_step_ns": 1000.0,
        "matched_collective_count": 10,
        "straggler_rank": 1,
        "straggler_cause": "host_sync",
        "straggler_cause_evidence": {"straggler_ns_per_step": 300.0, "median_rank_ns_per_step": 100.0},
        "straggler_tokens": None,
        "straggler_others_wait_ns_per_step": 200.0,
        "straggler_others_wait_share": 0.2,
        "straggler_consistency_share": 1.0,
        "straggler_last_arrivals": 9,
        "straggler_last_steps": 4,
        "straggler_last_step_share": 0.8,
        "straggler_others_wait_step_sd_ns": 50.0,
        "straggler_others_wait_low_ns_per_step": 120.0,
        "straggler_others_wait_low_share": 0.12,
        "straggler_significance": "significant",
        "straggler_what_if": WHAT_IF,
        "exposed_transfer_ns_per_step": 300.0,
        "exposed_transfer_share": 0.3,
        "exposed_share": 0.5,
        "overlap_share": 0.25,
        "top_collective_kind": "all_gather",
        "collective_by_kind": [],
        "waiting_known": True,
        "exposed_what_if": EXPOSED_WHAT_IF,
    }
    m.update(over)
    return m


def test_job_rules_and_run_rules_are_one_rule_type() -> None:
    assert all(type(r) is Rule for r in JOB_RULES + RULES)
    assert [(r.id, r.level) for r in JOB_RULES] == [
        ("straggler", "job"),
        ("exposed_communication", "job"),
        ("pipeline_stage_straggler", "job"),
        ("pipeline_bubble", "job"),
        ("slow_link_collectives", "job"),
    ]
    assert {r.level for r in RULES} == {"run"}


def test_job_findings_come_out_of_the_engine_whole() -> None:
    # GIVEN a job where both rules pass; THEN the exposed transfer (30 %) ranks above the straggler (20 %)
    m = job()
    found = jsonable(rank(evaluate(m, JOB_RULES)))
    assert [f["id"] for f in found] == ["exposed_communication", "straggler"]
    exposed, straggler = found
    assert exposed == {
        "id": "exposed_communication",
        "title": "Collective transfers no compute hides",
        "summary": "Collective transfers no compute hides take 300 ns per step (30.0 % of the 1 µs step; "
        "all-gather leads; 25.0 % of collective time is hidden under compute).",
        "metric": "exposed_transfer_share",
        "value": 0.3,
        "threshold": 0.10,
        "evidence": {k: m[k] for k in ("exposed_transfer_ns_per_step", "exposed_share", "overlap_share",
                                       "top_collective_kind", "collective_by_kind", "waiting_known", "job_step_ns")},
        "fix": EXPOSED_FIXES["all_gather"],
        "what_if": EXPOSED_WHAT_IF,
    }
    assert exposed["evidence"]["collective_by_kind"] == []  # a job finding keeps an empty list (a run's drops it)
    assert straggler["fix"] == STRAGGLER_FIXES["host_sync"] and straggler["what_if"] == WHAT_IF
    assert straggler["threshold"] == 0.05 and straggler["value"] == 0.2
    assert straggler["summary"].startswith("Rank 1 is the straggler: the other ranks wait for it 200 ns per step")
    assert "At least 120 ns per step (12.0 %) at 95 % confidence over the 5 steps." in straggler["summary"]
    assert straggler["summary"].endswith("Cause: its host blocks longer in syncs per step (300 ns against 100 ns "
                                         "for the median rank).")


def test_a_job_fix_without_its_own_text_takes_the_rule_fix() -> None:
    # an unknown kind: the rule's own fix text (EXPOSED_FIXES has no entry for it); no cause: no straggler text
    m = job(top_collective_kind="mystery", straggler_cause=None)
    by_id = {f["id"]: f for f in jsonable(evaluate(m, JOB_RULES))}
    exposed_rule = next(r for r in JOB_RULES if r.id == "exposed_communication")
    assert by_id["exposed_communication"]["fix"] == exposed_rule.fix.text
    assert by_id["exposed_communication"]["fix"].startswith("Overlap communication with compute or shrink it")
    assert by_id["straggler"]["fix"] == ""


def test_a_job_threshold_is_strict_and_a_run_threshold_is_not() -> None:
    # GIVEN the same value and threshold (0.1); THEN the run rule fires at it, the job rule only above it
    fix = Fix(text="t", pytorch="", hf_trainer="")
    run_rule = Rule(id="r", title="r", metric="x", above=0.1, fix=fix)
    job_rule = Rule(id="j", title="j", metric="x", above=0.1, fix=fix, level="job")
    assert fires(run_rule, {"x": 0.1}) and not fires(job_rule, {"x": 0.1})
    assert verdict(job_rule, {"x": 0.1}) == "below_threshold" and fires(job_rule, {"x": 0.1000001})
    assert verdict(job_rule, {"x": None}) is None and not fires(job_rule, {})


def test_a_floor_holds_the_finding_back_and_leaves_a_note() -> None:
    # the lower bound 4 % is not above the 5 % threshold: within the noise; the exposed rule still fires
    m = job(straggler_others_wait_low_share=0.04, straggler_others_wait_low_ns_per_step=40.0)
    assert [f["id"] for f in jsonable(evaluate(m, JOB_RULES))] == ["exposed_communication"]
    assert held_back(m) == [
        "rank 1 makes the others wait 200 ns per step (20.0 % of the job step), but at 95 % confidence over the 5 "
        "steps only 40 ns (4.0 %), not above 5.0 %: within the step-to-step noise of this capture, so no straggler "
        "finding"
    ]
    assert held_back(job()) == []  # nothing held back when the floors pass
