"""Ranking by estimated saving, the what-if line, and id de-duplication across rule tables."""

from __future__ import annotations

from tb_llmdiag.findings import GPU_RULES, Fix, Rule, diagnose, rank, what_if


def f(id_: str, share: float | None, ns: int | None, severity: str = "low") -> dict:
    saving = None if share is None else {"share": share, "ns": ns}
    return {"id": id_, "severity": severity, "saving": saving}


def test_rank_by_saving_then_severity() -> None:
    got = rank([f("a", 0.05, 5), f("b", None, None, "high"), f("c", 0.3, 30), f("d", None, None, "low"), f("e", 0.0, 0, "medium")])
    assert [x["id"] for x in got] == ["c", "a", "b", "e", "d"]


def test_what_if_uses_the_first_finding_with_a_saving() -> None:
    metrics = {"steps": {"mean_ns": 100}}
    assert what_if([f("x", None, None, "high"), f("y", 0.25, 25)], metrics) == {"finding_id": "y", "step_ns": 100, "step_ns_if_fixed": 75}
    assert what_if([f("x", None, None)], metrics) is None
    assert what_if([f("y", 0.25, 25)], {"steps": {"available": False}}) is None


def test_diagnose_end_to_end_on_metrics() -> None:
    # GIVEN a run that waits on the data loader (30 %) and launches (12 %), with pageable copies
    metrics = {
        "steps": {"available": True, "mean_ns": 200_000_000},
        "kernels": {"available": True, "device_events": 100},
        "dataloader": {"available": True, "stall_share": 0.30},
        "idle": {"available": True, "host_wait_share": 0.12},
        "memcpy": {"available": True, "htod_pageable_count": 4, "pageable_htod_share": 0.001},
    }
    findings, wi = diagnose(metrics)
    assert [x["id"] for x in findings] == ["dataloader_stall", "host_bound", "pageable_memcpy"]
    assert [x["severity"] for x in findings] == ["high", "medium", "low"]
    assert findings[0]["saving"] == {"share": 0.30, "ns": 60_000_000}
    assert wi == {"finding_id": "dataloader_stall", "step_ns": 200_000_000, "step_ns_if_fixed": 140_000_000}


def test_later_rule_with_the_same_id_replaces_the_earlier() -> None:
    fix = Fix("t", "p", "h")
    r1 = Rule(id="dup", title="gpu", metric="a.x", above=0, fix=fix, saving="a.x")
    r2 = Rule(id="dup", title="xla", metric="b.x", above=0, fix=fix, saving="b.x")
    findings, _ = diagnose({"a": {"x": 0.1}, "b": {"x": 0.2}, "steps": {"mean_ns": 10}}, rules=(r1, r2))
    assert [(x["id"], x["title"]) for x in findings] == [("dup", "xla")]


def test_nothing_fires_on_empty_metrics() -> None:
    assert diagnose({}) == ([], None)
    assert len(GPU_RULES) >= 12
