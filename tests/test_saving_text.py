"""One text per number (#25): the CLI (Python) and the tab (frontend/format.js) write a finding's saving, its
what-if and every value the same way. Runs the tab's own module in node on the goldens' savings and on values of
each unit, and compares with the Python text."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tb_llmdiag.findings.whatif_text import saving_text, what_if_text
from tb_llmdiag.units import fmt, fmt_interval

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")

SCRIPT = """
import { fmtSaving, fmtWhatIf, formatInterval, formatValue } from '%s';
let text = '';
process.stdin.on('data', (d) => { text += d; });
process.stdin.on('end', () => {
  const { savings, values, intervals } = JSON.parse(text);
  const out = { savings: savings.map(fmtSaving), whatifs: savings.map(fmtWhatIf),
    values: values.map(([v, u]) => formatValue(v, u)), intervals: (intervals || []).map(([v, u]) => formatInterval(v, u)) };
  process.stdout.write(JSON.stringify(out));
});
"""


def _node(payload: dict) -> dict:
    script = SCRIPT % (ROOT / "frontend" / "format.js").as_uri()
    res = subprocess.run([NODE, "--input-type=module", "-e", script], input=json.dumps(payload), text=True,
                         capture_output=True, check=True, timeout=60)
    return json.loads(res.stdout)


def _savings() -> list[dict]:
    out = []
    for p in sorted((ROOT / "tests" / "golden").glob("*.diagnosis.json")):
        out += [f["saving"] for f in json.loads(p.read_text())["findings"] if f.get("saving")]
    return out


VALUES = [
    (12_345, "ns"), (999_700, "ns"), (1_500, "ns"), (2.15e9, "ns"), (800, "ns"), (0.1234, "share"), (0.00004, "share"),
    (0.0, "share"), (1.0, "share"), (5816, "count_per_step"), (31_915.2, "count_per_step"), (2_500_000, "count"),
    (0.333, "count_per_step"), (63_736.2, "per_s"), (1954.3, "per_s"), (0.4963, "ratio"), (12.34, "ratio"),
    (1234.5, "ratio"), (3 << 30, "bytes"), (1536, "bytes"), (103869, "id"), (104000, "index"), (3.2e14, "flop"),
]

#: the capture topic's 95 % intervals (capture.profiler_overhead_share_95, after_window_slowdown_share_95)
INTERVALS = [([0.401, 0.523], "share"), ([-0.152, 0.207], "share"), ([0.0, 0.0], "share"), ([12_345, 2_150_000], "ns")]


def test_savings_what_ifs_and_values_read_the_same_in_the_cli_and_the_tab() -> None:
    savings = _savings()
    assert len(savings) > 50
    got = _node({"savings": savings, "values": VALUES, "intervals": INTERVALS})
    assert got["savings"] == [saving_text(s) for s in savings]
    assert got["whatifs"] == [what_if_text(s) for s in savings]
    assert got["values"] == [fmt(u, v) for v, u in VALUES]
    assert got["intervals"] == [fmt_interval(u, v) for v, u in INTERVALS]
    assert got["intervals"][:2] == ["40.1 % – 52.3 %", "-15.2 % – 20.7 %"]
