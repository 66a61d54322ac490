"""Where a finding's evidence is in the trace, for findings whose metrics do not hold time ranges.

Contract:
- ``locate(trace, report) -> [{"id", "ranges": [[start_ns, end_ns], ...], "culprit": name | null, "source":
  file:line | null}]`` (``source``: the finding's own, shown beside the op it blames) for the
  report's findings that the engine did not already locate (``finding["ranges"]``, engine.py's ``Rule.ranges``,
  filled where the metrics hold the ranges: outlier and first steps, XLA recompiles and transfers).
  What to look for is the finding's rule's ``locate`` (``findings.engine.Locate``, found through
  ``findings.engine.rules_of``); each kind of search is a row of ``SEARCHES`` and reads only what the report already
  decided (the culprit op the metrics named, the long-gap threshold): it draws the report's evidence, it does not
  measure anything new.
- At most ``MAX_RANGES`` ranges per finding, the longest, in time order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tb_llmdiag.findings.engine import MAX_RANGES, rules_of
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.intervals import gaps as complement
from tb_llmdiag.metrics.context import HOST_KINDS_FOR, NAME_PATTERNS
from tb_llmdiag.metrics.steps.idle import LONG_GAP_NS
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


_ACTIVITY = (Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON, Kind.RUNTIME, Kind.DRIVER)


def _op(trace: Trace, m: Mapping[str, Any], path: str) -> Located:
    """The host operator the metrics name at ``path``."""
    return _named(trace, _path(m, path), (Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON))


def _chain(trace: Trace, m: Mapping[str, Any], path: str) -> Located:
    """The innermost activity of a chain the attribution named at ``path`` (``a > b > c``: ``c``)."""
    chain = _path(m, path)
    return _named(trace, chain.split(" > ")[-1] if isinstance(chain, str) else None, _ACTIVITY)


def _long_gaps(trace: Trace, m: Mapping[str, Any], at: str) -> Located:
    ev = trace.events
    dev = np.flatnonzero(kind_mask(ev.kind, DEVICE_KINDS) & (ev.device >= 0))
    if dev.size < 2:
        return [], None
    s, e = ev.ts_ns[dev], ev.ts_ns[dev] + ev.dur_ns[dev]
    gs, ge = complement(s, e, int(s.min()), int(e.max()))
    long = (ge - gs) >= LONG_GAP_NS
    return _longest(gs[long], ge[long]), None


def _pageable(trace: Trace, m: Mapping[str, Any], at: str) -> Located:
    ev = trace.events
    rows = np.flatnonzero(ev.name_mask(lambda n: "HtoD" in n and "Pageable" in n) & (ev.kind == int(Kind.MEMCPY)))
    if not rows.size:
        return [], None
    return _longest(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]), ev.name_of(int(rows[0]))


#: ``Locate.how`` -> search(trace, metrics, ``Locate.at``) -> (ranges, culprit)
SEARCHES: dict[str, Callable[[Trace, Mapping[str, Any], str], Located]] = {
    "chain": _chain,
    "op": _op,
    "family": lambda t, m, family: _family(t, family),
    "long_gaps": _long_gaps,
    "pageable_htod": _pageable,
}


def locate(trace: Trace, report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Evidence ranges of the report's findings (module docstring)."""
    metrics = report.get("metrics") or {}
    findings = [f for f in report.get("findings") or [] if isinstance(f, Mapping) and not f.get("ranges")]
    out = []
    for f, rule in zip(findings, rules_of([str(f.get("id")) for f in findings], metrics, RULES)):
        if rule is None or rule.locate is None:
            continue
        ranges, culprit = SEARCHES[rule.locate.how](trace, metrics, rule.locate.at)
        out.append({"id": f["id"], "ranges": ranges, "culprit": culprit, "source": f.get("source")})
    return out
