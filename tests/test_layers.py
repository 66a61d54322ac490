"""The package's shape (issue #10): no import cycle, function-level imports included; no module over ~400
lines; dependencies point one way (nothing below the front door imports the CLI or the tab).

The import graph is read from the source with ``ast`` (not by importing), so an import inside a function
counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "tb_llmdiag"
MAX_LINES = 400


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}
#: compiled extensions (ingest/_scan.c): modules too, importing nothing of ours
EXTENSIONS = {_module_name(p.with_suffix(".py")) for p in PKG.rglob("*.c")}


def _resolve(name: str) -> str | None:
    """The module of ours that ``name`` refers to: itself, or its longest known prefix (an attribute)."""
    while name:
        if name in MODULES or name in EXTENSIONS:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(mod: str) -> set[str]:
    """Every module of ours that ``mod`` imports, anywhere in its body."""
    path = MODULES[mod]
    return _imports_in(mod, path.read_text(encoding="utf-8"), is_pkg=path.name == "__init__.py")


def _imports_in(mod: str, source: str, *, is_pkg: bool) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            # `from pkg import sub` imports the submodule when there is one, else an attribute of pkg
            targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in MODULES or f"{src}.{a.name}" in EXTENSIONS else src
                       for a in node.names]
        else:
            continue
        for t in targets:
            r = _resolve(t)
            if r is not None and r != mod:
                out.add(r)
    return out


GRAPH = {**{m: _imports(m) for m in MODULES}, **{m: set() for m in EXTENSIONS}}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    # GIVEN a -> b -> c -> a and d -> a, THEN one cycle {a, b, c}
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(g) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_function_level_and_relative_imports() -> None:
    # GIVEN a module that imports only inside a function, relatively, and an attribute of a package
    src = ("def f():\n    from tb_llmdiag import api\n    from . import steps\n"
           "    import numpy\n    from tb_llmdiag.findings import RULES\n")
    # THEN each of ours is an edge: the module, the sibling submodule, the package that holds the attribute
    assert _imports_in("tb_llmdiag.metrics.fake", src, is_pkg=False) == {
        "tb_llmdiag.api", "tb_llmdiag.metrics.steps", "tb_llmdiag.findings"}
    # a compiled submodule is a module of its own, not an attribute of its package
    assert _imports_in("tb_llmdiag.ingest.scan_ext", "from tb_llmdiag.ingest import _scan\n", is_pkg=False) == {
        "tb_llmdiag.ingest._scan"}


def test_no_import_cycle_in_the_package() -> None:
    assert _cycles(GRAPH) == []


def _package(mod: str) -> str:
    """The package a module belongs to: ``tb_llmdiag.<first part>`` (a top-level module is its own)."""
    return ".".join(mod.split(".")[:2])


def test_no_import_cycle_between_packages() -> None:
    # issue #22: api re-exports compare, so compare may not import api (the CLI passes the analyzer in)
    packages: dict[str, set[str]] = {}
    for mod, deps in GRAPH.items():
        packages.setdefault(_package(mod), set()).update(_package(d) for d in deps if _package(d) != _package(mod))
    assert _cycles(packages) == []


def test_no_module_over_400_lines() -> None:
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_dependencies_point_one_way() -> None:
    # nothing imports the CLI or the tab; below the front door nothing knows the tab, the CLI or werkzeug
    for mod, deps in GRAPH.items():
        if not (mod.startswith("tb_llmdiag.tab") or mod in ("tb_llmdiag.cli", "tb_llmdiag.__main__")):
            assert not any(d.startswith("tb_llmdiag.tab") or d == "tb_llmdiag.cli" for d in deps), (mod, deps)
    # the agent sits beside the CLI and the tab: only the CLI's `mcp` subcommand imports it
    for mod, deps in GRAPH.items():
        if not mod.startswith("tb_llmdiag.agent") and mod != "tb_llmdiag.cli":
            assert not any(d.startswith("tb_llmdiag.agent") for d in deps), (mod, deps)
    # the tab and the agent use the library through its front door (api) and the renderers only
    allowed = ("tb_llmdiag.api", "tb_llmdiag.render", "tb_llmdiag.jsonsafe", "tb_llmdiag.errors")
    for layer, extra in (("tb_llmdiag.tab", ()), ("tb_llmdiag.agent", ("tb_llmdiag.extras",))):
        for mod, deps in GRAPH.items():
            if mod.startswith(layer):
                ok = (*allowed, layer, *extra)
                assert all(d.startswith(ok) or d == "tb_llmdiag" for d in deps), (mod, sorted(deps))


def test_the_layer_rules_catch_an_agent_import_from_below() -> None:
    # GIVEN a metric module that imports the agent, THEN the graph has the edge the rule above refuses
    src = "from tb_llmdiag.agent import answers\n"
    assert _imports_in("tb_llmdiag.metrics.fake", src, is_pkg=False) == {"tb_llmdiag.agent.answers"}
