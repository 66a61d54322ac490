"""Answers within a size bound: compact JSON, and what does not fit left out, saying so.

An agent reads every byte of an answer into its context, so each tool answer has a budget (``DEFAULT_BUDGET_BYTES``,
``DETAIL_BUDGET_BYTES`` with ``detail``). ``fit`` keeps an answer whole when it fits; else it shortens very long
names (kernel names of several hundred characters) and then drops items from the end of the longest lists (every
list here is ranked, most important first) until it fits, and records what it left out under ``truncated``.

A tool error is one line within the same bound (``error_line``): the messages quote arguments and list runs cut
already (``errors.quoted``, ``errors.listed``); this is the last guard, and the words for arguments that fail the
tool's schema (the SDK's are several lines quoting the value whole).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tb_llmdiag.errors import cut
from tb_llmdiag.jsonsafe import jsonable

DEFAULT_BUDGET_BYTES = 8_000
DETAIL_BUDGET_BYTES = 60_000
#: names longer than this are cut first when an answer is over its budget (C++ kernel names run to 1000 characters)
LONG_STRING = 240
CUT_KEYS = ("name",)
_NOTE_BYTES = 400  # room kept for the ``truncated`` note itself
#: characters of a tool error: at most 4 bytes each in UTF-8, so the line stays within DEFAULT_BUDGET_BYTES
ERROR_CHARS = 1_900


def dumps(doc: Any) -> str:
    """Compact, strict JSON (no NaN: ``jsonable`` turns it to null), UTF-8 text as sent."""
    return json.dumps(jsonable(doc), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def size(doc: Any) -> int:
    return len(dumps(doc).encode("utf-8"))


def _lists(doc: Any, path: str = "") -> list[tuple[str, list[Any]]]:
    """Every list in ``doc`` with two or more items, with its dotted path."""
    out: list[tuple[str, list[Any]]] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _lists(v, f"{path}.{k}" if path else str(k))
    elif isinstance(doc, list):
        if len(doc) >= 2:
            out.append((path, doc))
        for item in doc:
            out += _lists(item, path + "[]")
    return out


def _cut_strings(doc: Any, limit: int) -> tuple[Any, int]:
    """``name`` values (kernel and operator names) longer than ``limit`` cut to it; sentences are never cut."""
    if isinstance(doc, dict):
        n = 0
        for k, v in doc.items():
            if k in CUT_KEYS and isinstance(v, str) and len(v) > limit:
                doc[k], c = v[: limit - 1] + "…", 1
            else:
                doc[k], c = _cut_strings(v, limit)
            n += c
        return doc, n
    if isinstance(doc, list):
        n = 0
        for i, v in enumerate(doc):
            doc[i], c = _cut_strings(v, limit)
            n += c
        return doc, n
    return doc, 0


def fit(answer: dict[str, Any], budget: int, hint: str) -> dict[str, Any]:
    """``answer`` itself when its JSON fits ``budget`` bytes; else a copy cut to fit (module docstring), with
    ``truncated: {"budget_bytes", "omitted": {list path: items left out}, "strings_cut", "hint"}``."""
    if size(answer) <= budget:
        return answer
    doc = copy.deepcopy(jsonable(answer))
    doc, cut = _cut_strings(doc, LONG_STRING)
    omitted: dict[str, int] = {}
    room = max(budget - _NOTE_BYTES, 0)
    while size(doc) > room:
        lists = _lists(doc)
        if not lists:
            break
        path, longest = max(lists, key=lambda pl: size(pl[1]))
        n = max(1, (len(longest) - 1) // 10)  # long lists shrink by a tenth at a time, short ones by an item
        del longest[-n:]
        omitted[path] = omitted.get(path, 0) + n
    doc["truncated"] = {"budget_bytes": budget, "omitted": omitted, "strings_cut": cut, "hint": hint}
    return dict(doc)


def _problem(p: Mapping[str, Any]) -> str:
    where = ".".join(str(x) for x in p.get("loc") or ()) or "arguments"
    if p.get("type") == "missing":
        return f"argument {where}: {p.get('msg')}"
    return f"argument {where}: {p.get('msg')} (got {cut(repr(p.get('input')), 60)})"


def error_line(tool: str, text: str, problems: Sequence[Mapping[str, Any]] | None = None) -> str:
    """A tool error as the agent gets it: one line of at most ERROR_CHARS characters. ``problems``: the validation
    errors of arguments that failed the tool's schema (pydantic's ``errors()``), each said in a few words."""
    if problems is not None:
        text = f"Error executing tool {cut(tool)}: " + "; ".join(_problem(p) for p in problems[:10])
    return cut(text, ERROR_CHARS)
