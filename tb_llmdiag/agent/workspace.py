"""The logdir an MCP server was started on: run names to files, each file analysed once, nothing outside it.

Contract:
- ``Workspace(logdir)`` reads only below ``logdir`` (its real path): a path argument that resolves outside it
  (``..``, an absolute path, a symlink leading out) is refused with ``OutsideLogdir``, before anything is opened.
- A run argument is a name as ``list_runs`` gives it (``compare``'s ``--run`` rules: ``api.resolve``) or a path
  inside the logdir to a trace file or run folder; a wrong one is the CLI's one-line error.
- A discovered file whose real path leaves the logdir (a link out of it) is listed as a report of status
  ``error`` saying so, as the tab lists it; nothing of it is read, whatever ``LLMDIAG_FOLLOW_LINKS`` says.
- Reports come from the front door (``api.analyze``, jobs from ``api.job_for_summaries``), cached by
  (path, size, mtime_ns): a file that changes is analysed again. The last ``KEEP_TRACES`` loaded traces are kept
  for ``top_activities`` and ``explain_finding``'s ranges. Read-only: nothing is written anywhere.
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from tb_llmdiag import api
from tb_llmdiag.errors import LlmDiagError, NoTracesFound, RunNotFound, TraceFormatError, cut, listed

if TYPE_CHECKING:
    from tb_llmdiag.compare.names import Target
    from tb_llmdiag.ingest.discover import Index, TraceFile

#: traces kept loaded (with their analysis) for the questions that read events
KEEP_TRACES = 2

Identity = tuple[str, int, int]


class BadName(LlmDiagError):
    """A name argument no file can have (a NUL byte): a bad argument, exit code 2."""

    exit_code = 2


class OutsideLogdir(LlmDiagError):
    """A path argument outside the logdir the server was started on (a bad argument: exit code 2)."""

    exit_code = 2


def _identity(tf: TraceFile) -> Identity:
    return (tf.path, tf.size_bytes, tf.mtime_ns)


class Workspace:
    """One logdir's runs, reports and loaded traces (module docstring). Not thread-safe: the server calls it under
    one lock."""

    def __init__(self, logdir: str) -> None:
        self.given = logdir
        self.root = os.path.realpath(os.path.expanduser(logdir))
        if not os.path.isdir(self.root):
            raise NoTracesFound(f"{logdir}: not a directory (llmdiag mcp serves one logdir)")
        self._reports: dict[str, tuple[Identity, bool, dict[str, Any], dict[str, Any] | None]] = {}
        self._loaded: OrderedDict[Identity, api.Analysed] = OrderedDict()

    # ------------------------------------------------------------------------------------------- names

    def index(self) -> Index:
        """The logdir discovered now (files come and go while a job runs)."""
        return api.discover(self.root)

    def inside(self, path: str) -> str:
        """The real path of ``path`` (relative to the logdir, or absolute) when it is inside the logdir.

        Raises:
            OutsideLogdir: it resolves outside.
            BadName: it holds a NUL byte (no path can).
        """
        if "\x00" in path:
            raise BadName(f"{cut(path)}: a name or path cannot hold a NUL byte")
        real = os.path.realpath(os.path.join(self.root, os.path.expanduser(path)))
        if not self.holds(real):
            raise OutsideLogdir(
                f"{cut(path)}: outside the logdir {self.root} this server was started on; it reads only files inside it"
            )
        return real

    def holds(self, real: str) -> bool:
        """Whether the real path ``real`` is the logdir or lies under it."""
        return real == self.root or real.startswith(self.root.rstrip(os.sep) + os.sep)

    def target(self, name: str, role: str = "run") -> Target:
        """The trace or job ``name`` picks: a run name, or a path inside the logdir (module docstring)."""
        index = self.index()
        looks_like_path = os.path.isabs(name) or name.startswith("~") or ".." in name.replace("\\", "/").split("/")
        if not looks_like_path:
            try:
                return api.resolve(index, name, self.given, role)
            except RunNotFound:
                if not os.path.exists(os.path.join(self.root, name)):
                    raise
        return self._by_path(index, name, role)

    def _by_path(self, index: Index, path: str, role: str) -> Target:
        real = self.inside(path)
        traces, jobs = api.run_names(index)
        under = [n for n, tf in traces if os.path.realpath(tf.path) == real or tf.path.startswith(real + os.sep)]
        if len(under) == 1:
            return api.resolve(index, under[0], self.given, role)
        for job in jobs:
            if sorted(n for n, tf in traces if tf in job.files) == sorted(under):
                return api.resolve(index, job.name, self.given, role)
        if not under:
            raise NoTracesFound(f"{cut(path)}: no profiler traces found there (see list_runs)")
        raise RunNotFound(f"{cut(path)} holds {len(under)} runs ({listed(under)}); name one of them")

    # ------------------------------------------------------------------------------------------- reports

    def report(self, tf: TraceFile, *, in_job: bool = False) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The RunReport of one file and, for a rank of a job, its RankSummary as a dict (cached); a file that is a
        link out of the logdir gets an error report saying so (module docstring), nothing of it read."""
        if not self.holds(os.path.realpath(tf.path)):
            # the front door refuses a file outside ``inside`` before reading anything (TraceFile.refusal); held to
            # this logdir even where discovery followed links (LLMDIAG_FOLLOW_LINKS), and said in this server's words
            refused = api.analyze(dataclasses.replace(tf, inside=self.root)).report
            why = "this server reads only files inside the logdir it was started on"
            return {
                **refused,
                "error": f"{os.path.basename(tf.path)} is a link to a file outside the logdir; not read ({why})",
            }, None
        key = _identity(tf)
        got = self._reports.get(tf.path)
        if got is None or got[0] != key or (in_job and not got[1]):
            done = api.analyze(tf, summary=in_job)
            rep, summary = done.report, done.rank_summary
            got = (key, in_job, rep, summary.to_dict() if summary is not None else None)
            if rep.get("status") != "writing":  # a file still being written is read again next time
                self._reports[tf.path] = got
        return got[2], got[3]

    def run_report(self, target: Target) -> dict[str, Any]:
        """The RunReport of a one-trace target. Raises TraceFormatError when it could not be analysed."""
        rep, _ = self.report(target.files[0])
        if rep.get("status") not in ("ok", "partial"):
            raise TraceFormatError(f"run {target.name} could not be analysed: {rep.get('error') or 'no report'}")
        return rep

    def job(self, target: Target) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A job's ``jobs[]`` entry and its ranks' RunReports (as ``llmdiag report`` builds them)."""
        members, reports = [], []
        for tf in target.files:
            rep, summary = self.report(tf, in_job=True)
            members.append((tf, summary))
            reports.append(rep)
        return api.job_for_summaries(target.run, target.span, members), reports

    def loaded(self, target: Target) -> api.Analysed:
        """A one-trace target analysed, with its trace and analysis (``api.Analysed``), the last ``KEEP_TRACES`` kept
        in memory. Raises TraceFormatError with its error RunReport's one line when it cannot be read."""
        tf = target.files[0]
        self.inside(tf.path)
        key = _identity(tf)
        if key in self._loaded:
            self._loaded.move_to_end(key)
            return self._loaded[key]
        got = api.analyze(tf)
        if got.trace is None:
            raise TraceFormatError(f"{tf.path}: {got.report['error']}")
        self._loaded[key] = got
        while len(self._loaded) > KEEP_TRACES:
            self._loaded.popitem(last=False)
        return got
