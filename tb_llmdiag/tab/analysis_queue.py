"""The tab's analysis queue: a priority heap drained into an injected executor.

Contract:
- ``AnalysisQueue(executor, claim=..., finish=..., phase=...)``: the executor is given (a process pool in
  TensorBoard; tests pass a ``ThreadPoolExecutor`` or an inline one). Tasks *return* their result
  (``api.Analysed.tab_result``'s dict); ``finish`` is called in this process with it, and the caller keeps
  it (the cache's entries are made by the TensorBoard process only, never by a worker).
- Big arrays do not travel back through the pool: a process worker started with the cache's directory
  (``process_pool(..., cache_root=)``) streams the trace view's arrays into a temporary file beside their
  entry (``tab/arrays.py``'s ``Writer``, one array at a time: the worker's memory stays the trace plus one
  level) and returns its path as ``traceview["file"]``; ``ResultCache.store`` renames it into place (or reads
  it into memory when the cache went to memory meanwhile). On a disk error the worker keeps the arrays in
  memory and returns them as before (``traceview["arrays"]``); so do thread and cluster executors.
- ``workers`` dispatcher threads pop the heap (lower priority first, then FIFO), ask ``claim(key, token)``
  whether the job is still wanted (it returns the TraceFile, or None for a stale or duplicate job), run
  it and report ``finish(key, token, result, error)``: exactly one of ``result`` / ``error`` (one line).
- Progress: a task says each phase through a queue; a drain thread hands ``(token, phase)`` to ``phase``.
  In-process executors get the queue's ``put``; process workers are started with ``init_worker(queue)``
  (see ``process_pool``) and use that one; a cluster's tasks get its picklable ``task_put`` (its phases come
  back on the ``progress_queue`` given with it: ``scale/dask.py``).
- A broken executor (a worker process died: ``BrokenExecutor``) fails the tasks it held with a one-line
  error; ``renew()`` (if given) builds a fresh executor for the tasks after them.
- Bounded worker memory. A worker lives on after a task, and what an analysis leaves behind stays with it:
  heap pages glibc keeps after the arrays are freed (1 GB trace: 90-160 MB resident while idle, and the next
  task starts from there: a small trace after a big one peaked at 197-230 MB instead of 120). So the analysis
  hands its free heap back to the system before it returns (the trace view's build trims the heap once its
  levels are written), and, structurally, a worker that has just analysed a big trace is retired: when
  ``renew`` is given (a process pool) and the task read at least ``retire_bytes`` (``task_bytes``: the JSON
  read, inflated, or the file's size; the parameter, else ``LLMDIAG_WORKER_RETIRE_BYTES`` read when the queue
  is made, default 256 MiB; negative: never), the queue moves to a fresh pool (``renew()``) and shuts the old
  one down without cancelling anything: a task another dispatcher runs there finishes and is reported, and
  nothing more is submitted to it (submits and the swap hold the same lock). The fresh pool starts a worker
  for the next task, as any new pool does (~0.3 s, paid once after a big trace; not started ahead, so that
  nothing is left half-started when TensorBoard exits). Small traces keep their worker (``max_tasks_per_child``
  still renews it after 8 tasks). When ``renew()`` fails the old pool stays in use.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import multiprocessing
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from tb_llmdiag import api
from tb_llmdiag.tab import arrays as array_file
from tb_llmdiag.tab.cache import CACHE_LAYOUT, arrays_path

if TYPE_CHECKING:
    from tb_llmdiag.ingest.discover import TraceFile

logger = logging.getLogger(__name__)

Key = tuple[str, str, str]
Put = Callable[[tuple[str, str]], None]

#: A task that read at least this many bytes retires its worker (module docstring); negative: never.
RETIRE_ENV = "LLMDIAG_WORKER_RETIRE_BYTES"
DEFAULT_RETIRE_BYTES = 256 << 20


def retire_bytes_from_env() -> int | None:
    """``LLMDIAG_WORKER_RETIRE_BYTES`` as a threshold (None: never retire); the default when unset or not a number."""
    raw = os.environ.get(RETIRE_ENV, "").strip()
    try:
        value = int(raw) if raw else DEFAULT_RETIRE_BYTES
    except ValueError:
        logger.warning("llm_diag: %s=%r is not a number of bytes; using %d", RETIRE_ENV, raw, DEFAULT_RETIRE_BYTES)
        value = DEFAULT_RETIRE_BYTES
    return None if value < 0 else value


def task_bytes(tf: Any, result: dict[str, Any] | None) -> int:
    """How big the task's trace was: the bytes of JSON its report read (a .gz inflated), or the file's size when
    that is more or there is no report (an XPlane file, a task that raised)."""
    size = getattr(tf, "size_bytes", 0)
    read = 0
    report = result.get("report") if isinstance(result, dict) else None
    state = report.get("read_state") if isinstance(report, dict) else None
    if isinstance(state, dict) and isinstance(state.get("read_bytes"), int):
        read = state["read_bytes"]
    return max(size if isinstance(size, int) else 0, read)


#: In a worker process: where tasks send their progress, and the cache's directory (set by ``init_worker``).
_WORKER_PROGRESS: Any = None
_WORKER_CACHE: str | None = None


#: how often a worker checks that TensorBoard is still its parent
PARENT_CHECK_S = 1.0


def init_worker(progress_queue: Any, cache_root: str | None = None) -> None:
    """Process-pool initializer: remember the parent's progress queue and its cache directory, and die with the
    parent (``_exit_with_parent``)."""
    global _WORKER_PROGRESS, _WORKER_CACHE
    _WORKER_PROGRESS, _WORKER_CACHE = progress_queue, cache_root
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), name="llmdiag-parent-watch", daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """Exit this worker once its parent is gone (#27: a TensorBoard killed by a signal left its workers running as
    orphans, each holding its memory): the parent's death reparents us, so getppid() changes."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


class Spill:
    """The trace view's arrays of one analysis, streamed into the cache's directory (module docstring); after a
    disk error, kept in memory (what was already written is read back)."""

    def __init__(self, root: str, key: str) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.writer: array_file.Writer | None = None
        try:
            self.writer = array_file.Writer(arrays_path(Path(root), key), CACHE_LAYOUT, key, "traceview.bin")
        except OSError as e:
            logger.warning("llm_diag: keeping the trace view's arrays in memory: %s", e)

    def add(self, name: str, a: np.ndarray) -> None:
        if self.writer is not None:
            try:
                self.writer.add(name, a)
                return
            except OSError as e:
                self._fall_back(e)
        self.arrays[name] = a.copy() if a.base is not None else a

    def _fall_back(self, e: OSError) -> None:
        logger.warning("llm_diag: keeping the trace view's arrays in memory: %s", e)
        writer, self.writer = self.writer, None
        if writer is not None:
            self.arrays = writer.read_back()
            writer.abort()

    def done(self, traceview: dict[str, Any]) -> None:
        """Say in ``traceview`` where the arrays are: ``file`` (streamed) or ``arrays`` (in memory)."""
        if self.writer is not None:
            try:
                traceview["file"], traceview["arrays"] = str(self.writer.finish()), None
                return
            except OSError as e:
                self._fall_back(e)
        traceview["arrays"] = self.arrays

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()


def analyse_task(tf: TraceFile, token: str, put: Put | None) -> dict[str, Any]:
    """One analysis, run by the executor: the tab's result for ``tf`` (nothing is written anywhere)."""
    sink = put if put is not None else (_WORKER_PROGRESS.put if _WORKER_PROGRESS is not None else None)

    def progress(phase: str) -> None:
        if sink is not None:
            with contextlib.suppress(OSError, ValueError, EOFError):  # the parent went away: progress is best effort
                sink((token, phase))

    if _WORKER_CACHE is None:
        return api.analyze(tf, summary=True, progress=progress, strict=True).tab_result(progress=progress)
    spill = Spill(_WORKER_CACHE, token)
    try:
        result = api.analyze(tf, summary=True, progress=progress, strict=True).tab_result(
            progress=progress, put_array=spill.add
        )
        if result["traceview"] is not None:
            spill.done(result["traceview"])
        else:
            spill.abort()
    except BaseException:
        spill.abort()
        raise
    return result


def process_pool(
    workers: int, progress_queue: Any = None, cache_root: str | os.PathLike[str] | None = None
) -> tuple[Executor, Any]:
    """TensorBoard's executor: ``workers`` spawned processes (a big parse never holds the server's GIL),
    and the queue their progress comes back on (a new one, or the one given: a renewed pool reuses it).
    With ``cache_root`` (the cache's directory), workers stream the trace view's arrays there (module docstring)."""
    ctx = multiprocessing.get_context("spawn")
    if progress_queue is None:
        progress_queue = ctx.SimpleQueue()
    root = None if cache_root is None else str(cache_root)
    kw: dict[str, Any] = {"mp_context": ctx, "initializer": init_worker, "initargs": (progress_queue, root)}
    if sys.version_info >= (3, 11):
        return ProcessPoolExecutor(max_workers=workers, max_tasks_per_child=8, **kw), progress_queue
    return ProcessPoolExecutor(max_workers=workers, **kw), progress_queue  # Python 3.10: no max_tasks_per_child


class AnalysisQueue:
    def __init__(
        self,
        executor: Executor,
        *,
        claim: Callable[[Key, str], TraceFile | None],
        finish: Callable[[Key, str, dict[str, Any] | None, str | None], None],
        phase: Callable[[str, str], None],
        workers: int = 2,
        progress_queue: Any = None,
        renew: Callable[[], Executor] | None = None,
        task: Callable[[TraceFile, str, Put | None], dict[str, Any]] = analyse_task,
        retire_bytes: int | Literal["env"] | None = "env",
        task_put: Put | None = None,
    ) -> None:
        self._executor = executor
        self._claim, self._finish, self._phase = claim, finish, phase
        self._renew = renew
        self._retire_bytes = retire_bytes_from_env() if retire_bytes == "env" else retire_bytes
        self._task = task
        # Worker processes were started with the queue; in-process tasks are handed its put; cluster tasks task_put.
        self._progress: Any = progress_queue if progress_queue is not None else queue.SimpleQueue()
        self._put: Put | None = task_put or (None if progress_queue is not None else self._progress.put)
        self._heap: list[tuple[int, int, Key, str]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._dispatch, name=f"llmdiag-job-{i}", daemon=True)
            for i in range(max(1, workers))
        ]
        self._threads.append(threading.Thread(target=self._drain, name="llmdiag-progress", daemon=True))
        for t in self._threads:
            t.start()

    def submit(self, key: Key, token: str, priority: int = 1) -> None:
        """Queue ``key`` (priority 0 jumps ahead of 1). Duplicates are dropped by ``claim``."""
        with self._cond:
            heapq.heappush(self._heap, (priority, next(self._seq), key, token))
            self._cond.notify()

    def position(self, key: Key, wanted: Callable[[Key, str], bool]) -> int | None:
        """How many distinct wanted tasks are ahead of ``key``'s first one; None if it is not queued."""
        with self._cond:
            items = sorted(self._heap)
        seen: set[Key] = set()
        for _, _, k, token in items:
            if k in seen or not wanted(k, token):
                continue
            if k == key:
                return len(seen)
            seen.add(k)
        return None

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        with contextlib.suppress(OSError, ValueError):
            self._progress.put(None)
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- threads
    def _dispatch(self) -> None:
        while True:
            with self._cond:
                while not self._heap and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                _, _, key, token = heapq.heappop(self._heap)
            tf = self._claim(key, token)
            if tf is not None:
                self._run(key, token, tf)  # never raises: every outcome goes to finish()

    def _run(self, key: Key, token: str, tf: TraceFile) -> None:
        try:
            with self._cond:  # never submitted to a pool that _retire_after has just shut down
                executor = self._executor
                future = executor.submit(self._task, tf, token, self._put)
            result = future.result()
        except BrokenExecutor as e:
            self._replace(executor)
            self._finish(
                key,
                token,
                None,
                f"the analysis process died ({type(e).__name__}); the trace may be "
                "too big for memory. It is analysed again when the file changes or TensorBoard restarts",
            )
        except Exception as e:  # noqa: BLE001 - a bug in the engine: shown on the run, logged in full
            logger.exception("llm_diag: analysing %s failed", getattr(tf, "path", key))
            line = f"{type(e).__name__}: {e}".splitlines()[0][:300] if str(e) else type(e).__name__
            self._retire_after(executor, tf, None)
            self._finish(key, token, None, f"analysis failed: {line} (see the TensorBoard log)")
        else:
            self._retire_after(executor, tf, result)
            self._finish(key, token, result, None)

    def _retire_after(self, executor: Executor, tf: TraceFile, result: dict[str, Any] | None) -> None:
        """Move to a fresh pool when this task's trace was big (module docstring); the old one finishes what it runs."""
        if self._renew is None or self._retire_bytes is None or task_bytes(tf, result) < self._retire_bytes:
            return
        with self._cond:
            if self._executor is not executor or self._stopped:
                return  # already retired (or replaced) by another dispatcher
            try:
                fresh = self._renew()
            except (OSError, ValueError) as e:
                logger.warning("llm_diag: cannot start a new analysis pool; keeping the current one: %s", e)
                return
            self._executor = fresh
            executor.shutdown(wait=False)

    def _replace(self, broken: Executor) -> None:
        with self._cond:
            if self._executor is not broken or self._renew is None or self._stopped:
                return
            broken.shutdown(wait=False, cancel_futures=True)
            try:
                self._executor = self._renew()
            except (OSError, ValueError) as e:
                logger.warning("llm_diag: cannot start a new analysis pool: %s", e)

    def _drain(self) -> None:
        while True:
            try:
                item = self._progress.get()
            except (OSError, EOFError, ValueError):
                return
            if item is None:
                return
            token, phase = item
            self._phase(token, phase)
