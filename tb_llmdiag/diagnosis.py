"""Diagnosis: rank the findings of ``rules.evaluate`` and say what fixing the top one would give.

Contract:
- ``diagnose(metrics) -> (findings, what_if)``. Findings are ordered by estimated saving (ns, then share),
  highest first; an unknown saving counts as 0; ties go by severity (high, medium, low), then table order.
- ``what_if`` = ``{"finding_id", "step_ns", "step_ns_if_fixed"}`` for the first finding with a saving in
  ns: the mean step (savings are shares of the summed step time), and the mean step minus that
  saving. Null when no finding has one.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tb_llmdiag.rules import Rule, evaluate

_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


def rank(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def key(item: tuple[int, dict[str, Any]]) -> tuple[float, float, int, int]:
        i, f = item
        s = f.get("saving") or {}
        return (-float(s.get("ns") or 0), -float(s.get("share") or 0),
                _SEVERITY_ORDER.get(f.get("severity", "low"), 3), i)

    return [f for _, f in sorted(enumerate(findings), key=key)]


def what_if(findings: Sequence[Mapping[str, Any]], metrics: Mapping[str, Any]) -> dict[str, Any] | None:
    step = (metrics.get("steps") or {}).get("mean_ns")
    if not isinstance(step, int):
        return None
    for f in findings:
        s = f.get("saving") or {}
        if isinstance(s.get("ns"), int) and s["ns"] > 0:
            return {"finding_id": f["id"], "step_ns": step, "step_ns_if_fixed": max(step - s["ns"], 0)}
    return None


def diagnose(metrics: Mapping[str, Any], rules: Sequence[Rule] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Ranked findings and the what-if line (see the module docstring)."""
    findings = rank(evaluate(metrics, rules))
    return findings, what_if(findings, metrics)
