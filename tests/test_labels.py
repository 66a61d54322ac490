"""#25: every label a user reads in the CLI text comes from the metric registry: no key of the report (snake_case,
``_ns``-suffixed), no backtick; numbers as the tab writes them. The fix lines are exempt: they quote code
(``num_workers=2``, ``torch.compile``), which users type as written. tests/e2e/test_tab.py checks the rendered tab."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tb_llmdiag import api
from tb_llmdiag.render.text import render_report

REPO = Path(__file__).resolve().parents[1]


def report_keys(doc: Any) -> set[str]:
    """Every snake_case key of a report (dict keys at any depth)."""
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            if "_" in str(k):
                out.add(str(k))
            out |= report_keys(v)
    elif isinstance(doc, list):
        for v in doc:
            out |= report_keys(v)
    return out


def leaks(text: str, keys: set[str]) -> list[str]:
    """The words of ``text`` a user should not read: report keys, ``*_ns`` names, backticks."""
    found = [w for w in re.findall(r"[A-Za-z0-9_.:]+", text) if w in keys or re.fullmatch(r"[a-z_]+_ns", w)]
    return found + (["`"] if "`" in text else [])


def user_text(text: str) -> str:
    """The CLI text a user reads as labels and sentences: without the fix lines (code) and the rule ids."""
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("fix:")]
    return re.sub(r"\(rule [a-z_]+\)", "", "\n".join(lines))


@pytest.mark.parametrize("where", ["demo_logs", "tests/data/gpu_seed", "tests/data/ddp_straggler", "tests/data/recompile"])
def test_cli_text_shows_no_key(where: str) -> None:
    rep = api.report(str(REPO / where))
    text = user_text(render_report(rep))
    assert leaks(text, report_keys(rep)) == []


def test_the_check_sees_a_key() -> None:
    """The check is not vacuous: the old evidence line ("straggler_others_wait_step_sd_ns 2.62 ms") fails it."""
    keys = {"straggler_others_wait_step_sd_ns", "gpu_busy_share"}
    assert leaks("evidence: straggler_others_wait_step_sd_ns 2.62 ms", keys) == ["straggler_others_wait_step_sd_ns"]
    assert leaks("the cause of `host_bound`", set()) == ["`"] and leaks("job step ns job_step_ns", set()) == ["job_step_ns"]
