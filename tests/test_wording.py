"""#36: no internal key, unfilled placeholder or negative cost reaches a user, on any surface.

Every rule (``llmdiag rules``, text and JSON), every finding of every fixture (tests/data/*, demo_logs) and every
job go through the four surfaces: the terminal text, the Markdown report, the agent's answers (``diagnose`` of
every run and job, ``explain_finding`` of every finding of the demo logdir) and the data the tab renders (each
finding's text fields, and its evidence as label + value the way frontend/registry.js reads them from
``./metric_registry``: ``evidence_labels``, job labels, ``value_labels``). A user reads none of:

- a ``str.format`` placeholder (``{where}``): a template the engine did not fill;
- an internal key: a key of the report at any depth, a segment of a registry key, or a named value the report holds
  (``more_tokens``, ``all_reduce``, ``profiler_step``), written with underscores; rule ids are the findings' public
  names (``llmdiag rules`` lists them) and code the user types (``non_blocking=True``, ``torch.cuda.empty_cache()``)
  is exempt;
- a negative duration (a cost of "-1.77 ms").

The vocabulary is read from the reports and the registry at test time, so a new key is covered without a change here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tb_llmdiag import api
from tb_llmdiag.agent import answers
from tb_llmdiag.agent.workspace import Workspace
from tb_llmdiag.cli import main as cli_main
from tb_llmdiag.render.markdown import render_report_md
from tb_llmdiag.render.text import render_report

REPO = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p.name for p in (REPO / "tests/data").iterdir() if p.is_dir())
PLACEHOLDER = re.compile(r"\{[A-Za-z_][\w.]*(?:![rsa])?(?::[^{}]*)?\}")
SNAKE = re.compile(r"(?<![\w.:/#-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w(=/-]|\.\w|::)")
NEGATIVE_TIME = re.compile(r"(?<![\w.])[-−]\d[\d.,]*\s?(?:ns|µs|ms|s)\b")
#: fields whose string values are names from the trace or the user (runs, ops, kernels, frames), not ours
NAME_FIELDS = {"run", "worker", "span", "root", "path", "name", "chain", "chain_text", "top_chain", "top_name",
               "allocator_chain", "unrecorded_chain", "sync_chain", "holder", "culprit", "module", "modules",
               "recompile_modules", "where", "source", "file", "top_kernel", "activity", "longest_call",
               "trigger_op", "after_op", "host_wait_culprit", "host_wait_per_shape_op", "top_source"}


def _walk(doc: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield str(k), None
            yield from _walk(v, str(k))
    elif isinstance(doc, list):
        for v in doc:
            yield from _walk(v, key)
    else:
        yield key, doc


def vocabulary(*docs: Any) -> set[str]:
    """The internal words: report keys, registry key segments, and the named values the reports hold."""
    reg = api.catalogue.metrics()
    words = {seg for m in reg["metrics"] for seg in re.split(r"[.\[\]*]+", m["key"]) if "_" in seg}
    words |= {k for k in reg["value_labels"] if "_" in k}
    for doc in docs:
        for key, value in _walk(doc):
            if value is None and "_" in key:
                words.add(key)
            elif isinstance(value, str) and key not in NAME_FIELDS and re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)+", value):
                words.add(value)
    return words - {r["id"] for r in api.catalogue.rules()}


def leaks(text: str, words: set[str]) -> list[str]:
    """What a user should not read in ``text``: placeholders, internal words, negative durations."""
    found = PLACEHOLDER.findall(text) + NEGATIVE_TIME.findall(text)
    return found + [w for w in SNAKE.findall(text.replace("\\_", "_")) if w in words]


def tab_text(report: dict[str, Any], reg: dict[str, Any]) -> str:
    """The words the tab shows for a report's findings: each text field, and each evidence row as registry label and
    value (a named value by ``value_labels``), as frontend/views/findings.js and the job view draw them."""
    values = reg["value_labels"]
    labels = {m["key"]: m["label"] for m in reg["metrics"]}
    out = []
    for run in report["runs"]:
        for f in run.get("findings") or []:
            out += [f["title"], f["summary"], f.get("caveat") or "", (f.get("fix") or {}).get("text") or ""]
            names = reg["evidence_labels"].get(f["id"], {})
            out += [f"{names.get(k, k)}: {values.get(v, v) if isinstance(v, str) else v}"
                    for k, v in (f.get("evidence") or {}).items()]
        out.append((run.get("what_if") or {}).get("statement") or "")
    for job in report.get("jobs") or []:
        out += job.get("notes") or []
        for f in job.get("findings") or []:
            out += [f["title"], f["summary"], f.get("fix") or ""]
            for k, v in (f.get("evidence") or {}).items():
                items = [(f"job.{k}.{sub}", x) for sub, x in v.items()] if isinstance(v, dict) else [(f"job.{k}", v)]
                if isinstance(v, list):  # a table: one row per item, a column per key
                    items = [(f"job.{k}[].{sub}", x) for row in v if isinstance(row, dict) for sub, x in row.items()]
                for key, x in items:
                    shown = values.get(x, x) if isinstance(x, str) else x
                    out.append(f"{labels.get(key, key)}: {json.dumps(shown, ensure_ascii=False)}")
    return "\n".join(out)


#: the fields of an agent answer that hold prose (its other strings are the documented schema's named values, and
#: the fix's code snippets are code)
PROSE = {"title", "summary", "caveat", "text", "statement", "notes", "warnings", "capture_problems", "next", "error"}


def agent_text(doc: Any, key: str = "") -> str:
    """The prose of an agent answer, and its evidence values, a named value by the registry's ``value_labels`` (the
    agent reads them at ``llmdiag://registry``; an answer's keys are the report's documented keys: an API)."""
    if isinstance(doc, dict):
        return "\n".join(agent_text(v, "evidence" if key == "evidence" else str(k)) for k, v in doc.items())
    if isinstance(doc, list):
        return "\n".join(agent_text(v, key) for v in doc)
    if key == "evidence" and isinstance(doc, str):
        return str(api.catalogue.metrics()["value_labels"].get(doc, doc))
    return doc if isinstance(doc, str) and key in PROSE else ""


@pytest.fixture(scope="module")
def reports() -> dict[str, dict[str, Any]]:
    return {name: api.report(str(REPO / "tests/data" / name)) for name in FIXTURES} | {
        "demo_logs": api.report(str(REPO / "demo_logs"))
    }


@pytest.fixture(scope="module")
def words(reports: dict[str, dict[str, Any]]) -> set[str]:
    return vocabulary(*reports.values())


@pytest.mark.parametrize("surface", ["text", "markdown", "tab"])
def test_no_internal_words_in_any_report(surface: str, reports: dict[str, Any], words: set[str]) -> None:
    reg = api.catalogue.metrics()
    render = {"text": render_report, "markdown": render_report_md, "tab": lambda r: tab_text(r, reg)}[surface]
    found = {name: leaks(render(rep), words) for name, rep in reports.items()}
    assert {k: v for k, v in found.items() if v} == {}


def test_no_internal_words_in_agent_answers(reports: dict[str, Any], words: set[str]) -> None:
    found = {}
    for root in ["demo_logs", *(f"tests/data/{n}" for n in FIXTURES)]:
        ws = Workspace(str(REPO / root))
        listed = answers.list_runs(ws)
        for entry in listed["runs"] + listed["jobs"]:
            got = leaks(agent_text(answers.diagnose(ws, entry["name"])), words)
            if got:
                found[f"{root}:{entry['name']}"] = got
    ws = Workspace(str(REPO / "demo_logs"))
    for run in answers.list_runs(ws)["runs"]:
        for fid in run["finding_ids"]:
            got = leaks(agent_text(answers.explain_finding(ws, run["name"], fid)), words)
            if got:
                found[f"{run['name']}:{fid}"] = got
    assert found == {}


def test_every_rule_reads_without_placeholder_or_key(words: set[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["rules"]) == 0
    text = capsys.readouterr().out
    prose = "\n".join(r["title"] + "\n" + r["fix"] for r in api.catalogue.rules())
    assert leaks(text, words) == [] and leaks(prose, words) == []


def test_the_check_sees_each_kind_of_leak() -> None:
    """Not vacuous: the issue's own examples fail it."""
    words = {"straggler_cause", "more_tokens", "compute_ns"}
    assert leaks("fix: Find out what {host_op} does", words) == ["{host_op}"]
    assert leaks("- straggler\\_cause: more\\_tokens; quantity compute\\_ns", words) == [
        "straggler_cause", "more_tokens", "compute_ns"]
    assert leaks("profiler's extra cost on the straggler -1.77 ms", words) == ["-1.77 ms"]
    # code the user types and the trace's own names are not ours
    assert leaks("non_blocking=True; torch.cuda.empty_cache(); in aten::_cudnn_attention_backward", words) == []
