"""The metric registry: every number a report holds, as data (key, unit, better, tolerance, label, definition).

Keys name values as rules and the tab do, relative to the run report:
- a metric topic's key is ``topic.key`` (``steps.median_ns``; the report holds it at ``metrics.steps.median_ns``);
- ``summary.*``, ``headline.*``, ``what_if.*``, ``findings[].*`` are the run report's sections;
- ``trace.*`` are the run report's own fields (``size_bytes``, ``rank``), ``report.*`` the whole report's;
- ``[]`` stands for every item of a list (``steps.per_step[].duration_ns``, ``kernels.top_kernels[].total_ns``) and
  ``*`` for every key of a map (``kernels.by_category.*.time_ns``).

``UNITS`` is the one vocabulary of units (the formatter, ``tb_llmdiag.units.fmt``, knows each); ``better`` is
``lower`` / ``higher`` / ``neither``; ``tolerance`` is the relative change a comparison of two runs should treat
as noise. ``as_json()`` is what the tab serves (``api.metric_registry()``); ``markdown()`` generates ``docs/metrics.md``
(``python -m tb_llmdiag.metrics.registry --markdown > docs/metrics.md``). The entries are data (``metrics/entry.py``:
``Entry``, ``Intro``) declared beside the code that computes their keys: each topic's ``ENTRIES`` (and ``INTRO``) in
its module, collected in the order of the topic table (``metrics/topics.py`` ``TOPICS``); ``summary`` and
``headline`` in ``metrics/summary.py`` and ``metrics/headline.py``. Keys computed above this layer, which it may
not import, are declared here in the layer: the report's own sections (``report_entries.py``), the job level
(``job_entries.py``: ``job.*``) and a time range's top activities (``activity_entries.py``: ``activities.*``, the
agent's answer). ``metrics/labels.py`` ``LABELS`` gives the label a user reads for the keys findings show as
evidence where an entry's own label would be the key's words; ``value_labels`` (its ``VALUE_WORDS``) the words of
the named values the report holds.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from tb_llmdiag.metrics import activity_entries, headline, job_entries, report_entries, summary
from tb_llmdiag.metrics.entry import Entry, Intro
from tb_llmdiag.metrics.labels import LABELS, VALUE_WORDS
from tb_llmdiag.metrics.topics import TOPICS

#: unit -> what it means (and how ``tb_llmdiag.units.fmt`` prints it)
UNITS: dict[str, str] = {
    "ns": "nanoseconds, an integer: a duration, or a time since the trace's first event (1.23 ms, 45.6 µs)",
    "bytes": "bytes (binary multiples: 17.6 GiB)",
    "share": "a fraction in 0..1 of the quantity its definition names (12.3 %)",
    "ratio": "a plain number: one quantity over another of the same unit, or a coefficient (3 significant digits)",
    "count": "a number of things (events, calls, steps)",
    "count_per_step": "a count divided by the number of profiled steps",
    "per_s": "things per second (tokens/s)",
    "bytes_per_s": "bytes per second (binary multiples: 4.1 GiB/s)",
    "flop": "floating-point operations",
    "tflop_per_s": "10^12 floating-point operations per second",
    "index": "a position or number that names a step or device (never abbreviated)",
    "id": "an identifier: a program id, a rank, a version (never abbreviated)",
    "as_metric": "the unit of the metric the finding reads it from: its `metric` for `value` and `threshold`; "
    "for evidence, the rule's evidence path (`evidence_units` in `api.metric_registry()`)",
    "text": "a name or label",
    "flag": "true / false",
}
BETTER = ("lower", "higher", "neither")


@dataclass(frozen=True)
class Metric:
    key: str
    unit: str
    better: str
    tolerance: float
    label: str
    definition: str


def _metric(e: Entry) -> Metric:
    key, unit, better, tolerance, label, definition = e
    return Metric(key, unit, better, float(tolerance), LABELS.get(key, label), definition)


#: every entry: the report's sections in report order, the topics in ``TOPICS`` order, the job level, activities
METRICS: tuple[Metric, ...] = tuple(
    _metric(e)
    for e in (
        *report_entries.REPORT,
        *summary.ENTRIES,
        *report_entries.RUN,
        *headline.ENTRIES,
        *report_entries.RESULTS,
        *(entry for topic in TOPICS for entry in topic.entries),
        *job_entries.ENTRIES,
        *activity_entries.ENTRIES,
    )
)

#: section or topic -> its docs/metrics.md title and the prose before its table
INTROS: dict[str, Intro] = {
    **report_entries.INTROS,
    "summary": summary.INTRO,
    "headline": headline.INTRO,
    **{topic.name: topic.intro for topic in TOPICS if topic.intro is not None},
    "job": job_entries.INTRO,
    "activities": activity_entries.INTRO,
}


def _pattern(key: str) -> re.Pattern[str]:
    parts = [r"[^.\[\]]+" if p == "*" else re.escape(p) for p in re.split(r"(\*)", key)]
    return re.compile(r"\A" + "".join(parts) + r"\Z")


_PATTERNS = tuple((_pattern(m.key), m) for m in METRICS)


@lru_cache(maxsize=4096)
def matches(path: str) -> tuple[Metric, ...]:
    """The entries whose key names ``path`` (a key with list items as ``[]``: ``steps.per_step[].duration_ns``)."""
    return tuple(m for p, m in _PATTERNS if p.match(path))


def metric(path: str) -> Metric | None:
    """The one entry that names ``path`` (a list's path names its items' entry: ``xla.recompile_steps`` ->
    ``xla.recompile_steps[]``), or None when none or several do."""
    found = matches(path) or matches(path + "[]")
    return found[0] if len(found) == 1 else None


def unit_of(path: str, default: str = "ratio") -> str:
    m = metric(path)
    return m.unit if m is not None else default


def as_json() -> dict[str, Any]:
    """``{"units": {unit: meaning}, "metrics": [{key, unit, better, tolerance, label, definition}, ...],
    "value_labels": {named value: its words}}`` (``metrics/labels.py``)."""
    return {"units": dict(UNITS), "metrics": [asdict(m) for m in METRICS], "value_labels": dict(VALUE_WORDS)}


def _topic(key: str) -> str:
    return re.split(r"[.\[]", key, maxsplit=1)[0]


def markdown() -> str:
    """docs/metrics.md: the intro, then one table per topic / report section, in registry order."""
    out = [report_entries.INTRO.rstrip(), "", "## Units", "", "| unit | meaning |", "|---|---|"]
    out += [f"| `{u}` | {d} |" for u, d in UNITS.items()]
    seen: list[str] = []
    for m in METRICS:
        if _topic(m.key) not in seen:
            seen.append(_topic(m.key))
    for topic in seen:
        title, intro = INTROS.get(topic, (f"`{topic}`", ""))
        out += ["", f"## {title}", ""]
        if intro:
            out += [intro.rstrip(), ""]
        out += ["| key | unit | better | tolerance | label | definition |", "|---|---|---|---|---|---|"]
        out += [
            f"| `{m.key}` | {m.unit} | {m.better} | {m.tolerance:g} | {m.label} | {m.definition} |"
            for m in METRICS
            if _topic(m.key) == topic
        ]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--markdown"]:
        sys.stdout.write(markdown())
        return 0
    print("usage: python -m tb_llmdiag.metrics.registry --markdown", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
