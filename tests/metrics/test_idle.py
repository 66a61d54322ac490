"""GPU busy/idle and idle causes on a hand-made step with one gap of each cause."""

from __future__ import annotations

import numpy as np

from minitrace import US, GEMM, idle_scenario, kernel, launch, make_trace, step
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.steps.gaps import CAUSES, IdleGaps, classify, gap_causes
from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.model import Trace


def classify_idle(trace: Trace, win_s: np.ndarray, win_e: np.ndarray) -> IdleGaps:
    ctx = Context.build(trace, find_steps(trace))
    return classify(ctx.busy_s, ctx.busy_e, np.asarray(win_s), np.asarray(win_e), ctx.host)


def test_gaps_and_causes_of_the_scenario() -> None:
    # GIVEN kernels at 5-15, 40-50, 65-70, 72-80 us in a 0-100 us step, a DataLoader call at 15-35 us,
    # a stream sync at 41-50.5 us, and K4 launched (62-63 us) before the GPU went idle at 70 us
    trace = idle_scenario()
    # WHEN the idle gaps of the step are classified
    gaps = classify_idle(trace, np.array([0]), np.array([100 * US]))
    # THEN each gap has the expected cause
    assert gaps.start_ns.tolist() == [0, 15 * US, 50 * US, 70 * US, 80 * US]
    assert gaps.end_ns.tolist() == [5 * US, 40 * US, 65 * US, 72 * US, 100 * US]
    assert [CAUSES[c] for c in gaps.cause] == ["host_wait", "data_loader", "sync", "other", "host_wait"]
    host = Context.build(trace, find_steps(trace)).host
    assert [CAUSES[c] for c in gap_causes(gaps.start_ns, gaps.end_ns, host)] == [
        "host_wait", "data_loader", "sync", "other", "host_wait"]


def test_idle_topic_totals() -> None:
    trace = idle_scenario()
    m = compute_metrics(trace, find_steps(trace))["idle"]
    assert m["window_ns"] == 100 * US
    assert m["busy_ns"] == 33 * US and m["busy_share"] == 0.33
    assert m["idle_ns"] == 67 * US
    assert (m["host_wait_ns"], m["data_loader_ns"], m["sync_ns"], m["other_ns"]) == (25 * US, 25 * US, 15 * US, 2 * US)
    assert m["host_wait_share"] == 0.25 and m["sync_share"] == 0.15
    assert m["gap_count"] == 5
    assert m["long_gap_count"] == 0 and m["long_gap_share"] == 0.0
    assert m["low_util_steps"] == [1]


def test_long_gaps_over_500ms() -> None:
    trace = make_trace([step(1, 0, 2_100_000_000), launch(0, 1000, 1), kernel(GEMM, 1000, 1000, 1),
                        launch(1_500_000_000, 1000, 2), kernel(GEMM, 1_500_002_000, 1000, 2)])
    m = compute_metrics(trace, find_steps(trace))["idle"]
    assert m["long_gap_count"] == 2
    assert m["long_gap_max_ns"] == 1_500_002_000 - 2000
    assert m["long_gap_ns"] == (1_500_002_000 - 2000) + (2_100_000_000 - 1_500_003_000)


def test_without_correlation_ids_gaps_are_other() -> None:
    trace = make_trace([step(1, 0, 10 * US), kernel(GEMM, 2 * US, 2 * US), kernel(GEMM, 6 * US, 2 * US)])
    gaps = classify_idle(trace, np.array([0]), np.array([10 * US]))
    assert [CAUSES[c] for c in gaps.cause] == ["other", "other", "other"]


def test_no_device_activity_is_unavailable() -> None:
    trace = make_trace([step(1, 0, 10 * US)])
    m = compute_metrics(trace, find_steps(trace))["idle"]
    assert m == {"available": False, "reason": "no device activity in the trace"}


def test_host_signals_join_launch_ends() -> None:
    hs = Context.build(idle_scenario(), find_steps(idle_scenario())).host
    assert hs.dev_launch_end.tolist() == [3 * US, 38 * US, 62 * US, 63 * US]
