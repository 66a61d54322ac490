"""What the engine can report, as JSON: every finding rule (what an agent cites), every rule once by id
(``llmdiag rules``); and the rule behind one finding. Pure over the declared tables. The metric registry with the
findings' evidence units and labels is ``tb_llmdiag/registry.py`` ``metric_registry``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tb_llmdiag.findings.engine import Rule, rule_of
from tb_llmdiag.findings.job import JOB_RULES
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.metrics.labels import VALUE_WORDS, unfilled


def finding_catalogue() -> dict[str, Any]:
    """Every finding the engine can report: ``{"runs": [...], "jobs": [...]}``, each rule's id, title, the metric
    (a registry key) it compares and its threshold, the registry keys of its evidence, its fix and docs."""
    runs = [
        {
            "id": r.id,
            "title": r.title,
            "platform": r.platform,
            "metric": r.metric,
            "above": r.above,
            "below": r.below,
            "evidence": {lab: p for lab, p in r.evidence if isinstance(p, str)},
            "skip_on": list(r.skip_on),
            "fix": r.fix.text,
            "docs": r.docs,
        }
        for r in RULES
    ]
    jobs = [
        {
            "id": r.id,
            "title": r.title,
            "metric": f"job.{r.metric}",
            "above": r.above,
            "evidence": [label for label, _ in r.evidence],
        }
        for r in JOB_RULES
    ]
    return {"runs": runs, "jobs": jobs}


#: what picks a job rule's fix, in words (``Rule.fix_by``)
CHOSEN_BY = {"straggler_cause": "cause of the straggler", "top_collective_kind": "leading collective kind"}

#: how ``llmdiag rules`` names a platform (``Rule.platform``; a rule without one applies to both)
PLATFORM_NAMES = {"cuda": "GPU (Kineto)", "xla": "XLA (XPlane)"}


def rule_catalogue() -> list[dict[str, Any]]:
    """Every rule once by id: the run rules (one id may have a GPU and an XLA variant: its platforms are listed
    together, with the first variant's title and fix), then the job rules (a run with several ranks)."""
    by_id: dict[str, dict[str, Any]] = {}
    for r in RULES:
        e = by_id.setdefault(
            r.id,
            {
                "id": r.id,
                "level": "run",
                "platforms": [],
                "title": r.title,
                "fix": unfilled(r.fix.text),
                "docs": r.docs,
            },
        )
        e["platforms"].extend(p for p in ([r.platform] if r.platform else PLATFORM_NAMES) if p not in e["platforms"])
    jobs = [
        {
            "id": r.id,
            "level": "job",
            "platforms": ["a job: every rank of a run"],
            "title": r.title,
            # chosen by what the job shows (the straggler's cause, the leading collective kind): named, not listed
            "fix": (r.fix.text + " " if r.fix.text else "")
            + (
                f"(one fix for each {CHOSEN_BY.get(r.fix_by, 'case')}: "
                f"{', '.join(VALUE_WORDS.get(k, k.replace('_', ' ')) for k, _ in r.fixes)})"
                if r.fixes and r.fix_by
                else ""
            ),
            "docs": r.docs,
        }
        for r in JOB_RULES
    ]
    for e in by_id.values():
        e["platforms"] = [PLATFORM_NAMES[p] for p in PLATFORM_NAMES if p in e["platforms"]]
    return [*by_id.values(), *jobs]


def finding_rule(finding_id: str, metrics: Mapping[str, Any]) -> Rule | None:
    """The rule behind a run finding, on the run whose metrics these are (``findings.engine.rule_of`` over ``RULES``):
    a surface reads what a finding's rule declares (``Rule.step_part``, ...) from it, never from a table of its own."""
    return rule_of(finding_id, metrics, RULES)
