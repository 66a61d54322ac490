"""The capture topic on hand-made traces (issue #24): graph replays, unmatched launches and kernels, the
profiler's cost measured from unprofiled step times, and the metadata reader."""

from __future__ import annotations

import json

import numpy as np
import pytest
from minitrace import GEMM, US, E, kernel, launch, make_trace, op, step

from tb_llmdiag.findings.diagnosis import diagnose
from tb_llmdiag.ingest.kineto.meta import extra_metadata, unprofiled_steps_ns
from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics import analyze
from tb_llmdiag.metrics.steps.gaps import CAUSES
from tb_llmdiag.model import Kind, Trace


def _replay_trace() -> Trace:
    """Two 100 us steps; each: one cudaGraphLaunch (corr 10/20) at 1-3 us replaying 20 kernels of 2 us each,
    3 us apart (1 us gaps), starting at 5 us; nothing else."""
    rows: list[E] = [step(1, 0, 100 * US), step(2, 100 * US, 100 * US)]
    for base, corr in ((0, 10), (100 * US, 20)):
        rows.append(launch(base + 1 * US, 2 * US, corr, name="cudaGraphLaunch"))
        rows += [kernel(GEMM if i % 2 else "triton_poi_fused_add_0", base + 5 * US + 3 * i * US, 2 * US, corr)
                 for i in range(20)]
    return make_trace(rows)


def test_graph_replays_are_grouped_busy_and_never_launch_gaps() -> None:
    # GIVEN two replays of the same 20-kernel graph, 1 us apart inside each replay
    a = analyze(_replay_trace())
    m = a.metrics
    # THEN they are counted as replays of one graph
    cap = m["capture"]
    assert (cap["graph_launches"], cap["graph_kernels"], cap["graphs"]) == (2, 40, 1)
    assert cap["graph_list"] == [{"graph_id": None, "replays": 2, "kernels": 40, "nodes": None, "device_ns": 80 * US}]
    assert cap["graph_op_attribution"] == "unavailable"
    assert [p["kind"] for p in cap["problems"]] == ["graph_replays"]
    # busy: 40 x 2 us; the 19 one-us gaps inside each replay are not host waits ("other"); the gap before each
    # replay's first kernel (the host launching the graph) and after its last are
    assert m["idle"]["busy_ns"] == 80 * US
    gaps = a.breakdown.gaps
    inner = (gaps.dur_ns == US)
    assert int(inner.sum()) == 38 and {CAUSES[c] for c in gaps.cause[inner]} == {"other"}
    assert m["idle"]["host_wait_ns"] == 2 * (5 + 100 - 64) * US
    # replayed kernels are not launched one by one: no tiny-kernel share, no tiny_kernels finding
    assert m["launch"]["graph_kernels"] == 40 and m["launch"]["tiny_kernel_share"] is None
    assert "tiny_kernels" not in [f["id"] for f in jsonable(diagnose(m))[0]]


def test_recorded_graph_ids_group_and_count_nodes() -> None:
    # GIVEN the same trace with Kineto's graph id 7 and node ids 0..19 on every replayed kernel
    t = _replay_trace()
    ev = t.events
    kern = ev.kind == Kind.KERNEL
    gid = np.where(kern, 7, -1).astype(np.int64)
    node = np.full(len(ev), -1, np.int64)
    node[kern] = np.tile(np.arange(20), 2)
    t = Trace(source_kind="kineto", events=ev, extra={"graph_id": gid, "graph_node_id": node})
    cap = analyze(t).metrics["capture"]
    assert cap["graph_list"] == [{"graph_id": 7, "replays": 2, "kernels": 40, "nodes": 20, "device_ns": 80 * US}]


def test_unmatched_launches_and_kernels_inside_and_at_the_edges() -> None:
    # GIVEN a kernel whose launch preceded the capture (corr 1, at the start), a launch answered (2), a launch
    # with no kernel inside the recorded device span (3), a kernel with no launch inside it (4), and a last launch
    # after the last device event started (5: it may have run after the profiler stopped)
    t = make_trace([
        step(1, 0, 100 * US),
        kernel(GEMM, 0, 2 * US, 1),
        launch(10 * US, 2 * US, 2), kernel(GEMM, 13 * US, 2 * US, 2),
        launch(20 * US, 2 * US, 3),
        kernel(GEMM, 40 * US, 2 * US, 4),
        launch(90 * US, 2 * US, 5),
    ])
    cap = analyze(t).metrics["capture"]
    assert (cap["launches_without_kernels"], cap["edge_launches_without_kernels"]) == (1, 1)
    assert (cap["kernels_without_launches"], cap["edge_kernels_without_launches"]) == (1, 1)
    assert [p["kind"] for p in cap["problems"]] == ["launches_without_kernels", "kernels_without_launches"]
    assert cap["problem_count"] == 2


def test_overhead_is_measured_from_unprofiled_steps_when_the_trace_holds_them() -> None:
    # GIVEN two 100 us steps and unprofiled steps of 60, 70 and 80 us in the metadata
    rows = [step(1, 0, 100 * US), step(2, 100 * US, 100 * US), op("aten::mm", 1 * US, 90 * US),
            launch(2 * US, 1 * US, 1), kernel(GEMM, 95 * US, 4 * US, 1)]
    t = make_trace(rows)
    t = Trace(source_kind="kineto", events=t.events,
              metadata={"unprofiled_step_ns": [60 * US, 70 * US, 80 * US], "unprofiled_source": "x_unprofiled_ms"})
    cap = analyze(t).metrics["capture"]
    assert (cap["profiled_step_ns"], cap["unprofiled_step_ns"], cap["unprofiled_steps"]) == (100 * US, 70 * US, 3)
    assert cap["profiler_overhead_ns"] == 30 * US and cap["profiler_overhead_share"] == 0.3
    assert cap["overhead_basis"] == "unprofiled_steps"


def test_metadata_reader_takes_unprofiled_times_in_the_unit_the_name_gives() -> None:
    text = (b'{"traceEvents": [], "llmdiag_unprofiled_step_ms": [95.5, 100], "WARNING": ["CUPTI: 12 records were '
            b'dropped"], "cupti_version": 130001, "with_flops": true, "other": 1}')
    meta = extra_metadata(text)
    assert meta == {"unprofiled_step_ns": [95_500_000, 100_000_000], "unprofiled_source": "llmdiag_unprofiled_step_ms",
                    "WARNING": ["CUPTI: 12 records were dropped"], "cupti_version": 130001, "with_flops": 1}
    assert unprofiled_steps_ns("unprofiled", {"median_ms": 9.0, "wall_us": [5, 6]}) == [5_000, 6_000]
    assert unprofiled_steps_ns("unprofiled_step_s", "[0.5]") == [500_000_000]
    assert unprofiled_steps_ns("unprofiled_step_ms", [True, -1, "x"]) == []
    assert extra_metadata(b"not json") == {}


def test_metadata_reader_takes_the_capture_helpers_object() -> None:
    # GIVEN what tb_llmdiag.capture writes (prof.add_metadata_json): the skipped steps' indices and times in ns
    text = (b'{"traceEvents": [], "llmdiag_unprofiled_step_ns": {"schema": 1, "steps": [0, 1, 2], '
            b'"step_ns": [2308000000, 72000000, 89000000], "synchronized": true, '
            b'"profiler_options": {"record_shapes": true}, "schedule": {"skip_first": 3, "warmup": 1}}}')
    # THEN the times are read in ns, step 0 (one-time costs) left out, the indices and the schedule never taken
    assert extra_metadata(text)["unprofiled_step_ns"] == [72_000_000, 89_000_000]
    assert unprofiled_steps_ns("u_ns", {"steps": [0, 1], "schedule": {"skip_first": 3}}) == []
    assert extra_metadata(text)["unprofiled_when"] == "before_window"


def _helper_object(**fields: object) -> bytes:
    value = {"schema": 2, "steps": [0, 1, 2], "step_ns": [2_308_000_000, 72_000_000, 89_000_000], "after_steps": [10, 11],
             "after_step_ns": [95_000_000, 97_000_000], "window_steps": [4, 9], "synchronized": True,
             "steps_after_window": 3, **fields}
    return json.dumps({"llmdiag_unprofiled_step_ns": value, "traceEvents": []}).encode()


def test_metadata_reader_takes_the_steps_after_the_window_when_too_few_come_before_it() -> None:
    # GIVEN schema 2 of tb_llmdiag.capture: two steps before the window once step 0 is left out, two after it
    meta = extra_metadata(_helper_object())
    # THEN the steps after it are the basis, the reader says so, and both lists are kept
    assert (meta["unprofiled_step_ns"], meta["unprofiled_when"]) == ([95_000_000, 97_000_000], "after_window")
    assert meta["unprofiled_before_step_ns"] == [72_000_000, 89_000_000]
    assert meta["unprofiled_after_step_ns"] == [95_000_000, 97_000_000]
    # a loop that stopped before any step after the window: the steps before it, step 0 left out
    meta = extra_metadata(_helper_object(after_steps=[], after_step_ns=[]))
    assert (meta["unprofiled_step_ns"], meta["unprofiled_when"]) == ([72_000_000, 89_000_000], "before_window")
    assert "unprofiled_after_step_ns" not in meta
    # from step 0 with nothing timed: no unprofiled step (the setting `steps_after_window` is no time)
    meta = extra_metadata(_helper_object(steps=[], step_ns=[], after_steps=[], after_step_ns=[]))
    assert "unprofiled_step_ns" not in meta and "unprofiled_when" not in meta
    # another writer's field: its times, where they were timed unknown
    meta = extra_metadata(b'{"traceEvents": [], "my_unprofiled_ms": [5, 6]}')
    assert meta["unprofiled_step_ns"] == [5_000_000, 6_000_000] and "unprofiled_when" not in meta


def test_the_method_says_which_unprofiled_steps_it_measured_against() -> None:
    rows = [step(1, 0, 100 * US), step(2, 100 * US, 100 * US), op("aten::mm", 1 * US, 90 * US),
            launch(2 * US, 1 * US, 1), kernel(GEMM, 95 * US, 4 * US, 1)]
    t = make_trace(rows)
    base = {"unprofiled_step_ns": [70 * US], "unprofiled_source": "llmdiag_unprofiled_step_ns"}
    methods = {}
    for when in ("after_window", "before_window", None):
        meta = {**base, "unprofiled_when": when} if when else base
        cap = analyze(Trace(source_kind="kineto", events=t.events, metadata=meta)).metrics["capture"]
        methods[when] = cap["overhead_method"]
    # the capture helper's own field goes unnamed (an internal key, #36); a field of the user's is named
    assert methods["after_window"] == ("measured: the profiled median step less the median of 1 unprofiled steps the "
                                       "capture helper timed after the profiled window; "
                                       "no interval: fewer than 3 unprofiled steps")
    assert "timed before the profiled window; no interval" in methods["before_window"]
    assert "unprofiled steps the trace's metadata holds; no interval" in methods[None]
    meta = {**base, "unprofiled_source": "my_unprofiled_steps"}
    cap = analyze(Trace(source_kind="kineto", events=t.events, metadata=meta)).metrics["capture"]
    assert "holds (the trace's metadata field my_unprofiled_steps); no interval" in cap["overhead_method"]


FIVE_BEFORE = {"steps": [0, 1, 2, 3, 4], "step_ns": [900_000_000, 30_000_000, 31_000_000, 29_000_000, 32_000_000],
               "schedule": {"skip_first": 5, "wait": 0, "warmup": 1, "active": 3, "repeat": 1}}


@pytest.mark.parametrize("schema", [1, 2, 3])
def test_metadata_reader_takes_the_steps_before_the_window_when_three_remain(schema: int) -> None:
    # GIVEN the helper's object with steps 0-4 before the window (step 0 pays one-time costs) and, from schema 2 on,
    # three slower steps after it (schema 3 synchronizes only at the edges of each run of them)
    if schema == 1:  # batch 3's helper: the steps before the window only
        text = json.dumps({"llmdiag_unprofiled_step_ns": {"schema": 1, "synchronized": True, **FIVE_BEFORE}}).encode()
    else:
        text = _helper_object(schema=schema, synchronized="run_edges" if schema == 3 else True, **FIVE_BEFORE,
                              after_steps=[9, 10, 11], after_step_ns=[40_000_000, 41_000_000, 39_000_000])
    meta = extra_metadata(text)
    # THEN steps 1-4 are the basis (the job before any profiler ran), both lists are kept for the metrics
    assert meta["unprofiled_step_ns"] == [30_000_000, 31_000_000, 29_000_000, 32_000_000]
    assert meta["unprofiled_when"] == "before_window"
    assert meta["unprofiled_before_step_ns"] == meta["unprofiled_step_ns"]
    if schema == 1:
        assert "unprofiled_after_step_ns" not in meta
    else:
        assert meta["unprofiled_after_step_ns"] == [40_000_000, 41_000_000, 39_000_000]


def test_metadata_reader_leaves_out_steps_before_a_later_window_that_ran_after_an_earlier_one() -> None:
    # GIVEN the second window of a repeat=2 schedule (skip_first 2, wait 2): its steps before it are 0-3 and the wait
    # steps 7-8 of the second cycle, which ran after the first window's profiler
    meta = extra_metadata(_helper_object(
        steps=[0, 1, 2, 3, 7, 8], step_ns=[900, 30, 31, 29, 50, 51], after_steps=[12], after_step_ns=[60],
        schedule={"skip_first": 2, "wait": 2, "warmup": 1, "active": 2, "repeat": 2}))
    # THEN the pristine ones are steps 1-3 only (before the first cycle's warm-up at step 4), and they are the basis
    assert (meta["unprofiled_step_ns"], meta["unprofiled_when"]) == ([30, 31, 29], "before_window")
    assert meta["unprofiled_after_step_ns"] == [60]


def test_metadata_reader_without_named_steps_does_not_take_the_steps_before_as_pristine() -> None:
    # GIVEN the helper's object whose step numbers do not line up with its times: step 0 cannot be told apart
    meta = extra_metadata(_helper_object(steps=[0, 1], step_ns=[900, 30, 31, 29]))
    # THEN the steps after the window are the basis; the times before it are kept as they are
    assert (meta["unprofiled_step_ns"], meta["unprofiled_when"]) == ([95_000_000, 97_000_000], "after_window")
    assert meta["unprofiled_before_step_ns"] == [900, 30, 31, 29]


def test_another_writers_unprofiled_field_is_read_as_before() -> None:
    # GIVEN a field another tool wrote: an object without a schema, with step indices and times in ms
    text = b'{"traceEvents": [], "their_unprofiled": {"steps": [0, 1, 2, 3], "wall_ms": [900, 30, 31, 29]}}'
    # THEN its times (step 0 left out), where they were timed unknown, and no before/after lists
    assert extra_metadata(text) == {"unprofiled_step_ns": [30_000_000, 31_000_000, 29_000_000],
                                    "unprofiled_source": "their_unprofiled"}


def _measured(profiled_us: list[int], meta: dict) -> dict:
    """The capture topic of a trace whose steps last ``profiled_us`` (one GEMM each), with ``meta``."""
    rows: list[E] = []
    t0 = 0
    for i, d in enumerate(profiled_us):
        rows += [step(i + 1, t0 * US, d * US), op("aten::mm", (t0 + 1) * US, 5 * US), launch((t0 + 2) * US, US, i + 1),
                 kernel(GEMM, (t0 + 4) * US, 2 * US, i + 1)]
        t0 += d
    t = make_trace(rows)
    return analyze(Trace(source_kind="kineto", events=t.events, metadata=meta)).metrics["capture"]


def test_the_measured_share_has_a_95_percent_interval_from_resampling_the_unprofiled_steps() -> None:
    # GIVEN three 100 us profiled steps and unprofiled steps of 60, 70 and 80 us
    cap = _measured([100, 100, 100], {"unprofiled_step_ns": [60 * US, 70 * US, 80 * US], "unprofiled_when": "before_window"})
    assert cap["profiler_overhead_share"] == 0.3
    # THEN by hand: the profiled step is the trace's own 100 us; a resample's unprofiled median is 60 us with probability
    # P(at least 2 of 3 draws are 60) = 3 (1/3)^2 (2/3) + (1/3)^3 = 7/27 (26 %), 80 us likewise, else 70 us; so the
    # share is 0.4 or 0.2 in 26 % of the resamples each: both 2.5 % tails sit on them
    assert cap["profiler_overhead_share_95"] == pytest.approx([0.2, 0.4], abs=1e-12)
    assert "95 % interval from 1000 resamples of the 3 unprofiled steps (the profiled step is this trace's own)" in cap[
        "overhead_method"
    ]
    # the profiled steps are not resampled: a slow first one (the window's first step) moves the median, not the
    # interval's width
    cap = _measured([300, 100, 100, 100, 100, 100], {"unprofiled_step_ns": [70 * US] * 3})
    assert cap["profiler_overhead_share_95"] == pytest.approx([0.3, 0.3], abs=1e-12)
    # identical steps on each side: the interval is the point
    cap = _measured([100, 100, 100], {"unprofiled_step_ns": [70 * US] * 3})
    assert cap["profiler_overhead_share_95"] == pytest.approx([0.3, 0.3], abs=1e-12)
    # fewer than 3 unprofiled steps: no interval, and the method says why
    cap = _measured([100, 100, 100], {"unprofiled_step_ns": [70 * US] * 2})
    assert cap["profiler_overhead_share_95"] is None and cap["profiler_overhead_share"] == 0.3
    assert cap["overhead_method"].endswith("no interval: fewer than 3 unprofiled steps")
    # modelled: no interval
    assert _measured([100, 100, 100], {})["profiler_overhead_share_95"] is None


def _slow(before_ms: list[float], after_ms: list[float]) -> dict:
    basis = [int(x * 1e6) for x in before_ms]
    return _measured([100, 100, 100], {"unprofiled_step_ns": basis, "unprofiled_when": "before_window",
                                       "unprofiled_before_step_ns": basis,
                                       "unprofiled_after_step_ns": [int(x * 1e6) for x in after_ms]})


def test_steps_after_the_window_slower_than_before_it_are_a_capture_problem() -> None:
    # GIVEN the helper's steps: 10 ms before the window, 12 ms after it
    cap = _slow([10, 10, 10], [12, 12, 12])
    # THEN the slowdown is (12 - 10) / 10, its interval the point (no spread), and it is a warning
    assert cap["after_window_slowdown_share"] == pytest.approx(0.2)
    assert cap["after_window_slowdown_share_95"] == pytest.approx([0.2, 0.2])
    slower = [p for p in cap["problems"] if p["kind"] == "slower_after_profiling"]
    assert slower == [{"kind": "slower_after_profiling", "count": None, "severity": "warning", "text": (
        "The steps after the profiled window ran 20 % slower than those before it (12 ms vs 10 ms, median of 3 and 3"
        " unprofiled steps; 95 % interval 20.0 % – 20.0 %): a profiler's state can outlive its window (Kineto keeps "
        "CUPTI attached unless TEARDOWN_CUPTI=1) or the job itself slowed; the trace cannot tell which. The "
        "profiler's share uses the steps before the window.")}]
    assert cap["problem_count"] == sum(p["severity"] == "warning" for p in cap["problems"])


def test_a_slowdown_within_the_steps_spread_or_under_5_percent_is_not_a_problem() -> None:
    # 10 % slower, but one step before the window took 20 ms: by hand a resample's median before is 20 ms with
    # probability 7/27, so the interval's low end is (11 - 20) / 20 = -0.45 and its high end (11 - 10) / 10
    cap = _slow([10, 10, 20], [11, 11, 11])
    assert cap["after_window_slowdown_share"] == pytest.approx(0.1)
    assert cap["after_window_slowdown_share_95"] == pytest.approx([-0.45, 0.1])
    assert "slower_after_profiling" not in [p["kind"] for p in cap["problems"]]
    # 4 % slower with no spread: the interval excludes 0 but it is under 5 %
    cap = _slow([10, 10, 10], [10.4, 10.4, 10.4])
    assert cap["after_window_slowdown_share_95"] == pytest.approx([0.04, 0.04])
    assert "slower_after_profiling" not in [p["kind"] for p in cap["problems"]]
    # faster after the window: negative
    assert _slow([10, 10, 10], [9, 9, 9])["after_window_slowdown_share"] == pytest.approx(-0.1)
    # fewer than 3 steps on a side: null
    for before, after in (([10, 10], [12, 12, 12]), ([10, 10, 10], [12, 12])):
        cap = _slow(before, after)
        assert (cap["after_window_slowdown_share"], cap["after_window_slowdown_share_95"]) == (None, None)
