"""A rule is one declaration (#32): everything done for a rule is a field of its ``Rule`` entry in its table, so no
module but the declaration tables keys anything by a rule id. Read from the source's syntax tree (not grep): a rule
id string as a dict key, a subscript or ``.get`` key, a comparison operand (``== "host_bound"``, ``in ("a", "b")``),
a member of a set literal, or a match case, anywhere in ``tb_llmdiag/`` outside the tables, fails.

On main before #32 this failed on findings/workload.py (TRAINING_ONLY, WHOLE_FILE, INFERENCE), findings/trust.py
(HOST_TIME_RULES, UNPROFILED_SPREAD, ``== "unrecorded_host_time"``), findings/whatif.py (HOST_FLOOR_EFFECT),
traceview/evidence.py (LOCATORS) and agent/answers.py (STEP_PART).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tb_llmdiag.findings.job import JOB_RULES
from tb_llmdiag.findings.table import RULES

PACKAGE = Path(__file__).resolve().parents[1] / "tb_llmdiag"

#: the modules that declare rules: the only ones where a rule id may be a key (docs/DESIGN.md, "A new finding rule")
DECLARATION_TABLES = frozenset(
    {
        "findings/gpu.py",
        "findings/gpu_causes.py",
        "findings/parts.py",
        "findings/attribution_rules.py",
        "findings/comm.py",
        "findings/xla.py",
        "findings/job.py",
        "findings/structure.py",
    }
)

#: (module, string): the same word in another vocabulary, never a rule's id there; each says which
OTHER_MEANINGS = {
    ("metrics/topics.py", "host_sync"): "the host_sync metric topic (metrics/host/sync.py), which sync_storm needs",
    ("metrics/host/launch.py", "tiny_kernels"): "a key of the launch topic's per-step counts",
    ("jobs/straggler.py", "host_sync"): "a straggler cause (job.straggler_cause), compared across ranks",
}

RULE_IDS = frozenset(r.id for r in RULES + JOB_RULES)


def _strings(node: ast.AST) -> Iterator[str]:
    """The string constants a key or operand holds: itself, or the members of a tuple, list or set literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for elt in node.elts:
            yield from _strings(elt)


def _keys(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(line, how, string) for every string the module uses as a key, a compared value or a match case."""
    for node in ast.walk(tree):
        found: list[tuple[str, ast.AST]] = []
        if isinstance(node, ast.Dict):
            found += [("dict key", k) for k in node.keys if k is not None]
        elif isinstance(node, ast.Subscript):
            found.append(("subscript", node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr in ("get", "pop", "setdefault", "index", "count"):
                found.append((f".{node.func.attr}() key", node.args[0]))
        elif isinstance(node, ast.Compare):
            found += [("comparison", x) for x in (node.left, *node.comparators)]
        elif isinstance(node, ast.Set):
            found.append(("set member", node))
        elif isinstance(node, ast.MatchValue):
            found.append(("match case", node.value))
        for how, sub in found:
            for s in _strings(sub):
                yield node.lineno if hasattr(node, "lineno") else 0, how, s


def rule_id_keys(root: Path, rule_ids: frozenset[str]) -> list[str]:
    """Every place outside the declaration tables where a module of ``root`` keys something by a rule id."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in DECLARATION_TABLES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, how, s in _keys(tree):
            if s in rule_ids and (rel, s) not in OTHER_MEANINGS:
                out.append(f"{rel}:{line}: rule id {s!r} as a {how}")
    return sorted(set(out))


def test_no_module_but_the_tables_keys_anything_by_a_rule_id() -> None:
    found = rule_id_keys(PACKAGE, RULE_IDS)
    assert found == [], "a rule's behaviour belongs in its Rule entry (findings/engine.py):\n" + "\n".join(found)


def test_the_scan_sees_each_kind_of_key(tmp_path: Path) -> None:
    # GIVEN a module that keys things by a rule id in every way the test forbids, and one that names it otherwise
    (tmp_path / "findings").mkdir()
    (tmp_path / "bad.py").write_text(
        "T = {'host_bound': 1}\n"
        "S = frozenset({'tiny_kernels'})\n"
        "def f(x, d):\n"
        "    a = x == 'host_sync' or x in ('gpu_gaps', 'other') or d['straggler'] or d.get('copy_heavy')\n"
        "    match x:\n"
        "        case 'fp32_math':\n"
        "            return a\n"
    )
    (tmp_path / "fine.py").write_text("TITLE = 'host_bound'\ndef g(rule):\n    return rule.step_part\n")
    (tmp_path / "findings" / "gpu.py").write_text("X = {'host_bound': 1}\n")  # a declaration table
    # THEN each use is reported once, with its line; the plain string and the table are not
    assert rule_id_keys(tmp_path, RULE_IDS) == [
        "bad.py:1: rule id 'host_bound' as a dict key",
        "bad.py:2: rule id 'tiny_kernels' as a set member",
        "bad.py:4: rule id 'copy_heavy' as a .get() key",
        "bad.py:4: rule id 'gpu_gaps' as a comparison",
        "bad.py:4: rule id 'host_sync' as a comparison",
        "bad.py:4: rule id 'straggler' as a subscript",
        "bad.py:6: rule id 'fp32_math' as a match case",
    ]


def _declared_ids(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        kw.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Rule"
        for kw in node.keywords
        if kw.arg == "id" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)
    }


def test_every_rule_is_declared_in_a_table() -> None:
    # every rule of the catalogue is a Rule(id=...) entry of a declaration table, and no other module declares one
    tables = set().union(*(_declared_ids(PACKAGE / t) for t in DECLARATION_TABLES))
    assert tables == RULE_IDS
    others = {
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).as_posix() not in DECLARATION_TABLES and _declared_ids(p)
    }
    assert others == set()


def test_the_other_meanings_are_still_there() -> None:
    # an exception that no longer matches anything is dropped, not kept as a hole for a later key
    for (rel, s), _why in OTHER_MEANINGS.items():
        tree = ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))
        assert any(k == s for _, _, k in _keys(tree)), (rel, s)
