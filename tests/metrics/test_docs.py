"""docs/metrics.md defines every metric key; docs/findings.md lists every GPU rule with its threshold."""

from __future__ import annotations

import re
from pathlib import Path

from minitrace import full_metrics_keys
from tb_llmdiag.findings import GPU_RULES

DOCS = Path(__file__).resolve().parents[2] / "docs"
MEMCPY_GROUP = re.compile(r"^(htod_pageable|dtoh_pageable|htod_pinned|dtoh_pinned|dtod)_(count|bytes|time_ns|host_ns)$")


def test_every_metric_key_is_defined_in_metrics_md() -> None:
    text = (DOCS / "metrics.md").read_text()
    sections = dict(re.findall(r"^## `(\w+)`[^\n]*\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M))
    missing = []
    for path in sorted(full_metrics_keys()):
        topic, key = path.split(".", 1)
        body = sections.get(topic, "")
        if key in ("available",) or (topic == "memcpy" and MEMCPY_GROUP.match(key)):
            continue
        if f"`{key}`" not in body:
            missing.append(path)
    assert not missing


def test_every_rule_is_in_the_catalogue() -> None:
    text = (DOCS / "findings.md").read_text()
    for r in GPU_RULES:
        assert f"## `{r.id}`" in text, r.id
        if r.metric:
            thr = r.above if r.above is not None else r.below
            assert f"`{r.metric}` {'>=' if r.above is not None else '<'} {thr}" in text, r.id
        assert r.fix.text in text
