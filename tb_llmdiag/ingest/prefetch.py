"""Reading ahead: a trace's blocks read and inflated on a thread while the reader decodes the blocks before them.

Reading a block (the read syscall) and inflating it (zlib/isal) release the GIL, so on a second core they
overlap with msgspec's decode of the previous block, which holds it. At most ``DEPTH`` blocks wait in the
queue (a plain file's blocks live in DEPTH + 2 buffers used in turn), so memory stays bounded. The reader
sees the same blocks, the same counters (``inflated_bytes``, ``raw_bytes`` and ``share`` as of the block
it was last handed) and the same exceptions at the same point as with ``Source.blocks`` read inline.

``LLMDIAG_READ_THREADS=0`` reads inline (kineto/reader.py), the same result (tests/test_row_worker.py).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator

from tb_llmdiag.ingest.source import Source, share_read

DEPTH = 2  # blocks read ahead


class Prefetch:
    """``src``'s blocks, read on a thread; looks like the Source to the reader (counters, ``share``)."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.size_bytes = src.size_bytes
        self.gzipped = src.gzipped
        self.inflated_bytes = 0  # as of the block last handed out
        self.raw_bytes = 0

    def share(self, offset: int) -> float:
        """Source.share as of the block last handed out."""
        return share_read(self.size_bytes, self.gzipped, self.inflated_bytes, self.raw_bytes, offset)

    def blocks(self) -> Iterator[memoryview]:
        items: queue.Queue[tuple[memoryview | None, int, int, BaseException | None]] = queue.Queue(DEPTH)
        stop = threading.Event()
        thread = threading.Thread(target=self._read, args=(items, stop), name="llmdiag-read", daemon=True)
        thread.start()
        try:
            while True:
                block, self.inflated_bytes, self.raw_bytes, exc = items.get()
                if block is None:
                    if exc is not None:
                        raise exc
                    return
                yield block
                del block
        finally:  # done, or the reader stopped early: let the thread see stop, then wait for it
            stop.set()
            while thread.is_alive():
                with contextlib.suppress(queue.Empty):
                    items.get(timeout=0.01)
            thread.join()

    def _read(
        self, items: queue.Queue[tuple[memoryview | None, int, int, BaseException | None]], stop: threading.Event
    ) -> None:
        src = self.src
        gen = src.blocks(ring=DEPTH + 2)
        end: BaseException | None = None
        try:
            for block in gen:
                items.put((block, src.inflated_bytes, src.raw_bytes, None))
                if stop.is_set():
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, raised there
            end = exc
        finally:
            gen.close()
        if not stop.is_set():
            items.put((None, src.inflated_bytes, src.raw_bytes, end))


__all__ = ["DEPTH", "Prefetch"]
