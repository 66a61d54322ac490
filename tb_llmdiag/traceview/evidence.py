"""Where a finding's evidence is in the trace, for findings whose metrics do not hold time ranges.

Contract:
- ``locate(trace, report) -> [{"id", "ranges": [[start_ns, end_ns], ...], "culprit": name | null, "source":
  file:line | null}]`` (``source``: the finding's own, shown beside the op it blames) for the
  report's findings that the engine did not already locate (``finding["ranges"]``, engine.py's ``Rule.ranges``,
  filled where the metrics hold the ranges: outlier and first steps, XLA recompiles and transfers).
  Each locator is a row of ``LOCATORS`` (finding id -> what to look for) and reads only what the report
  already decided (the culprit op the metrics named, the outlier steps, the long-gap threshold): it draws
  the report's evidence, it does not measure anything new.
- At most ``MAX_RANGES`` ranges per finding, the longest, in time order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tb_llmdiag.findings.engine import MAX_RANGES
from tb_llmdiag.intervals import gaps as complement
from tb_llmdiag.metrics.context import HOST_KINDS_FOR, NAME_PATTERNS
from tb_llmdiag.metrics.idle import LONG_GAP_NS
from tb_llmdiag.model import DEVICE_KINDS, Kind, Trace, kind_mask

Located = tuple[list[list[int]], str | None]


def _path(m: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = m
    for p in dotted.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(p)
    return cur


def _longest(s: np.ndarray, e: np.ndarray) -> list[list[int]]:
    pick = np.argsort(s - e, kind="stable")[:MAX_RANGES]
    return sorted([int(s[i]), int(e[i])] for i in pick)


def _named(trace: Trace, name: str | None, kinds: tuple[Kind, ...], host: bool = True) -> Located:
    ev = trace.events
    if not name or name not in ev.names:
        return [], name
    rows = np.flatnonzero(
        (ev.name_id == ev.names.index(name))
        & kind_mask(ev.kind, kinds)
        & ((ev.device < 0) if host else (ev.device >= 0))
    )
    return _longest(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]), name


def _family(trace: Trace, family: str) -> Located:
    ev = trace.events
    pat = re.compile(NAME_PATTERNS[family])
    rows = np.flatnonzero(ev.name_mask(pat.search) & kind_mask(ev.kind, HOST_KINDS_FOR[family]) & (ev.device < 0))
    if not rows.size:
        return [], None
    longest = rows[int(np.argmax(ev.dur_ns[rows]))]
    return _longest(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]), ev.name_of(int(longest))


def _op(path: str) -> Callable[[Trace, Mapping[str, Any], list[Any]], Located]:
    return lambda t, m, s: _named(t, _path(m, path), (Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON))


def _long_gaps(trace: Trace, m: Mapping[str, Any], steps: list[Any]) -> Located:
    ev = trace.events
    dev = np.flatnonzero(kind_mask(ev.kind, DEVICE_KINDS) & (ev.device >= 0))
    if dev.size < 2:
        return [], None
    s, e = ev.ts_ns[dev], ev.ts_ns[dev] + ev.dur_ns[dev]
    gs, ge = complement(s, e, int(s.min()), int(e.max()))
    long = (ge - gs) >= LONG_GAP_NS
    return _longest(gs[long], ge[long]), None


def _pageable(trace: Trace, m: Mapping[str, Any], steps: list[Any]) -> Located:
    ev = trace.events
    rows = np.flatnonzero(ev.name_mask(lambda n: "HtoD" in n and "Pageable" in n) & (ev.kind == int(Kind.MEMCPY)))
    if not rows.size:
        return [], None
    return _longest(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]), ev.name_of(int(rows[0]))


_ACTIVITY = (Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON, Kind.RUNTIME, Kind.DRIVER)


def _activity(path: str) -> Callable[[Trace, Mapping[str, Any], list[Any]], Located]:
    """The innermost activity of a chain the attribution named (``a > b > c``: ``c``)."""

    def locate_chain(t: Trace, m: Mapping[str, Any], s: list[Any]) -> Located:
        chain = _path(m, path)
        return _named(t, chain.split(" > ")[-1] if isinstance(chain, str) else None, _ACTIVITY)

    return locate_chain


#: finding id -> locator(trace, metrics, summary steps) -> (ranges, culprit)
LOCATORS: dict[str, Callable[[Trace, Mapping[str, Any], list[Any]], Located]] = {
    "host_bound": _activity("attribution.top_chain"),
    "allocator_churn": _activity("attribution.allocator_chain"),
    "unrecorded_host_time": _activity("attribution.unrecorded_chain"),
    "host_activity": _activity("attribution.top_chain"),
    "slow_host_op": _op("idle.host_wait_culprit"),
    "variable_shapes": _op("idle.host_wait_per_shape_op"),
    "gpu_gaps": _long_gaps,
    "host_sync": lambda t, m, s: _family(t, "sync_api"),
    "dataloader_stall": lambda t, m, s: _family(t, "dataloader"),
    "pageable_memcpy": _pageable,
}


def locate(trace: Trace, report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Evidence ranges of the report's findings (module docstring)."""
    metrics = report.get("metrics") or {}
    steps = list(_path(metrics, "steps.per_step") or [])
    out = []
    for f in report.get("findings") or []:
        if not isinstance(f, Mapping) or f.get("ranges") or f.get("id") not in LOCATORS:
            continue
        ranges, culprit = LOCATORS[str(f["id"])](trace, metrics, steps)
        out.append({"id": f["id"], "ranges": ranges, "culprit": culprit, "source": f.get("source")})
    return out
