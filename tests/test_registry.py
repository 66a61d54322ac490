"""The metric registry names every number a report holds, in one vocabulary of units, and the rules name only
registry keys."""

from __future__ import annotations

import copy
import json
import math
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tb_llmdiag import api
from tb_llmdiag import registry
from tb_llmdiag.findings.engine import Fix, Rule
from tb_llmdiag.findings.table import EVIDENCE_UNITS, RULES
from tb_llmdiag.metrics.registry import BETTER, UNITS
from tb_llmdiag.registry import METRICS, matches, metric
from tb_llmdiag.units import fmt

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden"
sys.path.insert(0, str(REPO / "tests" / "metrics"))

RUN_SECTIONS = ("summary", "headline", "what_if", "findings")


def _leaves(obj: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(obj, list):
        for v in obj:
            yield from _leaves(v, path + "[]")
    else:
        yield path, obj


def run_leaves(run: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(registry path, value) of every leaf of a run report (or a golden: metrics, headline, findings, what_if)."""
    for key, value in run.items():
        if key == "metrics":
            yield from _leaves(value, "")
        elif key in RUN_SECTIONS:
            yield from _leaves(value, key)
        else:
            yield from _leaves(value, f"trace.{key}")


def job_leaves(job: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(registry path, value) of a report's ``jobs[]`` item: metrics as ``job.*``, a finding's evidence as the
    metric it repeats."""
    for key, value in job.items():
        if key == "metrics":
            yield from _leaves(value, "job")
        elif key == "findings":
            for f in value:
                for k, v in f.items():
                    yield from _leaves(v, "job" if k == "evidence" else f"job.findings[].{k}")
        else:
            yield from _leaves(value, f"job.{key}")


def report_leaves(rep: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    for key, value in rep.items():
        if key == "runs":
            for run in value:
                yield from run_leaves(run)
        elif key == "jobs":
            for job in value:
                yield from job_leaves(job)
        else:
            yield from _leaves(value, f"report.{key}")


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def unregistered(leaves: Iterator[tuple[str, Any]]) -> dict[str, int]:
    """Numeric leaves that match no registry entry, or more than one, or one whose unit is not a number's."""
    bad: dict[str, int] = {}
    for path, v in leaves:
        if not is_number(v):
            continue
        found = matches(path)
        if len(found) != 1 or found[0].unit in ("text", "flag"):
            bad[path] = len(found)
    return bad


@pytest.fixture(scope="module")
def demo_report() -> dict[str, Any]:
    return api.report(str(REPO / "demo_logs"))


GOLDENS = sorted(GOLDEN.glob("*.json"))


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.name.split(".")[0])
def test_every_number_of_a_golden_has_exactly_one_entry(path: Path) -> None:
    golden = json.loads(path.read_text())
    assert sum(1 for _, v in run_leaves(golden) if is_number(v)) > 20
    assert unregistered(run_leaves(golden)) == {}


def test_every_number_of_a_fresh_report_has_exactly_one_entry(demo_report: dict[str, Any]) -> None:
    assert demo_report["runs"] and unregistered(report_leaves(demo_report)) == {}


def test_a_new_unregistered_number_is_caught(demo_report: dict[str, Any]) -> None:
    rep = copy.deepcopy(demo_report)
    rep["runs"][0]["metrics"]["steps"]["new_thing_ns"] = 5
    rep["runs"][0]["metrics"]["kernels"]["by_category"]["gemm"]["new_count"] = 1
    rep["runs"][0]["summary"]["counts"]["fresh"] = 2
    assert unregistered(report_leaves(rep)) == {
        "steps.new_thing_ns": 0, "kernels.by_category.gemm.new_count": 0, "summary.counts.fresh": 0}


def test_patterns_name_list_items_and_map_keys() -> None:
    assert metric("kernels.by_category.attention.time_ns").key == "kernels.by_category.*.time_ns"  # type: ignore[union-attr]
    assert metric("steps.per_step[].duration_ns").unit == "ns"  # type: ignore[union-attr]
    assert metric("xla.recompile_steps").key == "xla.recompile_steps[]"  # type: ignore[union-attr]  # a list names its items
    assert metric("steps.available").unit == "flag"  # type: ignore[union-attr]
    assert metric("steps.nope") is None and metric("kernels.by_category.x.y.time_ns") is None


def test_every_metric_topic_key_has_an_entry() -> None:
    from minitrace import full_metrics_keys

    keys = [m.key for m in METRICS]
    missing = [k for k in sorted(full_metrics_keys())
               if not matches(k) and not any(e.startswith((k + "[]", k + ".")) for e in keys)]
    assert missing == []


# ---------------------------------------------------------------------------------------------- units


def test_each_entry_is_complete_and_in_the_vocabulary() -> None:
    keys = [m.key for m in METRICS]
    assert len(keys) == len(set(keys))
    for m in METRICS:
        assert m.unit in UNITS, m
        assert m.better in BETTER, m
        assert math.isfinite(m.tolerance) and 0 <= m.tolerance < 1, m
        assert m.label and m.definition and "TODO" not in m.definition and "|" not in m.definition, m
        if m.unit in ("text", "flag", "index", "id", "as_metric"):
            assert m.better == "neither" and m.tolerance == 0, m


def test_units_follow_the_key_names() -> None:
    """A key's unit suffix and its registry unit agree: ``_ns`` is ns, ``_share`` a share, ``_bytes`` bytes."""
    for m in METRICS:
        last = m.key.split(".")[-1].removesuffix("[]")
        for suffix, unit in (("_ns", "ns"), ("_share", "share"), ("_bytes", "bytes"), ("_per_step", "count_per_step")):
            if last.endswith(suffix) and m.unit != "as_metric" and not (suffix == "_per_step" and ("flop" in last or last.endswith("_ns_per_step"))):
                assert m.unit == unit, m


def test_every_unit_is_used_and_formatted() -> None:
    used = {m.unit for m in METRICS}
    assert used == set(UNITS)
    # the tab's formatValue writes the same (#25; tests/test_saving_text.py runs it)
    expected = {"ns": "4.42 µs", "bytes": "4.3 KiB", "bytes_per_s": "4.3 KiB/s", "share": "442000.0 %", "ratio": "4420", "count": "4420",
                "count_per_step": "4420", "per_s": "4420/s", "flop": "4.42 kFLOP", "tflop_per_s": "4.42 PFLOP/s",
                "index": "4420", "id": "4420", "as_metric": "4420", "text": "4420", "flag": "4420"}
    assert {u: fmt(u, 4420.0) for u in UNITS} == expected
    # ids and step numbers are never abbreviated or rounded
    assert fmt("id", 103869) == "103869" and fmt("index", [3, 104000]) == "3, 104000"
    assert fmt("ns", None) == "n/a" and fmt("count", True) == "yes" and fmt("ns", []) == "none"


def test_as_json_and_the_api() -> None:
    got = api.catalogue.metrics()
    assert set(got) == {"units", "metrics", "evidence_units", "evidence_labels", "value_labels"}
    assert got["units"] == UNITS and json.loads(json.dumps(got)) == got
    assert got["metrics"][0] == {"key": METRICS[0].key, "unit": METRICS[0].unit, "better": METRICS[0].better,
                                 "tolerance": METRICS[0].tolerance, "label": METRICS[0].label,
                                 "definition": METRICS[0].definition}
    assert len(got["metrics"]) == len(METRICS)
    assert got["evidence_units"]["host_transfer"]["stall_ns"] == "ns"
    assert got["evidence_units"]["recompilation"]["steps"] == "index"
    # evidence reads by its metric's label, never by its key (#25)
    assert got["evidence_labels"]["host_bound"]["launches_per_step"] == "kernel launches per step"
    assert got["value_labels"]["more_tokens"] == "more tokens per step"  # a named value in words (#36)
    assert all("_" not in label for labels in got["evidence_labels"].values() for label in labels.values())


# ---------------------------------------------------------------------------------------------- rules


def rule_paths(rule: Rule) -> list[str]:
    return [p for p in (rule.metric, rule.saving, *(p for _, p in rule.evidence)) if isinstance(p, str)]


def unknown_keys(rules: tuple[Rule, ...]) -> list[tuple[str, str]]:
    """(rule id, path) for every dotted path a rule names that is not exactly one registry key."""
    return [(r.id, p) for r in rules for p in rule_paths(r) if metric(p) is None]


def test_every_rule_names_registry_keys() -> None:
    assert unknown_keys(RULES) == []
    for r in RULES:
        if isinstance(r.saving, str):
            assert metric(r.saving).unit == "share", r.id  # type: ignore[union-attr]
        if r.metric is not None:
            assert metric(r.metric).unit not in ("text", "flag", "as_metric"), r.id  # type: ignore[union-attr]


def test_the_metrics_layer_registry_reads_every_rule_path_as_the_whole_registry_does() -> None:
    """The findings layer reads rule paths in the metrics layer's registry (``metrics/registry.py``), which lacks the
    keys computed above it: every run rule's path names the same entry there, and a job rule's (relative to the job's
    metrics) names none in either (``job.*`` keys are the job level's, read by the renderers in the whole one)."""
    from tb_llmdiag.findings.job import JOB_RULES
    from tb_llmdiag.metrics import registry as metrics_registry

    paths = {p for r in RULES for p in rule_paths(r)}
    paths |= {r.locate.at for r in RULES if r.locate is not None and r.locate.how in ("chain", "op")}
    assert {p: metrics_registry.metric(p) for p in paths} == {p: metric(p) for p in paths}
    assert all(metrics_registry.metric(p) is not None for p in paths)
    job_paths = {p for r in JOB_RULES for _, p in r.evidence if isinstance(p, str)} | {r.metric for r in JOB_RULES if r.metric}
    assert job_paths and {p: metrics_registry.metric(p) for p in job_paths} == {p: metric(p) for p in job_paths}
    assert {m.key for m in METRICS} > {m.key for m in metrics_registry.METRICS}


def test_a_rule_naming_an_unknown_key_fails() -> None:
    fix = Fix("t", "p", "h")
    bad = (Rule(id="x", title="x", metric="steps.no_such_ns", above=1, fix=fix),
           Rule(id="y", title="y", metric="steps.cv", above=1, saving="idle.nope_share", fix=fix,
                evidence=(("a", "memory.peak_used_bytes"), ("b", "xla.missing"))))
    assert unknown_keys(bad) == [("x", "steps.no_such_ns"), ("y", "idle.nope_share"), ("y", "xla.missing")]


def test_evidence_units_agree_across_platforms() -> None:
    """Both platforms' rules of one id give a shared evidence label one unit (the tab looks units up by id)."""
    from tb_llmdiag.findings.engine import evidence_unit

    for r in RULES:
        for label, path in r.evidence:
            assert EVIDENCE_UNITS[r.id][label] == evidence_unit(label, path), (r.id, label)
    # evidence functions return names (their unit is text) unless their label names a unit
    assert EVIDENCE_UNITS["recompilation"]["recompiled"] == "text"
    assert evidence_unit("x_share", lambda m: 0.5) == "share" and evidence_unit("x_ns", "steps.cv") == "ratio"


# ---------------------------------------------------------------------------------------------- docs


def test_docs_metrics_md_is_generated_from_the_registry() -> None:
    assert (REPO / "docs" / "metrics.md").read_text() == registry.markdown(), (
        "regenerate: python -m tb_llmdiag.registry --markdown > docs/metrics.md")


def test_markdown_lists_every_entry_once() -> None:
    text = registry.markdown()
    for m in METRICS:
        assert text.count(f"| `{m.key}` | {m.unit} |") == 1, m.key
