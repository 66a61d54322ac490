"""Symlinks in a logdir (#27): nothing outside the logdir is read or served unless the user opts in.

A second audit found ``r/passwd.pt.trace.json -> /etc/passwd`` indexed as a run and ``GET /trace`` answering
``/etc/passwd`` with 200. Each case is a link to a file outside, to a folder outside, or a chain of links, in
discovery, the CLI report and the tab's routes (TensorBoard's real WSGI app); ``LLMDIAG_FOLLOW_LINKS=1`` turns it off.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tb_llmdiag import api
from tb_llmdiag.cli import main
from tb_llmdiag.findings.structs import RunReport
from tb_llmdiag.ingest.links import LinkOutside

FOLLOW_ENV = "LLMDIAG_FOLLOW_LINKS"  # (a literal: this test also runs against the code before #27)
from test_plugin import PREFIX, make_plugin, tb_client, wait_ready
from tracepaths import shared_trace

RESNET = "kineto_resnet50/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
REFUSED = "is a link to a file outside the logdir; not read (set LLMDIAG_FOLLOW_LINKS=1 to follow links out of it)"


def make_logdir(tmp: Path) -> Path:
    """logs/ with a real trace in run_in/, and links: to a trace outside (run_out/), to a folder outside
    (run_dir -> outside/), a chain inside -> inside -> outside (chain/), a chain that stays inside (ok/), and
    a trace-named link to /etc/passwd (r/)."""
    outside = tmp / "outside"
    outside.mkdir()
    secret = outside / "secret.pt.trace.json.gz"
    shutil.copy(shared_trace(RESNET), secret)
    logs = tmp / "logs"
    for d in ("run_in", "run_out", "chain", "ok", "r"):
        (logs / d).mkdir(parents=True)
    shutil.copy(shared_trace(RESNET), logs / "run_in" / "worker0.1.pt.trace.json.gz")
    (logs / "run_out" / "worker0.1.pt.trace.json.gz").symlink_to(secret)
    (logs / "run_dir").symlink_to(outside, target_is_directory=True)
    (logs / "chain" / "hop2.json").symlink_to(secret)
    (logs / "chain" / "worker0.1.pt.trace.json.gz").symlink_to(logs / "chain" / "hop2.json")
    (logs / "ok" / "hop").symlink_to(logs / "run_in" / "worker0.1.pt.trace.json.gz")
    (logs / "ok" / "worker0.1.pt.trace.json.gz").symlink_to(logs / "ok" / "hop")
    (logs / "r" / "passwd.pt.trace.json").symlink_to("/etc/passwd")
    return logs


@pytest.fixture
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(FOLLOW_ENV, raising=False)
    return make_logdir(tmp_path)


def test_discovery_lists_links_out_and_walks_no_folder_outside(logs: Path) -> None:
    index = api.discover(str(logs))
    got = {(f.run, f.worker) for f in index.files}
    # the folder link is not walked: outside/secret would be run_dir's; chain/hop2.json is not a trace name
    assert got == {("run_in", "worker0"), ("run_out", "worker0"), ("chain", "worker0"), ("ok", "worker0"), ("r", "passwd")}
    assert all(f.inside == os.path.realpath(logs) for f in index.files)
    assert "run_dir skipped: a link to a folder outside the logdir (set LLMDIAG_FOLLOW_LINKS=1 to follow links out of it)" in index.warnings
    assert f"chain/hop2.json skipped: hop2.json {REFUSED}" in index.warnings
    # nothing of a target outside was read: not even its size
    out = {f.run: f for f in index.files}
    assert (out["run_out"].size_bytes, out["r"].size_bytes) == (0, 0)


def test_cli_report_refuses_links_out_with_one_line(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["report", str(logs), "--json"])
    runs = {r["run"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert runs["run_in"]["status"] == "ok" and runs["ok"]["status"] == "ok"  # a chain that stays inside is read
    for run, name in (("run_out", "worker0.1.pt.trace.json.gz"), ("chain", "worker0.1.pt.trace.json.gz"), ("r", "passwd.pt.trace.json")):
        assert (runs[run]["status"], runs[run]["error"]) == ("error", f"{name} {REFUSED}")
    assert code == 4


def test_tab_serves_and_analyses_nothing_outside(logs: Path, tmp_path: Path) -> None:
    p = make_plugin(logs, tmp_path / "cache")
    try:
        c = tb_client(p)
        assert p.wait_scanned(10)
        for run, worker in (("run_out", "worker0"), ("chain", "worker0"), ("r", "passwd")):
            q = {"run": run, "worker": worker, "span": "1" if worker == "worker0" else "default"}
            r = c.get(f"{PREFIX}/trace", query_string=q)
            assert r.status_code == 422, (run, r.status_code)
            assert r.get_json()["error"].endswith(REFUSED)
            assert b"root:" not in r.get_data() and b"traceEvents" not in r.get_data()
            rep = wait_ready(c, q["run"], q["worker"], q["span"])
            assert (rep["status"], rep["summary"], rep["metrics"]) == ("error", None, {}) and rep["error"].endswith(REFUSED)
        runs = {r["run"]: r for r in c.get(f"{PREFIX}/runs").get_json()["runs"]}
        assert runs["r"]["error"] == f"passwd.pt.trace.json {REFUSED}"
        ok = c.get(f"{PREFIX}/trace", query_string={"run": "ok", "worker": "worker0", "span": "1"})
        assert ok.status_code == 200 and ok.get_data() == (logs / "run_in" / "worker0.1.pt.trace.json.gz").read_bytes()
    finally:
        p.close()


def test_a_link_swapped_in_after_discovery_is_refused_when_opened(logs: Path) -> None:
    index = api.discover(str(logs))
    tf = next(f for f in index.files if f.run == "run_in")
    os.replace(logs / "run_in" / "worker0.1.pt.trace.json.gz", logs / "run_in" / "moved")
    os.symlink(logs.parent / "outside" / "secret.pt.trace.json.gz", tf.path)
    with pytest.raises(LinkOutside, match="outside the logdir"):
        tf.open()
    rep = api.load(tf)
    assert isinstance(rep, RunReport) and rep.error == f"worker0.1.pt.trace.json.gz {REFUSED}"


def test_opting_in_follows_links_and_walks_linked_folders(logs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FOLLOW_ENV, "1")
    (logs / "loop").symlink_to(logs, target_is_directory=True)  # a cycle: each real folder is walked once
    index = api.discover(str(logs))
    got = {(f.run, f.worker) for f in index.files}
    assert {("run_out", "worker0"), ("chain", "worker0"), ("run_dir", "secret")} <= got
    tf = next(f for f in index.files if f.run == "run_out")
    f, size = tf.open()
    with f:
        assert f.read() == (logs.parent / "outside" / "secret.pt.trace.json.gz").read_bytes()
    assert api.analyze(tf).report["status"] == "ok"
