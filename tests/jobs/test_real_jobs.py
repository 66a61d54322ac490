"""Jobs on real multi-rank traces: DLRM's 8 ranks (../shared), and exposed communication checked against an
independent computation (plain json + Python interval sweeps, nothing shared with the product)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tracepaths import SHARED_TRACES, shared_trace
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.jobs.cross_rank import analyze_job
from tb_llmdiag.metrics.comm.collectives import find_collectives
from tb_llmdiag.metrics.comm.communication import comm_breakdown
from tb_llmdiag.jobs.report import job_findings, job_metrics
from tb_llmdiag.jobs.rank_summary import summarize_rank
from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.model import DEVICE_KINDS, kind_mask

DLRM = "external/facebookresearch_param/dlrm_kineto"


def dlrm_files() -> list[Path]:
    shared_trace(DLRM)
    return sorted((SHARED_TRACES / DLRM).glob("worker*.pt.trace.json.gz"))


def independent_exposed_us(path: Path) -> tuple[float, float, float]:
    """(collective, compute, exposed) in us over the whole trace: kernels from the raw JSON; NCCL kernels by
    the substring 'nccl'; union lengths by a sort-and-sweep in plain Python."""
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    comm, comp = [], []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            iv = (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
            (comm if "nccl" in e["name"].lower() else comp).append(iv)

    def union(ivs: list[tuple[float, float]]) -> float:
        total, cur_s, cur_e = 0.0, None, None
        for s, e in sorted(ivs):
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    total += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        return total + ((cur_e - cur_s) if cur_e is not None else 0.0)

    u_comm, u_comp = union(comm), union(comp)
    return u_comm, u_comp, union(comm + comp) - u_comp


@pytest.mark.parametrize("rel", ["hta/nccl_parser_config/nccl_data.json.gz",
                                 DLRM + "/worker0_step_12.1694128201545.pt.trace.json.gz",
                                 DLRM + "/worker4_step_12.1694128201547.pt.trace.json.gz"])
def test_exposed_matches_independent_computation(rel: str) -> None:
    path = shared_trace(rel)
    trace = load_trace(str(path))
    coll = find_collectives(trace)
    whole = comm_breakdown(trace, coll, [0], [int(trace.events.end_ns.max()) + 1])
    comm_us, comp_us, exposed_us = independent_exposed_us(path)
    assert comm_us > 0
    assert whole.collective_ns[0] / 1e3 == pytest.approx(comm_us, rel=0.05)
    assert whole.compute_ns[0] / 1e3 == pytest.approx(comp_us, rel=0.05)
    assert whole.exposed_ns[0] / 1e3 == pytest.approx(exposed_us, rel=0.05)


def test_dlrm_job_gets_a_communication_finding() -> None:
    files = dlrm_files()
    assert len(files) == 8
    summaries = []
    for f in files:
        t = load_trace(str(f))
        summaries.append(summarize_rank(t, find_steps(t), label=f.name))
        # the reading: NCCL is 62-90 % of each rank's device time (sum of device event durations)
        device_ns = t.events.dur_ns[kind_mask(t.events.kind, DEVICE_KINDS)].sum()
        assert 0.61 <= summaries[-1].steps["collective_ns"][0] / device_ns <= 0.91
    # the ranks that block in syncs for over 1 ms (0, 1, 3, 4, 5) do so while their GPU sits in a collective
    for s in summaries:
        if s.steps["sync_ns"][0] > 1_000_000:
            assert s.steps["sync_in_collective_ns"][0] >= 0.9 * s.steps["sync_ns"][0]
    assert sum(s.steps["sync_ns"][0] > 1_000_000 for s in summaries) == 5
    job = analyze_job(summaries)
    assert job.ranks == tuple(range(8)) and job.notes == ()
    m = job_metrics(job)
    found = job_findings(m)
    assert found and found[0]["id"] == "straggler"
    # rank 7 arrives last to 5 of the 8 collectives; ranks 1 and 3 wait longest and must not be named
    assert m["straggler_rank"] == 7 and m["straggler_last_arrivals"] == 5
    # one step per rank: no step-to-step spread to test the wait against; it fires on its threshold and says so
    assert m["straggler_significance"] == "noise_unknown" and m["straggler_others_wait_low_share"] is None
    assert "With fewer than two common steps the wait's step-to-step spread is unknown" in found[0]["summary"]
    waited = job.tables.waiting_ns[:, 0]
    assert set(waited.argsort()[-2:].tolist()) == {1, 3}
    # rank 7 entered the step 3.3 ms after the median of all ranks, 4.5 ms after the median of the other
    # seven (ranks share one host's clock; step starts read off the traces: 428.7 ms vs 424.2 ms)
    assert job.clock_aligned and m["straggler_cause"] == "late_step_start"
    ev = m["straggler_cause_evidence"]
    assert ev["straggler_ns_per_step"] == pytest.approx(3.28e6, rel=0.01)
    assert ev["difference_ns_per_step"] == pytest.approx(4.52e6, rel=0.01)
    # what-if: the first all-to-all's second-last arrival is 0.5 ms behind ... the step would shrink <= 1.3 ms
    assert m["straggler_what_if"]["saving_ns"] == pytest.approx(1.308e6, rel=0.01)
    json.dumps(found, allow_nan=False)


def test_nccl_args_give_bytes_and_bus_bandwidth() -> None:
    """The Trace.extra contract (docs/jobs.md) on a real trace whose kernels carry NCCL args: the reader's columns
    equal a plain-json pass joined by correlation id, and give bytes, group size and bus bandwidth."""
    import numpy as np

    from tb_llmdiag.metrics.comm.collectives import KINDS
    from tb_llmdiag.metrics.comm.communication import communication_metrics
    from tb_llmdiag.model import Kind

    path = shared_trace("hta/nccl_parser_config/nccl_data.json.gz")
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    args = {e["args"]["correlation"]: e["args"] for e in doc["traceEvents"]
            if e.get("cat") == "kernel" and "In msg nelems" in e.get("args", {})}
    trace = load_trace(str(path))
    ev = trace.events
    dtypes, pgs = ["Float"], ["0"]
    cols = {k: np.full(len(ev), -1, np.int64) for k in ("comm_in_nelems", "comm_out_nelems", "comm_group_size",
                                                        "comm_dtype_id", "comm_pg_id")}
    for i in np.flatnonzero(ev.kind == Kind.KERNEL):
        a = args.get(int(ev.correlation[i]))
        if a:
            cols["comm_in_nelems"][i], cols["comm_out_nelems"][i] = a["In msg nelems"], a["Out msg nelems"]
            cols["comm_group_size"][i] = a["Group size"]
            if a["dtype"] not in dtypes:
                dtypes.append(a["dtype"])
            cols["comm_dtype_id"][i] = dtypes.index(a["dtype"])
            cols["comm_pg_id"][i] = pgs.index(a["Process Group Name"])
    # the reader keeps the same args itself (ingest/kineto/comm_args.py)
    for k in ("comm_in_nelems", "comm_out_nelems", "comm_group_size"):
        assert np.array_equal(trace.extra[k], cols[k]), k
    assert [trace.extra_names["comm_dtype"][i] if i >= 0 else None for i in trace.extra["comm_dtype_id"]] == \
        [dtypes[i] if i >= 0 else None for i in cols["comm_dtype_id"]]
    trace = trace.__class__(**{**trace.__dict__, "extra": cols, "extra_names": {"comm_dtype": tuple(dtypes),
                                                                                "comm_pg": tuple(pgs)}})
    coll = find_collectives(trace)
    assert len(coll) == len(args) == 21
    assert coll.pg_names == ("0",) and set(coll.pg_id.tolist()) == {0} and set(coll.group_size.tolist()) == {2}
    size = {"Float": 4, "Long": 8}  # PyTorch's dtype names -> bytes per element
    expected = sorted(size[a["dtype"]] * a["In msg nelems"] for a in args.values())
    assert sorted(coll.bytes.tolist()) == expected
    by_kind = {r["kind"]: r for r in communication_metrics(trace, coll, find_steps(trace))["by_kind"]}
    ar = coll.kind == KINDS.index("all_reduce")
    inside = by_kind["all_reduce"]["count"]
    assert inside <= int(ar.sum())
    # busbw lower bound = bytes / kernel time x 2 (n - 1) / n, n = 2: the factor is 1
    r = by_kind["all_reduce"]
    assert r["busbw_lower_bound_bytes_per_s"] == pytest.approx(r["bytes"] / (r["kernel_ns"] / 1e9))


def test_dlrm_through_the_front_door() -> None:
    """api.report on DLRM's folder: a jobs[] entry naming rank 7 (never rank 1 or 3, which wait longest), and
    each rank's own report with the collectives out of GPU busy, no host_sync blamed on time spent in a
    collective, and the per-rank exposed_communication finding (its share = the communication topic's)."""
    from tb_llmdiag import api

    dlrm_files()
    rep = api.report(str(SHARED_TRACES / DLRM))
    assert rep["schema"] == 3 and len(rep["jobs"]) == 1
    job = rep["jobs"][0]
    assert job["status"] == "ok" and job["metrics"]["rank_count"] == 8
    assert job["metrics"]["straggler_rank"] == 7 and job["findings"][0]["id"] == "straggler"
    assert len(rep["runs"]) == 8
    for run in rep["runs"]:
        m = run["metrics"]
        ids = [f["id"] for f in run["findings"]]
        assert "exposed_communication" in ids and "host_sync" not in ids, (run["worker"], ids)
        f = next(f for f in run["findings"] if f["id"] == "exposed_communication")
        assert f["value"] == m["communication"]["exposed_share"] > 0.1  # 14 % (rank 7, the straggler) to 60 %
        # busy + communication-only + idle = the window; busy is compute only
        idle = m["idle"]
        assert idle["busy_ns"] + idle["collective_ns"] + idle["idle_ns"] == idle["window_ns"]
        assert run["headline"]["gpu_busy_share"] == idle["busy_share"] < 0.1
        # most host time blocked in syncs was spent while a collective ran
        assert m["host_sync"]["in_collective_ns"] >= 0 and m["host_sync"]["blocked_share"] < 0.02
