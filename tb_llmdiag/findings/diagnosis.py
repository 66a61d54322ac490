"""Diagnosis: the ranked findings of a run and what fixing them would give.

Contract:
- ``diagnose(metrics, rules=RULES) -> (findings, what_if)``: ``evaluate`` (``findings/engine.py``), then
  ``whatif.apply_in_sequence``: each finding's one ``saving`` (#25): what it takes off the median step (the mean
  step for causes only slower steps have) in sequence (applied by each rule's own share), never more than fixing it
  alone; findings ranked by severity then that saving, severity from it: both decided there only.
- ``what_if``: the top finding's own saving as a what-if, and all findings' causes removed, as bounds
  that never go below the GPU's compute floor, nor, for a fix of GPU time, the host floor; tokens/s beside step time (``findings/whatif.py``,
  ``docs/whatif.md``). Null without steps.
- The profiler's own cost (``findings/trust.py``): host-time findings carry a ``caveat`` when it could account for a
  large part of them, and the what-if is restated on the unprofiled step when the capture holds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tb_llmdiag.findings.engine import Rule, run_findings
from tb_llmdiag.findings.structs import Finding, WhatIf
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.findings.trust import with_caveats, with_unprofiled
from tb_llmdiag.findings.whatif import apply_in_sequence


def what_if(findings: Sequence[Finding], metrics: Mapping[str, Any], rules: Sequence[Rule] = RULES) -> WhatIf | None:
    """The what-if of already ranked findings (``whatif.apply_in_sequence``)."""
    return with_unprofiled(apply_in_sequence(list(findings), metrics, rules)[1], metrics)


def diagnose(metrics: Mapping[str, Any], rules: Sequence[Rule] = RULES) -> tuple[list[Finding], WhatIf | None]:
    """Ranked findings with in-sequence savings, and the what-if (see the module docstring)."""
    findings, what = apply_in_sequence(run_findings(metrics, rules), metrics, rules)
    return with_caveats(findings, metrics, what, rules), with_unprofiled(what, metrics)
