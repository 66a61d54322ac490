"""Where a model part's kernels are in the trace, and a range's device time by part (traceview/anatomy.py; #37
item 6: the tab's "Show in trace" of a part, the agent's `anatomy` tool with a range). Inline traces, each part
given by hand (``PartRows``), expected values worked out by hand in the comments."""

from __future__ import annotations

import numpy as np

from metrics.minitrace import US, kernel, make_trace
from tb_llmdiag.metrics.anatomy.topic import PartRows
from tb_llmdiag.model import DEVICE_KINDS
from tb_llmdiag.traceview.anatomy import part_locations, parts_in_range

LABELS = ("attention", "mlp", "other")


def _rows(trace, codes: dict[str, int]) -> PartRows:
    ev = trace.events
    rows = np.flatnonzero(np.isin(ev.kind, [int(k) for k in DEVICE_KINDS]))
    code = np.array([codes[ev.names[ev.name_id[r]]] for r in rows], np.int32)
    return PartRows(rows, code, LABELS, ev.dur_ns[rows].astype(np.float64))


def test_a_parts_runs_break_at_other_parts_and_idle_time() -> None:
    # GIVEN attention kernels A1 [0, 10) A2 [10, 30) us, an MLP kernel M1 [30, 40), 50 us of idle device, then
    # attention A1 [90, 95) A3 [95, 200) and MLP M2 [200, 210)
    trace = make_trace([
        kernel("A1", 0, 10 * US), kernel("A2", 10 * US, 20 * US), kernel("M1", 30 * US, 10 * US),
        kernel("A1", 90 * US, 5 * US), kernel("A3", 95 * US, 105 * US), kernel("M2", 200 * US, 10 * US),
    ])  # fmt: skip
    pr = _rows(trace, {"A1": 0, "A2": 0, "A3": 0, "M1": 1, "M2": 1})
    # THEN attention has two runs: [0, 30) (30 us) and [90, 200) (110 us, the focus; its longest kernel A3);
    # the MLP two of 10 us each: the first in time order is the focus
    assert part_locations(trace, pr) == [
        {"part": "attention", "ranges": [[0, 30 * US], [90 * US, 200 * US]], "focus": [90 * US, 200 * US],
         "culprit": "A3"},
        {"part": "mlp", "ranges": [[30 * US, 40 * US], [200 * US, 210 * US]], "focus": [30 * US, 40 * US],
         "culprit": "M1"},
    ]  # fmt: skip


def test_a_short_idle_gap_does_not_break_a_run() -> None:
    # GIVEN two attention kernels 15 us apart (under RUN_GAP_NS, 20 us): one run [0, 25) us
    trace = make_trace([kernel("A1", 0, 5 * US), kernel("A2", 20 * US, 5 * US)])
    pr = _rows(trace, {"A1": 0, "A2": 0})
    assert part_locations(trace, pr) == [
        {"part": "attention", "ranges": [[0, 25 * US]], "focus": [0, 25 * US], "culprit": "A1"}
    ]


def test_a_ranges_busy_time_split_among_the_parts() -> None:
    # GIVEN attention A1 [0, 10) and A2 [10, 30) us on stream 7, an MLP kernel M0 [20, 30) on stream 8 (beside A2),
    # M1 [30, 40), then A1 [90, 95) and A3 [95, 200)
    trace = make_trace([
        kernel("A1", 0, 10 * US), kernel("A2", 10 * US, 20 * US), kernel("M0", 20 * US, 10 * US, stream=8),
        kernel("M1", 30 * US, 10 * US), kernel("A1", 90 * US, 5 * US), kernel("A3", 95 * US, 105 * US),
    ])  # fmt: skip
    pr = _rows(trace, {"A1": 0, "A2": 0, "A3": 0, "M0": 1, "M1": 1})
    # WHEN the range is [5, 100) us: busy 5 + 25 (5..30) + 10 + 5 + 5 = 45 us; [20, 30) is split between A2 and M0
    got = parts_in_range(trace, pr, 5 * US, 100 * US)
    # THEN attention: 5 (A1) + 10 + 5 (A2, half of [20, 30)) + 5 (A1) + 5 (A3) = 30 us; MLP: 5 (M0) + 10 (M1) = 15 us
    assert got == {"busy_ns": 45 * US, "parts": {"attention": 30 * US, "mlp": 15 * US}}
