"""Every rule: ``RULES = GPU_RULES + COMM_RULES + XLA_RULES`` with the run-kind declarations of
``findings/workload.py`` applied (training-only, whole-file, inference wording), then the inference-only
rules; a static table (docs/findings.md lists each one;
``llmdiag rules`` prints it; tests iterate it)."""

from __future__ import annotations

from tb_llmdiag.findings.comm import COMM_RULES
from tb_llmdiag.findings.engine import Rule, evidence_unit
from tb_llmdiag.findings.gpu import GPU_RULES
from tb_llmdiag.findings.workload import INFERENCE_RULES, by_run_kind
from tb_llmdiag.findings.xla import XLA_RULES

RULES: tuple[Rule, ...] = by_run_kind(GPU_RULES + COMM_RULES + XLA_RULES) + INFERENCE_RULES


def _evidence_units(rules: tuple[Rule, ...]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for r in rules:
        out.setdefault(r.id, {}).update((label, evidence_unit(label, path)) for label, path in r.evidence)
    return out


#: rule id -> evidence label -> registry unit (both platforms' rules of one id share a label's unit: tested)
EVIDENCE_UNITS: dict[str, dict[str, str]] = _evidence_units(RULES)
