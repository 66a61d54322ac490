"""The package's shape (issues #10, #22): no import cycle, function-level imports included; every package in a
layer of the import-linter contracts (``.importlinter``, run by ``scripts/lint.sh``: dependencies point one way,
the CLI and the tab use the front door); no function over ~80 lines, its inner functions counted, in ``tb_llmdiag/``
and ``frontend/``; no private name imported across modules.

The import graph is read from the source with ``ast`` (not by importing), so an import inside a function
counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
import configparser
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "tb_llmdiag"
#: the longest a function may be: its ``def`` / ``function`` line to its last line, the functions nested in it
#: included (#32: a component's closure with its inner functions and methods is one long function to read; each
#: inner function is also held to the limit on its own)
MAX_FUNCTION_LINES = 80
#: functions still over the limit, with their length today; the list may only shrink, and a listed function that
#: grows or is split fails until updated. agent/server.py's build() is 89 lines with its tool functions (#32:
#: counted with inner functions since; not split here)
SPLIT_LATER: dict[str, int] = {}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}
#: compiled extensions (ingest/kineto/_scan.c): modules too, importing nothing of ours
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
            targets = [
                f"{src}.{a.name}" if f"{src}.{a.name}" in MODULES or f"{src}.{a.name}" in EXTENSIONS else src
                for a in node.names
            ]
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
    src = (
        "def f():\n    from tb_llmdiag import api\n    from . import steps\n"
        "    import numpy\n    from tb_llmdiag.findings import RULES\n"
    )
    # THEN each of ours is an edge: the module, the sibling submodule, the package that holds the attribute
    assert _imports_in("tb_llmdiag.metrics.fake", src, is_pkg=False) == {
        "tb_llmdiag.api",
        "tb_llmdiag.metrics.steps",
        "tb_llmdiag.findings",
    }
    # a compiled submodule is a module of its own, not an attribute of its package
    assert _imports_in("tb_llmdiag.ingest.kineto.scan_ext", "from tb_llmdiag.ingest.kineto import _scan\n", is_pkg=False) == {
        "tb_llmdiag.ingest.kineto._scan"
    }


def test_no_import_cycle_in_the_package() -> None:
    assert _cycles(GRAPH) == []


def _package(mod: str) -> str:
    """The package a module belongs to: ``tb_llmdiag.<first part>`` (a top-level module is its own)."""
    return ".".join(mod.split(".")[:2])


def test_no_import_cycle_between_packages() -> None:
    # issue #22: api re-exports compare, so compare may not import api (the CLI loads the sides through api)
    packages: dict[str, set[str]] = {}
    for mod, deps in GRAPH.items():
        packages.setdefault(_package(mod), set()).update(_package(d) for d in deps if _package(d) != _package(mod))
    assert _cycles(packages) == []


def test_the_graph_sees_an_agent_import_from_below() -> None:
    # GIVEN a metric module that imports the agent, THEN the graph has the edge .importlinter's layers refuse
    src = "from tb_llmdiag.agent import answers\n"
    assert _imports_in("tb_llmdiag.metrics.fake", src, is_pkg=False) == {"tb_llmdiag.agent.answers"}


def python_functions(source: str, rel: str) -> dict[str, int]:
    """``rel:name`` -> lines, nested functions included, of every function in one module's source (nested ones also
    on their own: ``outer.inner``; methods as ``Class.method``)."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out[f"{rel}:{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return out


def _python_functions() -> dict[str, int]:
    """``python_functions`` of every module of the package."""
    out: dict[str, int] = {}
    for path in MODULES.values():
        out.update(python_functions(path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix()))
    return out


#: what may precede a ``/`` that starts a regular expression literal (not a division)
_JS_REGEX_BEFORE = re.compile(r"(?:[=(,:;!&|?{}\[]|\breturn)\s*$|^\s*$")
#: words before ``(...) {`` that open a block, not a function body (anything else is a function or a method)
_JS_BLOCKS = {"if", "for", "while", "switch", "catch", "with"}


def _js_code(text: str) -> str:
    """``text`` with strings, template literals, comments and regular expressions blanked (newlines kept), so
    that only the code's own brackets are left."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i) or text.startswith("/*", i):
            end = text.find("\n" if c + text[i + 1] == "//" else "*/", i + 2)
            end = n if end < 0 else end + (0 if text[i + 1] == "/" else 2)
        elif c in "'\"":
            end = i + 1
            while end < n and text[end] not in (c, "\n"):
                end += 2 if text[end] == "\\" else 1
            end += 1
        elif c == "`":  # a template literal, ${...} expressions (and templates nested in them) included
            end, depth = i + 1, 0
            while end < n and (depth or text[end] != "`"):
                if text[end] == "\\":
                    end += 1
                elif text.startswith("${", end):
                    depth, end = depth + 1, end + 1
                elif depth and text[end] == "}":
                    depth -= 1
                end += 1
            end += 1
        elif c == "/" and _JS_REGEX_BEFORE.search("".join(out[max(0, i - 40) : i])):
            end, in_class = i + 1, False
            while end < n and text[end] != "\n" and (in_class or text[end] != "/"):
                in_class = (in_class or text[end] == "[") and text[end] != "]"
                end += 2 if text[end] == "\\" else 1
            end += 1
        else:
            i += 1
            continue
        blank(i, end)
        i = end
    return "".join(out)


def _js_is_body(code: str, brace: int) -> bool:
    """Whether the ``{`` at ``brace`` opens a function body: after ``=>``, or after ``(...)`` whose opening
    parenthesis follows ``function [name]`` or a method's name (not ``if``, ``for``... ``(...)``)."""
    before = code[:brace].rstrip()
    if before.endswith("=>"):
        return True
    if not before.endswith(")"):
        return False
    depth, k = 0, len(before) - 1
    while k >= 0:
        depth += {")": 1, "(": -1}.get(before[k], 0)
        if depth == 0:
            break
        k -= 1
    head = before[:k].rstrip()
    if re.search(r"\bfunction\b[\s*]*[\w$]*$", head):
        return True
    word = re.search(r"[\w$]+$", head)
    return word is not None and word.group() not in _JS_BLOCKS


def js_functions(text: str) -> list[tuple[str, int, int]]:
    """``(header, first line, lines)`` of every function body in a script (``_js_is_body``), its ``{`` matched to
    its ``}`` outside strings, template literals, comments and regular expressions."""
    code = _js_code(text)
    out: list[tuple[str, int, int]] = []
    stack: list[tuple[bool, int]] = []
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            stack.append((_js_is_body(code, i), line))
        elif c == "}" and stack:
            is_fn, start = stack.pop()
            if is_fn:
                out.append((text.splitlines()[start - 1].strip()[:80], start, line - start + 1))
    return out


def test_the_js_function_finder_measures_bodies_outside_strings_and_comments() -> None:
    # GIVEN a script with a nested function, an arrow, braces in strings, a template, a comment and a regex
    src = (
        "export function outer(a, { b } = {}) {\n"  # 1
        "  const s = '{'; const t = `${a + `{`}}`; // }\n"
        "  const re = /[}/]+/g;\n"
        "  const inner = (x) => {\n"  # 4
        "    if (x) { return { x }; }\n"
        "  };\n"  # 6
        "  /* } */ el.on('click', function () {\n"  # 7
        "  });\n"  # 8
        "}\n"  # 9
    )
    # THEN the three bodies and their lengths; the block and the object literal are not functions
    assert sorted((start, count) for _, start, count in js_functions(src)) == [(1, 9), (4, 3), (7, 2)]


def test_every_package_is_in_a_layer_of_the_import_contracts() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / ".importlinter")
    layers = cfg["importlinter:contract:layers"]["layers"]
    named = {m.strip() for row in layers.split() for m in row.split("|") if m.strip()}
    tops = {".".join(m.split(".")[:2]) for m in MODULES if m != "tb_llmdiag"}
    assert tops - named == set()
    assert "lint-imports" in (REPO / "scripts" / "lint.sh").read_text(encoding="utf-8")


def test_no_function_over_80_lines() -> None:
    found = {k: v for k, v in _python_functions().items() if v > MAX_FUNCTION_LINES}
    for path in sorted((REPO / "frontend").rglob("*.js")):
        if "vendor" in path.parts:
            continue
        found.update({
            f"{path.relative_to(REPO).as_posix()}:{start}: {header}": count
            for header, start, count in js_functions(path.read_text(encoding="utf-8"))
            if count > MAX_FUNCTION_LINES
        })
    assert found == SPLIT_LATER


def test_the_length_check_counts_inner_functions() -> None:
    # GIVEN a closure of 60 lines holding two inner functions of 20 lines each (no one of them over 80 on its own)
    inner = "".join(f"  function f{k}() {{\n" + "    x();\n" * 18 + "  }\n" for k in range(2))
    src = "export function outer() {\n" + inner + "  y();\n" * 18 + "}\n"
    spans = {start: count for _, start, count in js_functions(src)}
    # THEN the closure measures its whole body, inner functions included: 60 lines
    assert spans == {1: 60, 2: 20, 22: 20}
    py = "class C:\n  def outer(self):\n" + "".join(f"    def f{k}():\n" + "        x()\n" * 19 for k in range(2)) + "    y()\n" * 19
    assert python_functions(py, "m.py") == {"m.py:C.outer": 60, "m.py:C.outer.f0": 20, "m.py:C.outer.f1": 20}


def _private_imports(mod: str, source: str) -> list[tuple[str, str, list[str]]]:
    """``(module, source module, private names)`` of every import in ``source`` (the text of module ``mod``) that takes
    a private name (or a private module) from another module of ours; a compiled extension (``_scan``) is a module
    of its own, imported by name."""
    crossing = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or node.level or not (node.module or "").startswith("tb_llmdiag"):
            continue
        src = node.module or ""
        names = [
            a.name
            for a in node.names
            if a.name.startswith("_") and not a.name.startswith("__") and f"{src}.{a.name}" not in EXTENSIONS
        ]
        if src.rpartition(".")[2].startswith("_") and src not in EXTENSIONS:
            names.append(src)
        if names and src != mod:
            crossing.append((mod, src, names))
    return crossing


def test_the_private_import_check_sees_a_sibling_module_s_private_name() -> None:
    # GIVEN a module of a package importing a sibling's private name, and another importing the package's extension
    src = "from tb_llmdiag.ingest.kineto.layout import _ROWS, PUBLIC\nfrom tb_llmdiag.ingest.kineto import _scan\n"
    # THEN the private name crosses a module (the same package or not); the compiled extension does not
    assert _private_imports("tb_llmdiag.ingest.kineto.columns", src) == [
        ("tb_llmdiag.ingest.kineto.columns", "tb_llmdiag.ingest.kineto.layout", ["_ROWS"])
    ]


def test_no_private_name_imported_across_modules() -> None:
    # a leading underscore is a module's own business (#32; before, a package's): another module, even one of the same
    # package, reaches it through a public name
    crossing = [c for mod, path in MODULES.items() for c in _private_imports(mod, path.read_text(encoding="utf-8"))]
    assert crossing == []


#: the most names the front door may export (#32: a curated surface; a new name merges with one of its concept or
#: replaces one)
MAX_FRONT_DOOR_NAMES = 15


def _exported(source: str) -> list[str]:
    """The names of a module's ``__all__`` (a literal list or tuple), from its source."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def test_the_front_door_exports_at_most_15_names_each_one_it_holds() -> None:
    from tb_llmdiag import api

    names = _exported((PKG / "api.py").read_text(encoding="utf-8"))
    assert names == list(api.__all__) and len(set(names)) == len(names)
    assert len(names) <= MAX_FRONT_DOOR_NAMES, f"api exports {len(names)} names: merge some (#32)"
    assert [n for n in names if not hasattr(api, n)] == []


def only_reexports(source: str) -> bool:
    """Whether a module's body, past its docstring, is imports and ``__all__`` only, at least one of them importing
    from the package: a module that exists only to hand on names defined elsewhere."""
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    ours = any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith("tb_llmdiag") for n in body)
    rest = [
        n
        for n in body
        if not isinstance(n, (ast.Import, ast.ImportFrom))
        and not (isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"])
    ]
    return ours and not rest


def test_the_reexport_check_sees_a_module_that_only_hands_names_on() -> None:
    # GIVEN a module of imports and __all__, one that defines a function too, and a package marker
    hands_on = '"""Doc."""\nfrom __future__ import annotations\nfrom tb_llmdiag.x import a, b\n__all__ = ["a", "b"]\n'
    defines = hands_on + "def c() -> int:\n    return 1\n"
    # THEN only the first only re-exports
    assert (only_reexports(hands_on), only_reexports(defines), only_reexports('"""A package."""\n')) == (
        True,
        False,
        False,
    )


#: packages whose ``__init__`` presents its modules' names, and why (each one a reason outside the package)
PRESENTED = {
    "tb_llmdiag.tab": "TensorBoard loads the plugin by the entry point tb_llmdiag.tab:LlmDiagPlugin (setup.py)",
}


def test_no_module_exists_only_to_be_reexported() -> None:
    # #32: each module holds code of its own; a name lives where it is defined and is imported from there (the
    # front door, api, composes: it defines the pipeline, not only hands names on)
    found = {m for m, p in MODULES.items() if only_reexports(p.read_text(encoding="utf-8"))}
    assert found == set(PRESENTED)
