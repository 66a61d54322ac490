"""`llmdiag report --format md` and `llmdiag compare --format md` (issue #26): the demo's Markdown renders (read by
markdown-it-py, a CommonMark + GFM-tables parser that shares no code with ours) and its numbers are the `--json`
ones: each table cell is parsed back to a number here and compared with the JSON value it shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from typing import Any

import pytest
from markdown_it import MarkdownIt

from tracepaths import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
SEED, FIXED = "demo_logs/seed_lora_qwen1.5b", "demo_logs/fixed_lora_qwen1.5b"


def cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "tb_llmdiag.cli", *args], capture_output=True, text=True, env=ENV,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


class Blocks(HTMLParser):
    """The rendered document as a list of blocks: ("h1".."h3", text), ("p", text), ("li", text), ("table", rows)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[tuple[str, Any]] = []
        self._tag: str | None = None
        self._text: list[str] = []
        self._rows: list[list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "table":
            self._rows = []
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th", "h1", "h2", "h3", "p", "li"):
            self._tag, self._text = tag, []

    def handle_data(self, data: str) -> None:
        if self._tag is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        text = "".join(self._text).strip()
        if tag in ("td", "th") and self._rows is not None:
            self._rows[-1].append(text)
        elif tag == "table" and self._rows is not None:
            self.blocks.append(("table", self._rows))
            self._rows = None
        elif tag in ("h1", "h2", "h3", "p", "li") and self._tag == tag:
            self.blocks.append((tag, text))
        if tag == self._tag:
            self._tag = None


def render(md: str) -> list[tuple[str, Any]]:
    html = MarkdownIt("commonmark").enable("table").render(md)
    parser = Blocks()
    parser.feed(html)
    return parser.blocks


_SCALE = {"s": 1e9, "ms": 1e6, "µs": 1e3, "ns": 1.0, "%": 0.01, "B": 1.0, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def number(cell: str) -> float:
    """A cell's number in base units: '575 ms' -> 5.75e8 ns, '65.2 %' -> 0.652, '1954/s' -> 1954, '17.6 GiB'."""
    cell = cell.replace("<0.1 %", "0.05 %")  # a share under 0.1 % (as the tab writes it): within 0.05 % of 0
    cell = re.sub(r"^([0-9.]+) k/s$", lambda m: f"{float(m.group(1)) * 1000:g}/s", cell.strip())  # 63.4 k/s
    m = re.fullmatch(r"([-+]?[0-9.]+(?:e[-+]?\d+)?)\s*(s|ms|µs|ns|%|B|KiB|MiB|GiB|/s)?", cell.strip())
    assert m, cell
    return float(m.group(1)) * _SCALE.get(m.group(2) or "", 1.0)


def close(cell: str, value: float) -> bool:
    """The printed cell is the value at its printed precision: within half a unit of its last printed digit (3
    significant digits, 2 decimals below 10 as the tab writes them, or 0.1 % for shares)."""
    got = number(cell)
    digits = re.match(r"[-+]?\d+(?:\.(\d+))?", cell.replace("<0.1 %", "0.05 %").strip())
    last = 10.0 ** -len(digits.group(1) or "") if digits else 0.0
    unit = got / float(digits.group(0)) if digits and float(digits.group(0)) else 1.0
    return abs(got - value) <= max(abs(value) * 0.006, 0.51 * last * abs(unit), 0.0006 if cell.endswith("%") else 0.0)


def sections(blocks: list[tuple[str, Any]]) -> dict[str, list[tuple[str, Any]]]:
    out: dict[str, list[tuple[str, Any]]] = {}
    current = None
    for kind, content in blocks:
        if kind == "h2":
            current = content
            out[current] = []
        elif current is not None:
            out[current].append((kind, content))
    return out


def table_after(blocks: list[tuple[str, Any]], header: list[str]) -> list[list[str]]:
    return next(rows[1:] for kind, rows in blocks if kind == "table" and rows[0] == header)


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return json.loads(cli("report", "demo_logs", "--json"))


def test_the_markdown_report_of_the_demo_renders_with_the_json_numbers(report: dict[str, Any]) -> None:
    blocks = render(cli("report", "demo_logs", "--format", "md"))
    assert blocks[0] == ("h1", f"LLM Diag report for {report['root']} ({len(report['runs'])} trace(s))")
    by_title = sections(blocks)
    for run in report["runs"]:
        title = f"{run['run']} (worker {run['worker']}, span {run['span']}, {run['source_kind']})"
        body = by_title[title]
        # every step, its duration
        steps = run["metrics"]["steps"]["per_step"]
        rows = table_after(body, ["step", "duration"])
        assert [r[0] for r in rows] == [f"#{s['index']}" for s in steps[:12]]
        assert all(close(r[1], s["duration_ns"]) for r, s in zip(rows, steps))
        # every headline number
        head = {k: v for k, v in run["headline"].items() if v is not None}
        rows = table_after(body, ["metric", "value"])
        assert len(rows) == len(head)
        assert all(close(r[1], v) for r, v in zip(rows, head.values())), (rows, head)
        # every finding in rank order with its saving
        rows = table_after(body, ["#", "severity", "finding", "title", "saves at most", "share", "of the"])
        assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
            (str(i), f["severity"], f["id"], f["title"]) for i, f in enumerate(run["findings"], start=1)]
        for r, f in zip(rows, run["findings"]):
            s = f["saving"]
            if s is None:
                assert r[4:] == ["-", "-", "-"]
            else:
                # the one saving (#25): its time, its share, the step it is of (the median step, or the mean step)
                assert close(r[4], s["ns"]) and close(r[5], s["share"]) and close(" ".join(r[6].split()[:2]), s["step_ns"])
                assert r[6].endswith({"median_step": "median step", "mean_step": "mean step"}[s["basis"]]), (r, s)
        # the what-if statement, whole
        assert ("p", run["what_if"]["statement"].replace("`", "")) in body  # `id` renders as <code>id</code>
    job = report["jobs"][0]
    body = by_title[f"Job {job['run']} (span {job['span']}, 2 ranks: 0, 1)"]
    rows = dict(table_after(body, ["", "value"]))
    assert close(rows["step (median rank)"], job["metrics"]["job_step_ns"])
    assert close(rows["exposed communication"], job["metrics"]["exposed_share"])


def test_the_markdown_comparison_has_the_json_verdict_and_rows() -> None:
    doc = json.loads(cli("compare", SEED, FIXED, "--json"))
    blocks = render(cli("compare", SEED, FIXED, "--format", "md"))
    assert ("p", doc["verdict"].replace("`", "")) in blocks  # `id` renders as <code>id</code>
    rows = table_after(blocks, ["metric", "before", "after", "change", "noise band", "judgement"])
    assert len(rows) == len(doc["metrics"])
    for r, row in zip(rows, doc["metrics"]):
        if row["unit"] not in ("count", "count_per_step", "per_s", "ratio"):
            assert close(r[1], row["before"]) and close(r[2], row["after"]), (r, row)
        else:
            assert abs(number(r[1]) - row["before"]) <= max(abs(row["before"]) * 0.006, 0.5), (r, row)
        if row["change"] is not None and abs(row["change"]) < 9:
            assert abs(number(r[3].replace(" %", "")) / 100 - row["change"]) <= 0.0006
    items = [c for k, c in blocks if k == "li"]
    resolved = next(c for c in items if c.startswith("resolved: "))
    assert [re.match(r"[a-z_]+", p).group(0) for p in resolved.removeprefix("resolved: ").split("; ")] == [  # type: ignore[union-attr]
        f["id"] for f in doc["findings"]["resolved"]]


def test_untrusted_names_cannot_break_a_table() -> None:
    from tb_llmdiag.render.markdown import esc, table

    rows = table(("name", "value"), [[esc("a|b <script> *x* [l](u)"), "1"]])
    got = [b for b in render("\n".join(rows)) if b[0] == "table"]
    assert got == [("table", [["name", "value"], ["a|b <script> *x* [l](u)", "1"]])]
