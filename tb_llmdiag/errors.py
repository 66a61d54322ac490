"""User-facing errors. Every message is one line a user can act on; no tracebacks for these."""

from __future__ import annotations


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
