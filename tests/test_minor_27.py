"""The second audit's minor findings (#27 item 6), each on a small trace written here, through the CLI.

- a duplicate step number: the slow-step row named the fast step (1 ms, excess -1 ms);
- a corrupt gzip stream was reported as "JSON nested deeper than 256 levels" (what its garbage held);
- partial-read percentages used the compressed position (a NaN at 50 % of the JSON showed as 54 %);
- an unreadable XPlane path was printed twice; ``--json`` on a ``/dev/zero`` link printed nothing.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from tb_llmdiag.cli import main


def run_json(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict[str, Any]]:
    code = main(["report", str(path), "--json"])
    return code, json.loads(capsys.readouterr().out)


def steps_trace(durations_us: list[int], numbers: list[int]) -> dict[str, Any]:
    ev, t = [], 0
    for n, d in zip(numbers, durations_us):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": t, "dur": d, "pid": 1, "tid": 1})
        ev.append({"ph": "X", "cat": "kernel", "name": "k", "ts": t + 1, "dur": d - 2, "pid": 0, "tid": 7,
                   "args": {"device": 0, "stream": 7}})
        t += d
    return {"traceEvents": ev}


def test_duplicate_step_number_names_the_slow_step(tmp_path, capsys) -> None:
    path = tmp_path / "d.pt.trace.json"
    # steps 1..6 of 1 ms, and a second step "3" of 10 ms
    path.write_text(json.dumps(steps_trace([1000] * 6 + [10_000], [1, 2, 3, 4, 5, 6, 3])))
    code, doc = run_json(capsys, path)
    (row,) = doc["runs"][0]["metrics"]["outliers"]["steps"]
    assert (row["index"], row["duration_ns"], row["excess_ns"]) == (3, 10_000_000, 9_000_000)


def _varied_events(n: int) -> list[dict[str, Any]]:
    rng = random.Random(0)
    return [{"ph": "X", "cat": "kernel", "name": "k" if i < n // 2 else "k" + "".join(rng.choice("abcdefgh") for _ in range(60)),
             "ts": i * 10, "dur": 5, "pid": 0, "tid": 7, "args": {"device": 0, "stream": 7}} for i in range(n)]


def test_partial_share_is_the_inflated_position_of_a_gzipped_file(tmp_path, capsys) -> None:
    text = json.dumps({"traceEvents": _varied_events(40_000)})  # first half compresses far better than the second
    at = text.index('"dur": 5', len(text) // 2)
    bad = text[:at] + '"dur": NaN' + text[at + len('"dur": 5'):]
    path = tmp_path / "n.pt.trace.json.gz"
    path.write_bytes(gzip.compress(bad.encode()))
    code, doc = run_json(capsys, path)
    run = doc["runs"][0]
    nan_at = at + len('"dur": ')
    assert code == 6 and run["error"] == f"invalid JSON at byte {nan_at:,} (50%): NaN is not JSON"
    assert run["read_state"]["read_share"] == pytest.approx(0.5, abs=0.005)


def test_corrupt_gzip_stream_is_said_so(tmp_path, capsys) -> None:
    raw = bytearray(gzip.compress(json.dumps({"traceEvents": _varied_events(40_000)}).encode()))
    mid = len(raw) // 2
    raw[mid : mid + 40] = bytes(b ^ 0x5A for b in raw[mid : mid + 40])
    path = tmp_path / "c.pt.trace.json.gz"
    path.write_bytes(bytes(raw))
    code, doc = run_json(capsys, path)
    run = doc["runs"][0]
    assert code == 6 and run["error"].startswith("the gzip data is corrupt (")
    assert "nested deeper" not in run["error"]


def test_unreadable_xplane_path_is_said_once(tmp_path, capsys) -> None:
    folder = tmp_path / "r" / "plugins" / "profile" / "2026_01_01_00_00_00"
    folder.mkdir(parents=True)
    (folder / "h.xplane.pb").write_bytes(b"\x0a\x05garbage")
    code = main(["report", str(folder / "h.xplane.pb")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 4 and len(err) == 1 and err[0].count("h.xplane.pb") == 1, err


def test_json_on_a_device_link_prints_a_json_document(tmp_path, capsys) -> None:
    link = tmp_path / "z.pt.trace.json"
    link.symlink_to("/dev/zero")
    code, doc = run_json(capsys, link)
    assert code == 4 and doc == {"error": f"{link}: it is a character device, not a trace file", "exit_code": 4}
