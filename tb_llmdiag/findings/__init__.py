"""Findings: declared rule tables evaluated on a run's metrics, ranked, with a what-if.

- ``engine``: ``Rule``, ``Fix``, ``Flavour``, ``lookup``, ``run_platform``, ``evaluate``, ``rank``;
- ``gpu``: ``GPU_RULES`` (Kineto runs); ``xla``: ``XLA_RULES`` (XPlane runs); ``table``: ``RULES``, both;
- ``diagnosis``: ``diagnose`` (evaluate + rank) and ``what_if``.
"""

from __future__ import annotations

from tb_llmdiag.findings.diagnosis import diagnose, what_if
from tb_llmdiag.findings.engine import Fix, Flavour, Rule, evaluate, lookup, rank, run_platform
from tb_llmdiag.findings.gpu import GPU_RULES
from tb_llmdiag.findings.table import EVIDENCE_LABELS, EVIDENCE_UNITS, RULES
from tb_llmdiag.findings.xla import XLA_RULES

__all__ = [
    "EVIDENCE_LABELS",
    "EVIDENCE_UNITS",
    "Fix",
    "Flavour",
    "GPU_RULES",
    "RULES",
    "Rule",
    "XLA_RULES",
    "diagnose",
    "evaluate",
    "lookup",
    "rank",
    "run_platform",
    "what_if",
]
