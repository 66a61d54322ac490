"""The tab's failure paths (issue #17 items 4, 5, 8; issue #10 item 2), on werkzeug's test Client.

Failures are made for real where the machine allows it: a real FIFO (``os.mkfifo``), symlink loops, a
device link, a worker process that really dies (``BrokenProcessPool``), cache files overwritten with
garbage, a cache directory owned by another uid (chown, when the tests run as root).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest
from werkzeug.test import Client

from tb_llmdiag import api
from tb_llmdiag.ingest.discover import Index, TraceFile
from tb_llmdiag.tab import cache as cache_mod
from tb_llmdiag.tab.cache import ResultCache
from tb_llmdiag.tab.analysis_queue import AnalysisQueue, process_pool
from test_plugin import PREFIX, GatedExecutor, make_logdir, make_plugin, tb_client, wait_ready

Q = {"run": "run_a", "worker": "worker0", "span": "1"}


class FailingExecutor(ThreadPoolExecutor):
    """Every task raises ``exc`` instead of running (a bug in the engine, or a dead worker process)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(max_workers=1)
        self.exc = exc
        self.calls: list[tuple] = []

    def submit(self, fn, /, *args, **kwargs):
        self.calls.append(args)
        f: Future = Future()
        f.set_exception(self.exc)
        return f


def settle(c: Client, route: str = "report", q: dict = Q, timeout: float = 30):
    """Poll a route until it stops answering 202; returns the response."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = c.get(f"{PREFIX}/{route}", query_string=q)
        if r.status_code != 202:
            return r
        time.sleep(0.05)
    raise AssertionError(f"/{route} still 202 after {timeout}s")


# -- is_active never blocks ---------------------------------------------------------------------------


def test_is_active_answers_at_once_while_the_scan_is_slow(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    release = threading.Event()

    def slow_discover(path: str) -> Index:
        assert release.wait(30)
        return api.discover(path)

    p = make_plugin(logdir, tmp_path / "cache", discover=slow_discover)
    try:
        # the scan cannot end before release is set: had is_active waited on it, these calls would not return
        # (the scan would time out after 30 s and fail its assert); no wall-clock bound (never a timed test)
        active = [p.is_active() for _ in range(100)]
        assert active == [False] * 100
        assert not p.wait_scanned(0)  # still scanning: every answer above came while the scan was held
        release.set()
        assert p.wait_scanned(30)
        assert p.is_active() is True
    finally:
        release.set()
        p.close()


# -- a failed analysis is an error state (#17 item 4) ------------------------------------------------------


def test_failed_analysis_is_422_with_one_line_and_is_not_retried_until_the_file_changes(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    ex = FailingExecutor(RuntimeError("boom in the engine\nsecond line of the message"))
    p = make_plugin(logdir, tmp_path / "cache", executor=ex, scan_interval_s=0.05)
    try:
        c = tb_client(p)
        r = settle(c)
        assert r.status_code == 422
        body = r.get_json()
        assert body["status"] == "error" and (body["run"], body["worker"], body["span"]) == ("run_a", "worker0", "1")
        assert body["error"] == "analysis failed: RuntimeError: boom in the engine (see the TensorBoard log)"
        for route in ("steps", "timeline"):
            r2 = c.get(f"{PREFIX}/{route}", query_string=Q)
            assert r2.status_code == 422 and r2.get_json()["error"] == body["error"]
        runs = {x["run"]: x for x in c.get(f"{PREFIX}/runs").get_json()["runs"]}
        assert runs["run_a"]["status"] == "error" and runs["run_a"]["error"] == body["error"]
        # many polls and ~20 rescans later: still one attempt per file, no loop
        for _ in range(20):
            assert c.get(f"{PREFIX}/report", query_string=Q).status_code == 422
            time.sleep(0.05)
        tried = [a[0].run for a in ex.calls]
        assert tried.count("run_a") == 1
        # the file changes (new size and mtime): analysed again, once
        trace = logdir / "run_a" / "worker0.1623143089861.pt.trace.json.gz"
        with open(trace, "ab") as f:
            f.write(b"\n")
        deadline = time.time() + 10
        while [a[0].run for a in ex.calls].count("run_a") < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert [a[0].run for a in ex.calls].count("run_a") == 2
        assert settle(c).status_code == 422
    finally:
        p.close()


def test_dead_worker_is_an_error_card(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    ex = FailingExecutor(BrokenProcessPool("A process in the process pool was terminated abruptly"))
    p = make_plugin(logdir, tmp_path / "cache", executor=ex)
    try:
        r = settle(tb_client(p))
        assert r.status_code == 422
        msg = r.get_json()["error"]
        assert msg.startswith("the analysis process died (BrokenProcessPool); the trace may be too big for memory")
        assert "\n" not in msg
    finally:
        p.close()


def _die_on_a(tf, token, put):
    """A task whose worker process dies for job "a" (an OOM kill looks the same to the pool)."""
    if token == "a":
        os._exit(3)
    return {"report": {"status": "ok", "error": None, "path": tf}}


def test_a_really_dead_process_pool_fails_its_job_and_a_renewed_pool_runs_the_next():
    done: dict[tuple, tuple] = {}

    def finish(key, token, result, error):
        done[key] = (result, error)

    pool, progress = process_pool(1)  # TensorBoard's own pool: spawned processes
    q = AnalysisQueue(pool, claim=lambda key, token: token, finish=finish, phase=lambda t, ph: None, workers=1,
                 progress_queue=progress, renew=lambda: process_pool(1, progress)[0], task=_die_on_a)
    try:
        q.submit(("r", "w", "1"), "a")
        deadline = time.time() + 60
        while ("r", "w", "1") not in done and time.time() < deadline:
            time.sleep(0.05)
        q.submit(("r", "w", "2"), "b")
        while ("r", "w", "2") not in done and time.time() < deadline:
            time.sleep(0.05)
    finally:
        q.stop()
    result, error = done[("r", "w", "1")]
    assert result is None and error.startswith("the analysis process died (BrokenProcessPool)")
    assert done[("r", "w", "2")] == ({"report": {"status": "ok", "error": None, "path": "b"}}, None)


# -- only regular files are opened (#17 item 5) ------------------------------------------------------------


def _index_of(logdir: Path, files: dict[str, Path]) -> Index:
    tfs = tuple(TraceFile(run=run, worker="worker0", span="1", path=str(path), source_kind="kineto",
                              size_bytes=0, mtime_ns=0) for run, path in files.items())
    return Index(root=str(logdir), files=tfs)


def _get_within(c: Client, route: str, q: dict, seconds: float):
    """The response, or a failure if the server thread is still blocked after ``seconds``."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(c.get(f"{PREFIX}/{route}", query_string=q)), daemon=True)
    t.start()
    t.join(seconds)
    assert out, f"/{route} blocked for more than {seconds} s"
    return out[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_device_and_symlink_loop_are_refused_in_every_route_without_blocking(tmp_path: Path):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    fifo = logdir / "fifo.pt.trace.json"
    os.mkfifo(fifo)
    loop = logdir / "loop.pt.trace.json"
    os.symlink(logdir / "loop2.pt.trace.json", loop)
    os.symlink(loop, logdir / "loop2.pt.trace.json")
    dev = logdir / "dev.pt.trace.json"
    os.symlink("/dev/zero", dev)
    files = {"fifo": fifo, "loop": loop, "dev": dev}
    p = make_plugin(logdir, tmp_path / "cache", discover=lambda path: _index_of(logdir, files))
    # one check, one vocabulary for the CLI and the tab (ingest/files.py)
    expect = {"fifo": "cannot read fifo.pt.trace.json: it is a named pipe (FIFO), not a trace file",
              "loop": "cannot read loop.pt.trace.json: a symlink loop (the link points back to itself)",
              "dev": "cannot read dev.pt.trace.json: it is a character device, not a trace file"}
    try:
        c = tb_client(p)
        for run, message in expect.items():
            q = {"run": run, "worker": "worker0", "span": "1"}
            r = _get_within(c, "trace", q, 5)
            assert (r.status_code, r.get_json()) == (422, {"error": message})
            rep = settle(c, "report", q)
            assert rep.status_code == 200 and rep.get_json()["status"] == "error"
            assert rep.get_json()["error"] == message
            for route in ("steps", "timeline"):
                r2 = _get_within(c, route, q, 5)
                assert r2.status_code == 422 and r2.get_json()["error"] == message
    finally:
        p.close()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_trace_replaced_by_a_fifo_after_discovery_is_refused(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    p = make_plugin(logdir, tmp_path / "cache", scan_interval_s=3600)  # the index keeps the old file
    try:
        c = tb_client(p)
        wait_ready(c, "run_a", "worker0", "1")
        path = logdir / "run_a" / "worker0.1623143089861.pt.trace.json.gz"
        path.unlink()
        os.mkfifo(path)
        r = _get_within(c, "trace", Q, 5)
        assert r.status_code == 422
        assert r.get_json() == {"error": f"cannot read {path.name}: it is a named pipe (FIFO), not a trace file"}
    finally:
        p.close()


def test_raw_open_refuses_without_opening(tmp_path: Path):
    from tb_llmdiag.ingest.files import NotRegularFile, open_regular

    ok = tmp_path / "a.json"
    ok.write_bytes(b"{}")
    f, size = open_regular(str(ok))
    with f:
        assert (f.read(), size) == (b"{}", 2)
    with pytest.raises(NotRegularFile, match="is a directory"):
        open_regular(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        open_regular(str(tmp_path / "gone.json"))


# -- the cache is validated on read (#17 item 8) -----------------------------------------------------------


def read_entry(path: Path) -> tuple[dict, object]:
    """A cache file: its header line and its value (the layout ``tab.cache`` documents)."""
    head, _, body = path.read_bytes().partition(b"\n")
    return json.loads(head), json.loads(body)


def entry_bytes(header: dict, value: object, nan: bool = False) -> bytes:
    body = json.dumps(value).encode()
    if nan:
        body = body.replace(b'"size_bytes": ', b'"size_bytes": NaN, "x": ', 1)
    return json.dumps({**header, "bytes": len(body)}).encode() + b"\n" + body


@pytest.mark.parametrize("damage", ["garbage", "not_an_envelope", "other_key", "bad_schema", "truncated",
                                    "nan", "other_file"])
def test_corrupt_report_is_recomputed_never_served(tmp_path: Path, damage: str):
    logdir = make_logdir(tmp_path)
    (logdir / "run_b").rename(tmp_path / "run_b")  # one trace, so each cache file is unambiguous
    cache = tmp_path / "cache"
    p1 = make_plugin(logdir, cache)
    try:
        good = wait_ready(tb_client(p1), "run_a", "worker0", "1")
    finally:
        p1.close()
    (rep_path,) = list(cache.rglob("*.report.json"))
    header, value = read_entry(rep_path)
    assert value == good
    planted = {
        "garbage": b"\x00\xffnot json at all",
        "not_an_envelope": json.dumps(good).encode(),  # a bare report, as the old layout wrote it
        "other_key": entry_bytes({**header, "key": "0" * 40}, {**good, "findings": ["planted"]}),
        "bad_schema": entry_bytes(header, {"status": "ok", "findings": "x"}),
        "truncated": rep_path.read_bytes()[:-100],
        "nan": entry_bytes(header, good, nan=True),  # a NaN token in the value (header length right)
        # well-formed, right key, but the report of another file: a valid-but-bogus entry
        "other_file": entry_bytes(header, {**good, "path": "/elsewhere/x.pt.trace.json", "findings": []}),
    }[damage]
    rep_path.write_bytes(planted)
    ex = GatedExecutor()
    p2 = make_plugin(logdir, cache, executor=ex)
    try:
        c = tb_client(p2)
        codes = []
        deadline = time.time() + 60
        while time.time() < deadline:
            r = c.get(f"{PREFIX}/report", query_string=Q)
            codes.append(r.status_code)
            if r.status_code == 200:
                break
            time.sleep(0.05)
        assert set(codes) <= {200, 202} and codes[-1] == 200
        assert r.get_json() == good  # recomputed: the same report, not the planted one
        assert len(ex.calls) == 1  # analysed again exactly once
        assert read_entry(rep_path)[1] == good  # and the entry is repaired
    finally:
        p2.close()


def test_bad_timelines_index_is_recomputed_not_500(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    (logdir / "run_b").rename(tmp_path / "run_b")
    cache = tmp_path / "cache"
    p1 = make_plugin(logdir, cache)
    try:
        c1 = tb_client(p1)
        wait_ready(c1, "run_a", "worker0", "1")
        good = c1.get(f"{PREFIX}/timeline", query_string=Q).get_json()
        good_steps = c1.get(f"{PREFIX}/steps", query_string=Q).get_json()
    finally:
        p1.close()
    (idx,) = list(cache.rglob("*.timelines.json"))
    idx.write_bytes(entry_bytes(read_entry(idx)[0], [{"ordinal": "x"}]))
    (st,) = list(cache.rglob("*.steps.json"))
    st.write_bytes(b"[1, 2, 3]")
    ex = GatedExecutor()
    p2 = make_plugin(logdir, cache, executor=ex)
    try:
        c = tb_client(p2)
        assert c.get(f"{PREFIX}/report", query_string=Q).status_code == 200  # the report itself is fine
        r = settle(c, "timeline")
        assert r.status_code == 200 and r.get_json() == good
        r = settle(c, "steps")
        assert r.status_code == 200 and r.get_json() == good_steps
        assert 1 <= len(ex.calls) <= 2
    finally:
        p2.close()


def test_fallback_cache_dir_is_per_user_and_0700(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(cache_mod.tempfile, "gettempdir", lambda: str(tmp_path))
    logdir = tmp_path / "logs"
    logdir.mkdir()
    c = ResultCache(logdir / ".cache", logdir=str(logdir))
    base = tmp_path / f"tb_llmdiag-{os.getuid()}"
    assert c.root == base / f"v{cache_mod.CACHE_LAYOUT}" and c.error is None
    assert stat.S_IMODE(os.lstat(base).st_mode) == 0o700
    assert not (logdir / ".cache").exists()
    os.chmod(base, 0o777)  # made world-writable since: made private again
    ResultCache(logdir / ".cache", logdir=str(logdir))
    assert stat.S_IMODE(os.lstat(base).st_mode) == 0o700
    os.rmdir(base / f"v{cache_mod.CACHE_LAYOUT}")
    os.rmdir(base)
    os.symlink(tmp_path / "elsewhere", base)  # a link planted where our directory goes
    (tmp_path / "elsewhere").mkdir()
    c = ResultCache(logdir / ".cache", logdir=str(logdir))
    assert c.root is None and c.error == f"the cache directory {base} is not a directory (a link or a file is there)"


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown to another uid needs root")
def test_cache_dir_owned_by_another_user_is_not_used(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(cache_mod.tempfile, "gettempdir", lambda: str(tmp_path))
    base = tmp_path / f"tb_llmdiag-{os.getuid()}"
    base.mkdir(mode=0o777)
    os.chown(base, 12345, 12345)  # planted by someone else
    logdir = tmp_path / "logs"
    logdir.mkdir()
    c = ResultCache(logdir / ".cache", logdir=str(logdir))
    assert c.root is None
    assert c.state == {"dir": None, "writable": False, "error": (
        f"the cache directory {base} belongs to another user (uid 12345); not using it; results are kept "
        "in memory until TensorBoard stops (analysed again after a restart)")}


def test_unwritable_cache_analyses_in_memory_and_says_so(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    blocker = tmp_path / "cache_is_a_file"
    blocker.write_text("x")
    p = make_plugin(logdir, blocker)
    try:
        c = tb_client(p)
        rep = wait_ready(c, "run_a", "worker0", "1")
        assert rep["status"] == "ok"
        assert settle(c, "timeline").status_code == 200
        body = c.get(f"{PREFIX}/runs").get_json()
        assert body["cache"]["writable"] is False and body["cache"]["dir"] is None
        assert body["cache"]["error"].startswith(f"the cache directory {blocker} is not a directory (a file is there);")
        assert "results are kept in memory" in body["cache"]["error"]
    finally:
        p.close()


def test_cache_that_breaks_while_running_turns_to_memory(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    cache = tmp_path / "cache"
    gate = threading.Event()
    p = make_plugin(logdir, cache, executor=GatedExecutor(gate))
    try:
        c = tb_client(p)
        shutil.rmtree(cache / f"v{cache_mod.CACHE_LAYOUT}")
        (cache / f"v{cache_mod.CACHE_LAYOUT}").write_text("the disk went away")
        gate.set()
        assert wait_ready(c, "run_a", "worker0", "1")["status"] == "ok"
        assert settle(c, "steps").status_code == 200
        st = c.get(f"{PREFIX}/runs").get_json()["cache"]
        assert st["writable"] is False and st["error"].startswith("cannot write the cache directory")
    finally:
        gate.set()
        p.close()


def test_progress_comes_back_from_worker_processes_and_the_parent_gets_the_result(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    (tf,) = [f for f in api.discover(str(logdir)).files if f.run == "run_a"]
    phases: list[tuple[str, str]] = []
    done: list[tuple] = []
    pool, progress = process_pool(1)
    q = AnalysisQueue(pool, claim=lambda key, token: tf, finish=lambda *a: done.append(a),
                 phase=lambda token, ph: phases.append((token, ph)), workers=1, progress_queue=progress)
    try:
        q.submit(tf.key, "tok")
        deadline = time.time() + 120
        while (not done or len(phases) < 3) and time.time() < deadline:
            time.sleep(0.05)
    finally:
        q.stop()
    ((key, token, result, error),) = done
    assert (key, token, error) == (tf.key, "tok", None)
    assert result["report"] == api.analyze(tf).report  # the worker's result is the library's report
    assert len(result["timelines"]) == len(result["report"]["metrics"]["steps"]["per_step"])
    assert phases == [("tok", "reading"), ("tok", "analysing"), ("tok", "timeline")]
