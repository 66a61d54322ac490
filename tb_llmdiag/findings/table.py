"""Every rule: ``RULES = GPU_RULES + COMM_RULES + XLA_RULES + INFERENCE_RULES + STRUCTURE_RULES``, each rule as its table declares
it (which runs it skips, its wording per platform and run trait: ``Rule.skip_on``, ``Rule.flavours``); a static
table (docs/findings.md lists each one; ``llmdiag rules`` prints it; tests iterate it)."""

from __future__ import annotations

from tb_llmdiag.findings.comm import COMM_RULES
from tb_llmdiag.findings.engine import Read, Rule, evidence_unit
from tb_llmdiag.findings.gpu import GPU_RULES, INFERENCE_RULES
from tb_llmdiag.findings.structure import STRUCTURE_RULES
from tb_llmdiag.findings.xla import XLA_RULES
from tb_llmdiag.metrics.labels import EVIDENCE_KEY_LABELS
from tb_llmdiag.metrics.registry import metric

RULES: tuple[Rule, ...] = GPU_RULES + COMM_RULES + XLA_RULES + INFERENCE_RULES + STRUCTURE_RULES


def _evidence_units(rules: tuple[Rule, ...]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for r in rules:
        out.setdefault(r.id, {}).update((label, evidence_unit(label, path)) for label, path in r.evidence)
    return out


#: rule id -> evidence label -> registry unit (both platforms' rules of one id share a label's unit: tested)
EVIDENCE_UNITS: dict[str, dict[str, str]] = _evidence_units(RULES)


def label_from_key(key: str) -> str:
    """A user's label for a key the registry does not name: its words, unit suffix dropped
    (``pageable_host_ns`` -> "pageable host")."""
    for suffix in ("_ns", "_share", "_bytes"):
        key = key.removesuffix(suffix)
    return key.replace("_", " ")


def evidence_label(label: str, path: Read) -> str:
    """The label a user reads for an evidence value: the registry label of the metric the rule reads it from,
    else the label ``metrics/labels.py`` gives its key, else the key's own words (``label_from_key``)."""
    m = metric(path) if isinstance(path, str) else None
    return m.label if m is not None else EVIDENCE_KEY_LABELS.get(label) or label_from_key(label)


def _evidence_labels(rules: tuple[Rule, ...]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for r in rules:
        for label, path in r.evidence:
            out.setdefault(r.id, {}).setdefault(label, evidence_label(label, path))
    return out


#: rule id -> evidence key -> the label a user reads (the registry's label of the metric it comes from)
EVIDENCE_LABELS: dict[str, dict[str, str]] = _evidence_labels(RULES)
