"""Choosing where per-rank analyses run: this process, a local process pool, or a Dask cluster.

``runner_session(dask=None, workers=1)`` is what ``api.report`` and the CLI use; ``tab_executor(address)`` is
what the tab uses (``LLMDIAG_DASK``). Dask is imported here only when an address is given, through
``extras.require`` (MissingExtra, exit code 2, when the ``[dask]`` extra is not installed).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from types import ModuleType
from typing import Any, NamedTuple

from tb_llmdiag.errors import LlmDiagError
from tb_llmdiag.extras import require
from tb_llmdiag.scale.runner import InlineRunner, Runner, process_runner

#: The environment variable naming the tab's Dask scheduler (``tcp://host:8786`` or ``local[:N]``).
TAB_ENV = "LLMDIAG_DASK"


def dask_backend(what: str) -> ModuleType:
    """``tb_llmdiag.scale.dask``. Raises MissingExtra when Dask is not installed."""
    return require("tb_llmdiag.scale.dask", extra="dask", needs=("dask", "distributed", "fsspec"), what=what)


@contextmanager
def runner_session(dask: str | None = None, workers: int = 1) -> Iterator[Runner]:
    """A Runner for one report: on the Dask scheduler ``dask`` (``tcp://host:8786`` / ``local[:N]``), else on
    ``workers`` local processes (> 1), else in this process. Closed (pool, LocalCluster, client) on exit.

    Raises:
        MissingExtra: ``dask`` given but Dask is not installed.
        DaskUnavailable: ``dask`` is malformed or does not answer.
    """
    if dask:
        backend = dask_backend("--dask")
        with backend.dask_client(dask) as client:
            yield backend.DaskRunner(client)
        return
    if workers > 1:
        pool = process_runner(workers)
        try:
            yield pool
        finally:
            pool.executor.shutdown(cancel_futures=True)
        return
    yield InlineRunner()


class TabExecutor(NamedTuple):
    """The tab's executor on a cluster, the queue its tasks' ``(token, phase)`` come back on, and the picklable
    sink to hand each task for them (``scale/dask.py``: ``Worker.log_event`` -> ``Client.subscribe_topic``)."""

    executor: Executor
    progress_queue: Any
    task_put: Callable[[tuple[str, str]], None]


def tab_executor(address: str | None = None) -> TabExecutor | None:
    """The tab's executor on the Dask scheduler ``address`` (by default the one ``LLMDIAG_DASK`` names: None when it
    names none) with its progress queue and task sink; the executor's ``shutdown`` closes the client (and the
    LocalCluster for ``local[:N]``).

    Raises:
        MissingExtra: Dask is not installed.
        DaskUnavailable: ``address`` is malformed or does not answer.
    """
    address = os.environ.get(TAB_ENV, "").strip() if address is None else address
    if not address:
        return None
    try:
        backend = dask_backend(TAB_ENV)
        ctx = backend.dask_client(address)
        client = ctx.__enter__()
    except LlmDiagError as exc:  # said where the address came from: "LLMDIAG_DASK=<address>: <why>"
        exc.args = (f"{TAB_ENV}={address}: {exc}",)
        raise
    ex = backend.executor(client, lambda: ctx.__exit__(None, None, None))
    return TabExecutor(ex, ex.progress_queue, ex.task_put)


__all__ = ["TAB_ENV", "TabExecutor", "dask_backend", "runner_session", "tab_executor"]
