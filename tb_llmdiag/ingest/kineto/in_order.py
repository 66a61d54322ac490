"""Putting the table's columns in time order, half of them on a thread (not a read-ahead: the reader's last step).

finish() takes each of the ten columns in the order of the sorted times; numpy's take releases the GIL, so a
second thread taking half of them halves that step's wall time on a machine with two cores (the CPU time stays
the same). Peak memory grows by one column at most (each thread holds one unsorted column and its copy).

Converting each piece's rows on a worker while the next one is decoded was tried and did not gain: _rows.c's pass
is 20-90 ms over the 1 GB bench trace, and moving it to the other core cost more (its arrays leave the cache,
each hand-off waits for the GIL) than it saved (see the commit that removed it).

Measured (the 191 MB bench trace, 11 interleaved runs, medians, 2 shared cores): finish() on one thread 1.02x the floor
(plain file) and 0.98x (gzipped), on two 0.98x and 0.95x; a small gain, kept (the 1 GB trace: 0.13-0.15 s -> 0.08-0.1 s).

``LLMDIAG_READ_THREADS=0`` (source.threads_wanted; or ``Columns(threaded=False)``) sorts every column on the
calling thread: the same table (tests/test_read_threads.py).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np


def put_in_order(col: dict[str, np.ndarray], order: np.ndarray | None, threaded: bool) -> None:
    """Each column of ``col`` in time order (``order`` None: copied, the rows being in order already), in place,
    every other column on a second thread when ``threaded``; each unsorted column dropped as its copy is made."""
    keys = list(col)
    if not threaded or len(keys) < 2:
        col.update(zip(keys, _in_order([col.pop(k) for k in keys], order)))
        return
    mine, theirs = keys[1::2], keys[0::2]  # about half of the bytes each (8+1+2+8+8 and 8+4+4+8+4 per row)
    with ThreadPoolExecutor(1, thread_name_prefix="llmdiag-sort") as pool:
        future = pool.submit(_in_order, [col.pop(k) for k in theirs], order)
        done = _in_order([col.pop(k) for k in mine], order)
        col.update(zip(theirs, future.result()))  # an exception on the thread is raised here, as it is
    col.update(zip(mine, done))
    for k in keys:  # the columns back in their order
        col[k] = col.pop(k)


def _in_order(columns: list[np.ndarray], order: np.ndarray | None) -> list[np.ndarray]:
    """The columns taken in ``order`` (None: copied), each unsorted one dropped as its sorted copy is made."""
    out = []
    while columns:
        column = columns.pop(0)
        out.append(column[order] if order is not None else column.copy())
        del column
    return out


__all__ = ["put_in_order"]
