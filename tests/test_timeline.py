"""tb_llmdiag.timeline: lanes, gap causes and the interval budget, on inline mini traces (issue #4)."""

from __future__ import annotations

import json

import numpy as np

from tb_llmdiag import timeline
from tb_llmdiag.metrics import analyze
from tb_llmdiag.model import EventTable, Kind, Trace

HOST, DEV = -1, 0


def make_trace(rows: list[tuple[int, int, Kind, str, int, int, int]]) -> Trace:
    """rows: (ts_ns, dur_ns, kind, name, device, stream, correlation)."""
    rows = sorted(rows, key=lambda r: r[0])
    names: list[str] = []
    ids = []
    for r in rows:
        if r[3] not in names:
            names.append(r[3])
        ids.append(names.index(r[3]))
    n = len(rows)
    col = lambda i, dt: np.array([r[i] for r in rows], dtype=dt)  # noqa: E731
    ev = EventTable(
        ts_ns=col(0, np.int64), dur_ns=col(1, np.int64), kind=np.array([int(r[2]) for r in rows], np.uint8),
        name_id=np.array(ids, np.int32), device=col(4, np.int16), stream=col(5, np.int32),
        tid=np.where(col(4, np.int64) < 0, 1, -1).astype(np.int64), correlation=col(6, np.int64),
        bytes=np.full(n, -1, np.int64), shape_id=np.full(n, -1, np.int32),
        names=tuple(names),
    )
    return Trace(source_kind="kineto", events=ev)


def one_step_trace() -> Trace:
    # GIVEN a step of 100 us: two kernels with a launch-bound gap, a sync-bound gap and a data-loader gap
    return make_trace([
        (0, 100_000, Kind.STEP, "ProfilerStep#5", HOST, -1, -1),
        (1_000, 2_000, Kind.RUNTIME, "cudaLaunchKernel", HOST, -1, 11),
        (5_000, 10_000, Kind.KERNEL, "sm90_gemm", DEV, 7, 11),
        (15_000, 20_000, Kind.RUNTIME, "cudaStreamSynchronize", HOST, -1, -1),
        (30_000, 2_000, Kind.RUNTIME, "cudaMemcpyAsync", HOST, -1, 12),
        (40_000, 5_000, Kind.MEMCPY, "Memcpy HtoD (Pageable -> Device)", DEV, 8, 12),
        (50_000, 30_000, Kind.ANNOTATION, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", HOST, -1, -1),
        (81_000, 1_000, Kind.RUNTIME, "cudaLaunchKernel", HOST, -1, 13),
        (85_000, 15_000, Kind.KERNEL, "elementwise_kernel", DEV, 7, 13),
    ])


def timelines(trace: Trace, **kw) -> list[timeline.StepTimeline]:
    return timeline.build_timelines(trace, analyze(trace).breakdown, **kw)


def test_step_timeline_lanes_gaps_and_causes():
    tl = timelines(one_step_trace())
    assert len(tl) == 1
    t = tl[0]
    assert t["step"]["index"] == 5 and t["step"]["duration_ns"] == 100_000
    lanes = {L["id"]: L for L in t["lanes"]}
    assert list(lanes) == ["gpu0.s7", "gpu0.s8", "host.launch", "host.sync", "host.dataloader"]
    assert lanes["gpu0.s7"]["start_ns"] == [5_000, 85_000]
    assert lanes["gpu0.s7"]["dur_ns"] == [10_000, 15_000]
    assert [t["names"][i] for i in lanes["gpu0.s7"]["name"]] == ["sm90_gemm", "elementwise_kernel"]
    assert [t["categories"][c] for c in lanes["gpu0.s8"]["cat"]] == ["memcpy"]
    assert lanes["host.sync"]["start_ns"] == [15_000]
    # THEN idle gaps: [0,5k) launch wait, [15k,40k) mostly sync, [45k,85k) data loader
    g = t["gaps"]
    assert g["start_ns"] == [0, 15_000, 45_000]
    assert g["dur_ns"] == [5_000, 25_000, 40_000]
    assert [t["causes"][c] for c in g["cause"]] == ["host_wait", "sync", "data_loader"]
    assert t["merged"] is False and t["resolution_ns"] == 0
    assert t["intervals"] == 2 + 1 + 3 + 1 + 1 + 3
    json.dumps(t, allow_nan=False)


def test_budget_merges_dense_lanes():
    # GIVEN 50k tiny kernels (1 us each, 1 us apart) in one step
    rows = [(0, 100_000_000, Kind.STEP, "ProfilerStep#1", HOST, -1, -1)]
    rows += [(i * 2_000, 1_000, Kind.KERNEL, f"k{i % 3}", DEV, 7, -1) for i in range(50_000)]
    t = timelines(make_trace(rows), max_intervals=20_000)[0]
    # THEN the step stays under budget, merged events are counted, and no time is lost at the edges
    assert t["intervals"] <= 20_000
    assert t["merged"] is True
    lane = t["lanes"][0]
    assert sum(lane["n"]) == 50_000
    assert lane["start_ns"][0] == 0
    assert lane["start_ns"][-1] + lane["dur_ns"][-1] == 49_999 * 2_000 + 1_000


def test_no_step_markers_gives_whole_trace_pseudo_step():
    t = make_trace([(10, 90, Kind.KERNEL, "k", DEV, 1, -1), (0, 50, Kind.CPU_OP, "aten::mm", HOST, -1, -1)])
    (tl,) = timelines(t)
    assert tl["step"]["index"] == -1
    assert tl["step"]["start_ns"] == 0 and tl["step"]["end_ns"] == 100
    assert tl["lanes"][0]["start_ns"] == [10]


def test_empty_trace_has_no_timelines():
    assert timelines(make_trace([])) == []


def test_step_breakdown_parts_sum_to_step():
    trace = one_step_trace()
    (row,) = timeline.build(trace, analyze(trace).breakdown)[1]
    assert row == {"index": 5, "name": "ProfilerStep#5", "duration_ns": 100_000, "busy_ns": 30_000, "collective_ns": 0,
                   "host_wait_ns": 5_000, "sync_ns": 25_000, "data_loader_ns": 40_000, "other_ns": 0}



def two_step_trace() -> Trace:
    # GIVEN two 100 us steps; the GPU runs dry at 80 us and the next kernel is launched at 125-126 us, so the
    # gap [80, 130) us waits on the host (host_wait) and crosses the step boundary at 100 us. A short
    # cudaDeviceSynchronize (90-95 us) returns inside the gap: a gap *starting* at 100 us would read as sync.
    return make_trace([
        (0, 100_000, Kind.STEP, "ProfilerStep#1", HOST, -1, -1),
        (1_000, 1_000, Kind.RUNTIME, "cudaLaunchKernel", HOST, -1, 1),
        (10_000, 70_000, Kind.KERNEL, "sm90_gemm", DEV, 7, 1),
        (90_000, 5_000, Kind.RUNTIME, "cudaDeviceSynchronize", HOST, -1, -1),
        (100_000, 100_000, Kind.STEP, "ProfilerStep#2", HOST, -1, -1),
        (125_000, 1_000, Kind.RUNTIME, "cudaLaunchKernel", HOST, -1, 2),
        (130_000, 60_000, Kind.KERNEL, "elementwise_kernel", DEV, 7, 2),
    ])


def test_a_gap_across_a_step_boundary_keeps_its_cause_in_report_steps_and_timeline():
    trace = two_step_trace()
    analysis = analyze(trace)
    # THEN by hand: step 1 = busy 70 + host_wait [0,10) + [80,100); step 2 = busy 60 + host_wait [100,130) + [190,200)
    expect = [
        {"index": 1, "name": "ProfilerStep#1", "duration_ns": 100_000, "busy_ns": 70_000, "collective_ns": 0,
         "host_wait_ns": 30_000, "sync_ns": 0, "data_loader_ns": 0, "other_ns": 0},
        {"index": 2, "name": "ProfilerStep#2", "duration_ns": 100_000, "busy_ns": 60_000, "collective_ns": 0,
         "host_wait_ns": 40_000, "sync_ns": 0, "data_loader_ns": 0, "other_ns": 0},
    ]
    # the report's one step list
    per_step = analysis.metrics["steps"]["per_step"]
    assert [{k: r[k] for k in expect[0]} for r in per_step] == expect
    assert [(r["start_ns"], r["end_ns"], r["busy_share"]) for r in per_step] == [(0, 100_000, 0.7), (100_000, 200_000, 0.6)]
    idle = analysis.metrics["idle"]
    assert (idle["host_wait_ns"], idle["sync_ns"], idle["gap_count"]) == (70_000, 0, 3)
    # the tab's /steps rows
    tls, rows = timeline.build(trace, analysis.breakdown)
    assert rows == expect
    # the step timelines draw the same gaps with the same cause, clipped at the boundary
    assert [(t["gaps"]["start_ns"], t["gaps"]["dur_ns"], [t["causes"][c] for c in t["gaps"]["cause"]]) for t in tls] == [
        ([0, 80_000], [10_000, 20_000], ["host_wait", "host_wait"]),
        ([0, 90_000], [30_000, 10_000], ["host_wait", "host_wait"]),
    ]
