"""Typed model inside, JSON at the edge (#32): a run's report is built once as a typed ``RunReport`` and made JSON
once, where it leaves the front door; the CLI writes that JSON without walking it again."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tb_llmdiag import api, jsonsafe
from tb_llmdiag.cli import main
from tb_llmdiag.findings.structs import Finding, RunReport, WhatIf, from_json

DATA = Path(__file__).resolve().parent / "data"
ORIGINAL = jsonsafe.jsonable


def _is_run_report(obj: Any) -> bool:
    """A run's report, typed or as JSON (its path, metric topics, findings and what-if: a job's entry has no path)."""
    keys = ("path", "metrics", "findings", "what_if")
    return isinstance(obj, RunReport) or (isinstance(obj, dict) and all(k in obj for k in keys))


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``jsonable`` walk that starts at (or passes through) a run's report, by the report's path; ``jsonable``
    replaced wherever a module of ours holds it (its recursion goes through ``jsonsafe.jsonable`` too)."""
    seen: list[str] = []

    def counting(obj: Any, *, float_digits: int | None = None) -> Any:
        if _is_run_report(obj):
            seen.append(obj.path if isinstance(obj, RunReport) else obj["path"])
        return ORIGINAL(obj, float_digits=float_digits)

    for name, mod in list(sys.modules.items()):
        if name.startswith("tb_llmdiag") and getattr(mod, "jsonable", None) is ORIGINAL:
            monkeypatch.setattr(mod, "jsonable", counting)
    return seen


def test_the_cli_converts_each_run_report_to_json_once(walks: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a folder of two runs (two traces of one DDP job: each its own RunReport)
    folder = DATA / "ddp_balanced"
    # WHEN the CLI writes its JSON report
    main(["report", str(folder), "--json"])
    doc = json.loads(capsys.readouterr().out)
    # THEN each run's report was walked into JSON exactly once (by the front door), none twice
    paths = sorted(r["path"] for r in doc["runs"])
    assert len(paths) == 2
    assert sorted(walks) == paths


def test_the_run_report_json_is_the_typed_report_field_by_field() -> None:
    # GIVEN one run analysed through the front door
    (tf,) = [f for f in api.discover(str(DATA / "compile_off")).files][:1]
    got = api.analyze(tf)
    typed, doc = got.run, got.report
    # THEN its JSON is the typed report's fields in the schema's order (``window`` only on an over-the-run window's
    # report, which this is not), and reading it back gives the same findings
    assert typed.window is jsonsafe.msgspec.UNSET
    assert list(doc) == [k for k in RunReport.__struct_fields__ if k != "window"]
    assert [f["id"] for f in doc["findings"]] == [f.id for f in typed.findings]
    assert [from_json(Finding, f) for f in doc["findings"]] == [
        from_json(Finding, jsonsafe.jsonable(f)) for f in typed.findings
    ]
    assert doc["what_if"] is None or from_json(WhatIf, doc["what_if"]).statement == typed.what_if.statement
    # AND the JSON is made once and kept (the same object every time it is asked)
    assert got.report is doc
    # AND a finding's optional keys are absent, not null, where its rule has none (ranges / culprit)
    for f, t in zip(doc["findings"], typed.findings):
        assert ("ranges" in f) == (t.ranges is not jsonsafe.msgspec.UNSET)
