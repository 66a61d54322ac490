"""frontend/testdata/metric_registry.json (the node tests' registry, and the e2e browser's while a server has
no ./metric_registry route) is a faithful excerpt of the real one: every key it lists is in
``api.catalogue.metrics()`` with the same unit, and so is every evidence unit."""

from __future__ import annotations

import json
from pathlib import Path

from tb_llmdiag import api

FIXTURE = Path(__file__).resolve().parents[1] / "frontend" / "testdata" / "metric_registry.json"


def test_fixture_registry_is_an_excerpt_of_the_real_one() -> None:
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    real = api.catalogue.metrics()
    units = {m["key"]: m["unit"] for m in real["metrics"]}
    assert {m["key"]: m["unit"] for m in fixture["metrics"]}.items() <= units.items()
    assert set(fixture["units"]) <= set(real["units"])
    for fid, labels in fixture["evidence_units"].items():
        assert labels == real["evidence_units"][fid], fid
