"""Kineto / Chrome trace JSON (optionally gzipped) -> columnar ``Trace``.

How it stays fast and small: the file is decompressed in blocks (source.py); a resumable JSON depth
scan (split.py) finds the last boundary between two events in each block, whatever the layout
(Kineto's indented one, one event per line, one line); the piece of whole events before it is decoded
by msgspec straight into typed Structs holding only the fields we need (structs.py), turned into
numpy columns (columns.py), and dropped. Peak memory is one block plus the columns.

Reads the object format (``{"traceEvents": [...], ...}``) and the JSON Array format (a bare list of
events, whose closing ``]`` may be missing), current and 2021 Kineto traces, ROCm, MTIA, Triton and
CPU-only traces and ``[memory]`` samples.

It tells the truth about what it read: invalid JSON (NaN, a bad byte, invalid UTF-8) is an error at its
byte offset, a cut file says where it was cut; either way the events read before the problem are kept
and ``Trace.read_state`` says the result is partial (``complete`` False, how far the read got, why).
A file with no usable event at all raises ``TraceFormatError``.
"""

from __future__ import annotations

import codecs
import gc
import re
from typing import Any

import msgspec

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.kineto import scan_ext
from tb_llmdiag.ingest.kineto.columns import Columns
from tb_llmdiag.ingest.kineto.comm_args import CommArgs
from tb_llmdiag.ingest.kineto.counter_args import CounterArgs
from tb_llmdiag.ingest.kineto.graph_args import GraphArgs
from tb_llmdiag.ingest.kineto.layout import KIND_OF_CATEGORY
from tb_llmdiag.ingest.kineto.meta import extra_metadata
from tb_llmdiag.ingest.kineto.read_ahead import ReadAhead, native_available
from tb_llmdiag.ingest.kineto.split import MAX_DEPTH, SplitResult, SplitState, events_start, split_with
from tb_llmdiag.ingest.kineto.structs import Envelope, decode_envelope, decode_events, needs_exact_ts
from tb_llmdiag.ingest.kineto.trace import make_trace
from tb_llmdiag.ingest.source import Source, Truncated, drain, release_free_memory, threads_wanted
from tb_llmdiag.ingest.validate import read_state_with
from tb_llmdiag.model import DEVICE_KINDS, Trace, kind_mask

_HEAD_LIMIT = 64 << 20  # "traceEvents" must start within this many bytes, and the metadata after it fit in this
#: One event (the text between two boundaries) may not be longer than this: no profiler writes such an
#: event, and the bound keeps a file with no boundary (one huge string, a gzip bomb of spaces) from
#: filling memory.
MAX_EVENT_BYTES = 64 << 20
_MSGSPEC_BYTE = re.compile(r"\(byte (\d+)\)\s*$")
_NON_JSON_WORDS = (b"NaN", b"Infinity", b"-Infinity", b"+Infinity", b"-NaN")


class _Stop(Exception):
    """The text cannot be read past ``offset`` (absolute, in decompressed bytes): ``reason`` says why. With
    ``invalid``, the reason is an invalid token, said as "invalid JSON at byte N (P%): reason" once the share read is
    known (``message``: for a gzipped file, after the rest of the stream was inflated to learn its length)."""

    def __init__(self, offset: int, reason: str, invalid: bool = False) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        self.invalid = invalid

    def message(self, src: Source | ReadAhead) -> str:
        if not self.invalid:
            return self.reason
        return f"invalid JSON at byte {self.offset:,} ({src.share(self.offset):.0%}): {self.reason}"


def read_kineto(path: str, inside: str = "") -> Trace:
    """Read a Kineto/Chrome trace file (``.json`` or ``.json.gz``) into a ``Trace``.

    Raises:
        TraceFormatError: not a regular readable file, empty, not JSON, not a trace, or no usable events.
    """
    # The decoded structs hold no reference cycles; pausing the cyclic GC while hundreds of
    # thousands of them are built and dropped saves ~15 % of the read time.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _Reader(path, inside).read()
    finally:
        if enabled:
            gc.enable()
        release_free_memory()


def _invalid_reason(exc: Exception, text: Any, at: int) -> str:
    """What is wrong at ``at`` in ``text``, in words: "NaN is not JSON", "invalid UTF-8 byte 0xff"..."""
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 byte 0x{bytes(text[at : at + 1]).hex() or '??'}"
    word = bytes(text[at : at + 10])
    for w in _NON_JSON_WORDS:
        if word.startswith(w):
            return f"{w.decode().lstrip('+-')} is not JSON"
    return _MSGSPEC_BYTE.sub("", str(exc)).rstrip().replace("JSON is malformed: ", "") or "malformed JSON"


def _error_at(exc: Exception, text: Any) -> int:
    """The offset in ``text`` where msgspec found the problem (the end when it does not say)."""
    if isinstance(exc, UnicodeDecodeError):
        try:
            bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc2:
            return int(exc2.start)
        return len(text)
    m = _MSGSPEC_BYTE.search(str(exc))
    return min(int(m.group(1)), len(text)) if m else len(text)


class _Reader:
    """One pass over the decompressed blocks. The text lives in one bytearray: each piece is decoded in
    place through a memoryview (the ',' before it overwritten by '[' and the one after by ']'), then the
    consumed prefix is dropped, so the JSON text is never copied."""

    def __init__(self, path: str, inside: str = "") -> None:
        src = Source(path, inside)  # a gzip stream is inflated ahead on a thread (source.py)
        # an uncompressed file is read and cut ahead on a native thread unless LLMDIAG_READ_THREADS=0 (read_ahead.py)
        self.native: ReadAhead | None = ReadAhead(src) if threads_wanted() and native_available(src) else None
        self.src: Source | ReadAhead = self.native or src
        self.gzipped = src.gzipped
        self.cols = Columns()
        self.warnings: list[str] = []
        self.buf = bytearray()
        self.base = 0  # absolute offset of buf[0] in the decompressed text
        self.head: bytes | None = None  # the text before the events (b"" for the array format)
        self.array_format = False
        self.scanned = 0  # buf[:scanned] has been through the splitter
        self.state = SplitState()
        self.closed = -1  # buf index of the ']' closing the events array, once seen
        self.exact_ts: bool | None = None  # decided from the first timestamp seen
        self.events_end = 0  # absolute offset just past the last event read
        self.comm = CommArgs()  # NCCL args of kernel rows, for the jobs analysis (comm_args.py)
        self.graph = GraphArgs()  # CUDA graph ids of replayed kernels (ingest/graph_args.py)
        self.meta: dict[str, Any] = {}  # top-level fields beyond the envelope's (meta.py)
        self.counters = CounterArgs()  # hardware counters: CUPTI profiler ranges, counter tracks (counter_args.py)

    def read(self) -> Trace:
        problem: str | None = None
        stop_at = 0
        blocks = self.src.blocks()
        try:
            try:
                for block in blocks:
                    self.buf += block
                    del block
                    self._advance()
            except Truncated as exc:
                self._finish_cut()
                stop_at, problem = (
                    self.base + len(self.buf),
                    f"{exc}, at byte {self.base + len(self.buf):,} of the inflated JSON",
                )
            else:
                if self.head is None:
                    raise TraceFormatError(
                        "the file is empty"
                        if not self.buf.strip()
                        else "not a Chrome/Kineto trace (no 'traceEvents' array)"
                    )
                if self.closed < 0:
                    cut = self._finish_cut()
                    if not cut:
                        stop_at = self.base + len(self.buf)
                        problem = f"the JSON ends early at byte {stop_at:,} (file truncated?)"
        except _Stop as stop:
            corrupt = drain(blocks) if self.gzipped else None
            # a corrupt gzip stream inflates to garbage before its check fails: say that, not what the garbage held
            stop_at = stop.offset
            problem = f"{corrupt} (the JSON stopped parsing at byte {stop_at:,})" if corrupt else stop.message(self.src)
        if self.head is None:
            raise TraceFormatError(f"{problem}, before the trace's events began" if problem else "the file is empty")
        envs = [self._envelope(self.head + b"]}", "header")] if not self.array_format else []
        if problem is None and not self.array_format:
            try:
                envs.append(self._envelope(b'{"traceEvents":[]' + bytes(self.buf[self.closed + 1 :]), "metadata"))
            except _Stop as stop:
                stop_at = self.base + self.closed + 1 + stop.offset
                problem = (
                    stop.reason
                    if "ends early" in stop.reason
                    else (f"invalid JSON at byte {stop_at:,} ({self.src.share(stop_at):.0%}): {stop.reason}")
                )
        elif problem is None and bytes(self.buf[self.closed + 1 :]).strip():
            stop_at = self.base + self.closed + 1
            problem = f"invalid JSON at byte {stop_at:,}: text after the closing ']' of the events"
        share = self.src.share(stop_at) if problem else 1.0
        read_state = {
            "complete": problem is None,
            "read_bytes": self.events_end if problem else self.src.inflated_bytes,
            "total_bytes": self.src.inflated_bytes,
            "read_share": round(share, 4),
            "reason": problem,
        }
        if problem:
            if not self.cols.has_rows:
                raise TraceFormatError(f"{problem}; no complete event before it")
            self.warnings.insert(
                0, f"partial result: {problem} ({share:.0%} of the file read); analysed the events before it"
            )
        try:
            events, memory, origin_ns, col_warnings = self.cols.finish()
        except TraceFormatError as exc:  # no row at all: say what the decoder skipped, if anything
            if self.warnings:
                raise TraceFormatError(f"{exc}; {'; '.join(self.warnings)}") from None
            raise
        self.warnings.extend(col_warnings)
        read_state = read_state_with(
            read_state, self.cols.rejected, len(events), int(kind_mask(events.kind, DEVICE_KINDS).sum())
        )
        if not read_state["complete"] and problem is None:  # rejected rows made it partial (validate.py)
            self.warnings.insert(0, f"partial result: {read_state['reason']}")
        if len(self.counters):
            self.meta["hardware_counters"] = {k: list(v) for k, v in self.counters.summary().items()}
        side = (self.comm, self.graph, self.cols.fwd_links)  # the second passes' columns and the flows' links
        return make_trace(events, memory, origin_ns, envs, tuple(self.warnings), read_state, side, self.meta)

    # ------------------------------------------------------------------------------------ the text

    def _advance(self) -> None:
        """Take in what the last block added: find the events array, then decode the whole events."""
        buf = self.buf
        if self.closed >= 0:  # only the metadata after the events is left
            if len(buf) - self.closed > _HEAD_LIMIT:
                raise _Stop(self.base + len(buf), f"over {_HEAD_LIMIT >> 20} MiB of text after the events array")
            return
        if self.head is None and not self._find_head():
            return
        res = self._split_new()
        if res.deep >= 0:
            deep = self.base + res.deep  # absolute: decoding the events before it moves base
            self._decode_upto(self._last_boundary(res.deep))
            raise _Stop(deep, f"invalid trace at byte {deep:,}: JSON nested deeper than {MAX_DEPTH} levels")
        self.state = res.state
        self.scanned = len(buf)
        if self.native is not None and res.close < 0:  # the next blocks come cut (once started, a no-op)
            self.native.start_cut(self.state, MAX_DEPTH)
        if res.close >= 0:
            self._decode_upto(res.close)
            self.closed = 0  # _decode_upto dropped the text before the ']'
        elif res.last_comma > 0:
            self._decode_upto(res.last_comma)
        elif len(buf) > MAX_EVENT_BYTES:
            raise _Stop(
                self.base,
                f"invalid trace at byte {self.base:,}: one event runs over {MAX_EVENT_BYTES >> 20} MiB without ending",
            )

    def _split_new(self) -> SplitResult:
        """The depth scan of the bytes not scanned yet: the native thread's when it scanned just these bytes (the
        block last added) from the same state, else done here."""
        buf = self.buf
        cut = self.native.cut(self.scanned, len(buf), self.state) if self.native is not None else None
        return cut if cut is not None else split_with(scan_ext.ext, buf, self.scanned, len(buf), self.state, MAX_DEPTH)

    def _find_head(self) -> bool:
        buf = self.buf
        found = events_start(buf)
        if found is None:
            stripped = buf.lstrip()
            if len(buf) > _HEAD_LIMIT or stripped[:1] not in (b"{", b""):
                what = "the text is not JSON" if stripped[:1] not in b'{["' else "no 'traceEvents' array near the start"
                raise TraceFormatError(f"not a Chrome/Kineto trace ({what})")
            return False
        start, self.array_format = found
        self.head = b"" if self.array_format else bytes(buf[:start])
        del buf[: start - 1]  # buf[0] is now the array's '['
        self.base += start - 1
        self.scanned = 1
        return True

    def _last_boundary(self, end: int) -> int:
        """buf index of the last event boundary (or the opening '[') before ``end``."""
        res = split_with(scan_ext.ext, self.buf, 1, end, SplitState(), MAX_DEPTH)
        return max(res.last_comma, 0)

    def _decode_upto(self, cut: int) -> bool:
        """Decode the events in buf[0:cut] (buf[0] is '[' and buf[cut] a boundary or the closing ']'),
        then drop them so buf starts at the '[' (in place of the boundary) again. False if none."""
        if cut <= 0:
            return False
        buf = self.buf
        if self.exact_ts is None:
            self.exact_ts = needs_exact_ts(buf, cut)
        saved = buf[cut]
        buf[cut] = 0x5D  # ']' in place of the ',' after the piece's last event
        try:
            with memoryview(buf) as view:
                try:
                    # msgspec checks UTF-8 only in the strings it decodes: check the whole piece (cut is
                    # at an ASCII byte, never inside a character); all-ASCII text (most traces) is valid
                    if not buf.isascii():
                        codecs.utf_8_decode(view[: cut + 1], "strict", True)
                    events = decode_events(view[: cut + 1], self.warnings, self.exact_ts, self.cols.rejected)
                except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                    at = _error_at(exc, view[: cut + 1])
                    if at > 0 and view[at - 1] == 0x2D:  # msgspec points past the sign of "-Infinity"
                        at -= 1
                    reason = _invalid_reason(exc, view, at)
                    bad = True  # not the exception: its traceback holds views of buf
                else:
                    bad = False
                    # without the compiled scanner, a piece without "[memory]" is not searched for samples
                    self.cols.add(events, has_memory=scan_ext.ext is not None or buf.find(b'"[memory]"', 0, cut) >= 0)
                    self.comm.after_piece(buf, cut, self.cols.names.texts)  # NCCL args: a second, small pass
                    self.graph.after_piece(buf, cut, self.cols.names.texts)  # CUDA graph ids: the same
                    self.counters.after_piece(buf, cut, self.cols.kind_of)  # hardware counters (counter_args.py)
                    del events  # decoded Raw values point into the view: drop them before it closes
        finally:
            buf[cut] = saved
        if bad:
            if at >= cut:  # the piece ends early: the text after it decides (the caller sees the cut)
                at = cut
            good = self._last_boundary(at)
            if good > 0:
                self._decode_upto(good)
                at -= good
            raise _Stop(self.base + at, reason, invalid=True)
        try:
            del buf[:cut]
        except BufferError:  # a view of buf outlived the piece (a sampling profiler's frame: Dask's): copy instead
            buf = self.buf = buf[cut:]
        buf[0] = 0x5B  # '[' opens the rest
        self.base += cut
        self.scanned -= cut
        self.events_end = self.base
        return True

    def _finish_cut(self) -> bool:
        """At the end of the text without the array's ']': decode what is left when it is whole events.
        True when that ends the array validly: the array format may leave out its closing bracket (and
        keep a trailing comma), as the Trace Event Format allows."""
        buf = self.buf
        if self.head is None or not buf:
            return False
        complete = False
        if self.state.depth == 1 and not self.state.in_string:
            rest = bytes(buf[1:]).strip()
            if self.array_format and rest.endswith(b","):
                rest = rest[:-1]
            if not rest:
                complete = self.array_format
            else:
                del buf[1:]
                buf += rest + b"]"
                try:
                    self._decode_upto(len(buf) - 1)
                    complete = self.array_format
                except _Stop:
                    pass
        elif self.scanned > 1:  # keep the whole events before the cut
            self._decode_upto(self._last_boundary(len(buf)))
        if complete:
            self.closed = len(self.buf)
        return complete

    def _envelope(self, text: bytes, what: str) -> Envelope:
        try:
            if len(text) > 64:  # the header and metadata are checked for invalid UTF-8 too (see _decode_upto)
                codecs.utf_8_decode(text, "strict", True)
            env = decode_envelope(text, self.warnings, rejected=self.cols.rejected)
            self.meta.update(extra_metadata(text))
            return env
        except RecursionError:
            raise TraceFormatError(f"the trace {what} is nested too deep to be a trace") from None
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            at = _error_at(exc, text)
            if what == "header":
                raise TraceFormatError(
                    f"the trace header is not valid JSON at byte {at:,}: {_invalid_reason(exc, text, at)}"
                ) from None
            at -= len(b'{"traceEvents":[]')
            if isinstance(exc, msgspec.DecodeError) and "truncated" in str(exc):
                raise _Stop(
                    max(at, 0), "the JSON ends early in the metadata after the events (file truncated?)"
                ) from None
            raise _Stop(
                max(at, 0),
                _invalid_reason(exc, text, at + len(b'{"traceEvents":[]')) + " (in the metadata after the events)",
            ) from None


__all__ = ["read_kineto", "KIND_OF_CATEGORY"]
