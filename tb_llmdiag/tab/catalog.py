"""The tab's catalog of traces: the discovered index and each trace's analysis status, behind one lock.

Contract:
- ``scan()`` re-runs discovery (``api.discover``); a new file, or a file whose size or mtime changed
  (a new cache key), gets a fresh entry: ``ready`` if the cache holds a valid result, else ``pending``
  and queued. An entry whose key did not change keeps its state, so a failed analysis is retried only
  when its file changes (or TensorBoard restarts), never in a loop.
- ``active`` is a flag the scan thread keeps: reading it never blocks.
- Entry states: ``pending`` (queued), ``analysing`` (``phase`` from the worker), ``ready`` (the result is
  in the cache; its report may be an error RunReport: the file is not a usable trace), ``failed`` (the
  analysis itself did not finish: a bug or a dead worker process; ``error`` says why in one line).
- ``writing``: the file is still being written: its size or mtime changed since the previous scan (it is
  growing), or ``TraceFile.writing`` says so (it moved while looked at, or a recent gzip has no end marker). It is not
  queued and its result is never cached: each scan looks again, and once one scan finds it unchanged and
  complete it is analysed like a new file.
- Results come back from the job queue to ``_finish``, which stores them in the cache (this process).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tb_llmdiag import api
from tb_llmdiag.tab.analysis_queue import AnalysisQueue, Key
from tb_llmdiag.tab.cache import ResultCache

if TYPE_CHECKING:
    from tb_llmdiag.ingest.discover import Index, TraceFile

logger = logging.getLogger(__name__)


@dataclass
class Entry:
    tf: TraceFile
    cache_key: str
    status: str = "pending"  # pending | analysing | ready | failed | writing
    error: str | None = None
    report_status: str | None = None  # "ok" | "error" once ready
    phase: str | None = None
    started_s: float | None = None
    saving_ns: int | None = None  # the top finding's estimated saving, once ready (the tab opens the largest)

    def identity(self) -> dict[str, Any]:
        """What this file's report must say about itself (a cached report saying otherwise is a miss)."""
        tf = self.tf
        return {"run": tf.run, "worker": tf.worker, "span": tf.span, "path": tf.path, "size_bytes": tf.size_bytes}

    def shown(self) -> tuple[str, str | None]:
        """The status the tab shows: pending / analysing / ready / error / writing (+ one line)."""
        if self.status == "writing":
            return "writing", self.error
        if self.status == "ready":
            return ("error", self.error) if self.report_status == "error" else ("ready", None)
        if self.status == "failed":
            return "error", self.error
        return self.status, None


def top_saving_ns(report: dict[str, Any]) -> int | None:
    """The largest estimated saving (ns per step) among a report's findings, None when none is estimable."""
    best = None
    for f in report.get("findings") or []:
        ns = (f.get("saving") or {}).get("ns") if isinstance(f, dict) else None
        if isinstance(ns, int) and not isinstance(ns, bool) and (best is None or ns > best):
            best = ns
    return best


#: jobs kept built in memory (``Catalog.job_memo``)
JOBS_KEPT = 4


class Catalog:
    def __init__(
        self,
        logdir: str,
        cache: ResultCache,
        executor: Executor,
        *,
        workers: int = 2,
        scan_interval_s: float = 10.0,
        progress_queue: Any = None,
        renew: Callable[[], Executor] | None = None,
        task_put: Callable[[tuple[str, str]], None] | None = None,
        discover: Callable[[str], Index] = api.discover,
    ) -> None:
        self.logdir = logdir
        self.cache = cache
        self.scan_interval_s = scan_interval_s
        self._discover = discover
        self.lock = threading.Lock()
        self.entries: dict[Key, Entry] = {}
        #: the last jobs built (``routes.job_of``), by (run, span), with the member entries they were built from
        self._jobs: OrderedDict[tuple[str, str], tuple[tuple[Any, ...], dict[str, Any]]] = OrderedDict()
        self.warnings: tuple[str, ...] = ()
        self.scan_error: str | None = None
        self.active = False
        self.first_scan = threading.Event()
        self._stop = threading.Event()
        self.queue = AnalysisQueue(
            executor,
            claim=self._claim,
            finish=self._finish,
            phase=self._phase,
            workers=workers,
            progress_queue=progress_queue,
            renew=renew,
            task_put=task_put,
        )

    def start(self) -> None:
        threading.Thread(target=self._scan_loop, name="llmdiag-scan", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self.queue.stop()

    def _scan_loop(self) -> None:
        while not self._stop.is_set():
            self.scan()
            self.first_scan.set()
            self._stop.wait(self.scan_interval_s)

    # -- scanning
    def scan(self) -> None:
        if not self.logdir:
            with self.lock:
                self.scan_error, self.active = "TensorBoard was started without --logdir", False
            return
        try:
            index = self._discover(self.logdir)
        except Exception as e:  # noqa: BLE001 - a vanished or unreadable logdir must not kill the scan thread
            logger.warning("llm_diag: scanning %s failed: %s", self.logdir, e)
            with self.lock:
                self.scan_error = f"scanning the logdir failed: {e}"
            return
        fresh: list[Entry] = []
        for tf in index.files:
            ck = self.cache.key(tf)
            with self.lock:
                old = self.entries.get(tf.key)
                if old is not None and old.cache_key == ck and old.status != "writing":
                    old.tf = tf
                    continue
            entry = Entry(tf=tf, cache_key=ck)
            # never cached, never queued while it changes: growth since the previous scan, or tf.writing()
            writing = (
                (
                    f"still being written: it changed since the last scan ({old.tf.size_bytes:,} -> "
                    f"{tf.size_bytes:,} bytes)"
                )
                if old is not None and old.cache_key != ck
                else tf.writing()
            )
            if writing is not None:
                entry.status, entry.error = "writing", writing
            else:
                rep = self.cache.get(ck, "report", entry.identity())
                if rep is not None:
                    entry.status, entry.report_status, entry.error = "ready", rep["status"], rep["error"]
                    entry.saving_ns = top_saving_ns(rep)
            fresh.append(entry)
        with self.lock:
            keys = {tf.key for tf in index.files}
            for k in [k for k in self.entries if k not in keys]:
                del self.entries[k]
            for entry in fresh:
                self.entries[entry.tf.key] = entry
                if entry.status == "pending":
                    self.queue.submit(entry.tf.key, entry.cache_key, priority=1)
            self.warnings = tuple(index.warnings)
            self.scan_error = None
            self.active = bool(self.entries)

    # -- queue callbacks
    def _claim(self, key: Key, token: str) -> TraceFile | None:
        with self.lock:
            e = self.entries.get(key)
            if e is None or e.cache_key != token or e.status != "pending":
                return None  # a duplicate, a stale version or already done
            e.status, e.phase, e.started_s = "analysing", "starting", time.monotonic()
            return e.tf

    def _phase(self, token: str, phase: str) -> None:
        with self.lock:
            for e in self.entries.values():
                if e.cache_key == token and e.status == "analysing":
                    e.phase = phase

    def _finish(self, key: Key, token: str, result: dict[str, Any] | None, error: str | None) -> None:
        if result is not None and result["report"].get("status") == "writing":  # never kept as final
            with self.lock:
                e = self.entries.get(key)
                if e is not None and e.cache_key == token:
                    e.status, e.error, e.phase, e.report_status = "writing", result["report"].get("error"), None, None
            return
        if result is not None:
            try:
                self.cache.store(token, result)  # never raises for disk trouble: falls back to memory
            except (TypeError, ValueError, KeyError) as exc:  # a result the cache cannot encode: a bug, shown
                logger.exception("llm_diag: keeping the result of %s failed", key)
                result, error = None, f"analysis failed: cannot keep its result ({type(exc).__name__}: {exc})"
        with self.lock:
            e = self.entries.get(key)
            if e is None or e.cache_key != token:
                return
            e.phase = None
            if result is None:
                e.status, e.error, e.report_status = "failed", error, None
            else:
                rep = result["report"]
                e.status, e.report_status, e.error = "ready", rep.get("status"), rep.get("error")
                e.saving_ns = top_saving_ns(rep)

    # -- requests
    def prioritise(self, key: Key) -> None:
        with self.lock:
            e = self.entries.get(key)
            if e is not None and e.status == "pending":
                self.queue.submit(key, e.cache_key, priority=0)

    def requeue(self, key: Key) -> None:
        """Analyse a ready run again, first in line (its cached result vanished or is invalid)."""
        with self.lock:
            e = self.entries.get(key)
            if e is not None and e.status == "ready":
                e.status = "pending"
                self.queue.submit(key, e.cache_key, priority=0)

    def queue_position(self, key: Key) -> int | None:
        def wanted(k: Key, token: str) -> bool:
            with self.lock:
                e = self.entries.get(k)
                return e is not None and e.cache_key == token and e.status == "pending"

        return self.queue.position(key, wanted)

    def lookup(self, key: Key) -> Entry | None:
        with self.lock:
            return self.entries.get(key)

    def job_memo(self, run: str, span: str, members: tuple[Any, ...]) -> dict[str, Any] | None:
        """The job last built for (run, span) from exactly these ``members`` (their keys, cache keys and
        statuses), else None: a job of 1,000 ranks is built once, not on every request."""
        with self.lock:
            got = self._jobs.get((run, span))
            if got is None or got[0] != members:
                return None
            self._jobs.move_to_end((run, span))
            return got[1]

    def keep_job(self, run: str, span: str, members: tuple[Any, ...], job: dict[str, Any]) -> None:
        """Remember a job built from ``members`` (the last ``JOBS_KEPT``)."""
        with self.lock:
            self._jobs[(run, span)] = (members, job)
            self._jobs.move_to_end((run, span))
            while len(self._jobs) > JOBS_KEPT:
                self._jobs.popitem(last=False)

    def snapshot(self) -> list[tuple[Key, Entry]]:
        with self.lock:
            return sorted(self.entries.items(), key=lambda kv: kv[1].tf.order)
