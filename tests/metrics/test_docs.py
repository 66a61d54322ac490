"""docs/metrics.md defines every metric key; docs/findings.md lists every rule (GPU and XLA) with its threshold."""

from __future__ import annotations

import re
from pathlib import Path

from minitrace import full_metrics_keys

from tb_llmdiag.findings.gpu import GPU_RULES
from tb_llmdiag.findings.xla import XLA_RULES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_metric_key_is_defined_in_metrics_md() -> None:
    """docs/metrics.md is generated from the metric registry (tests/test_registry.py checks it is current);
    every key compute_metrics writes is in one of its tables, under its own key or its list items' / fields'."""
    text = (DOCS / "metrics.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \|", text, flags=re.M)
    missing = [k for k in sorted(full_metrics_keys())
               if not any(r == k or r.startswith((k + "[]", k + ".")) or r == "*." + k.split(".", 1)[1] for r in rows)]
    assert rows and not missing, missing


def test_every_rule_is_in_the_catalogue() -> None:
    text = (DOCS / "findings.md").read_text()
    for r in GPU_RULES:
        assert f"## `{r.id}`" in text, r.id
        if r.metric:
            thr = r.above if r.above is not None else r.below
            assert f"`{r.metric}` {'>=' if r.above is not None else '<'} {thr}" in text, r.id
        assert r.fix.text in text
    for r in XLA_RULES:  # one table row each
        thr = r.above if r.above is not None else r.below
        assert f"| `{r.id}` | `{r.metric}` {'>=' if r.above is not None else '<'} {thr}" in text, r.id
