"""User-facing errors. Every message is one line a user can act on; no tracebacks for these.

A message that quotes what the user gave (a run name, a path, a finding id) quotes it through ``quoted`` / ``cut``,
and one that lists what there is (runs, steps) lists it through ``listed``: a 1 MB argument or a logdir of 400 runs
still gets a line of a few hundred characters.
"""

from __future__ import annotations

from collections.abc import Iterable

#: characters of a user's value a message quotes (the rest is counted, not echoed)
QUOTE_CHARS = 120
#: names a message lists (runs, steps) before it counts the rest
LIST_ITEMS = 20
#: control characters (NUL, newlines...) as their escapes: a message stays one printable line
_CONTROL = {c: repr(chr(c))[1:-1] for c in (*range(32), 127)}


class LlmDiagError(Exception):
    """Base of every error caused by the user's input rather than by a bug."""

    exit_code = 1


class NoTracesFound(LlmDiagError):
    """The path holds no profiler trace we recognise."""

    exit_code = 3


class TraceFormatError(LlmDiagError):
    """A trace file is truncated, empty, not JSON/protobuf, or not a profiler trace."""

    exit_code = 4


class UnsupportedTraceError(TraceFormatError):
    """A well-formed file of a kind we do not read (Chakra graph, memory snapshot...)."""


class RunNotFound(LlmDiagError):
    """A run/worker/span name that is not in the discovered index."""

    exit_code = 5


class BadRange(LlmDiagError):
    """A step or time range the trace does not have (a bad argument: exit code 2, like a bad command line)."""

    exit_code = 2


class BadIndex(ValueError):
    """A stored trace-view index is not usable (one line): a bug or a damaged cache entry, not the user's input."""


class AmbiguousSide(LlmDiagError):
    """A side resolves to several runs and no ``--run`` picks one (a command-line problem: exit 2)."""

    exit_code = 2


def cut(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` as a message shows it: on one line, its first ``limit`` characters and how long it was."""
    one = text.translate(_CONTROL)
    if len(one) <= limit:
        return one
    return f"{one[: limit - 1]}… ({len(text):,} characters)"


def quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` cut as ``cut`` does (a name in quotes, its control characters escaped)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(str(value)):,} characters)"


def listed(items: Iterable[object], limit: int = LIST_ITEMS) -> str:
    """Up to ``limit`` items, comma-separated (each cut), then how many more there are."""
    all_ = [str(x) for x in items]
    shown = ", ".join(cut(x) for x in all_[:limit])
    more = len(all_) - limit
    return f"{shown} and {more:,} more" if more > 0 else shown
