"""Job analysis on hand-built ranks whose waiting, transfer and straggler are known by construction.

Scenario (``minijob.dp_rank``), per 1000 us step on every rank: GEMM [0, c), all-reduce [c, 600) on another
stream (every rank leaves it at 600 us), GEMM [600, 700), all-gather [700, 750), idle to 1000.
Ranks 0, 1, 2 have c = 300, 320, 500: rank 2 arrives last to every all-reduce.
By hand, per step: all-reduce durations 300, 280, 100 -> transfer 100, waiting 200, 180, 0; the all-gather
(50 us everywhere) adds transfer 50 and no waiting. Rank 2 makes the others wait (200 + 180) / 2 = 190 us
per step (share 0.19 of the 1000 us step); had it come with rank 1 the others would leave 280 - 100 = 180 us
sooner (what-if 1000 -> 820 us). Exposed communication (no overlap here) = all collective time:
rank 0: 300 + 50 = 350 us, of which 200 waiting -> exposed transfer 150 us on every rank (share 0.15).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from minijob import US, dp_rank
from tb_llmdiag.jobs.cross_rank import analyze_job, rank_from_name, resolve_ranks
from tb_llmdiag.jobs.report import job_findings, job_metrics
from tb_llmdiag.jobs.rank_summary import RankSummary, summarize_rank
from tb_llmdiag.metrics.steps.windows import find_steps


def summaries(computes=(300, 320, 500), **kw) -> list[RankSummary]:
    out = []
    for r, c in enumerate(computes):
        t = dp_rank(r, c, world=len(computes), **(kw.get(r, {}) if isinstance(kw.get(r), dict) else {}))
        out.append(summarize_rank(t, find_steps(t), label=f"rank{r}.pt.trace.json"))
    return out


def test_waiting_transfer_and_straggler_exact() -> None:
    job = analyze_job(summaries())
    t = job.tables
    assert job.ranks == (0, 1, 2)
    assert list(job.steps) == [1, 2]
    np.testing.assert_array_equal(t.waiting_ns, [[200 * US] * 2, [180 * US] * 2, [0, 0]])
    np.testing.assert_array_equal(t.transfer_ns, np.full((3, 2), 150 * US))
    np.testing.assert_array_equal(t.exposed_transfer_ns, np.full((3, 2), 150 * US))
    np.testing.assert_array_equal(job.caused_wait_ns, [0, 0, 190 * US])
    np.testing.assert_array_equal(job.last_count, [0, 0, 2])  # the all-gather ties: nobody is "last"
    assert job.straggler_pos == 2 and job.straggler_consistency_share == 1.0
    assert job.clock_aligned
    m = job_metrics(job)
    assert m["straggler_rank"] == 2
    assert m["straggler_others_wait_share"] == pytest.approx(0.19)
    assert m["straggler_what_if"]["step_after_ns"] == 820 * US
    assert m["exposed_transfer_share"] == pytest.approx(0.15)
    assert m["exposed_share"] == pytest.approx(0.33)  # median rank (rank 1): 280 + 50 us
    # cause: rank 2 computes 600 us per step, the other ranks 400 and 420 us (median 410)
    ev = m["straggler_cause_evidence"]
    assert m["straggler_cause"] == "longer_gpu_compute"
    assert (ev["straggler_ns_per_step"], ev["median_rank_ns_per_step"]) == (600 * US, 410 * US)
    found = job_findings(m)
    assert [f["id"] for f in found] == ["straggler", "exposed_communication"]
    assert found[0]["evidence"]["straggler_rank"] == 2
    json.dumps(found, allow_nan=False)


def test_straggler_is_never_the_rank_that_waits_longest() -> None:
    # rank 0 waits longest (it computes least); it must never be named, whatever the rank order
    for computes in [(300, 320, 500), (500, 320, 300), (320, 500, 300)]:
        job = analyze_job(summaries(computes))
        slow = computes.index(500)
        waits_most = computes.index(300)
        assert job.straggler_pos == slow
        assert job.straggler_pos != waits_most


def test_more_tokens_names_the_cause() -> None:
    ranks = []
    for r, (c, toks) in enumerate([(300, (4, 256)), (320, (4, 256)), (500, (4, 512))]):
        t = dp_rank(r, c, tokens=toks)
        ranks.append(summarize_rank(t, find_steps(t), label=f"r{r}"))
    m = job_metrics(analyze_job(ranks))
    assert m["straggler_rank"] == 2 and m["straggler_cause"] == "more_tokens"
    assert m["straggler_tokens"] == {"straggler_tokens_per_step": 2048.0, "median_rank_tokens_per_step": 1024.0,
                                     "excess_share": 1.0}
    assert "tokens per rank" in job_findings(m)[0]["fix"]


def test_clocks_need_not_agree() -> None:
    # rank 1's clock is 1 s ahead: waiting/transfer come from durations, so nothing changes but clock_aligned
    base = analyze_job(summaries())
    shifted = []
    for r, c in enumerate((300, 320, 500)):
        t = dp_rank(r, c, origin_ns=10**9 if r == 1 else 0)
        shifted.append(summarize_rank(t, find_steps(t), label=f"r{r}"))
    job = analyze_job(shifted)
    np.testing.assert_array_equal(job.tables.waiting_ns, base.tables.waiting_ns)
    assert job.straggler_pos == 2 and not job.clock_aligned


def test_balanced_ranks_have_no_straggler() -> None:
    job = analyze_job(summaries((300, 300, 300)))
    assert job.straggler_pos is None
    assert [f["id"] for f in job_findings(job_metrics(job))] == ["exposed_communication"]


def test_duplicates_missing_and_names() -> None:
    s = summaries()
    dup = s[0].replace(label="again.json")
    four = [x.replace(world_size=4) for x in (s[0], dup, s[2])]
    ranks, notes = resolve_ranks(four)
    assert [r.rank for r in ranks] == [0, 2]
    assert notes == ["rank 0 appears twice (rank0.pt.trace.json, again.json): the second is ignored",
                     "2 of 4 ranks missing: 1, 3"]
    assert rank_from_name("/logs/run/host_rank12.1694.pt.trace.json") == 12
    assert rank_from_name("worker3_step_12.1694128201557.pt.trace.json.gz") == 3
    assert rank_from_name("trace.json") is None
    unnamed = [x.replace(rank=None, label=f"worker{i}.json") for i, x in enumerate(s)]
    assert [r.rank for r in resolve_ranks(unnamed)[0]] == [0, 1, 2]


def test_summary_round_trip_and_size() -> None:
    s = summaries()[2]
    d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
    back = RankSummary.from_dict(d)
    for k, v in s.steps.items():
        np.testing.assert_array_equal(back.steps[k], v)
        assert back.steps[k].dtype == v.dtype
    for k, v in s.collectives.items():
        np.testing.assert_array_equal(back.collectives[k], v)
    assert (back.rank, back.label, back.world_size) == (2, "rank2.pt.trace.json", 3)
    # 2 steps x 13 int64 columns + 4 collectives x 45 bytes + strings
    assert s.nbytes == 2 * 13 * 8 + 4 * (1 + 8 + 8 + 8 + 4 + 4 + 8 + 4 + 8 + 1) + len("rank2.pt.trace.json") + 64


def test_sequence_numbers_match_across_different_orders() -> None:
    """With ``Seq`` args, collectives match by number even when one rank's capture starts one collective
    later (by order they would pair the wrong collectives)."""
    from minijob import AR, kern, make_rank, step

    def rank(r: int, seqs: list[int], durs: list[int]) -> RankSummary:
        rows = [step(1, 0, 10_000 * US)]
        for i, (q, d) in enumerate(zip(seqs, durs)):
            end = (i + 1) * 1000 * US + (1000 * US if r == 1 else 0)  # rank 1's window is shifted by one
            rows.append(kern(AR, end - d * US, d * US, comm_seq=q, comm_pg_id=0))
        t = make_rank(rows, rank=r, world=2, extra_names={"comm_pg": ("0",)})
        return summarize_rank(t, find_steps(t), label=f"r{r}")

    a = rank(0, [1, 2, 3], [50, 400, 60])
    b = rank(1, [2, 3], [100, 10])  # seq 2: rank 1 arrives last (100 us vs 400); seq 3: rank 0 waits 50
    job = analyze_job([a, b])
    m = job.matched
    assert sorted(m.transfer_ns.tolist()) == [10 * US, 100 * US]
    np.testing.assert_array_equal(job.tables.waiting_ns, [[300 * US + 50 * US], [0]])


def test_waiting_hidden_under_compute_costs_nothing() -> None:
    """DDP-style: rank 0 launches its all-reduce at 100 us while its backward runs to 500 us on another
    stream; rank 1 computes to 600 us and launches it then. Both leave at 700 us: transfer 100 us, rank 0 waits
    500 us of which 400 us are hidden under its own compute -> exposed waiting 100 us, exposed transfer
    100 us on both ranks; rank 1 costs rank 0 100 us per step (share 0.1), what-if saving <= 100 us."""
    from minijob import AR, GEMM, kern, make_rank, step

    def rank(r: int, compute_us: int, launch_us: int) -> RankSummary:
        rows = [step(1, 0, 1000 * US), kern(GEMM, 0, compute_us * US),
                kern(AR, launch_us * US, (700 - launch_us) * US, stream=20)]
        t = make_rank(rows, rank=r, world=2)
        return summarize_rank(t, find_steps(t), label=f"r{r}")

    job = analyze_job([rank(0, 500, 100), rank(1, 600, 600)])
    t = job.tables
    np.testing.assert_array_equal(t.waiting_ns[:, 0], [500 * US, 0])
    np.testing.assert_array_equal(t.exposed_ns[:, 0], [200 * US, 100 * US])
    np.testing.assert_array_equal(t.exposed_transfer_ns[:, 0], [100 * US, 100 * US])
    np.testing.assert_array_equal(job.caused_wait_ns, [0, 100 * US])
    np.testing.assert_array_equal(job.saving_ns, [0, 100 * US])
    m = job_metrics(job)
    assert m["straggler_rank"] == 1 and m["straggler_others_wait_share"] == pytest.approx(0.1)
    assert m["straggler_cause"] == "longer_gpu_compute"


def test_job_report_bars_sum_to_the_step_and_are_json() -> None:
    from tb_llmdiag.jobs.report import job_report

    rep = job_report(summaries())
    text = json.dumps(rep, allow_nan=False)
    assert json.loads(text) == rep
    assert [f["id"] for f in rep["findings"]] == ["straggler", "exposed_communication"]
    bars = {b["rank"]: b for b in rep["view"]["bars"]}
    # rank 0 per step: compute 300 + 100, exposed transfer 150, waiting 200, idle 250 (by hand, module docstring)
    assert {k: bars[0][k] for k in ("compute_ns", "exposed_transfer_ns", "waiting_ns", "idle_ns", "other_ns")} == \
        {"compute_ns": 400 * US, "exposed_transfer_ns": 150 * US, "waiting_ns": 200 * US, "idle_ns": 250 * US,
         "other_ns": 0}
    for b in bars.values():
        parts = b["compute_ns"] + b["exposed_transfer_ns"] + b["waiting_ns"] + b["idle_ns"] + b["other_ns"]
        assert parts == b["step_ns"] == 1000 * US
    assert rep["view"]["heatmap"]["waiting_ns"] == [[200 * US] * 2, [180 * US] * 2, [0, 0]]


@pytest.mark.parametrize("case", ["empty", "one_rank", "no_collectives", "no_steps"])
def test_odd_jobs_never_crash(case: str) -> None:
    from minijob import GEMM, kern, make_rank
    from tb_llmdiag.jobs.report import job_report

    if case == "empty":
        ss: list[RankSummary] = []
    elif case == "one_rank":
        ss = summaries()[:1]
    elif case == "no_collectives":
        ss = []
        for r in range(2):
            t = make_rank([kern(GEMM, 0, 10 * US)], rank=r, world=2)
            ss.append(summarize_rank(t, find_steps(t), label=f"r{r}"))
    else:  # ranks without step markers: one window over the device activity, matched by order
        ss = []
        for r, c in enumerate((300, 500)):
            t = dp_rank(r, c, world=2)
            keep = t.events.kind != 2  # drop the ProfilerStep rows
            ss.append(summarize_rank(t.__class__(source_kind="kineto", events=t.events.select(keep),
                                                 distributed=t.distributed), find_steps(t.__class__(
                                                     source_kind="kineto", events=t.events.select(keep))),
                                     label=f"r{r}"))
    rep = job_report(ss)
    json.dumps(rep, allow_nan=False)
    if case == "one_rank":
        assert rep["notes"] == ["2 of 3 ranks missing: 1, 2"]
        assert [f["id"] for f in rep["findings"]] == ["exposed_communication"]  # no waiting known: all transfer
    if case == "no_steps":
        assert rep["metrics"]["straggler_rank"] == 1
