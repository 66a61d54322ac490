"""The model's parts in the trace: where a part's kernels run (the tab's "Step anatomy" view opens the trace view
there) and which parts hold a time range's device time (the agent's ``anatomy`` tool for a range).

Contract (pure, vectorised over the device rows; no per-event Python), both reading what the ``anatomy`` topic
decided per device row (``metrics.anatomy.topic.PartRows``, kept in the analysis):
- ``part_locations(trace, rows) -> [{"part", "ranges": [[start_ns, end_ns], ...], "focus": [start_ns, end_ns],
  "culprit": name}]``: per
  part with time, its kernels as the trace shows them: a run is a stretch of consecutive device events (in start
  order, all streams) of that part with no device idle time over ``RUN_GAP_NS`` inside; ``ranges`` are the
  ``PART_RANGES`` runs holding most of its time, in time order; ``focus`` the one holding the most; ``culprit`` the
  name of the longest device event in it (the event the trace view selects and the name it outlines).
- ``parts_in_range(trace, rows, lo, hi) -> {"busy_ns", "parts": {name: time_ns}}``: the device-busy union within
  [lo, hi) split among the parts as the topic splits the analysis window (each instant equally among the device
  events running then, ``metrics.anatomy.topic.busy_shares``), so the parts add up to ``busy_ns``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.metrics.anatomy.topic import PartRows, busy_shares
from tb_llmdiag.model import Trace

#: ranges kept per part: its longest runs of kernels
PART_RANGES = 8
#: device idle longer than this ends a run (a run is a block of the part's work, not the gaps around it)
RUN_GAP_NS = 20_000


def part_locations(trace: Trace, pr: PartRows) -> list[dict[str, Any]]:
    """Each part's longest runs of kernels and the longest kernel of its longest run (module docstring)."""
    ev = trace.events
    keep = pr.w_ns > 0
    rows, code = pr.rows[keep], pr.code[keep]
    if rows.size == 0:
        return []
    s, e = ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]
    reach = np.maximum.accumulate(e)  # the device's busy end so far: a start past it by RUN_GAP_NS is idle between
    idle = np.concatenate(([True], s[1:] - reach[:-1] > RUN_GAP_NS))
    first = np.flatnonzero(idle | np.concatenate(([True], code[1:] != code[:-1])))
    run_s = np.minimum.reduceat(s, first)
    run_e = np.maximum.reduceat(e, first)
    run_w = np.add.reduceat(pr.w_ns[keep], first)
    run_code = code[first]
    ends = np.append(first[1:], rows.size)
    out = []
    for c in np.unique(run_code).tolist():
        mine = np.flatnonzero(run_code == c)
        longest = mine[np.argsort(-run_w[mine], kind="stable")[:PART_RANGES]]
        top = int(longest[0])
        inside = np.arange(first[top], ends[top])
        culprit = int(rows[inside[int(np.argmax(e[inside] - s[inside]))]])
        ranges = sorted([int(run_s[i]), int(run_e[i])] for i in longest.tolist())
        focus = [int(run_s[top]), int(run_e[top])]
        out.append({"part": pr.labels[c], "ranges": ranges, "focus": focus, "culprit": ev.name_of(culprit)})
    return out


def parts_in_range(trace: Trace, pr: PartRows, lo: int, hi: int) -> dict[str, Any]:
    """The device-busy union within [lo, hi) by part (module docstring); parts without time left out."""
    ev = trace.events
    s, e = ev.ts_ns[pr.rows], ev.ts_ns[pr.rows] + ev.dur_ns[pr.rows]
    w = busy_shares(s, e, np.array([lo], np.int64), np.array([hi], np.int64))
    tot = np.bincount(pr.code, weights=w, minlength=len(pr.labels))
    parts = {pr.labels[c]: int(round(t)) for c, t in enumerate(tot.tolist()) if t > 0}
    return {"busy_ns": int(round(float(w.sum()))), "parts": parts}
