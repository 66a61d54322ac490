"""Cutting the ``traceEvents`` array into pieces of whole events, for any JSON layout, in one pass.

A resumable JSON string/escape/depth state machine runs over each new block of text once: it finds the
last comma between two events (depth 1, outside strings) and the bracket that closes the array, whatever
the whitespace, key order or line breaks. The compiled ``_scan.split`` runs it in C; ``split_py`` is
the same machine in numpy (no per-byte Python loop) for installs without the compiler. Both must give
the same answer for every input (tests/test_scan.py).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import numpy as np

#: Brackets deeper than this are refused: no trace nests its events' args this deep, and a bound keeps
#: a hostile file (10^5 '[') from exhausting the decoder's or the report's recursion.
MAX_DEPTH = 256


class SplitState(NamedTuple):
    """Where the machine stands after the bytes seen so far (depth 1: inside the events array)."""

    depth: int = 1
    in_string: bool = False
    escape: bool = False


class SplitResult(NamedTuple):
    last_comma: int  # position of the last boundary between two events, -1 if none
    close: int  # position of the bracket that closes the array, -1 if not seen (the scan stops there)
    state: SplitState  # after the last byte scanned
    deep: int  # first position nested deeper than max_depth, -1 if none (the scan stops there)


def split_py(buf: Any, start: int, end: int, state: SplitState, max_depth: int = MAX_DEPTH) -> SplitResult:
    """The state machine of ``_scan.split`` over ``buf[start:end]``, vectorised with numpy."""
    n = end - start
    if n <= 0:
        return SplitResult(-1, -1, state, -1)
    a = np.frombuffer(buf, dtype=np.uint8, count=n, offset=start)
    backslash = a == 92
    # quotes escaped by an odd run of backslashes before them (the carried escape counts as one)
    quotes = np.flatnonzero(a == 34)
    idx = np.arange(n, dtype=np.int64)
    last_other = np.maximum.accumulate(np.where(backslash, -1, idx))  # last non-backslash at or before i
    before = quotes - 1
    run = np.where(before >= 0, before - last_other[np.maximum(before, 0)], 0)
    reaches_start = np.where(before >= 0, last_other[np.maximum(before, 0)] < 0, True)
    run = run + (reaches_start & state.escape)
    real = quotes[run % 2 == 0]
    toggles = np.zeros(n, dtype=np.int32)
    toggles[real] = 1
    quotes_so_far = np.cumsum(toggles, dtype=np.int32)
    structural = np.flatnonzero(
        ((a == 91) | (a == 93) | (a == 123) | (a == 125) | (a == 44)) & ((quotes_so_far + state.in_string) % 2 == 0)
    )
    ch = a[structural]
    delta = np.where((ch == 91) | (ch == 123), 1, np.where(ch == 44, 0, -1)).astype(np.int64)
    depth = state.depth + np.cumsum(delta)
    stop = n
    close = deep = -1
    opens = np.flatnonzero((delta > 0) & (depth > max_depth))
    closes = np.flatnonzero((delta < 0) & (depth == 0))
    first_deep = int(opens[0]) if opens.size else len(structural)
    first_close = int(closes[0]) if closes.size else len(structural)
    if first_deep < first_close:
        deep = start + int(structural[first_deep])
        stop = int(structural[first_deep]) + 1
        last = first_deep
    elif first_close < len(structural):
        close = start + int(structural[first_close])
        stop = int(structural[first_close]) + 1
        last = first_close
    else:
        last = len(structural)
    commas = np.flatnonzero((delta[:last] == 0) & (depth[:last] == 1))
    last_comma = start + int(structural[commas[-1]]) if commas.size else -1
    depth_after = int(depth[last]) if last < len(structural) else (int(depth[-1]) if len(structural) else state.depth)
    in_string = bool((quotes_so_far[stop - 1] + state.in_string) % 2)
    trailing = (stop - 1) - int(last_other[stop - 1])  # backslashes ending the scanned bytes
    escape = bool(trailing % 2) if last_other[stop - 1] >= 0 else bool((trailing + state.escape) % 2)
    if close >= 0 or deep >= 0:  # the machine stopped on a bracket: no escape or string is open there
        in_string, escape = False, False
    return SplitResult(last_comma, close, SplitState(depth_after, in_string, escape), deep)


_ARRAY_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


def find_array_start(buf: bytes | bytearray) -> int:
    """Index just past the '[' that opens "traceEvents", or -1 if not (yet) seen."""
    k = buf.find(b'"traceEvents"')
    if k < 0:
        return -1
    m = _ARRAY_KEY.match(buf, k)
    if m is None:
        b = buf.find(b"[", k)
        return -1 if b < 0 else b + 1
    return m.end()


def events_start(buf: bytes | bytearray) -> tuple[int, bool] | None:
    """Where the events begin in the text read so far: (index just past the array's '[', whether the file is the
    JSON Array format: a bare list of events); None if the text does not say yet (or never will: the reader
    decides which it is and why)."""
    stripped = buf.lstrip()
    if stripped[:1] == b"[":  # a bare list: a "traceEvents" inside its events is a name or a value, never the key
        return len(buf) - len(stripped) + 1, True
    start = find_array_start(buf)
    if start >= 0:
        return start, False
    return None


def split_with(ext: Any, buf: Any, start: int, end: int, state: SplitState, max_depth: int = MAX_DEPTH) -> SplitResult:
    """``_scan.split`` when ``ext`` (the compiled module) is given, else split_py."""
    if ext is None:
        return split_py(buf, start, end, state, max_depth)
    last_comma, close, depth, in_string, escape, deep = ext.split(
        buf, start, end, state.depth, state.in_string, state.escape, max_depth
    )
    return SplitResult(last_comma, close, SplitState(depth, in_string, escape), deep)


__all__ = ["MAX_DEPTH", "SplitResult", "SplitState", "events_start", "find_array_start", "split_py", "split_with"]
