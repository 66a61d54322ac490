"""The anatomy section of `llmdiag report` (issue #37 item 6), text and Markdown, against the JSON's
`metrics.anatomy` of the same run: the parts over 1 % of GPU busy time largest first, then `other` with its top
operators, each with its time per step, share, TFLOP/s, efficiency and evidence; labels from the metric registry;
values formatted here by a formatter written for this test. A run without the topic (XLA) has no section."""

from __future__ import annotations

import json
import re

from test_markdown_report import FIXED, SEED, cli, render

from tb_llmdiag.registry import as_json, metric

XLA = "demo_logs/jax_gpu_xplane"


def _sig(x: float) -> str:
    a = abs(x)
    if a >= 100:
        return str(int(round(x)))
    v = round(x, 1 if a >= 10 else 2)
    return f"{v:g}"


def _ns(v: float) -> str:
    for scale, unit in ((1, "ns"), (1e3, "µs"), (1e6, "ms")):
        if abs(v) < scale * 1e3:
            return f"{int(round(v))} ns" if unit == "ns" else f"{_sig(v / scale)} {unit}"
    return f"{_sig(v / 1e9)} s"


def _share(x: float) -> str:
    return "<0.1 %" if 0 < x < 0.001 else f"{x * 100:.1f} %"


def _tflops(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{_sig(x)} TFLOP/s" if x < 1000 else f"{_sig(x / 1000)} PFLOP/s"


WORDS = as_json()["value_labels"]  # the registry's words of named values (a part, an evidence level)


def _words(name: str) -> str:
    kind, sep, rest = name.partition(":")
    return f"{WORDS.get(kind, kind)} {rest}" if sep else WORDS.get(kind, kind)


def _expected(run: str) -> tuple[dict, list[list[str]], list[str]]:
    """The section's rows from the JSON: [part, per step, share, TFLOP/s, efficiency, evidence], and the rest."""
    doc = json.loads(cli("report", run, "--json"))
    a = doc["runs"][0]["metrics"]["anatomy"]
    parts = a["parts"]
    named = sorted((p for p in parts if p != "other"), key=lambda p: -parts[p]["time_ns"])
    shown = [p for p in named if parts[p]["share"] >= 0.01] + ["other"]
    rows = []
    for p in shown:
        f = parts[p]
        ident = "-" if f["identified_by"] is None else f"{_words(f['identified_by'])} ({_share(f['identified_share'])})"
        eff = "-" if f["efficiency_share"] is None else _share(f["efficiency_share"])
        rows.append([_words(p), _ns(f["per_step_time_ns"]), _share(f["share"]), _tflops(f["achieved_tflops"]), eff, ident])
    small = [f"{_words(p)} {_share(parts[p]['share'])}" for p in named if p not in shown]
    return a, rows, small


def _labels() -> list[str]:
    keys = ("per_step_time_ns", "share", "achieved_tflops", "efficiency_share", "identified_by")
    return [metric(f"anatomy.parts.*.{k}").label for k in keys]  # type: ignore[union-attr]


def test_text_section_is_the_jsons_anatomy() -> None:
    for run in (SEED, FIXED):
        a, rows, small = _expected(run)
        text = cli("report", run)
        lines = text.splitlines()
        at = next(i for i, ln in enumerate(lines) if ln.startswith("   anatomy: "))
        assert lines[at] == (
            f"   anatomy: {metric('anatomy.busy_ns').label} {_ns(a['busy_ns'])}; "  # type: ignore[union-attr]
            f"{metric('anatomy.assigned_share').label} {_share(a['assigned_share'])}; parts over 1.0 % of it:"  # type: ignore[union-attr]
        )
        assert re.split(r"\s{2,}", lines[at + 1].strip()) == ["part", *_labels()]
        body = lines[at + 2 : at + 2 + len(rows)]
        # columns are two or more spaces apart; a value holds single spaces ("10.5 ms")
        assert [re.split(r"\s{2,}", ln.strip()) for ln in body] == rows
        ops = a["parts"]["other"]["top_ops"]
        assert lines[at + 2 + len(rows)] == "     other's top operators: " + ", ".join(
            f"{o['name']} {_ns(o['time_ns'])}" for o in ops
        )
        if small:
            assert lines[at + 3 + len(rows)] == "     under 1.0 %: " + ", ".join(small)
        assert lines[at + 3 + len(rows) + bool(small)].startswith("   findings (")


def test_markdown_section_is_the_same_table() -> None:
    a, rows, small = _expected(SEED)
    blocks = render(cli("report", SEED, "--format", "md"))
    at = blocks.index(("h3", "Step anatomy"))
    assert blocks[at + 1] == (
        "p",
        f"{metric('anatomy.busy_ns').label} {_ns(a['busy_ns'])}; "  # type: ignore[union-attr]
        f"{metric('anatomy.assigned_share').label} {_share(a['assigned_share'])}; parts over 1.0 % of it:",  # type: ignore[union-attr]
    )
    assert blocks[at + 2] == ("table", [["part", *_labels()], *rows])
    ops = ", ".join(f"{o['name']} {_ns(o['time_ns'])}" for o in a["parts"]["other"]["top_ops"])
    assert blocks[at + 3] == ("p", f"other's top operators: {ops}")
    if small:
        assert blocks[at + 4] == ("p", "Under 1.0 %: " + ", ".join(small))


def test_a_run_without_the_topic_has_no_section() -> None:
    doc = json.loads(cli("report", XLA, "--json"))
    assert not (doc["runs"][0]["metrics"].get("anatomy") or {}).get("available")
    assert "anatomy:" not in cli("report", XLA)
    assert "Step anatomy" not in cli("report", XLA, "--format", "md")
