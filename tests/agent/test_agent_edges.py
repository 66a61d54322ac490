"""The agent server's edges (#35), through the official MCP SDK client driving `llmdiag mcp` over stdio: a link out
of the logdir in list_runs, error answers within the answers' bound, every hostile argument a one-line user error,
the run's status on every answer that reads its events, and a short bounded run of tests/fuzz/fuzz_agent.py.

Expected texts are written here from the inputs the tests build (the run names, the logdir), not read from the server.
"""

from __future__ import annotations

import gzip
import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tracepaths import REPO, TEST_DATA

pytest.importorskip("mcp", reason="the [agent] extra (mcp) is not installed")
sys.path.insert(0, str(REPO / "tests" / "fuzz"))
import fuzz_agent as fa  # noqa: E402

SEED = next((TEST_DATA / "gpu_compiled").glob("*.pt.trace.json.gz"))
BOUND = 8_000


def calls(logs: Path, tmp: Path, todo: list[tuple[str, dict[str, Any]]]) -> tuple[list[tuple[str, str]], fa.Tally]:
    """Each call's (kind, text) in one SDK session, and the tally (its judged problems)."""

    async def body(s: Any, tally: fa.Tally) -> None:
        for tool, args in todo:
            await fa._call(s, tally, tool, args)

    tally, up = anyio.run(fa.session, logs, tmp / "stderr.txt", body, True)
    assert up and fa.stderr_problems(tmp / "stderr.txt") == []
    assert tally.answers is not None
    return [(kind, text) for _, _, kind, text in tally.answers[: len(todo)]], tally


def at_rest(path: Path, data: bytes) -> None:
    fa._at_rest(path, data)


# -------------------------------------------------------------------------------- 1. a link out of the logdir


def test_list_runs_lists_a_link_out_of_the_logdir_as_an_error_entry(tmp_path: Path) -> None:
    # GIVEN one good run and a trace-named link beside it to a file outside the logdir
    logs = tmp_path / "logs"
    (logs / "good").mkdir(parents=True)
    shutil.copy2(SEED, logs / "good" / SEED.name)
    secret = tmp_path / "outside.pt.trace.json"
    secret.write_bytes(fa.tiny_trace().replace(b'"name":"k"', f'"name":"{fa.MARKER}"'.encode()))
    os.symlink(secret, logs / "x.pt.trace.json")
    got, tally = calls(logs, tmp_path, [("list_runs", {}), ("list_runs", {"detail": True}), ("diagnose", {"run": "good"}),
                                        ("diagnose", {"run": "logs"})])
    # THEN list_runs answers (with or without detail), listing the link as an error entry saying why
    for kind, text in got[:2]:
        assert kind == "ok", text
        runs = {r["name"]: r for r in json.loads(text)["runs"]}
        assert set(runs) == {"good", "logs"}  # a trace directly in the logdir is the logdir's run
        assert runs["good"]["status"] == "ok" and runs["good"]["error"] is None
        assert (runs["logs"]["status"], runs["logs"]["worker"]) == ("error", "x")
        assert runs["logs"]["error"] == ("x.pt.trace.json is a link to a file outside the logdir; not read (this server "
                                      "reads only files inside the logdir it was started on)")
    assert got[2][0] == "ok" and json.loads(got[2][1])["status"] == "ok"
    # the link named as a run is a user error that reads nothing of it
    assert got[3] == ("user_error", "Error executing tool diagnose: run logs could not be analysed: x.pt.trace.json is "
                      "a link to a file outside the logdir; not read (this server reads only files inside the logdir "
                      "it was started on)")
    assert not tally.problems  # no answer holds the outside file's content


# -------------------------------------------------------------------------------- 2. errors within the bound


def test_error_answers_stay_within_the_bound(tmp_path: Path) -> None:
    # GIVEN a logdir of 400 runs
    logs = tmp_path / "logs"
    names = [f"r{i:03d}" for i in range(400)]
    for n in names:
        at_rest(logs / n / "t.pt.trace.json", fa.tiny_trace())
    long_name = "y" * 4000  # within the schema's 4096 characters: the workspace's message quotes it cut
    got, tally = calls(logs, tmp_path, [("diagnose", {"run": "nope"}), ("diagnose", {"run": "x" * 1_000_000}),
                                        ("explain_finding", {"run": "r000", "finding": long_name}),
                                        ("diagnose", {"run": long_name})])
    assert not tally.problems, tally.findings
    # THEN an unknown run lists the first 20 runs and counts the rest
    assert got[0] == ("user_error", f"Error executing tool diagnose: run {logs}: no run named 'nope' (runs: "
                      f"{', '.join(names[:20])} and 380 more)")
    # a 1 MB name is refused by the schema, its value not echoed
    assert got[1] == ("user_error", "Error executing tool diagnose: argument run: String should have at most 4096 "
                      f"characters (got {repr('x' * 1_000_000)[:59]}… (1,000,002 characters))")
    # a long finding id and a long run name are quoted cut, saying how long they were
    cut = "'" + "y" * 118 + "… (4,000 characters)"
    assert got[2][0] == "user_error"
    assert got[2][1].startswith(f"Error executing tool explain_finding: run r000 has no finding {cut} (its findings: ")
    assert got[3] == ("user_error", f"Error executing tool diagnose: run {logs}: no run named {cut} (runs: "
                      f"{', '.join(names[:20])} and 380 more)")
    assert all(len(text.encode()) <= BOUND and "\n" not in text for _, text in got)


# -------------------------------------------------------------------------------- 3. hostile arguments


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[tuple[str, dict[str, Any], str, str]], fa.Tally]:
    base = tmp_path_factory.mktemp("hostile")
    logs = fa.build_logdir(base, tiny=3)
    at_rest(logs / "growing" / "g.pt.trace.json", gzip.decompress(SEED.read_bytes()))
    tally, up = anyio.run(fa.session, logs, base / "stderr.txt", fa.hostile_body, True)
    assert up, "the server no longer answers after the hostile calls"
    assert fa.stderr_problems(base / "stderr.txt") == []
    assert tally.answers is not None
    return tally.answers, tally


def test_every_tool_answers_every_hostile_argument_in_one_bounded_line(hostile) -> None:
    answers, tally = hostile
    # THEN no internal error, no error over 8 KB or over one line, no answer over its bound, nothing from outside
    assert tally.findings == [] and tally.kinds["internal_error"] == 0
    assert len(answers) == len(fa.hostile_calls()) + 1 and tally.max_bytes["error"] <= BOUND
    # the hostile values are user errors whatever the tool and argument: traversal, NUL, 1 MB strings,
    # wrong types, 2^63, negative (NaN and infinity leave the SDK's client as null: no value, a valid call)
    for tool, args, kind, text in answers:
        for p, v in args.items():
            hostile_value = (
                (isinstance(v, str) and (v.startswith("..") or "\x00" in v or len(v) > 4096))
                or (not isinstance(v, str) and fa.TOOLS[tool][p][0] in ("name", "finding"))
                or (isinstance(v, int) and not isinstance(v, bool) and (v >= 2**63 or v < 0))
                or (isinstance(v, (str, list, dict)) and fa.TOOLS[tool][p][0] in ("int", "top", "bool", "fraction"))
            )
            if hostile_value:
                assert kind == "user_error", (tool, p, fa.shown(args), text)


def test_the_audits_arguments_get_their_one_line(hostile) -> None:
    answers, _ = hostile
    by = {(tool, json.dumps(args, sort_keys=True)): text for tool, args, _, text in answers}

    def text_of(tool: str, **args: Any) -> str:
        return by[(tool, json.dumps(args, sort_keys=True))]

    run = {"run": "gpu_seed", "top": 5, "detail": False}
    assert text_of("top_activities", **run, end_ns=2**63) == (
        "Error executing tool top_activities: argument end_ns: Input should be less than 9223372036854775808 "
        "(got 9223372036854775808)")
    assert text_of("top_activities", **run, start_ns=-1) == (
        "Error executing tool top_activities: argument start_ns: Input should be greater than or equal to 0 (got -1)")
    assert text_of("top_activities", **run, step="5") == (
        "Error executing tool top_activities: argument step: Input should be a valid integer (got '5')")
    assert text_of("diagnose", run="../\x00", detail=False) == (
        "Error executing tool diagnose: ../\\x00: a name or path cannot hold a NUL byte")
    assert text_of("diagnose", run="../../../etc/passwd", detail=False).startswith(
        "Error executing tool diagnose: ../../../etc/passwd: outside the logdir ")
    assert text_of("check", candidate="gpu_fixed", baseline="gpu_seed", detail=False, max_regression=-1.0) == (
        "Error executing tool check: argument max_regression: Input should be greater than or equal to 0 (got -1.0)")
    assert text_of("no_such_tool", run=fa.BIG) == "Unknown tool: no_such_tool"


def raw_session(logs: Path, lines: list[str], ids: set[int]) -> dict[int, Any]:
    """JSON-RPC lines written to `llmdiag mcp` as they are (NaN literals, which the SDK's client cannot send); the
    answers by id."""
    proc = subprocess.Popen([sys.executable, "-m", "tb_llmdiag.cli", "mcp", str(logs)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={"PYTHONPATH": str(REPO)}, cwd=REPO)
    assert proc.stdin is not None and proc.stdout is not None
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    head = [json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})]
    proc.stdin.write(("\n".join(head + lines) + "\n").encode())
    proc.stdin.flush()
    got: dict[int, Any] = {}
    deadline = time.monotonic() + 120
    while not ids <= set(got) and time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 1.0)[0]:
            msg = json.loads(proc.stdout.readline())
            got[msg.get("id")] = msg
    proc.stdin.close()
    err = proc.stderr.read().decode() if proc.wait(60) is not None and proc.stderr else ""
    assert "Traceback" not in err
    return got


def test_nan_and_infinity_sent_raw_are_one_line_user_errors(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    at_rest(logs / "a" / "t.pt.trace.json", fa.tiny_trace())
    args = [{"name": "check", "arguments": {"candidate": "a", "baseline": "a", "max_regression": "NaN"}},
            {"name": "top_activities", "arguments": {"run": "a", "end_ns": "Infinity"}},
            {"name": "top_activities", "arguments": {"run": "a", "step": "-Infinity"}},
            {"name": "diagnose", "arguments": {"run": "a"}}]
    lines = [json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": a}).replace('"NaN"', "NaN")
             .replace('"Infinity"', "Infinity").replace('"-Infinity"', "-Infinity") for i, a in enumerate(args)]
    got = raw_session(logs, lines, {1, 2, 3, 4})
    texts = [(got[i]["result"]["isError"], got[i]["result"]["content"][0]["text"]) for i in (1, 2, 3)]
    assert texts == [
        (True, "Error executing tool check: argument max_regression: Input should be a finite number (got nan)"),
        (True, "Error executing tool top_activities: argument end_ns: Input should be a valid integer (got inf)"),
        (True, "Error executing tool top_activities: argument step: Input should be a valid integer (got -inf)")]
    assert got[4]["result"]["isError"] is False  # the server answers on


# -------------------------------------------------------------------------------- 6. the run's status on answers


def test_answers_that_read_events_carry_the_runs_status(tmp_path: Path) -> None:
    # GIVEN a run whose trace is cut at 60 % (at rest: not being written) and a whole one
    logs = tmp_path / "logs"
    text = gzip.decompress(SEED.read_bytes())
    at_rest(logs / "cut" / "c.pt.trace.json", text[: len(text) * 6 // 10])
    at_rest(logs / "whole" / "w.pt.trace.json", text)
    got, _ = calls(logs, tmp_path, [("top_activities", {"run": "cut"}), ("top_activities", {"run": "whole"}),
                                    ("diagnose", {"run": "cut"})])
    cut, whole, diag = (json.loads(t) for _, t in got)
    # THEN top_activities says partial and why, as diagnose does, with the read state; the whole run says ok
    assert (cut["status"], cut["error"]) == (diag["status"], diag["error"]) and cut["status"] == "partial"
    assert cut["error"].startswith("the JSON ends early at byte ")
    assert cut["trust"]["read_state"] == diag["trust"]["read_state"] and cut["trust"]["read_state"]["complete"] is False
    assert (whole["status"], whole["error"], whole["trust"]["read_state"]["complete"]) == ("ok", None, True)


def test_check_refuses_a_tolerance_that_is_not_a_number(tmp_path: Path) -> None:
    from tb_llmdiag.agent.comparison import check
    from tb_llmdiag.agent.workspace import Workspace
    from tb_llmdiag.errors import LlmDiagError

    logs = tmp_path / "logs"
    at_rest(logs / "a" / "t.pt.trace.json", fa.tiny_trace())
    ws = Workspace(str(logs))
    assert check(ws, "a", "a", max_regression=0.05)["passed"] is True
    for bad, shown in ((float("nan"), "nan"), (float("inf"), "inf"), (-0.5, "-0.5")):
        with pytest.raises(LlmDiagError) as exc:
            check(ws, "a", "a", max_regression=bad)
        assert str(exc.value) == f"max_regression must be a fraction in [0, 100) (0.05 = 5 %), not {shown}"
        assert exc.value.exit_code == 2


# -------------------------------------------------------------------------------- the fuzz, bounded


def test_a_short_fuzz_run_leaves_the_server_up_with_no_finding(tmp_path: Path) -> None:
    stats = fa.fuzz(seconds=15, workers=3, seed=7, out=tmp_path / "fuzz", tiny=3)
    assert stats["findings"] == [] and stats["server_up_at_end"] is True
    assert stats["calls"] > len(fa.hostile_calls()) and stats["answers_by_kind"].get("ok", 0) > 10
    assert stats["max_answer_bytes"]["error"] <= BOUND
