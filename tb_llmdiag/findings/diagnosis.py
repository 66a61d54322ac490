"""Diagnosis: the ranked findings of a run and what fixing the top one would give.

Contract:
- ``diagnose(metrics, rules=RULES) -> (findings, what_if)``: ``evaluate`` then ``rank``
  (``findings/engine.py``: by estimated saving, highest first).
- ``what_if`` = ``{"finding_id", "step_ns", "step_ns_if_fixed"}`` for the first finding with a saving in
  ns: the mean step (savings are shares of the summed step time), and the mean step minus that
  saving. Null when no finding has one.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tb_llmdiag.findings.engine import Rule, evaluate, rank
from tb_llmdiag.findings.table import RULES


def what_if(findings: Sequence[Mapping[str, Any]], metrics: Mapping[str, Any]) -> dict[str, Any] | None:
    step = (metrics.get("steps") or {}).get("mean_ns")
    if not isinstance(step, int):
        return None
    for f in findings:
        s = f.get("saving") or {}
        if isinstance(s.get("ns"), int) and s["ns"] > 0:
            return {"finding_id": f["id"], "step_ns": step, "step_ns_if_fixed": max(step - s["ns"], 0)}
    return None


def diagnose(metrics: Mapping[str, Any], rules: Sequence[Rule] = RULES) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Ranked findings and the what-if line (see the module docstring)."""
    findings = rank(evaluate(metrics, rules))
    return findings, what_if(findings, metrics)
