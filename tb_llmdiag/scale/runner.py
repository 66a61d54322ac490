"""Runners: run one function over many items, yielding each outcome as it completes.

An outcome is ``(index, result, None)`` or ``(index, None, exception)``: a task that raised (a bug, a dead
worker) is handed back, never lost, and the caller turns it into that item's error entry.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from typing import Any, Protocol

Outcome = tuple[int, Any, "BaseException | None"]


class Runner(Protocol):
    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any], keys: Sequence[str]) -> Iterator[Outcome]:
        """``fn(item)`` for every item; ``keys`` name the tasks (one per item, unique)."""
        ...


class InlineRunner:
    """In this process, one item after the other (the default: ``llmdiag report`` without options)."""

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any], keys: Sequence[str]) -> Iterator[Outcome]:
        for i, item in enumerate(items):
            try:
                yield i, fn(item), None
            except Exception as exc:  # noqa: BLE001 - handed to the caller, which reports it for this item
                yield i, None, exc


class ExecutorRunner:
    """Over a ``concurrent.futures.Executor`` (``process_runner(n)``: ``n`` spawned processes)."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any], keys: Sequence[str]) -> Iterator[Outcome]:
        futures: dict[Future[Any], int] = {self.executor.submit(fn, item): i for i, item in enumerate(items)}
        for fut in as_completed(futures):
            i = futures.pop(fut)
            exc = fut.exception()
            yield (i, None, exc) if exc is not None else (i, fut.result(), None)


def process_runner(workers: int) -> ExecutorRunner:
    """``workers`` spawned processes (close with ``runner.executor.shutdown()``)."""
    return ExecutorRunner(ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")))


__all__ = ["ExecutorRunner", "InlineRunner", "Outcome", "Runner", "process_runner"]
