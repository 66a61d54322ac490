"""The README stays true: every finding is in its catalogue, and CI runs its test command."""

from __future__ import annotations

import re
from importlib.metadata import version

from tracepaths import REPO

from tb_llmdiag.findings.table import RULES

README = (REPO / "README.md").read_text()


def test_catalogue_lists_every_rule() -> None:
    """README's 'What it finds' names every rule id once; docs/findings.md's table says what each means."""
    section = README.split("## What it finds", 1)[1].split("\n## ", 1)[0]
    bullets = re.findall(r"^- .*(?:\n  .*)*", section, flags=re.M)
    named = [i for b in bullets for i in re.findall(r"`([a-z0-9_]+)`", b)]
    assert sorted(named) == sorted({r.id for r in RULES})
    catalogue = (REPO / "docs" / "findings.md").read_text()
    assert set(re.findall(r"^\| `([a-z0-9_]+)` \| [^|]*[a-z ]{12}", catalogue, flags=re.M)) >= {r.id for r in RULES}


def test_ci_runs_the_readme_test_command() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    assert len(blocks) >= 2
    test_command = blocks[1].strip()
    assert test_command == "bash scripts/test.sh"
    assert test_command in (REPO / ".ci" / "run").read_text()
    assert "tensorboard --logdir demo_logs" in blocks[0]


def test_the_test_command_runs_the_lint_first() -> None:
    """scripts/test.sh runs scripts/lint.sh (formatter, linter, type checker on tb_llmdiag/) before pytest,
    and a fresh venv gets the very ruff and mypy versions the code was checked with."""
    test_sh = [ln.strip() for ln in (REPO / "scripts" / "test.sh").read_text().splitlines()]
    commands = [ln for ln in test_sh if ln and not ln.startswith("#")]
    lint_at = next(i for i, ln in enumerate(commands) if ln.startswith("bash scripts/lint.sh"))
    pytest_at = next(i for i, ln in enumerate(commands) if "-m pytest" in ln)
    assert lint_at < pytest_at
    lint_sh = (REPO / "scripts" / "lint.sh").read_text()
    for command in ('-m ruff format --check tb_llmdiag', '-m ruff check tb_llmdiag', '-m mypy'):
        assert command in lint_sh
    assert "files = tb_llmdiag" in (REPO / "mypy.ini").read_text()
    setup = (REPO / "setup.py").read_text()
    pins = dict(re.findall(r'"(ruff|mypy)==([0-9.]+)"', setup))
    assert set(pins) == {"ruff", "mypy"}
    assert pins == {"ruff": version("ruff"), "mypy": version("mypy")}


def test_the_installed_package_holds_every_module_and_asset() -> None:
    """README's first command is a plain `pip install .`: every package of ours and every asset the tab loads
    must be listed in setup.py (an editable install, as the tests use, would hide a missing one)."""
    import ast
    import fnmatch

    call = next(n for n in ast.walk(ast.parse((REPO / "setup.py").read_text())) if isinstance(n, ast.Call)
                and getattr(n.func, "id", "") == "setup")
    kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("packages", "package_data")}
    packages = {".".join(p.relative_to(REPO).parts[:-1]) for p in (REPO / "tb_llmdiag").rglob("__init__.py")}
    assert packages <= set(kw["packages"]), sorted(packages - set(kw["packages"]))
    globs = kw["package_data"]["tb_llmdiag.frontend"]
    front = REPO / "frontend"
    assets = [p.relative_to(front).as_posix() for p in front.rglob("*") if p.is_file()
              and p.suffix in (".js", ".css", ".html") and not p.name.endswith(".test.mjs")
              and p.relative_to(front).parts[0] != "testdata"]
    missing = [a for a in assets if not any(fnmatch.fnmatch(a, g.replace("**/", "*")) for g in globs)]
    assert missing == []
