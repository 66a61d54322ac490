"""The README stays true: every finding is in its catalogue, and CI runs its test command."""

from __future__ import annotations

import re

from tb_llmdiag.findings import RULES
from tracepaths import REPO

README = (REPO / "README.md").read_text()


def test_catalogue_lists_every_rule() -> None:
    listed = set(re.findall(r"^\| `([a-z0-9_]+)` \|", README, flags=re.M))
    assert listed == {r.id for r in RULES}


def test_ci_runs_the_readme_test_command() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    assert len(blocks) >= 2
    test_command = blocks[1].strip()
    assert test_command == "bash scripts/test.sh"
    assert test_command in (REPO / ".ci" / "run").read_text()
    assert "tensorboard --logdir demo_logs" in blocks[0]
