"""Saved reports (``llmdiag report --json``) that are not plain readable files, as ``compare`` / ``check`` sides and in
a logdir the tab serves: each is one line (a CLI exit code, an HTTP 4xx or an error report), never a hang or a
traceback. Saved reports open through ``ingest/files.py`` as traces do (tests/test_bad_inputs.py, "files that
are not files", is the model; tests/test_links.py for links).

Exit codes (tb_llmdiag/cli/__init__.py): 3 no traces, 4 unreadable.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tb_llmdiag import api
from tb_llmdiag.cli import main
from tb_llmdiag.ingest.links import LinkOutside
from test_plugin import PREFIX, make_plugin, tb_client, wait_ready
from tracepaths import REPO, TEST_DATA

TRACE = next((TEST_DATA / "gpu_compiled").glob("*.pt.trace.json.gz"))
LINK_REFUSED = "is a link to a file outside the logdir; not read (set LLMDIAG_FOLLOW_LINKS=1 to follow links out of it)"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real saved report: `llmdiag report --json` of one small trace."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", str(TRACE), "--json"]) == 0
    path = tmp_path_factory.mktemp("saved") / "good.json"
    path.write_text(out.getvalue())
    assert api.saved_report(str(path)) is not None
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """The CLI in-process: its exit code and stderr, which must be one line and no traceback."""
    code = main(list(argv))
    out = capsys.readouterr()
    assert "Traceback" not in out.err + out.out
    assert out.err.count("\n") <= 1, out.err
    return code, out.err.strip()


# ------------------------------------------------------------------------------ files that are not files


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_as_a_saved_report_side_is_refused_without_opening(tmp_path: Path, saved: Path) -> None:
    """In a real process with a time limit, so a regression fails instead of hanging the suite."""
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for argv in (["compare", str(fifo), str(saved)], ["check", str(saved), "--baseline", str(fifo)]):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "tb_llmdiag", *argv], capture_output=True, text=True, env=env,
                              timeout=120)
        assert time.perf_counter() - start < 120
        assert (proc.returncode, proc.stdout) == (4, ""), proc.stderr
        assert proc.stderr == "llmdiag: cannot read report.json: it is a named pipe (FIFO), not a trace file\n"


def test_symlink_loop_and_device_as_a_saved_report_side(tmp_path: Path, saved: Path, capsys) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    assert run(capsys, "compare", str(loop), str(saved)) == (
        4, "llmdiag: cannot read loop.json: a symlink loop (the link points back to itself)")
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    assert run(capsys, "check", str(saved), "--baseline", str(zero)) == (
        4, "llmdiag: cannot read zero.json: it is a character device, not a trace file")


def test_a_directory_side_is_a_logdir_never_a_saved_report(tmp_path: Path, saved: Path, capsys) -> None:
    """A folder is discovered for traces (a saved report in it is not one): no traces is exit 3."""
    folder = tmp_path / "report.json"
    folder.mkdir()
    (folder / "inner.json").write_bytes(saved.read_bytes())
    assert api.saved_report(str(folder)) is None
    assert run(capsys, "compare", str(folder), str(saved)) == (
        3, f"llmdiag: BEFORE {folder}: no profiler traces or runs found")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod-000 file")
def test_unreadable_saved_report(tmp_path: Path, saved: Path, capsys) -> None:
    p = tmp_path / "old.json"
    p.write_bytes(saved.read_bytes())
    p.chmod(0)
    assert run(capsys, "compare", str(p), str(saved)) == (
        4, "llmdiag: cannot read old.json: permission denied (the file is not readable by this user)")


def test_unreadable_saved_report_as_root_too(tmp_path: Path, saved: Path, capsys, monkeypatch) -> None:
    """The same line where the test runs as root (which reads chmod-000 files): the OS refusal is simulated
    where ``ingest/files.py`` opens (as tests/test_bad_inputs.py does for traces)."""
    from tb_llmdiag.ingest import files

    p = tmp_path / "old.json"
    p.write_bytes(saved.read_bytes())
    real_open = os.open

    def refuse(path, *args, **kwargs):
        if str(path) == str(p):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(files.os, "open", refuse)
    for argv in (["compare", str(p), str(saved)], ["check", str(saved), "--baseline", str(p)]):
        assert run(capsys, *argv) == (
            4, "llmdiag: cannot read old.json: permission denied (the file is not readable by this user)")


# ------------------------------------------------------------------------------ cut and malformed reports


def test_cut_and_nested_saved_reports_and_a_small_cut_trace(tmp_path: Path, saved: Path, capsys) -> None:
    """Each was a traceback before (EOFError from gzip, RecursionError from json)."""
    whole = gzip.compress(saved.read_bytes())
    (tmp_path / "whole.json.gz").write_bytes(whole)
    assert api.saved_report(str(tmp_path / "whole.json.gz")) == json.loads(saved.read_text())
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    assert run(capsys, "compare", str(cut), str(saved)) == (
        4, f"llmdiag: {cut}: looks like a saved llmdiag report but its gzip stream ends early (file truncated?)")
    deep = tmp_path / "deep.json"
    deep.write_text('{"tool": {"name": "tb_llmdiag"}, "schema": 3, "runs": [], "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, err = run(capsys, "compare", str(deep), str(saved))
    assert code == 4 and err.startswith(f"llmdiag: {deep}: looks like a saved llmdiag report but is not valid JSON (")
    # a gzipped trace cut before 64 KiB of text: not a saved report, so the reader reads what is there
    trace = tmp_path / "w.1.pt.trace.json.gz"
    trace.write_bytes(gzip.compress(gzip.decompress(TRACE.read_bytes()))[:3000])
    old = time.time() - 3600
    os.utime(trace, (old, old))  # at rest (a cut .gz modified moments ago is "still being written")
    assert api.saved_report(str(trace)) is None
    code = main(["compare", str(trace), str(saved)])
    out = capsys.readouterr()
    assert code == 0 and "Traceback" not in out.err + out.out
    assert f"warning: BEFORE {trace} (run {tmp_path.name}): analysed from a partial trace (the gzip stream ends early " \
        "(file truncated?), at byte " in out.out


# ------------------------------------------------------------------------------ links out of a logdir


def _logdir_with_links_out(tmp_path: Path, saved: Path) -> tuple[Path, Path]:
    """logs/run_a (a real trace) and logs/run_s: `report.json` and a trace-named link, both to a saved report
    outside the logdir."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "report.json"
    target.write_bytes(saved.read_bytes())
    logs = tmp_path / "logs"
    (logs / "run_a").mkdir(parents=True)
    (logs / "run_s").mkdir()
    (logs / "run_a" / "worker0.1.pt.trace.json.gz").write_bytes(TRACE.read_bytes())
    (logs / "run_s" / "report.json").symlink_to(target)
    (logs / "run_s" / "w.1.pt.trace.json").symlink_to(target)
    return logs, target


def test_a_saved_report_linked_from_outside_a_logdir(tmp_path: Path, saved: Path, monkeypatch) -> None:
    """With the logdir it must lie in (``inside``) the link is refused as a trace is (#27); given on the command
    line, the user's own argument is followed."""
    monkeypatch.delenv("LLMDIAG_FOLLOW_LINKS", raising=False)
    logs, target = _logdir_with_links_out(tmp_path, saved)
    link = logs / "run_s" / "report.json"
    with pytest.raises(LinkOutside) as exc:
        api.saved_report(str(link), inside=os.path.realpath(logs))
    assert str(exc.value) == f"report.json {LINK_REFUSED}"
    assert api.saved_report(str(link)) == json.loads(target.read_text())


def test_the_tab_reads_and_serves_nothing_of_a_saved_report_linked_from_outside(tmp_path: Path, saved: Path,
                                                                                monkeypatch) -> None:
    """The tab reads saved reports nowhere: the plain link is a warning, the trace-named one a refused trace
    (422 / an error report), and no route answers with the report's bytes."""
    monkeypatch.delenv("LLMDIAG_FOLLOW_LINKS", raising=False)
    logs, target = _logdir_with_links_out(tmp_path, saved)
    secret = target.read_bytes()
    p = make_plugin(logs, tmp_path / "cache")
    try:
        c = tb_client(p)
        assert p.wait_scanned(10)
        runs = c.get(f"{PREFIX}/runs").get_json()
        assert f"run_s/report.json skipped: report.json {LINK_REFUSED}" in runs["warnings"]
        listed = {(r["run"], w["worker"]) for r in runs["runs"] for w in r["workers"]}
        assert listed == {("run_a", "worker0"), ("run_s", "w")}  # the plain link is no trace: not listed
        q = {"run": "run_s", "worker": "w", "span": "1"}
        for route in ("trace", "steps", "timeline"):
            r = c.get(f"{PREFIX}/{route}", query_string=q)
            deadline = time.time() + 30
            while r.status_code == 202 and time.time() < deadline:
                time.sleep(0.1)
                r = c.get(f"{PREFIX}/{route}", query_string=q)
            assert (r.status_code, r.get_json()["error"]) == (422, f"w.1.pt.trace.json {LINK_REFUSED}"), route
        rep = wait_ready(c, "run_s", "w", "1")
        assert (rep["status"], rep["error"]) == ("error", f"w.1.pt.trace.json {LINK_REFUSED}")
        wait_ready(c, "run_a", "worker0", "1")
        r = c.get(f"{PREFIX}/compare", query_string={**q, "base_run": "run_a", "base_worker": "worker0", "base_span": "1"})
        assert r.status_code == 422 and r.get_json()["error"].endswith(f"could not be analysed: w.1.pt.trace.json {LINK_REFUSED}")
        r = c.get(f"{PREFIX}/report", query_string={"run": "run_s", "worker": "report", "span": "default"})
        assert r.status_code == 404
        for route in ("runs", "report?run=run_s&worker=w&span=1", "trace?run=run_s&worker=w&span=1"):
            assert secret[:200] not in c.get(f"{PREFIX}/{route}").get_data()
    finally:
        p.close()
