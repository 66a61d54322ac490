"""The tab's worker pool retires a worker after a big trace (issue #17, bounded memory; tab/analysis_queue.py).

Real spawned pools (``analysis_queue.process_pool``, as TensorBoard builds them) and real traces; the threshold is
lowered through ``AnalysisQueue(retire_bytes=...)`` to fall between two small real captures, whose sizes are
computed here with ``gzip`` (not by the product). Which process ran a task is read from its pid.
"""

from __future__ import annotations

import gzip
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tb_llmdiag import api
from tb_llmdiag.ingest.discover import TraceFile
from tb_llmdiag.tab import analysis_queue
from tracepaths import TEST_DATA

SMALL = next((TEST_DATA / "compile_on").glob("*.pt.trace.json.gz"))
BIG = next((TEST_DATA / "compile_off").glob("*.pt.trace.json.gz"))
PHASES = ["reading", "analysing", "timeline"]


def inflated(path: Path) -> int:
    return len(gzip.decompress(path.read_bytes()))


def pid_task(tf: Any, token: str, put: Any) -> dict[str, Any]:
    """The worker's real task, with the pid of the process that ran it."""
    return {**analysis_queue.analyse_task(tf, token, put), "pid": os.getpid()}


def stub_task(tf: Any, token: str, put: Any) -> dict[str, Any]:
    """No analysis: the pid only (its size for the policy is the file's). ``raise*`` fails like an engine bug;
    ``wait:PATH`` runs until PATH exists (a task still running in a pool when it is retired)."""
    if token.startswith("raise"):
        raise ValueError("boom")
    if token.startswith("wait:"):
        deadline = time.monotonic() + 120
        while not os.path.exists(token[5:]) and time.monotonic() < deadline:
            time.sleep(0.02)
    return {"report": {"read_state": None}, "pid": os.getpid()}


class Queue:
    """A AnalysisQueue over a real process pool of ``workers``; tokens map to trace files."""

    def __init__(self, workers: int, task: Any, retire_bytes: int | None, renew: Any = "pool") -> None:
        self.done: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
        self.phases: dict[str, list[str]] = {}
        self.files: dict[str, TraceFile] = {}
        self.cond = threading.Condition()
        pool, progress = analysis_queue.process_pool(workers)
        self.renewed = 0

        def fresh() -> Any:
            self.renewed += 1
            if renew == "fails":
                raise OSError("no more processes")
            return analysis_queue.process_pool(workers, progress)[0]

        self.q = analysis_queue.AnalysisQueue(
            pool,
            claim=lambda key, token: self.files[token],
            finish=self.finish,
            phase=lambda token, ph: self.phases.setdefault(token, []).append(ph),
            workers=workers,
            progress_queue=progress,
            renew=None if renew is None else fresh,
            task=task,
            retire_bytes=retire_bytes,
        )

    def finish(self, key: Any, token: str, result: dict[str, Any] | None, error: str | None) -> None:
        with self.cond:
            self.done[token] = (result, error)
            self.cond.notify_all()

    def submit(self, token: str, path: Path) -> None:
        self.files[token] = api.discover(str(path)).files[0]
        self.q.submit(self.files[token].key, token)

    def wait(self, token: str) -> tuple[dict[str, Any] | None, str | None]:
        with self.cond:
            assert self.cond.wait_for(lambda: token in self.done, timeout=180), f"{token} never finished"
            return self.done[token]

    def run(self, token: str, path: Path) -> dict[str, Any]:
        self.submit(token, path)
        result, error = self.wait(token)
        assert error is None and result is not None
        return result


def labels(pids: list[int]) -> list[int]:
    """Pids as 0, 1, 2... in order of first appearance: which tasks shared a process."""
    order: dict[int, int] = {}
    return [order.setdefault(p, len(order)) for p in pids]


def test_the_worker_is_retired_after_a_big_trace_and_kept_after_small_ones() -> None:
    small, big = inflated(SMALL), inflated(BIG)
    assert small < big
    q = Queue(1, pid_task, retire_bytes=(small + big) // 2)
    seq = [("s1", SMALL), ("s2", SMALL), ("b1", BIG), ("s3", SMALL), ("s4", SMALL), ("b2", BIG), ("s5", SMALL)]
    try:
        results = {token: q.run(token, path) for token, path in seq}
    finally:
        q.q.stop()
    # the big trace ran in the worker the small ones had used; the next task in a new one, and so on
    assert labels([results[t]["pid"] for t, _ in seq]) == [0, 0, 0, 1, 1, 1, 2]
    assert q.renewed == 2
    expected = {
        SMALL: api.analyze(api.discover(str(SMALL)).files[0]).report,
        BIG: api.analyze(api.discover(str(BIG)).files[0]).report,
    }
    for token, path in seq:  # every task's result is the library's, its phases all reported
        assert results[token]["report"] == expected[path]
        assert analysis_queue.task_bytes(q.files[token], results[token]) == inflated(path)
        assert q.phases[token] == PHASES


def test_no_threshold_or_no_renew_keeps_the_worker() -> None:
    for retire_bytes, renew in ((None, "pool"), (0, None)):
        q = Queue(1, stub_task, retire_bytes=retire_bytes, renew=renew)
        try:
            pids = [q.run(token, BIG)["pid"] for token in ("a", "b", "c")]
        finally:
            q.q.stop()
        assert labels(pids) == [0, 0, 0] and q.renewed == 0


def test_a_pool_that_cannot_be_renewed_keeps_serving() -> None:
    q = Queue(1, stub_task, retire_bytes=0, renew="fails")
    try:
        pids = [q.run(token, SMALL)["pid"] for token in ("a", "b")]
    finally:
        q.q.stop()
    assert labels(pids) == [0, 0] and q.renewed == 2  # tried after each task, kept the pool each time


def test_a_failed_big_analysis_retires_its_worker_and_shows_its_error() -> None:
    q = Queue(1, stub_task, retire_bytes=(SMALL.stat().st_size + BIG.stat().st_size) // 2)
    try:
        first = q.run("first", SMALL)["pid"]
        q.submit("raise", BIG)
        failed = q.wait("raise")
        after = q.run("after", SMALL)["pid"]
    finally:
        q.q.stop()
    assert failed == (None, "analysis failed: ValueError: boom (see the TensorBoard log)")
    assert first != after and q.renewed == 1


def test_a_task_running_in_a_retired_pool_finishes_and_is_reported(tmp_path: Path) -> None:
    """Two dispatchers, a pool of two: a big trace retires the pool while the other worker still runs a task;
    that task is not cancelled, its result comes back, and the next task runs in the new pool."""
    gate = tmp_path / "gate"
    q = Queue(2, stub_task, retire_bytes=(SMALL.stat().st_size + BIG.stat().st_size) // 2)
    try:
        q.submit(f"wait:{gate}", SMALL)
        big = q.run("big", BIG)["pid"]
        assert q.renewed == 1 and f"wait:{gate}" not in q.done
        gate.touch()
        waited, error = q.wait(f"wait:{gate}")
        after = q.run("after", SMALL)["pid"]
    finally:
        q.q.stop()
    assert error is None and waited is not None
    assert len({waited["pid"], big, after}) == 3 and q.renewed == 1


@pytest.mark.parametrize(
    ("result", "size", "expected"),
    [
        ({"report": {"read_state": {"read_bytes": 5_000, "total_bytes": 9_000}}}, 300, 5_000),  # a .gz: inflated
        ({"report": {"read_state": {"read_bytes": 100}}}, 300, 300),  # read less than the file: the file
        ({"report": {"read_state": None}}, 300, 300),  # an XPlane file or an error report
        (None, 300, 300),  # the task raised
        ({"report": {"read_state": {"read_bytes": "x"}}}, 7, 7),
    ],
)
def test_task_bytes(result: dict[str, Any] | None, size: int, expected: int) -> None:
    tf = TraceFile(run="r", worker="w", span="1", path="/x", source_kind="kineto", size_bytes=size, mtime_ns=0)
    assert analysis_queue.task_bytes(tf, result) == expected
