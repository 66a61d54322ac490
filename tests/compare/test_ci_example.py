"""The CI recipe stays runnable: every `llmdiag` command in README's compare section, in docs/compare.md's CI recipe
and in the example workflow parses with the real argument parser, and the workflow gates with `check` against a
saved report."""

from __future__ import annotations

import re
import shlex

from tb_llmdiag.cli import build_parser
from tracepaths import REPO

WORKFLOW = (REPO / "examples" / "ci" / "perf-gate.yml").read_text()
README = (REPO / "README.md").read_text()
COMPARE_DOC = (REPO / "docs" / "compare.md").read_text()


def commands(text: str) -> list[list[str]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not line.startswith("llmdiag "):
            continue
        line = re.split(r"\s(?:>|\|\||#)", line)[0]
        out.append(shlex.split(line)[1:])
    return out


def test_every_llmdiag_command_parses() -> None:
    section = README.split("## Comparing runs and gating CI", 1)[1].split("\n## ", 1)[0]
    recipe = COMPARE_DOC.split("## CI recipe", 1)[1].split("\n## ", 1)[0]
    found = commands(WORKFLOW) + commands(section) + commands(recipe)
    assert len(found) >= 7
    parser = build_parser()
    for argv in found:
        args = parser.parse_args(argv)
        assert args.command in ("report", "compare", "check")


def test_workflow_gates_on_a_committed_report_and_uploads_it() -> None:
    checks = [c for c in commands(WORKFLOW) if c[0] == "check"]
    assert len(checks) == 1
    args = build_parser().parse_args(checks[0])
    assert args.baseline == "perf/baseline.json" and args.max_regression == 0.15
    assert "--active-steps 10" in WORKFLOW and "actions/upload-artifact" in WORKFLOW
    assert "llmdiag report runs/ci/candidate --json > perf/baseline.json" in COMPARE_DOC
