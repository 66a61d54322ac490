"""The metric registry of what the metrics layer computes: every number of a run report's ``summary``, ``run``,
``headline`` and metric topics, as data (key, unit, better, tolerance, label, definition).

Keys name values as rules and the tab do, relative to the run report:
- a metric topic's key is ``topic.key`` (``steps.median_ns``; the report holds it at ``metrics.steps.median_ns``);
- ``summary.*``, ``headline.*`` and ``run.*`` are the run report's sections this layer computes; ``*.available`` and
  ``*.reason`` the keys every topic has;
- ``[]`` stands for every item of a list (``steps.per_step[].duration_ns``, ``kernels.top_kernels[].total_ns``) and
  ``*`` for every key of a map (``kernels.by_category.*.time_ns``).

``UNITS`` is the one vocabulary of units (the formatter, ``tb_llmdiag.units.fmt``, knows each); ``better`` is
``lower`` / ``higher`` / ``neither``; ``tolerance`` is the relative change a comparison of two runs should treat
as noise. The entries are data (``metrics/entry.py``: ``Entry``, ``Intro``) declared beside the code that computes
their keys: each topic's ``ENTRIES`` (and ``INTRO``) in its module, collected in the order of the topic table
(``metrics/topics.py`` ``TOPICS``); ``summary`` and ``headline`` in ``metrics/summary.py`` and
``metrics/headline.py``, ``run`` and the keys every topic has in ``metrics/__init__.py``. ``metric(path)`` is what
the findings layer reads a rule's evidence unit and label with (``findings/engine.py`` ``evidence_unit``,
``findings/table.py`` ``evidence_label``): rule paths name this layer's keys only (a job rule's are relative to the
job's metrics and name no entry). ``metrics/labels.py`` ``LABELS`` gives the label a user reads for the keys findings
show as evidence where an entry's own label would be the key's words; ``value_labels`` (its ``VALUE_WORDS``) the
words of the named values the report holds.

The whole registry, with the keys computed above this layer (the report's own fields, ``findings[]`` and
``what_if``, the job level, a time range's activities) and docs/metrics.md, is ``tb_llmdiag/registry.py``: it
builds on ``Metric``, ``as_metric``, ``Lookup`` and ``UNITS`` here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache

from tb_llmdiag.metrics import EVERY_TOPIC_ENTRIES, EVERY_TOPIC_INTRO, RUN_ENTRIES, RUN_INTRO, headline, summary
from tb_llmdiag.metrics.entry import Entry, Intro
from tb_llmdiag.metrics.labels import LABELS
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
    "for evidence, the rule's evidence path (`evidence_units` in `api.catalogue.metrics()`)",
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


def as_metric(e: Entry) -> Metric:
    """An entry as a ``Metric``, its label the one ``metrics/labels.py`` gives its key when it gives one."""
    key, unit, better, tolerance, label, definition = e
    return Metric(key, unit, better, float(tolerance), LABELS.get(key, label), definition)


@cache
def _pattern(key: str) -> re.Pattern[str]:
    """A key as a regular expression, compiled once (both registries' lookups share it: re's own cache holds fewer
    patterns than there are keys)."""
    parts = [r"[^.\[\]]+" if p == "*" else re.escape(p) for p in re.split(r"(\*)", key)]
    return re.compile(r"\A" + "".join(parts) + r"\Z")


class Lookup:
    """Paths to the entries of one registry (this layer's, or the whole one: ``tb_llmdiag/registry.py``)."""

    def __init__(self, metrics: tuple[Metric, ...]) -> None:
        self._patterns = tuple((_pattern(m.key), m) for m in metrics)
        self.matches = lru_cache(maxsize=4096)(self._matches)

    def _matches(self, path: str) -> tuple[Metric, ...]:
        """The entries whose key names ``path`` (a key with list items as ``[]``: ``steps.per_step[].duration_ns``)."""
        return tuple(m for p, m in self._patterns if p.match(path))

    def metric(self, path: str) -> Metric | None:
        """The one entry that names ``path`` (a list's path names its items' entry: ``xla.recompile_steps`` ->
        ``xla.recompile_steps[]``), or None when none or several do."""
        found = self.matches(path) or self.matches(path + "[]")
        return found[0] if len(found) == 1 else None

    def unit_of(self, path: str, default: str = "ratio") -> str:
        m = self.metric(path)
        return m.unit if m is not None else default


#: every topic's entries, in ``TOPICS`` order
TOPIC_ENTRIES: tuple[Entry, ...] = tuple(entry for topic in TOPICS for entry in topic.entries)

#: what this layer computes, in registry order: the summary, ``run``, the headline, the keys every topic has, the topics
METRICS: tuple[Metric, ...] = tuple(
    as_metric(e) for e in (*summary.ENTRIES, *RUN_ENTRIES, *headline.ENTRIES, *EVERY_TOPIC_ENTRIES, *TOPIC_ENTRIES)
)

#: section or topic -> its docs/metrics.md title and the prose before its table
INTROS: dict[str, Intro] = {
    "summary": summary.INTRO,
    "run": RUN_INTRO,
    "headline": headline.INTRO,
    "*": EVERY_TOPIC_INTRO,
    **{topic.name: topic.intro for topic in TOPICS if topic.intro is not None},
}

_LOOKUP = Lookup(METRICS)
#: ``matches(path)``, ``metric(path)``, ``unit_of(path)`` over this layer's entries (``Lookup``)
matches, metric, unit_of = _LOOKUP.matches, _LOOKUP.metric, _LOOKUP.unit_of
