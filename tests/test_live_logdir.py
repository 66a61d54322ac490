"""A trace still being written in a live logdir (issue #15): the tab shows "writing" (202, never cached as
final) until the file stops changing, then the full report; the CLI says so in one line. The file is a real demo
trace, copied in two halves the way a profiler's export grows it."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

from tb_llmdiag import api, cli
from tb_llmdiag.ingest.written import RECENT_S, still_being_written
from test_plugin import PREFIX, make_plugin, tb_client, wait_ready

REPO = Path(__file__).resolve().parents[1]
DEMO = next((REPO / "demo_logs" / "fixed_lora_qwen1.5b").glob("*.pt.trace.json.gz"))
NAME = DEMO.name


def _age(path: Path, seconds: float) -> None:
    """Set the file's mtime ``seconds`` in the past."""
    t = time.time() - seconds
    os.utime(path, (t, t))


def _append(path: Path, more: bytes) -> None:
    """Append, as a profiler's export does (the file never shrinks while it grows)."""
    with open(path, "ab") as f:
        f.write(more)


def _poll(c, query: dict, want: str, timeout: float = 60) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = c.get(f"{PREFIX}/report", query_string=query)
        body = r.get_json()
        if r.status_code == 202 and body["status"] == want:
            return body
        time.sleep(0.05)
    raise AssertionError(f"no 202 {want!r} within {timeout} s: last {r.status_code} {body}")


def test_half_written_trace_shows_writing_then_the_full_report(tmp_path: Path) -> None:
    data = DEMO.read_bytes()
    logdir = tmp_path / "logs"
    (logdir / "live").mkdir(parents=True)
    target = logdir / "live" / NAME
    target.write_bytes(data[: len(data) // 2])  # the export has written half of the gzip stream
    p = make_plugin(logdir, tmp_path / "cache", scan_interval_s=0.1)
    try:
        c = tb_client(p)
        assert p.wait_scanned(10)
        worker = NAME.split(".")[0]
        runs = c.get(f"{PREFIX}/runs").get_json()["runs"]
        assert [r["run"] for r in runs] == ["live"] and runs[0]["status"] == "writing"
        span = runs[0]["workers"][0]["spans"][0]
        assert span["status"] == "writing" and span["error"].startswith("still being written: the gzip stream has no end")
        q = {"run": "live", "worker": worker, "span": span["span"]}
        body = _poll(c, q, "writing")
        assert body["error"].startswith("still being written")

        # a few scans later: still "writing", never queued, nothing cached as its final report
        time.sleep(0.5)
        e = p._catalog.lookup(("live", worker, span["span"]))
        assert e.status == "writing" and p._catalog.cache.get(e.cache_key, "report", e.identity()) is None
        # the writer appends more (still no end): growth between scans keeps it "writing"
        _append(target, data[len(data) // 2: 3 * len(data) // 4])
        _poll(c, q, "writing")

        # the export finishes: the whole file, settled
        _append(target, data[3 * len(data) // 4:])
        rep = wait_ready(c, "live", worker, span["span"], timeout=120)
        assert rep["status"] == "ok" and rep["size_bytes"] == len(data)
        assert not any("truncat" in w for w in rep["warnings"])
        assert rep["metrics"]["steps"]["count"] == 3 and rep["findings"]
        assert rep == api.report(str(logdir))["runs"][0]  # what the CLI reports for it
    finally:
        p.close()


def test_cli_says_still_being_written(tmp_path: Path, capsys) -> None:
    data = DEMO.read_bytes()
    target = tmp_path / NAME
    target.write_bytes(data[: 3_000_000])  # the first 3 MB, just written
    code = cli.main(["report", str(target), "--json"])
    out, err = capsys.readouterr()
    run = json.loads(out)["runs"][0]
    assert run["status"] == "writing" and run["findings"] == [] and run["metrics"] == {}
    assert run["error"].startswith("still being written")
    assert code == cli.WRITING_EXIT_CODE and "still being written" in err
    # the same bytes, left alone for longer than RECENT_S: a cut file, not one being written
    _age(target, RECENT_S + 10)
    tf = api.discover(str(target)).files[0]
    assert tf.writing() is None and api.analyze(tf).report["status"] != "writing"
    # a complete copy, settled: no end problem
    target.write_bytes(data)
    assert api.discover(str(target)).files[0].writing() is None


def test_still_being_written_reasons(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    f.write_text("{}")
    st = f.stat()
    assert still_being_written(str(f), st.st_size, st.st_mtime_ns) is None
    assert "grew from 1 to 2 bytes" in still_being_written(str(f), 1, st.st_mtime_ns)
    assert "modified while it was read" in still_being_written(str(f), 2, st.st_mtime_ns - 1)
    assert still_being_written(str(tmp_path / "gone.json"), 2, st.st_mtime_ns) is None
    # a cut plain JSON file is truncated, not "being written": nothing in it tells a pause from a cut
    g = tmp_path / "open.json"
    g.write_text('{"traceEvents": [{"ph": "X"}, ')
    st = g.stat()
    assert still_being_written(str(g), st.st_size, st.st_mtime_ns) is None
    # a complete gzip stream (around cut JSON) is finished; the same stream without its last bytes is not
    z = tmp_path / "cut.json.gz"
    blob = gzip.compress(b'{"traceEvents": [{"ph": "X"}, ')
    z.write_bytes(blob)
    st = z.stat()
    assert still_being_written(str(z), st.st_size, st.st_mtime_ns) is None
    z.write_bytes(blob[:-8])
    st = z.stat()
    assert "no end marker" in still_being_written(str(z), st.st_size, st.st_mtime_ns)
    assert still_being_written(str(z), st.st_size, st.st_mtime_ns, now_ns=st.st_mtime_ns + int((RECENT_S + 1) * 1e9)) is None


def test_the_end_marker_check_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    # GIVEN a FIFO where a recent gzip trace was when discovery looked (swapped in between the stat and the open)
    import threading

    import pytest

    from tb_llmdiag.ingest.written import gzip_has_end

    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    fifo = tmp_path / "w.1.pt.trace.json.gz"
    os.mkfifo(fifo)
    out: list[bool] = []
    t = threading.Thread(target=lambda: out.append(gzip_has_end(str(fifo), 10, 1)), daemon=True)
    t.start()
    t.join(5)
    # THEN the check answers at once (the file is opened through ingest/files.py, O_NONBLOCK and fstat): not growing
    assert out == [True]
