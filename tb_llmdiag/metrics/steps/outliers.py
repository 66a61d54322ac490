"""What holds the extra time of each outlier step: the user annotation or host operator that grew.

Definitions (outlier steps as ``steps.outliers`` defines them, else the slowest step after the first when it is
>= 10 % over the median; host rows by the step whose host window holds their start):
- Per step and name, the summed duration of the name's ANNOTATION rows (``record_function`` ranges: a
  checkpoint save, an eval, logging) and of its CPU operator rows. A name's *excess* in a step = its time there
  minus its median time over all steps (0 where it does not run).
- ``holder``: the annotation with the largest excess when it covers at least ``HOLD_SHARE`` (25 %) of the step's
  excess over the median step, else the operator with the largest excess when that one does (operators nest, so
  the outermost one that grew wins ties), else null; ``holder_kind`` (``annotation`` | ``op``),
  ``holder_ns`` (its time in the step), ``holder_excess_ns``.
- ``dtoh_bytes`` / ``htod_bytes``: bytes of the device-to-host / host-to-device copies launched from inside the
  holder's rows in that step (what a checkpoint save moves); ``holder_copy_ns``: those copies' summed duration.
- ``copy_ns``: the summed ``holder_copy_ns`` of the outlier steps (copies that only those steps make).
- ``summary``: the first outlier step other than the first profiled one (else the first), in words:
  "step #5 takes 6.26 s: 5.9 s inside "save_checkpoint" (3.0 GB device-to-host copies)".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.entry import BYTES, INDEX, LOWER, NEITHER, NS, TEXT, Entry, Intro
from tb_llmdiag.metrics.host.ranges import launched_inside, step_of
from tb_llmdiag.model import Kind
from tb_llmdiag.units import fmt_bytes, fmt_ns

HOLD_SHARE = 0.25


def _per_name(ctx: Context, kind: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of a kind inside steps, their (name, step) cells (name id x steps + step position), and a (names x
    steps) matrix of summed durations."""
    ev = ctx.trace.events
    rows = ctx.cache.kinds(kind)
    pos = step_of(ctx, ev.ts_ns[rows])
    inside = pos >= 0
    rows, pos = rows[inside], pos[inside]
    del inside
    n = ctx.n_steps
    key = ev.name_id[rows].astype(np.int64)
    key *= n
    key += pos
    del pos
    mat = np.bincount(key, weights=ev.dur_ns[rows], minlength=len(ev.names) * n).reshape(len(ev.names), n)
    return rows, key, mat


def outlier_metrics(ctx: Context, steps: dict[str, Any]) -> dict[str, Any]:
    ev = ctx.trace.events
    if not steps.get("available") or ctx.n_steps < 2:
        return {"available": True, "steps": [], "summary": "no step stands out from the others", "copy_ns": 0}
    rows = steps.get("per_step") or []
    d = np.asarray([r["duration_ns"] for r in rows], dtype=np.float64)
    med = float(np.median(d))
    index = [r["index"] for r in rows]
    chosen = list(steps.get("outliers") or [])
    if not chosen:  # no outlier by the MAD rule: the slowest step after the first, when >= 10 % over the median
        k = int(np.argmax(d[1:])) + 1
        if d[k] >= 1.1 * med:
            chosen = [index[k]]
    if not chosen:
        return {"available": True, "steps": [], "summary": "no step stands out from the others", "copy_ns": 0}
    tables = {k: _per_name(ctx, int(kind)) for k, kind in (("annotation", Kind.ANNOTATION), ("op", Kind.CPU_OP))}
    out = []
    for i in chosen:
        # the slowest step of that number: a trace may number two steps alike (#27: the fast one was named)
        p = max((q for q, x in enumerate(index) if x == i), key=lambda q: d[q])
        excess = d[p] - med
        holder = None
        for kind in ("annotation", "op"):
            rows, key, mat = tables[kind]
            if mat.size == 0:
                continue
            grow = mat[:, p] - np.median(mat, axis=1)
            j = int(np.argmax(grow))
            if grow[j] > 0 and grow[j] >= HOLD_SHARE * excess:
                holder = (kind, j, float(mat[j, p]), float(grow[j]), rows[key == j * ctx.n_steps + p])
                break
        row: dict[str, Any] = {
            "index": int(i),
            "duration_ns": int(d[p]),
            "excess_ns": int(excess),
            "holder": None,
            "holder_kind": None,
            "holder_ns": None,
            "holder_excess_ns": None,
            "dtoh_bytes": 0,
            "htod_bytes": 0,
            "holder_copy_ns": 0,
        }
        if holder is not None:
            kind, j, t, g, hrows = holder
            dev = launched_inside(ctx, hrows)
            cp = dev[ev.kind[dev] == Kind.MEMCPY]
            names = np.array([ev.names[k] for k in ev.name_id[cp]], dtype=object)
            b = np.maximum(ev.bytes[cp], 0)
            row.update(
                holder=ev.names[j],
                holder_kind=kind,
                holder_ns=int(t),
                holder_excess_ns=int(g),
                holder_copy_ns=int(ev.dur_ns[cp].sum()),
                dtoh_bytes=int(b[np.char.find(names.astype(str), "DtoH") >= 0].sum()) if cp.size else 0,
                htod_bytes=int(b[np.char.find(names.astype(str), "HtoD") >= 0].sum()) if cp.size else 0,
            )
        out.append(row)
    pick = next((r for r in out if r["index"] != index[0]), out[0])
    text = f"step #{pick['index']} takes {fmt_ns(pick['duration_ns'])} (median {fmt_ns(med)})"
    if pick["holder"]:
        text += f': {fmt_ns(pick["holder_ns"])} inside "{pick["holder"]}"'
        copies = [
            f"{fmt_bytes(pick[k])} {w} copies"
            for k, w in (("dtoh_bytes", "device-to-host"), ("htod_bytes", "host-to-device"))
            if pick[k] >= 2**20
        ]
        if copies:
            text += f" ({', '.join(copies)})"
    return {"available": True, "steps": out, "summary": text, "copy_ns": int(sum(r["holder_copy_ns"] for r in out))}


# The registry's entries of the `outliers` topic: one row per key (metrics/entry.py); metrics/registry.py collects
# them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`outliers` (metrics/steps/outliers.py)",
    "What holds the extra time of each outlier step (`steps.outliers`): the annotation or operator that grew.",
)

ENTRIES: tuple[Entry, ...] = (
    (
        "outliers.summary",
        TEXT,
        NEITHER,
        0,
        "slowest step",
        "the first outlier step after the first profiled one, and what holds its extra time, in words",
    ),
    ("outliers.steps[].index", INDEX, NEITHER, 0, "step", "the outlier step"),
    ("outliers.steps[].duration_ns", NS, LOWER, 0.05, "step time", "its duration"),
    ("outliers.steps[].excess_ns", NS, LOWER, 0.05, "excess", "its duration minus the median step"),
    (
        "outliers.steps[].holder",
        TEXT,
        NEITHER,
        0,
        "holder",
        "the annotation (else operator) whose time grew most in the step, when it covers >= 25 % of the excess; else null",
    ),
    ("outliers.steps[].holder_kind", TEXT, NEITHER, 0, "holder kind", "`annotation` or `op`"),
    ("outliers.steps[].holder_ns", NS, NEITHER, 0.05, "holder time", "the holder's summed time in the step"),
    (
        "outliers.steps[].holder_excess_ns",
        NS,
        LOWER,
        0.05,
        "holder excess",
        "the holder's time in the step minus its median time per step",
    ),
    (
        "outliers.steps[].dtoh_bytes",
        BYTES,
        NEITHER,
        0.02,
        "device-to-host bytes",
        "bytes of device-to-host copies launched from inside the holder in that step",
    ),
    (
        "outliers.steps[].htod_bytes",
        BYTES,
        NEITHER,
        0.02,
        "host-to-device bytes",
        "bytes of host-to-device copies launched from inside the holder in that step",
    ),
    (
        "outliers.steps[].holder_copy_ns",
        NS,
        NEITHER,
        0.05,
        "holder copy time",
        "summed duration of the memcpys launched from inside the holder in that step",
    ),
    (
        "outliers.copy_ns",
        NS,
        NEITHER,
        0.05,
        "outlier-step copy time",
        "summed holder_copy_ns of the explained steps: copies only those steps make (a checkpoint save's)",
    ),
)
