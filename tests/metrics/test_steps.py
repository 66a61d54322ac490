"""find_steps: step windows from markers, and well-formed steps inferred from Optimizer.step# annotations."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from minitrace import US, E, kernel, launch, make_trace, step
from tb_llmdiag.metrics.steps.windows import find_steps, optimizer_groups
from tb_llmdiag.model import Kind


def opt(ts: int, dur: int, name: str = "Optimizer.step#AdamW.step") -> E:
    return E(Kind.ANNOTATION, name, ts, dur)


def test_profiler_steps_extend_to_the_device_work_they_launched() -> None:
    s = find_steps(make_trace([step(3, 0, 100 * US), launch(90 * US, 5 * US, corr=1),
                               kernel("k", 95 * US, 30 * US, corr=1), step(4, 110 * US, 50 * US)]))
    assert s.source == "profiler_step" and s.index.tolist() == [3, 4]
    assert s.end_ns.tolist() == [125 * US, 160 * US] and s.host_end_ns.tolist() == [100 * US, 160 * US]
    # step 4's marker starts at 110 us while step 3's kernel runs until 125 us: step 4 starts at 125 us
    assert s.start_ns.tolist() == [0, 125 * US]
    assert s.host_starts.tolist() == [0, 110 * US]  # host-side attribution keeps the marker's own window


def test_a_gpu_bound_loop_reads_as_its_gpu_period_not_the_queue_lag() -> None:
    # GIVEN a host that launches each step's 80 us kernel in 10 us and runs ahead; the device runs them
    # back to back, so step k's kernel ends at 80 us * (k + 1) while its marker spans [20k, 20k + 10) us
    rows = []
    for k in range(4):
        rows += [step(k, 20 * k * US, 10 * US), launch(20 * k * US + 2 * US, 5 * US, corr=k + 1),
                 kernel("k", 80 * k * US, 80 * US, corr=k + 1)]
    s = find_steps(make_trace(rows))
    # THEN every step lasts one GPU period (80 us) and the steps tile the window without overlapping;
    # extending markers to their GPU tail alone would give 80, 140, 200, 260 us
    assert s.duration_ns.tolist() == [80 * US] * 4
    assert s.start_ns.tolist() == [0, 80 * US, 160 * US, 240 * US]
    assert int(s.duration_ns.sum()) == int(s.end_ns[-1] - s.start_ns[0])


def test_optimizer_steps_are_the_time_between_optimizer_step_ends() -> None:
    s = find_steps(make_trace([opt(10 * US, 5 * US), opt(110 * US, 5 * US), opt(210 * US, 5 * US)]))
    assert s.source == "optimizer_step" and s.index.tolist() == [1, 2]
    assert s.start_ns.tolist() == [15 * US, 115 * US] and s.end_ns.tolist() == [115 * US, 215 * US]


def test_overlapping_optimizer_annotations_count_as_one_optimizer_step() -> None:
    # GIVEN each training step's optimizer step annotated twice: an outer annotation and, nested in it, a
    # second optimizer's annotation that ends earlier (the old inference made windows ending before they start)
    rows = []
    for k in range(3):
        t = k * 100 * US
        rows += [opt(t + 50 * US, 20 * US, "Optimizer.step#AdamW.step"),
                 opt(t + 55 * US, 5 * US, "Optimizer.step#SGD.step")]
    # and one pair that only partly overlaps: the later end wins
    rows += [opt(350 * US, 10 * US), opt(355 * US, 15 * US)]
    s = find_steps(make_trace(rows))
    # THEN one step between consecutive optimizer-step ends, named by the group's first annotation
    assert s.start_ns.tolist() == [70 * US, 170 * US, 270 * US]
    assert s.end_ns.tolist() == [170 * US, 270 * US, 370 * US]
    assert s.names == ("Optimizer.step#AdamW.step",) * 3 and s.index.tolist() == [1, 2, 3]
    assert (s.duration_ns > 0).all()


def test_one_optimizer_step_annotated_twice_gives_no_steps() -> None:
    s = find_steps(make_trace([opt(0, 50 * US), opt(10 * US, 5 * US)]))
    assert s.source == "none" and len(s) == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 300)), min_size=0, max_size=12))
def test_inferred_steps_are_always_well_formed(spans: list[tuple[int, int]]) -> None:
    s = find_steps(make_trace([opt(ts * US, dur * US) for ts, dur in spans]))
    assert (s.end_ns >= s.start_ns).all() and (s.host_end_ns >= s.start_ns).all()
    assert (np.diff(s.start_ns) > 0).all()
    assert (s.start_ns[1:] >= s.host_end_ns[:-1]).all()  # disjoint host windows
    if len(s):
        assert s.source == "optimizer_step"


def test_optimizer_groups() -> None:
    first, end = optimizer_groups(np.array([0, 5, 10, 20, 20]), np.array([10, 8, 15, 30, 25]))
    # [0,10) and [5,8) nest; [10,15) touches the first group's end and joins it; [20,30) and [20,25) overlap
    assert first.tolist() == [0, 3] and end.tolist() == [15, 30]
