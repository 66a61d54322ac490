"""Reading an uncompressed trace ahead and cutting it into pieces on a native thread (_readahead.c).

The depth scan that finds the boundaries between events (split.py) is a quarter of the time it takes to read
an uncompressed trace (0.41 of 1.7 s on the 1 GB bench trace). It needs no Python object, so the compiled
extension runs it, with the reads, on a thread of its own that never takes the GIL: the reader's msgspec decode,
which holds the GIL, goes on meanwhile. (A Python thread doing the same gained nothing: each of its reads and scans
waits for the GIL, which the decode holds for milliseconds at a time, and the reader ended up waiting for it.)

The reader finds where the events begin in the first blocks itself, then calls ``start_cut`` with the scan's state
after the block in hand; from the next block on, each block comes with its ``note``: the scan of exactly that block
from exactly that state, which ``cut_of`` turns into the reader's SplitResult. A note that does not fit the reader's
own position and state is not used (the reader scans the block itself), so the result is the same as reading
inline (``LLMDIAG_READ_THREADS=0``; tests/test_read_threads.py).

Gzipped files are inflated ahead by the source itself (source.py: inflating releases the GIL, and dominates). Without
the extension an uncompressed file is read inline: a Python thread reading it ahead gained nothing.

Measured (the 191 MB bench trace uncompressed, 11 interleaved runs, medians, 2 shared cores): read inline 1.18x the
floor, read ahead on a Python thread 1.17x, read and cut on this native thread 0.98x.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tb_llmdiag.ingest import source
from tb_llmdiag.ingest.kineto import scan_ext
from tb_llmdiag.ingest.kineto.split import SplitResult, SplitState
from tb_llmdiag.ingest.source import AHEAD, Source, share_read

#: a block's note: the scan's state going in, then what split returns (last_comma, close, depth, in_string, escape,
#: deep), positions within the block
Note = tuple[int, bool, bool, int, int, int, bool, bool, int]


def native_available(src: Source) -> bool:
    """Whether ``src`` can be read by ReadAhead: an uncompressed file, and the extension built with it."""
    return not src.gzipped and hasattr(scan_ext.ext, "ReadAhead")


class ReadAhead:
    """``src``'s blocks read (and, after ``start_cut``, cut) on a native thread; looks like the Source to the reader."""

    def __init__(self, src: Source, block_bytes: int | None = None, ring: int = AHEAD + 2) -> None:
        self.src = src
        self.size_bytes = src.size_bytes
        self.inflated_bytes = 0  # as of the block last handed out
        self.note: Note | None = None  # the scan of the block last handed out, if the thread made it
        self.note_bytes = 0  # the length of that block
        self.cutting = False  # start_cut was called: the blocks after the one then in hand come with a note
        self.block_bytes = block_bytes or source.BLOCK_BYTES  # read when made (the tests make blocks small)
        self.ring = ring
        self._native: Any = None

    def share(self, offset: int) -> float:
        """Source.share as of the block last handed out."""
        return share_read(self.size_bytes, False, self.inflated_bytes, 0, offset)

    def blocks(self) -> Iterator[memoryview]:
        buffers = [bytearray(self.block_bytes) for _ in range(self.ring)]
        ext = scan_ext.ext
        assert ext is not None
        with self.src.raw:
            self._native = native = ext.ReadAhead(self.src.raw.fileno(), buffers)
            try:
                while (got := native.next()) is not None:
                    slot, self.note_bytes, self.note = got
                    self.inflated_bytes += self.note_bytes
                    with memoryview(buffers[slot]) as view:
                        yield view[: self.note_bytes]  # valid until the next block is asked for
            finally:  # done, or the reader stopped early: the thread stops before the file closes
                native.close()
                self._native = None

    def start_cut(self, state: SplitState, max_depth: int) -> None:
        """From the next block on, scan each block on the thread, beginning in ``state``."""
        if self._native is not None and not self.cutting:
            self._native.start_cut(state.depth, state.in_string, state.escape, max_depth)
            self.cutting = True

    def cut(self, unscanned: int, end: int, state: SplitState) -> SplitResult | None:
        """The reader's SplitResult for buf[unscanned:end] when that is just the block last handed out (it was
        appended to buf, ending at ``end``) and the thread scanned it from ``state``; else None (scan it there)."""
        if not self.cutting or end - unscanned != self.note_bytes:
            return None
        return cut_of(self.note, unscanned, state)


def cut_of(note: Note | None, at: int, state: SplitState) -> SplitResult | None:
    """The reader's SplitResult for a block that begins at buffer index ``at``, when the thread scanned it from
    ``state`` (None: it did not, or from another state: the reader scans it itself)."""
    if note is None or (note[0], note[1], note[2]) != state:
        return None
    last_comma, close, depth, in_string, escape, deep = note[3:]
    return SplitResult(
        at + last_comma if last_comma >= 0 else -1,
        at + close if close >= 0 else -1,
        SplitState(depth, in_string, escape),
        at + deep if deep >= 0 else -1,
    )


__all__ = ["Note", "ReadAhead", "cut_of", "native_available"]
