"""The straggler rule's floors (``findings.job.STRAGGLER_FLOORS``) on hand-built 2-rank jobs whose per-step
waits are known by construction, so the verdict is hand arithmetic at the boundary.

Scenario (``minijob.dp_rank``, 2 ranks, 1000 us steps): rank 0 computes 300 us every step, rank 1 computes
300 + d_k us in step k, so rank 1 arrives last to every all-reduce and rank 0 waits exactly d_k us in step k
with nothing hiding it (all-reduce durations 300 and 300 - d_k: transfer 300 - d_k, waiting d_k; the
all-gathers tie). With d = 100 + s x (-2, -1, 0, 1, 2) us the mean wait is 100 us (10 % of the step, twice the
5 % threshold) whatever the spread s; the sample standard deviation is s x sqrt(10 / 4) and the lower
one-sided 95 % bound is 100 - t x sd / sqrt(5), t = 2.132 (Student's t, 4 degrees of freedom, from a printed
table). s = 33: 100 - 2.132 x 33 x sqrt(0.5) = 50.25 us > 50 us: the finding fires; s = 34: 48.74 us: within
the noise, held back with a job note.
"""

from __future__ import annotations

import math

import pytest

from minijob import US, dp_rank
from tb_llmdiag.findings.engine import verdict
from tb_llmdiag.findings.job import STRAGGLER_RULE
from tb_llmdiag.jobs.cross_rank import T95_ONE_SIDED, analyze_job, t95
from tb_llmdiag.jobs.report import job_findings, job_metrics, job_report
from tb_llmdiag.jobs.rank_summary import RankSummary, summarize_rank
from tb_llmdiag.metrics.steps.windows import find_steps

T4 = 2.132  # Student's t, one-sided 95 %, 4 degrees of freedom (any printed table)


def two_ranks(rank0_us: list[int], rank1_us: list[int]) -> list[RankSummary]:
    out = []
    for r, c in enumerate((rank0_us, rank1_us)):
        t = dp_rank(r, c, world=2)
        out.append(summarize_rank(t, find_steps(t), label=f"rank{r}.pt.trace.json"))
    return out


def spread(s: int) -> list[int]:
    return [100 + s * k for k in (-2, -1, 0, 1, 2)]


@pytest.mark.parametrize(("s", "fires"), [(0, True), (33, True), (34, False), (45, False)])
def test_the_same_mean_wait_fires_or_not_by_its_step_to_step_spread(s: int, fires: bool) -> None:
    d = spread(s)
    ss = two_ranks([300] * 5, [300 + x for x in d])
    job = analyze_job(ss)
    m = job_metrics(job)
    # by construction: rank 1 is the straggler, rank 0 waits d_k in step k
    assert job.job_step_ns == 1000 * US and m["common_step_count"] == 5
    assert job.caused_wait_by_step_ns.tolist() == [[0.0] * 5, [x * US for x in d]]
    assert m["straggler_rank"] == 1 and m["straggler_others_wait_share"] == pytest.approx(0.1)
    assert m["straggler_last_steps"] == 5 and m["straggler_last_step_share"] == 1.0
    sd_us = s * math.sqrt(10 / 4)
    low_us = max(100 - T4 * sd_us / math.sqrt(5), 0.0)
    assert m["straggler_others_wait_step_sd_ns"] == pytest.approx(sd_us * US, abs=1e-6)
    assert m["straggler_others_wait_low_ns_per_step"] == pytest.approx(low_us * US, rel=1e-9, abs=1e-6)
    assert m["straggler_others_wait_low_share"] == pytest.approx(low_us / 1000, rel=1e-9, abs=1e-12)
    assert (low_us > 50) is fires  # the hand arithmetic is on the side of the boundary the case names
    rep = job_report(ss)
    ids = [f["id"] for f in rep["findings"]]
    if fires:
        assert m["straggler_significance"] == "significant" and "straggler" in ids
        f = rep["findings"][ids.index("straggler")]
        assert f["value"] == pytest.approx(0.1) and f["evidence"]["straggler_significance"] == "significant"
        assert f["evidence"]["straggler_others_wait_low_share"] == m["straggler_others_wait_low_share"]
        assert "and is the rank waited for most in 5 of 5 steps. At least " in f["summary"]
        assert rep["notes"] == []
    else:
        assert m["straggler_significance"] == "within_noise" and "straggler" not in ids
        assert rep["notes"] == [
            f"rank 1 makes the others wait 100 µs per step (10.0 % of the job step), but at 95 % confidence over the "
            f"5 steps only {low_us:.3g} µs ({100 * low_us / 1000:.1f} %), not above 5.0 %: within the step-to-step "
            "noise of this capture, so no straggler finding"
        ]


def test_a_rank_waited_for_in_a_minority_of_steps_is_held_back() -> None:
    """Steps 1-2: rank 1 computes 500 us against rank 0's 200 (rank 0 waits 300 us); steps 3-5: rank 0 computes
    320 us against 300 (rank 1 waits 20 us). Rank 1 causes (300 + 300) / 5 = 120 us a step (12 %), rank 0
    60 / 5 = 12 us: rank 1 is the candidate (120 / 132 of all caused waiting) but is the rank waited for most in
    2 of 5 steps (0.4, not above 0.5): the ranks take turns, so no finding, whatever its spread."""
    ss = two_ranks([200, 200, 320, 320, 320], [500, 500, 300, 300, 300])
    m = job_metrics(analyze_job(ss))
    assert m["straggler_rank"] == 1 and m["straggler_others_wait_ns_per_step"] == 120 * US
    assert m["straggler_consistency_share"] == pytest.approx(120 / 132)
    assert (m["straggler_last_steps"], m["straggler_last_step_share"]) == (2, 0.4)
    assert m["straggler_significance"] == "not_most_steps"
    assert "straggler" not in [f["id"] for f in job_findings(m)]
    assert job_report(ss)["notes"] == [
        "rank 1 makes the others wait 120 µs per step (12.0 % of the job step) but is the rank waited for most in "
        "only 2 of 5 steps: the ranks take turns, so no straggler finding"
    ]


def test_one_step_fires_on_its_threshold_and_says_the_noise_is_unknown() -> None:
    """One common step: no step-to-step spread to measure; rank 1 (400 us against 300) makes rank 0 wait 100 us
    (10 %): the finding fires on its threshold alone and its summary says so."""
    ss = two_ranks([300], [400])
    m = job_metrics(analyze_job(ss))
    assert m["straggler_others_wait_step_sd_ns"] is None and m["straggler_others_wait_low_share"] is None
    assert m["straggler_significance"] == "noise_unknown"
    (f,) = [f for f in job_findings(m) if f["id"] == "straggler"]
    assert "With fewer than two common steps the wait's step-to-step spread is unknown: it is not tested against it." in f["summary"]


def test_below_the_threshold_is_decided_first() -> None:
    """d = 40 us every step: 4 % of the step, no spread: below the threshold (the floors are not reached)."""
    m = job_metrics(analyze_job(two_ranks([300] * 5, [340] * 5)))
    assert m["straggler_others_wait_share"] == pytest.approx(0.04)
    assert m["straggler_others_wait_low_share"] == pytest.approx(0.04)
    assert m["straggler_significance"] == "below_threshold"


def test_floors_are_declared_data_checked_in_order() -> None:
    floors = STRAGGLER_RULE.floors
    assert [(f.metric, f.above, f.fails_as, f.unknown_as) for f in floors] == [
        ("straggler_last_step_share", 0.5, "not_most_steps", "noise_unknown"),
        ("straggler_others_wait_low_share", None, "within_noise", "noise_unknown"),
        ("straggler_others_wait_beyond_profiler_share", None, "within_profiler_cost", "noise_unknown"),  # #25
    ]
    base = {
        "straggler_others_wait_share": 0.2,
        "straggler_last_step_share": 0.6,
        "straggler_others_wait_low_share": 0.06,
        "straggler_others_wait_beyond_profiler_share": 0.06,
    }
    assert verdict(STRAGGLER_RULE, base) == "significant"
    assert verdict(STRAGGLER_RULE, {**base, "straggler_others_wait_low_share": 0.05}) == "within_noise"  # not above
    assert verdict(STRAGGLER_RULE, {**base, "straggler_others_wait_beyond_profiler_share": 0.05}) == "within_profiler_cost"
    # an intermittent straggler passes the profiler floor as it passes the noise floor (its steps are named instead)
    assert verdict(STRAGGLER_RULE, {**base, "straggler_others_wait_beyond_profiler_share": 0, "straggler_intermittent": True}) == "intermittent"
    assert verdict(STRAGGLER_RULE, {**base, "straggler_last_step_share": 0.5, "straggler_others_wait_low_share": 0}) == (
        "not_most_steps"
    )
    assert verdict(STRAGGLER_RULE, {**base, "straggler_others_wait_low_share": None}) == "noise_unknown"
    assert verdict(STRAGGLER_RULE, {**base, "straggler_last_step_share": None}) == "noise_unknown"  # no common step
    assert verdict(STRAGGLER_RULE, {**base, "straggler_others_wait_share": 0.05}) == "below_threshold"
    assert verdict(STRAGGLER_RULE, {}) is None


def test_t_quantiles() -> None:
    # printed-table values (one-sided 95 %) and the normal quantile's limit
    assert (t95(1), t95(4), t95(10), t95(30)) == (6.314, 2.132, 1.812, 1.697)
    assert len(T95_ONE_SIDED) == 30
    assert t95(40) == pytest.approx(1.684, abs=0.001) and t95(120) == pytest.approx(1.658, abs=0.001)
    assert t95(10**6) == pytest.approx(1.6449, abs=1e-4)
