"""Device copies by direction and host memory kind: pageable vs pinned.

Definitions (memcpy events whose start lies in the analysis window):
- A memcpy's name says its direction and memory kinds: ``Memcpy HtoD (Pageable -> Device)``.
  Pageable host memory makes a copy synchronous for the host (the driver stages it), so
  ``non_blocking=True`` is silently ignored.
- ``by_name``: per name: count, bytes (sum of known payloads), time_ns (device time).
- ``htod_pageable_*`` / ``dtoh_pageable_*`` / ``htod_pinned_*``: count, bytes, device time_ns, and
  host_ns, the duration of the runtime calls that issued them (joined by correlation id; the device time
  when no call joins): the host time the copies blocked.
- ``pageable_htod_share`` = length of the union of those host spans within the window / window_ns: what
  pinning the inputs would save at most.
  (Device -> Pageable copies are how ``.item()`` reads values; they are counted under host syncs.)
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tb_llmdiag.intervals import merge, overlap_per_window
from tb_llmdiag.metrics.context import Context, per_step, share
from tb_llmdiag.metrics.entry import BYTES, COUNT, LOWER, NEITHER, NS, PER_STEP, SHARE, TEXT, Entry, Intro
from tb_llmdiag.model import Kind

_MEMCPY = re.compile(r"Memcpy\s+(\w+)\s*\((\w+)\s*->\s*(\w+)\)")


def _kinds(names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = np.empty(len(names), dtype=object)
    src = np.empty(len(names), dtype=object)
    dst = np.empty(len(names), dtype=object)
    for i, n in enumerate(names):
        m = _MEMCPY.search(n)
        d[i], src[i], dst[i] = (m.group(1), m.group(2), m.group(3)) if m else ("", "", "")
    return d, src, dst


def memcpy_metrics(ctx: Context) -> dict[str, Any]:
    ev = ctx.trace.events
    rows = ctx.dev[ctx.dev_in_win]
    rows = rows[ev.kind[rows] == Kind.MEMCPY]
    out: dict[str, Any] = {"available": ctx.dev.size > 0, "count": int(rows.size)}
    if ctx.dev.size == 0:
        out["reason"] = "no device activity in the trace"
        return out
    direction, src, dst = _kinds(ev.names)
    nid = ev.name_id[rows]
    dur = ev.dur_ns[rows]
    nbytes = np.maximum(ev.bytes[rows], 0)
    host_s, host_e = _host_span(ctx, rows)
    host_ns = host_e - host_s
    out["by_name"] = [
        {
            "name": ev.names[int(i)],
            "count": int((nid == i).sum()),
            "bytes": int(nbytes[nid == i].sum()),
            "time_ns": int(dur[nid == i].sum()),
        }
        for i in np.unique(nid)
    ]
    groups = {
        "htod_pageable": (direction == "HtoD") & (src == "Pageable"),
        "dtoh_pageable": (direction == "DtoH") & (dst == "Pageable"),
        "htod_pinned": (direction == "HtoD") & (src == "Pinned"),
        "dtoh_pinned": (direction == "DtoH") & (dst == "Pinned"),
        "dtod": direction == "DtoD",
    }
    for g, per_name in groups.items():
        m = per_name[nid] if nid.size else np.zeros(0, bool)
        out[f"{g}_count"] = int(m.sum())
        out[f"{g}_bytes"] = int(nbytes[m].sum())
        out[f"{g}_time_ns"] = int(dur[m].sum())
        out[f"{g}_host_ns"] = int(host_ns[m].sum())
    out["htod_pageable_per_step"] = per_step(out["htod_pageable_count"], ctx)
    m = groups["htod_pageable"][nid] if nid.size else np.zeros(0, bool)
    ms, me = merge(host_s[m], host_e[m])
    out["pageable_htod_share"] = share(int(overlap_per_window(ms, me, ctx.win_s, ctx.win_e).sum()), ctx.window_ns)
    return out


def _host_span(ctx: Context, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[start, end) of the runtime call that issued each memcpy row (the copy itself when none joins)."""
    ev = ctx.trace.events
    call = ctx.cache.launcher(rows)
    span = np.where(call >= 0, call, rows)
    return ev.ts_ns[span], ev.ts_ns[span] + ev.dur_ns[span]


# The registry's entries of the `memcpy` topic: one row per key (metrics/entry.py); metrics/registry.py collects them
# through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`memcpy` (metrics/gpu/memcpy.py)",
    "Memcpy events in the window. Names carry direction and memory kinds: `Memcpy HtoD (Pageable -> Device)`.\nA copy from pageable host memory is synchronous for the host (the driver stages it through a pinned\nbuffer), so `non_blocking=True` is ignored.\n\nDevice -> Pageable copies are how `.item()` reads a value; they are counted, but judged under host syncs.",
)

#: the shared part of the definitions of `memcpy.by_name[]`'s fields
_BY_NAME_ENTRY = "`by_name` entry: per name: `name`, `count`, `bytes` (sum of known payloads), `time_ns` (device time)"

ENTRIES: tuple[Entry, ...] = (
    ("memcpy.count", COUNT, NEITHER, 0.02, "count", "memcpy events"),
    ("memcpy.dtod_bytes", BYTES, NEITHER, 0.02, "dtod bytes", "payload of dtod copies"),
    ("memcpy.dtod_count", COUNT, NEITHER, 0.02, "dtod count", "number of dtod copies"),
    ("memcpy.dtod_host_ns", NS, NEITHER, 0.05, "dtod host", "host time (the issuing runtime call) of dtod copies"),
    ("memcpy.dtod_time_ns", NS, NEITHER, 0.05, "dtod time", "device time of dtod copies"),
    ("memcpy.dtoh_pageable_bytes", BYTES, NEITHER, 0.02, "dtoh pageable bytes", "payload of dtoh pageable copies"),
    ("memcpy.dtoh_pageable_count", COUNT, LOWER, 0.02, "dtoh pageable count", "number of dtoh pageable copies"),
    (
        "memcpy.dtoh_pageable_host_ns",
        NS,
        LOWER,
        0.05,
        "dtoh pageable host",
        "host time (the issuing runtime call) of dtoh pageable copies",
    ),
    ("memcpy.dtoh_pageable_time_ns", NS, LOWER, 0.05, "dtoh pageable time", "device time of dtoh pageable copies"),
    ("memcpy.dtoh_pinned_bytes", BYTES, NEITHER, 0.02, "dtoh pinned bytes", "payload of dtoh pinned copies"),
    ("memcpy.dtoh_pinned_count", COUNT, NEITHER, 0.02, "dtoh pinned count", "number of dtoh pinned copies"),
    (
        "memcpy.dtoh_pinned_host_ns",
        NS,
        NEITHER,
        0.05,
        "dtoh pinned host",
        "host time (the issuing runtime call) of dtoh pinned copies",
    ),
    ("memcpy.dtoh_pinned_time_ns", NS, NEITHER, 0.05, "dtoh pinned time", "device time of dtoh pinned copies"),
    ("memcpy.htod_pageable_bytes", BYTES, NEITHER, 0.02, "htod pageable bytes", "payload of htod pageable copies"),
    ("memcpy.htod_pageable_count", COUNT, LOWER, 0.02, "htod pageable count", "number of htod pageable copies"),
    (
        "memcpy.htod_pageable_host_ns",
        NS,
        LOWER,
        0.05,
        "htod pageable host",
        "host time (the issuing runtime call) of htod pageable copies",
    ),
    (
        "memcpy.htod_pageable_per_step",
        PER_STEP,
        LOWER,
        0.05,
        "htod pageable per step",
        "pageable host-to-device copies per step",
    ),
    ("memcpy.htod_pageable_time_ns", NS, LOWER, 0.05, "htod pageable time", "device time of htod pageable copies"),
    ("memcpy.htod_pinned_bytes", BYTES, NEITHER, 0.02, "htod pinned bytes", "payload of htod pinned copies"),
    ("memcpy.htod_pinned_count", COUNT, NEITHER, 0.02, "htod pinned count", "number of htod pinned copies"),
    (
        "memcpy.htod_pinned_host_ns",
        NS,
        NEITHER,
        0.05,
        "htod pinned host",
        "host time (the issuing runtime call) of htod pinned copies",
    ),
    ("memcpy.htod_pinned_time_ns", NS, NEITHER, 0.05, "htod pinned time", "device time of htod pinned copies"),
    (
        "memcpy.pageable_htod_share",
        SHARE,
        LOWER,
        0.1,
        "pageable htod share",
        "length of the union of those copies' host spans within the window / window_ns: the most pinning could save",
    ),
    ("memcpy.by_name[].bytes", BYTES, NEITHER, 0.02, "copy bytes", "`bytes` of each " + _BY_NAME_ENTRY),
    ("memcpy.by_name[].count", COUNT, NEITHER, 0.02, "copy count", "`count` of each " + _BY_NAME_ENTRY),
    ("memcpy.by_name[].name", TEXT, NEITHER, 0, "copy name", "`name` of each " + _BY_NAME_ENTRY),
    ("memcpy.by_name[].time_ns", NS, NEITHER, 0.05, "copy time", "`time_ns` of each " + _BY_NAME_ENTRY),
)
