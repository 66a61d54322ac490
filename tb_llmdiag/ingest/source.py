"""Opening a trace file safely and reading its (decompressed) bytes in bounded blocks.

Only regular files are opened (files.py): a FIFO would block the reader forever, a device (/dev/zero) never
ends, and each gets its own one-line message. Gzip is inflated block by block with a bound on the inflated
size checked while inflating, so a small compression bomb stops at the bound in a fraction of a second
instead of filling memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gzip
import os
import queue
import threading
import types
import zlib
from collections.abc import Callable, Generator, Iterator

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.files import open_trace

_gzip: types.ModuleType
_zlib: types.ModuleType
try:  # isal's gzip reader inflates ~2x faster than the standard library's; optional
    from isal import igzip as _gzip
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - depends on the environment
    _gzip = gzip
    _zlib = zlib
#: what a gzip reader raises on corrupt data (a cut-short stream raises EOFError)
GZIP_ERRORS = (gzip.BadGzipFile, zlib.error, _zlib.error, OSError)

#: Decompressed bytes per block, and so about the size of a decoded piece: small enough that a piece's
#: text and then its Structs are still in the CPU cache when they are decoded and scanned (2 MiB read
#: ~20 % faster than 16 MiB on the bench trace).
BLOCK_BYTES = 2 << 20
#: Inflated bytes allowed per compressed byte (real Kineto traces inflate ~10-20x: the bench trace 16x), with a floor for
#: small files, and an absolute cap: a gzip bomb stops here. Checked on the running ratio (inflated
#: so far / compressed read so far), so a bomb stops after MIN_INFLATED_BYTES, not at the total bound.
MAX_INFLATE_RATIO = float(os.environ.get("LLMDIAG_MAX_INFLATE_RATIO", "64"))
MIN_INFLATED_BYTES = 32 << 20
MAX_INFLATED_BYTES = int(os.environ.get("LLMDIAG_MAX_INFLATED_BYTES", str(16 << 30)))

#: glibc's malloc_trim, where there is one: the reader frees ~10^5 small per-piece objects whose memory
#: glibc keeps in holes of its heap; handing it back after a read lowers the report's peak (1 GB bench
#: trace: 220 -> 167 MB before the analysis starts). None elsewhere (musl, macOS, Windows).
_MALLOC_TRIM: Callable[[int], int] | None
try:
    _MALLOC_TRIM = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
except (OSError, AttributeError):  # pragma: no cover - not glibc
    _MALLOC_TRIM = None


def release_free_memory() -> None:
    """Give the allocator's free heap pages back to the system (a no-op where that is not available)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def share_read(size_bytes: int, gzipped: bool, inflated_bytes: int, raw_bytes: int, offset: int) -> float:
    """The share of a file of ``size_bytes`` read at decompressed ``offset``, when ``inflated_bytes`` (from
    ``raw_bytes`` compressed) have been handed out."""
    if not size_bytes:
        return 0.0
    if not gzipped:
        return min(1.0, offset / size_bytes)
    if offset >= inflated_bytes:
        return min(1.0, raw_bytes / size_bytes)
    # inside the bytes handed out: scale the compressed position by the inflated one
    return min(1.0, (raw_bytes / size_bytes) * (offset / max(1, inflated_bytes)))


class Truncated(Exception):
    """The compressed stream breaks off or is corrupt; carries the reason."""


def threads_wanted() -> bool:
    """Whether the reader may use a second thread (default yes; ``LLMDIAG_READ_THREADS=0``: no)."""
    return os.environ.get("LLMDIAG_READ_THREADS", "1").strip().lower() not in ("0", "false", "no", "off")


#: a block and the counters as of it: (view, inflated bytes so far, compressed bytes consumed so far)
Made = tuple[memoryview, int, int]


class Source:
    """A trace file's decompressed bytes, block by block, with how far the read has got.

    ``blocks()`` yields each block as a view (a plain file's: of one reused buffer, valid until the next is asked
    for); it raises Truncated when the gzip stream ends early or is corrupt, and TraceFormatError past the inflate
    bound. The counters (``inflated_bytes``, ``raw_bytes``, ``share``) are as of the block last handed out.

    Reading ahead: a gzip stream is inflated on a thread (``ahead``, unless ``LLMDIAG_READ_THREADS=0``) while the
    reader decodes the blocks before: reading and inflating release the GIL, so on a second core they overlap with
    msgspec's decode, which holds it (the bench trace, gzipped: 1.11x -> 0.95x its floor). The reader sees the same
    blocks, counters and exceptions at the same point as inline. A plain file is read inline: a Python thread
    reading it gained nothing (1.18x -> 1.17x); the Kineto reader reads and cuts it on a native thread instead
    (kineto/read_ahead.py).
    """

    def __init__(self, path: str, inside: str = "", ahead: bool | None = None) -> None:
        self.path = path
        self.raw, self.size_bytes = open_trace(path, inside)
        self.gzipped = self.raw.read(2) == b"\x1f\x8b"
        self.raw.seek(0)
        self.inflated_bytes = 0  # decompressed bytes handed out so far
        self.raw_bytes = 0  # compressed bytes consumed so far, as of the block last handed out
        self.limit_bytes = (
            min(MAX_INFLATED_BYTES, max(MIN_INFLATED_BYTES, int(MAX_INFLATE_RATIO * self.size_bytes)))
            if self.gzipped
            else None
        )
        self.ahead = self.gzipped and (threads_wanted() if ahead is None else ahead)

    def share(self, offset: int) -> float:
        """The share of the file read when ``offset`` decompressed bytes have been handed out."""
        return share_read(self.size_bytes, self.gzipped, self.inflated_bytes, self.raw_bytes, offset)

    def blocks(self) -> Generator[memoryview, None, None]:
        """The blocks (class docstring); the file is closed when they end or the reader stops asking."""
        with self.raw:
            made = self._inflate() if self.gzipped else self._read()
            if self.ahead:
                made = ahead_of(made)
            try:
                for block, self.inflated_bytes, self.raw_bytes in made:
                    yield block
                    del block
            finally:  # done, or the reader stopped early: the thread stops before the file closes
                made.close()

    def _read(self) -> Generator[Made, None, None]:
        view = memoryview(bytearray(BLOCK_BYTES))
        inflated = 0
        while n := self.raw.readinto(view):
            inflated += n
            yield view[:n], inflated, 0

    def _inflate(self) -> Generator[Made, None, None]:
        """Inflate gzip member after member, at most BLOCK_BYTES per step, so every byte before a cut
        or a corrupt spot is handed out and the bound is checked before memory is spent."""
        d = _zlib.decompressobj(31)
        fed = False  # the current member has been given bytes
        pending = b""
        inflated = raw = 0
        while True:
            if not pending:
                pending = self.raw.read(BLOCK_BYTES // 4)
                raw += len(pending)
                if not pending:
                    if fed and not d.eof:
                        rest = d.flush()  # what the cut stream still inflates to
                        if rest:
                            inflated += len(rest)
                            yield memoryview(rest), inflated, raw
                        raise Truncated("the gzip stream ends early (file truncated?)")
                    return
            fed = True
            try:
                out = d.decompress(pending, BLOCK_BYTES)
            except GZIP_ERRORS as exc:
                raise Truncated(f"the gzip data is corrupt ({exc})") from None
            pending = d.unconsumed_tail
            if d.eof:  # a member ended: what follows is another member, or zero padding
                pending = (d.unused_data + pending).lstrip(b"\x00")
                d, fed = _zlib.decompressobj(31), False
            if out:
                inflated += len(out)
                # the ratio so far decides as soon as there is enough text to judge, so a bomb stops early
                if inflated > min(self.limit_bytes or 0, max(MIN_INFLATED_BYTES, MAX_INFLATE_RATIO * raw)):
                    raise TraceFormatError(
                        f"the gzip data inflates over {MAX_INFLATE_RATIO:g}x ({inflated / 2**20:,.0f} MiB "
                        f"from {raw / 2**20:,.1f} MiB of {self.size_bytes / 2**20:,.1f} MiB compressed): "
                        "refused as a likely decompression bomb (set LLMDIAG_MAX_INFLATE_RATIO to raise it)"
                    )
                yield memoryview(out), inflated, raw  # a fresh buffer: safe to hand over from a thread


#: blocks made ahead of the reader (each a fresh buffer: an inflated gzip block), so memory stays bounded
AHEAD = 2


def ahead_of(made: Generator[Made, None, None]) -> Generator[Made, None, None]:
    """``made``'s items, made on a thread at most AHEAD ahead of the caller; an exception raised there is raised
    here, at the same point; closing this stops the thread (and closes ``made``) before it returns."""
    items: queue.Queue[tuple[Made | None, BaseException | None]] = queue.Queue(AHEAD)
    stop = threading.Event()

    def make() -> None:
        end: BaseException | None = None
        try:
            for item in made:
                items.put((item, None))
                if stop.is_set():
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, raised there
            end = exc
        finally:
            made.close()
        if not stop.is_set():
            items.put((None, end))

    thread = threading.Thread(target=make, name="llmdiag-read", daemon=True)
    thread.start()
    try:
        while True:
            item, exc = items.get()
            if item is None:
                if exc is not None:
                    raise exc
                return
            yield item
            del item
    finally:  # done, or the caller stopped early: let the thread see stop, then wait for it
        stop.set()
        while thread.is_alive():
            with contextlib.suppress(queue.Empty):
                items.get(timeout=0.01)
        thread.join()


def drain(blocks: Iterator[memoryview]) -> str | None:
    """Inflate the rest of a source's ``blocks`` (the reader stopped early), keeping nothing: afterwards its
    ``share`` is exact (the inflated length is known). Returns the reason when the gzip stream turns out corrupt or
    cut (``Truncated``), else None; a stream past the inflate bound ends the drain quietly."""
    try:
        for _ in blocks:
            pass
    except Truncated as exc:
        return str(exc)
    except TraceFormatError:
        return None
    return None


__all__ = [
    "BLOCK_BYTES",
    "share_read",
    "Source",
    "Truncated",
    "drain",
    "release_free_memory",
    "threads_wanted",
]
