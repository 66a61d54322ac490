"""What one metric registry entry is, and the names its tables are written with.

An ``Entry`` is one row, ``(key, unit, better, tolerance, label, definition)`` (``metrics/registry.py`` explains the
fields and holds the units' meanings); an ``Intro`` is a docs/metrics.md section: its title and the prose before its
table. Each topic module declares its rows as ``ENTRIES`` (and its section as ``INTRO``) beside the function that
computes its keys; the registry collects them through the topic table (``metrics/topics.py``). The layers above
declare the rows of the keys they compute the same way, beside their code; ``tb_llmdiag/registry.py`` collects all.
"""

from __future__ import annotations

#: (key, unit, better, tolerance, label, definition)
Entry = tuple[str, str, str, float, str, str]
#: (section title, prose before its table)
Intro = tuple[str, str]

NS, BYTES, SHARE, RATIO, COUNT, PER_STEP = "ns", "bytes", "share", "ratio", "count", "count_per_step"
PER_S, FLOP, TFLOP_PER_S, INDEX, ID, AS_METRIC = "per_s", "flop", "tflop_per_s", "index", "id", "as_metric"
TEXT, FLAG = "text", "flag"
LOWER, HIGHER, NEITHER = "lower", "higher", "neither"
