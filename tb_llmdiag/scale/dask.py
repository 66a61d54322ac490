"""The Dask runner: per-rank analyses as ``dask.distributed`` tasks, where the data is.

Contract:
- ``DaskRunner(client).map_unordered(fn, items, keys)``: one task per item, ``client.submit(fn, item,
  key=..., pure=False)``, key ``llmdiag-<key>-<run id>`` (unique per call, so two reports on one cluster
  never share results); outcomes in completion order (``distributed.as_completed``), each future released
  as soon as its result is read, so the scheduler and the workers hold only the tasks still running.
- Only the item (a ``TraceFile``: a path or URL, ~200 bytes) goes out; the worker reads the file itself
  and only ``fn``'s return value (the rank's report and its compact RankSummary) comes back.
- A worker lost mid-task: the scheduler runs the task again on another worker (``distributed``'s own
  recovery; after ``distributed.scheduler.allowed-failures`` deaths, 3 by default, the task fails with
  ``KilledWorker`` and that item gets an error outcome, the others are unaffected).
- ``dask_client(address)``: ``tcp://host:8786`` (an existing scheduler) or ``local[:N]`` (a LocalCluster of
  N single-threaded worker processes on 127.0.0.1, no dashboard; N defaults to the CPU count), closed on exit.
  ``executor(client)``: the tab's ``concurrent.futures`` view of the same client.
- The tab's progress from cluster workers: ``ClusterExecutor`` subscribes its client to a topic of its own
  (``llmdiag-progress-<id>``, ``Client.subscribe_topic``) whose handler puts each ``(token, phase)`` into
  its ``progress_queue`` (the one the tab's job queue drains); its ``task_put`` (a ``PhaseEvents``, only the
  topic is pickled) is handed to each task, which on the worker publishes ``[token, phase]`` with
  ``Worker.log_event``. Best effort: publishing never blocks the task (the worker sends it from its event
  loop) and never raises into it; a lost or malformed event only leaves the run's previous phase showing.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from typing import Any

import dask
import distributed
from distributed import Client, LocalCluster
from distributed.client import ClosedClientError

from tb_llmdiag.errors import LlmDiagError
from tb_llmdiag.scale.runner import Outcome

logger = logging.getLogger(__name__)

_LOCAL = re.compile(r"local(?::(\d+))?")
#: The tab's progress topics on the scheduler: ``<prefix>-<12 hex>``, one per ClusterExecutor.
PROGRESS_TOPIC = "llmdiag-progress"
#: How long to wait for a scheduler to answer (``LLMDIAG_DASK_CONNECT_TIMEOUT_S``).
CONNECT_TIMEOUT_S = float(os.environ.get("LLMDIAG_DASK_CONNECT_TIMEOUT_S", "20"))


class DaskUnavailable(LlmDiagError):
    """The scheduler named by --dask / LLMDIAG_DASK cannot be reached or the address is malformed."""

    exit_code = 2


class DaskRunner:
    def __init__(self, client: Client) -> None:
        self.client = client

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any], keys: Sequence[str]) -> Iterator[Outcome]:
        run_id = uuid.uuid4().hex[:12]
        futures = {
            self.client.submit(fn, item, key=f"llmdiag-{k}-{run_id}", pure=False): i
            for i, (item, k) in enumerate(zip(items, keys))
        }
        try:
            for fut in distributed.as_completed(list(futures)):
                i = futures.pop(fut)
                try:
                    yield i, fut.result(), None
                except Exception as exc:  # noqa: BLE001 - the task raised or its worker died too often
                    yield i, None, exc
                finally:
                    fut.release()
        finally:
            for fut in futures:  # the caller stopped early: cancel what is left
                fut.cancel()


def parse_address(address: str) -> tuple[str, int | None]:
    """("local", N or None) or ("remote", None) for a scheduler address.

    Raises:
        DaskUnavailable: neither ``local[:N]`` (N >= 1) nor ``scheme://host:port``.
    """
    m = _LOCAL.fullmatch(address.strip())
    if m:
        n = int(m.group(1)) if m.group(1) else None
        if n is not None and n < 1:
            raise DaskUnavailable(f"--dask {address}: a LocalCluster needs at least 1 worker")
        return "local", n
    if re.fullmatch(r"[a-z]+://[^\s/]+", address.strip()):
        return "remote", None
    raise DaskUnavailable(f"--dask {address!r}: expected a scheduler address like tcp://host:8786, or local[:N]")


def local_cluster(workers: int) -> LocalCluster:
    """``local:N``: N single-threaded worker processes on 127.0.0.1, no dashboard. Every task goes to a worker
    as soon as it is submitted (``worker-saturation: inf``, work stealing balances them): a worker never
    idles waiting for the scheduler to hand it the next rank, which on a busy machine cost 2 workers ~25 %
    of their speedup (64 ranks of ~70 ms each). The workers' sampling profiler is off (it costs CPU, and a
    frame it holds kept a reader's buffer view alive once: the Kineto reader now copies in that case)."""
    # workers' statistical profiler off: it samples the analysing thread every 10 ms for nothing we show
    with dask.config.set(
        {"distributed.scheduler.worker-saturation": float("inf"), "distributed.worker.profile.enabled": False}
    ):
        return LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )


@contextmanager
def dask_client(address: str) -> Iterator[Client]:
    """A Client on ``address`` (see the module docstring), closed (with its LocalCluster) on exit.

    Raises:
        DaskUnavailable: malformed address, or the scheduler does not answer within CONNECT_TIMEOUT_S.
    """
    kind, n = parse_address(address)
    if kind == "local":
        with local_cluster(n or os.cpu_count() or 1) as cluster, Client(cluster) as client:
            yield client
        return
    try:
        client = Client(address.strip(), timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise DaskUnavailable(f"cannot reach the Dask scheduler at {address}: {exc}".splitlines()[0]) from None
    with client:
        yield client


class PhaseEvents:
    """A task's progress sink on a cluster worker: ``(token, phase)`` -> ``Worker.log_event(topic, [token, phase])``
    (the scheduler forwards it to the subscribed client). Picklable: only the topic travels with the task.
    Best effort: off a worker, or on a worker that is closing, the phase is dropped (logged at debug level)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def __call__(self, item: tuple[str, str]) -> None:
        token, phase = item
        try:
            distributed.get_worker().log_event(self.topic, [token, phase])
        except (ValueError, RuntimeError, TypeError) as e:  # no worker here / its loop is closed / not msgpack-able
            logger.debug("llm_diag: phase %s of %s not published: %s", phase, token, e)


class ClusterExecutor(Executor):
    """The client as a ``concurrent.futures.Executor`` for the tab's job queue (``client.get_executor(pure=False)``;
    each task gets a fresh key). Its tasks' phases come back through ``progress_queue`` (``task_put`` is the sink
    to hand them: module docstring). ``shutdown`` unsubscribes, then closes the client (and a LocalCluster)
    through ``close``."""

    def __init__(self, client: Client, close: Callable[[], None] = lambda: None) -> None:
        self._client = client
        self._inner = client.get_executor(pure=False)
        self._close = close
        self.topic = f"{PROGRESS_TOPIC}-{uuid.uuid4().hex[:12]}"
        self.progress_queue: queue.SimpleQueue[tuple[str, str] | None] = queue.SimpleQueue()
        self.task_put = PhaseEvents(self.topic)
        client.subscribe_topic(self.topic, self._on_event)

    def _on_event(self, event: Any) -> None:
        """The client's handler (its event loop): ``event`` is ``(scheduler time, [token, phase])``; anything else
        is dropped."""
        msg = event[1] if isinstance(event, (tuple, list)) and len(event) == 2 else None
        if isinstance(msg, (tuple, list)) and len(msg) == 2 and all(isinstance(v, str) for v in msg):
            self.progress_queue.put((msg[0], msg[1]))
        else:
            logger.debug("llm_diag: ignoring a malformed progress event on %s: %r", self.topic, event)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return self._inner.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        try:
            self._inner.shutdown(wait=wait and not cancel_futures)
            try:
                self._client.unsubscribe_topic(self.topic)
            except (ValueError, ClosedClientError) as e:  # already unsubscribed, or the client is closed
                logger.debug("llm_diag: unsubscribing %s: %s", self.topic, e)
        finally:
            self._close()


def executor(client: Client, close: Callable[[], None] = lambda: None) -> ClusterExecutor:
    """The tab's executor on ``client`` (see ClusterExecutor)."""
    return ClusterExecutor(client, close)


__all__ = [
    "PROGRESS_TOPIC",
    "ClusterExecutor",
    "DaskRunner",
    "DaskUnavailable",
    "PhaseEvents",
    "dask_client",
    "executor",
    "local_cluster",
    "parse_address",
]
