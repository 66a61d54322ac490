"""What the straggler does that the others do not (jobs/straggler.straggler_activity, issue #23), by hand."""

from __future__ import annotations

from tb_llmdiag.jobs.straggler import straggler_activity


def test_the_activity_with_the_largest_excess_over_the_median_rank() -> None:
    # GIVEN three ranks' idle activities (ns per step); rank 2 spends 5 ms in release_memory, the others 1 and 0
    acts = [
        [("idle", "fwd", 4e6), ("idle", "release_memory", 1e6)],
        [("idle", "fwd", 4e6)],
        [("idle", "fwd", 4.5e6), ("idle", "release_memory", 5e6), ("busy", "aten::mm", 9e6)],
    ]
    # WHEN rank 2 is the straggler THEN release_memory: 5 ms against the median of (1, 0) = 0.5 ms
    got = straggler_activity(acts, 2, "idle", min_difference_ns=1_000)
    assert got == {"activity": "release_memory", "activity_kind": "idle", "activity_ns_per_step": 5e6,
                   "activity_difference_ns_per_step": 4.5e6}
    # busy activities are compared only with busy ones; nothing above the floor names nothing
    assert straggler_activity(acts, 2, "busy", min_difference_ns=1_000)["activity"] == "aten::mm"
    assert straggler_activity(acts, 0, "idle", min_difference_ns=1e6) is None
    assert straggler_activity([[], []], 0, "idle", min_difference_ns=1) is None
