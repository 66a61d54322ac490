"""Findings: declared rule tables evaluated on a run's metrics, ranked, with a what-if.

- ``engine``: ``Rule`` (parts ``Floor``, ``Fix``, ``Flavour``, ``Locate``, ``ProfilerCost``), ``lookup``,
  ``run_platform``, ``fires``, ``verdict``, ``finding``, ``evaluate``, ``rule_of``, ``rank``: one engine for runs and
  jobs;
- ``gpu``: ``GPU_RULES`` (Kineto runs), ``INFERENCE_RULES``; ``comm``: ``COMM_RULES``; ``xla``: ``XLA_RULES`` (XPlane runs);
  ``table``: ``RULES``, all of them; ``job``: ``JOB_RULES`` (a job's metrics) and ``held_back``;
- ``diagnosis``: ``diagnose`` (evaluate, then the savings sequence: severity and rank) and ``what_if``.
"""

from __future__ import annotations

from tb_llmdiag.findings.diagnosis import diagnose, what_if
from tb_llmdiag.findings.engine import (
    Fix,
    Flavour,
    Floor,
    Locate,
    ProfilerCost,
    Rule,
    evaluate,
    finding,
    fires,
    lookup,
    rank,
    rule_of,
    run_platform,
    verdict,
)
from tb_llmdiag.findings.gpu import GPU_RULES
from tb_llmdiag.findings.job import JOB_RULES, held_back
from tb_llmdiag.findings.table import EVIDENCE_LABELS, EVIDENCE_UNITS, RULES
from tb_llmdiag.findings.xla import XLA_RULES

__all__ = [
    "EVIDENCE_LABELS",
    "EVIDENCE_UNITS",
    "Fix",
    "Flavour",
    "Floor",
    "GPU_RULES",
    "JOB_RULES",
    "Locate",
    "ProfilerCost",
    "RULES",
    "Rule",
    "XLA_RULES",
    "diagnose",
    "evaluate",
    "finding",
    "fires",
    "held_back",
    "lookup",
    "rank",
    "rule_of",
    "run_platform",
    "verdict",
    "what_if",
]
