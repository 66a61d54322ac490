"""#36: the documentation a clone holds reads on its own: it points to no file outside the repository (the tests'
data folder ../shared/traces, documented in README, aside) and names no tool a reader of the project lacks."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "demo_logs" / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_docs_point_to_nothing_outside_the_clone() -> None:
    outside = {
        p.relative_to(REPO).as_posix(): hits
        for p in DOCS
        if (hits := [m for m in re.findall(r"\.\./shared/[\w./-]*", p.read_text()) if not m.startswith("../shared/traces")])
    }
    assert outside == {}


def test_design_names_only_files_the_clone_has() -> None:
    text = (REPO / "docs" / "DESIGN.md").read_text()
    named = set(re.findall(r"`((?:docs|tb_llmdiag|frontend|scripts|tests|bench|examples)/[\w./-]+\.(?:md|py|js|sh))`", text))
    assert named and sorted(n for n in named if not (REPO / n).exists()) == []
    assert "farm-studio" not in text
