"""`check`'s decisions on hand-built run reports: tolerance AND noise, work normalisation, overrides."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from tb_llmdiag.compare import check, compare


def run(durations_ms: list[float], tokens: list[int] | None, findings: list[dict[str, Any]] | None = None,
        syncs_per_step: float | None = None) -> dict[str, Any]:
    """A run report holding only what the comparison reads, its figures computed here by plain arithmetic."""
    d = [int(x * 1e6) for x in durations_ms]
    mean = sum(d) / len(d)
    cv = statistics.pstdev(d) / mean
    tps = sum(tokens) / (sum(d) / 1e9) if tokens else None
    metrics: dict[str, Any] = {"steps": {"available": True, "durations_ns": d, "indexes": list(range(len(d))),
                                         "tokens": tokens, "median_ns": int(statistics.median(d)),
                                         "tokens_per_step_median": int(statistics.median(tokens)) if tokens else None}}
    if syncs_per_step is not None:
        metrics["host_sync"] = {"available": True, "syncs_per_step": syncs_per_step}
    return {"run": "r", "worker": "w", "span": "1", "status": "ok", "metrics": metrics,
            "headline": {"step_median_ns": int(statistics.median(d)), "step_cv": cv, "tokens_per_s": tps},
            "findings": findings or []}


def regressed(result: dict[str, Any]) -> list[str]:
    return [r["key"] for r in result["regressions"]]


BASE_MS = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0]


def test_noise_only_passes() -> None:
    result = check(compare(run(BASE_MS, [4096] * 6), run([100.4, 99.2, 100.9, 100.1, 99.8, 100.3], [4096] * 6)))
    assert result["passed"] and result["regressions"] == [] and result["unjudged"] is None


def test_faster_step_with_smaller_batch_is_a_throughput_regression() -> None:
    """The candidate's step is 20 % faster, but it does half the work: tokens/s fell by 37.5 %."""
    before = run(BASE_MS, [4096] * 6)
    after = run([x * 0.8 for x in BASE_MS], [2048] * 6)
    doc = compare(before, after)
    result = check(doc)
    assert not result["passed"]
    assert regressed(result) == ["headline.tokens_per_s"]
    tps = next(r for r in doc["metrics"] if r["key"] == "headline.tokens_per_s")
    assert tps["change"] == pytest.approx((2048 / 0.8) / 4096 - 1)         # -0.375
    step = next(r for r in doc["metrics"] if r["key"] == "headline.step_median_ns")
    assert step["comparable"] is False and step["direction"] == "better" and not step["regressed"]
    assert doc["work"]["differs"] and doc["work"]["ratio"] == pytest.approx(0.5)
    assert result["regressions"][0]["line"].startswith("tokens/s (headline.tokens_per_s) regressed: 41 k/s -> 25.6 k/s (-37.5 %")
    # 40960 / 25600 tokens/s = 1.6: a ratio from 1.5 on reads as a factor
    assert doc["verdict"].startswith("AFTER is 1.6x slower in tokens/s (41 k/s -> 25.6 k/s; "
                                     "step 100 ms -> 80 ms at 0.5x the tokens per step)")


def test_change_within_tolerance_passes_even_beyond_noise() -> None:
    after = run([x * 1.03 for x in BASE_MS], [4096] * 6)        # 3 % slower, every step: beyond noise, within 5 %
    doc = compare(run(BASE_MS, [4096] * 6), after)
    tps = next(r for r in doc["metrics"] if r["key"] == "headline.tokens_per_s")
    assert tps["beyond_noise"] is True and tps["beyond_tolerance"] is False
    assert check(doc)["passed"]
    # a tighter tolerance on that metric, or for every gated metric, fails it
    assert regressed(check(compare(run(BASE_MS, [4096] * 6), after,
                                        tolerances={"headline.tokens_per_s": 0.02}))) == ["headline.tokens_per_s"]
    assert set(regressed(check(compare(run(BASE_MS, [4096] * 6), after, max_regression=0.02)))) == {
        "headline.tokens_per_s", "headline.step_median_ns"}


def test_change_beyond_tolerance_but_within_noise_passes() -> None:
    """Median 8 % up, but the steps are so spread that the band holds no change: not a regression."""
    before = run([60.0, 140.0, 100.0, 70.0, 130.0], [4096] * 5)
    after = run([65.0, 150.0, 108.0, 72.0, 141.0], [4096] * 5)
    doc = compare(before, after)
    step = next(r for r in doc["metrics"] if r["key"] == "headline.step_median_ns")
    assert step["beyond_tolerance"] and step["beyond_noise"] is False and not step["regressed"]
    assert check(doc)["passed"]


def test_counts_without_per_step_values_are_judged_on_tolerance() -> None:
    doc = compare(run(BASE_MS, [4096] * 6, syncs_per_step=1.0), run(BASE_MS, [4096] * 6, syncs_per_step=5.0))
    row = next(r for r in doc["metrics"] if r["key"] == "host_sync.syncs_per_step")
    assert row["noise"] is None and row["beyond_noise"] is None and row["regressed"]
    assert regressed(check(doc)) == ["host_sync.syncs_per_step"]


def test_without_steps_check_cannot_judge_and_fails() -> None:
    empty = {"run": "r", "status": "ok", "metrics": {"steps": {"available": False}}, "headline": {}, "findings": []}
    result = check(compare(empty, empty))
    assert not result["passed"] and "not known on both sides" in result["unjudged"]


def test_findings_diff_and_bottleneck() -> None:
    f = lambda i, share, sev="high": {"id": i, "severity": sev, "title": i, "saving": {"share": share, "ns": 1}}  # noqa: E731
    before = run(BASE_MS, [4096] * 6, [f("host_bound", 0.6), f("pageable_memcpy", 0.1), f("tiny_kernels", 0.05)])
    after = run(BASE_MS, [4096] * 6, [f("dataloader_stall", 0.3), f("host_bound", 0.2), f("tiny_kernels", 0.055)])
    doc = compare(before, after)
    fd = doc["findings"]
    assert [x["id"] for x in fd["resolved"]] == ["pageable_memcpy"]
    assert [x["id"] for x in fd["new"]] == ["dataloader_stall"]
    assert [(x["id"], x["saving_share_before"], x["saving_share_after"]) for x in fd["changed"]] == [("host_bound", 0.6, 0.2)]
    assert [x["id"] for x in fd["unchanged"]] == ["tiny_kernels"]       # 0.5 points: under the 1-point floor
    assert doc["bottleneck"] == {"before": {"id": "host_bound", "title": "host_bound", "share": 0.6},
                                 "after": {"id": "dataloader_stall", "title": "dataloader_stall", "share": 0.3}}
    # findings named by their titles in quotes (these test findings' titles are their ids), never in backticks (#25)
    assert doc["verdict"].endswith('"pageable_memcpy" is gone; "dataloader_stall" is new; the bottleneck moved from '
                                   '"host_bound" (60.0 % of the step) to "dataloader_stall" (30.0 %).')


def test_tolerance_floors() -> None:
    from tb_llmdiag.compare.table import beyond_tolerance

    assert beyond_tolerance("ns", 100.0, 106.0, 0.05) and not beyond_tolerance("ns", 100.0, 104.0, 0.05)
    assert beyond_tolerance("count_per_step", 0.0, 3.0, 0.05)                  # from 0: any change
    assert not beyond_tolerance("share", 0.0002, 0.0005, 0.1)                  # +150 % but 0.03 points
    assert beyond_tolerance("share", 0.02, 0.04, 0.1)
    assert not beyond_tolerance("ratio", 0.01, 0.02, 0.1, "headline.step_cv")  # +100 % of a steady step
    assert beyond_tolerance("ratio", 0.01, 0.08, 0.1, "headline.step_cv")


def as_step_rows(run_report: dict[str, Any]) -> dict[str, Any]:
    """The same run in schema 2's layout: one `steps.per_step` row per step instead of parallel lists."""
    st = dict(run_report["metrics"]["steps"])
    d, t, idx = st.pop("durations_ns"), st.pop("tokens"), st.pop("indexes")
    st["per_step"] = [{"index": i, "duration_ns": x, "tokens": (t[k] if t else None)} for k, (i, x) in enumerate(zip(idx, d))]
    return {**run_report, "metrics": {**run_report["metrics"], "steps": st}}


def test_both_report_layouts_compare_the_same() -> None:
    before, after = run(BASE_MS, [4096] * 6), run([x * 0.8 for x in BASE_MS], [2048] * 6)
    old = compare(before, after)
    new = compare(as_step_rows(before), as_step_rows(after))
    assert new == old
    assert new["before"]["step_durations_ns"] == [int(x * 1e6) for x in BASE_MS]
    assert next(r for r in new["metrics"] if r["key"] == "headline.tokens_per_s")["noise"] is not None


def test_every_table_row_names_a_registry_key() -> None:
    """A row the registry does not name is dropped silently, so a typo would hide a metric: only the
    communication share's two names (before / after the metric topics' rename) may be missing, one at a time."""
    from tb_llmdiag.compare.table import ROWS, entry

    missing = {r.key for r in ROWS if entry(r.key) is None}
    assert missing <= {"xla.collective_share", "xla.communication_share"} and len(missing) <= 1
