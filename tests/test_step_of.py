"""metrics.host.ranges.step_of: its per-step fill (sorted times) against a per-time rule written here, on generated
steps that overlap, share starts, end their host part before the next starts or not at all."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_llmdiag.metrics.host import ranges
from tb_llmdiag.metrics.steps.windows import Steps


def by_rule(starts: list[int], host_ends: list[int], t: int) -> int:
    """The step (position) with the latest start at or before t (the last listed of equal starts, by a stable
    sort), when t is before that step's host end; else -1."""
    best = -1
    for k in sorted(range(len(starts)), key=lambda k: starts[k]):
        if starts[k] <= t:
            best = k
    return best if best >= 0 and t < host_ends[best] else -1


def ctx_of(starts: list[int], host_ends: list[int]) -> Any:
    a = np.array(starts, dtype=np.int64)
    steps = Steps(index=np.arange(len(starts), dtype=np.int64), names=tuple(f"s{i}" for i in range(len(starts))),
                  start_ns=a, host_end_ns=np.array(host_ends, dtype=np.int64), end_ns=a + 100, source="test")
    return SimpleNamespace(steps=steps)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(-5, 40)), min_size=1, max_size=8),
       st.lists(st.integers(-10, 120), max_size=60), st.booleans())
def test_step_of_matches_rule(spans: list[tuple[int, int]], times: list[int], small_limit: bool) -> None:
    starts = [s for s, _ in spans]
    host_ends = [s + d for s, d in spans]
    ctx = ctx_of(starts, host_ends)
    want = [by_rule(starts, host_ends, t) for t in sorted(times)]
    got = ranges.step_of(ctx, np.array(sorted(times), dtype=np.int64))  # sorted: the per-step fill
    assert got.tolist() == want
    unsorted = np.array(times, dtype=np.int64)  # unsorted: the per-time search
    assert ranges.step_of(ctx, unsorted).tolist() == [by_rule(starts, host_ends, t) for t in times]


def test_step_of_many_steps_searches_per_time(monkeypatch: Any) -> None:
    monkeypatch.setattr(ranges, "_STEP_SLICES", 2)
    starts, host_ends = [0, 10, 20, 30], [5, 25, 22, 31]
    times = list(range(-2, 35))
    got = ranges.step_of(ctx_of(starts, host_ends), np.array(times, dtype=np.int64))
    assert got.tolist() == [by_rule(starts, host_ends, t) for t in times]
