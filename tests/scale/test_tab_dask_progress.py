"""The tab's progress phases from cluster workers (``LLMDIAG_DASK``): each task publishes ``[token, phase]`` with
``Worker.log_event`` on a topic of the tab's own, the client's ``subscribe_topic`` handler puts ``(token, phase)``
on the registry's progress queue, and ``/report``'s 202 body shows it, as with local process pools."""

from __future__ import annotations

import queue
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_plugin import PREFIX, make_plugin, tb_client, wait_ready

from tb_llmdiag import api
from tb_llmdiag.ingest.discover import TraceFile
from tb_llmdiag.scale.dask import PROGRESS_TOPIC, ClusterExecutor, PhaseEvents
from tb_llmdiag.tab import analysis_queue
from tb_llmdiag.tab.catalog import Catalog

PHASES = ["reading", "analysing", "timeline"]  # api.analyze's phases, then Analysed.tab_result's, in order
KEY = ("ddp", "rank1", "1")


def _two_ranks(job16: Path, dest: Path) -> Path:
    run = dest / "logs" / "ddp"
    run.mkdir(parents=True)
    for r in (0, 1):
        shutil.copy(job16 / f"rank{r}.1000000000.pt.trace.json.gz", run)
    return dest / "logs"


def _until(cond: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _rank(logdir: Path, worker: str) -> TraceFile:
    (tf,) = [f for f in api.discover(str(logdir)).files if f.worker == worker]
    return tf


def test_phases_from_cluster_worker_processes_reach_the_catalog(job16: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """local:1: the task runs in a worker process (the sink is pickled there); every phase the registry is told
    for a token, in order, is reading -> analysing -> timeline, and the result is the local analysis'."""
    logdir = _two_ranks(job16, tmp_path)
    seen: dict[str, list[str]] = {}
    lock = threading.Lock()
    real_phase = Catalog._phase

    def recording(self: Catalog, token: str, phase: str) -> None:
        with lock:
            seen.setdefault(token, []).append(phase)
        real_phase(self, token, phase)

    monkeypatch.setattr(Catalog, "_phase", recording)
    monkeypatch.setenv("LLMDIAG_DASK", "local:1")
    p = make_plugin(logdir, tmp_path / "cache")
    try:
        ex = p._catalog.queue._executor
        assert isinstance(ex, ClusterExecutor) and ex.topic.startswith(PROGRESS_TOPIC + "-")
        c = tb_client(p)
        reports = {w: wait_ready(c, "ddp", w, "1") for w in ("rank0", "rank1")}
        tokens = {w: p._catalog.entries[("ddp", w, "1")].cache_key for w in reports}
        # the last event may follow the result by a moment (a separate stream): wait for it, then compare whole lists
        assert _until(lambda: all(len(seen.get(t, [])) >= 3 for t in tokens.values()), 10)
        time.sleep(0.2)  # nothing more arrives
        with lock:
            assert {w: seen.get(t) for w, t in tokens.items()} == {"rank0": PHASES, "rank1": PHASES}
            assert set(seen) == set(tokens.values())
        for w, rep in reports.items():
            assert rep == api.analyze(_rank(logdir, w), summary=True, strict=True).tab_result()["report"]
    finally:
        p.close()


def test_the_202_body_shows_each_phase_of_a_cluster_analysis(job16: Path, tmp_path: Path, threads_client: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The real analysis on the cluster, held at the start of each phase until /report's 202 body has shown it
    (the worker threads run in this process, so the hold can wrap ``api.analyze`` and ``Analysed.tab_result``)."""
    logdir = tmp_path / "logs"
    (logdir / "ddp").mkdir(parents=True)
    shutil.copy(job16 / "rank1.1000000000.pt.trace.json.gz", logdir / "ddp")
    real, real_tab = api.analyze, api.Analysed.tab_result
    reached = {ph: threading.Event() for ph in PHASES}
    release = {ph: threading.Event() for ph in PHASES}

    def holding(progress: Callable[[str], None] | None) -> Callable[[str], None]:
        def hold(phase: str) -> None:
            assert progress is not None
            progress(phase)  # published to the tab first, then held
            reached[phase].set()
            release[phase].wait(30)

        return hold

    def held(tf: TraceFile, *, progress: Callable[[str], None] | None = None, **kw: Any) -> api.Analysed:
        return real(tf, progress=holding(progress), **kw)

    def held_tab(got: api.Analysed, *, progress: Callable[[str], None] | None = None, **kw: Any) -> dict[str, Any]:
        return real_tab(got, progress=holding(progress), **kw)

    monkeypatch.setattr(api, "analyze", held)
    monkeypatch.setattr(api.Analysed, "tab_result", held_tab)
    monkeypatch.setenv("LLMDIAG_DASK", threads_client.scheduler.address)
    p = make_plugin(logdir, tmp_path / "cache")
    try:
        assert isinstance(p._catalog.queue._executor, ClusterExecutor)
        c = tb_client(p)
        shown = []
        for ph in PHASES:
            assert reached[ph].wait(30), ph
            body: dict[str, Any] = {}

            def showing(ph: str = ph) -> bool:
                r = c.get(f"{PREFIX}/report", query_string={"run": "ddp", "worker": "rank1", "span": "1"})
                assert r.status_code == 202, r.get_data(as_text=True)
                body.update(r.get_json())
                return body.get("phase") == ph

            assert _until(showing, 10), (ph, body)
            assert body["status"] == "analysing" and isinstance(body["elapsed_s"], float)
            shown.append(body["phase"])
            release[ph].set()
        assert shown == PHASES
        rep = wait_ready(c, *KEY)
        assert rep == real(_rank(logdir, "rank1")).report
    finally:
        for ev in release.values():
            ev.set()
        p.close()


def test_events_travel_from_a_worker_to_the_executor_queue_and_malformed_ones_are_dropped(threads_client: Any) -> None:
    ex = ClusterExecutor(threads_client)  # no close: the fixture's client outlives it
    other = ClusterExecutor(threads_client)  # a second tab on the same cluster: a topic of its own
    try:
        assert ex.topic != other.topic
        threads_client.submit(PhaseEvents(ex.topic), ("tok-a", "reading"), pure=False).result()
        assert ex.progress_queue.get(timeout=10) == ("tok-a", "reading")
        threads_client.submit(PhaseEvents(other.topic), ("tok-o", "analysing"), pure=False).result()
        assert other.progress_queue.get(timeout=10) == ("tok-o", "analysing")
        for bad in ("reading", ["tok-b"], ["tok-b", 3], {"token": "tok-b"}):
            threads_client.log_event(ex.topic, bad)  # through the scheduler, as a worker's would come
        threads_client.submit(PhaseEvents(ex.topic), ("tok-c", "timeline"), pure=False).result()
        assert ex.progress_queue.get(timeout=10) == ("tok-c", "timeline")  # the bad ones before it were dropped
        for q in (ex.progress_queue, other.progress_queue):  # nothing else, and nothing crossed over
            with pytest.raises(queue.Empty):
                q.get(timeout=0.2)
    finally:
        ex.shutdown()
        other.shutdown()
    assert threads_client.status == "running"  # shutdown without close leaves the client usable
    # unsubscribed: an event on the topic no longer reaches the queue
    threads_client.submit(PhaseEvents(ex.topic), ("tok-d", "reading"), pure=False).result()
    with pytest.raises(queue.Empty):
        ex.progress_queue.get(timeout=0.5)


def test_a_phase_nobody_hears_never_fails_the_analysis(job16: Path, tmp_path: Path, threads_client: Any) -> None:
    """Best effort: with no subscriber on the topic, and off a worker, publishing is a no-op."""
    logdir = _two_ranks(job16, tmp_path)
    tf = _rank(logdir, "rank0")
    got = threads_client.submit(analysis_queue.analyse_task, tf, "tok", PhaseEvents("llmdiag-progress-nobody"),
                                pure=False).result()
    assert got["report"] == api.analyze(tf, summary=True, strict=True).tab_result()["report"]
    PhaseEvents("llmdiag-progress-nobody")(("tok", "reading"))  # in the client process: no worker, dropped
