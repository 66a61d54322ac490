"""Jobs from a discovered index: which trace files are the ranks of one run, and the job entry of the report.

Contract:
- ``job_groups(files)``: the files of one ``(run, span)`` form a job when there are at least two of them (the
  ranks of one run write one file each into the run's folder); other files stay single-rank runs. Groups keep
  discovery's order; files inside a group keep theirs (``analysis.resolve_ranks`` orders by rank).
- ``job_entry(run, span, members)``: the report's ``jobs[]`` item (docs/report_schema.md): the run and span, the
  member files (``path``, ``worker``, ``rank`` as discovery saw them, ``status``), and the job section
  (``jobs.report.job_report``: ``notes``, ``metrics``, ``findings``, ``view``) over the members whose trace
  could be analysed as ranks (``api.is_rank``: collectives or a distributedInfo world of several ranks). A job
  with fewer than two such ranks gets ``status: "error"`` and one line why.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from typing import Any

from tb_llmdiag.ingest.discover import TraceFile, name_order
from tb_llmdiag.jobs.rank_summary import RankSummary
from tb_llmdiag.jobs.report import job_report


def job_groups(
    files: Sequence[TraceFile], read: Collection[str] | None = None
) -> list[tuple[str, str, list[TraceFile]]]:
    """``[(run, span, files)]`` for every (run, span) with at least two trace files; given ``read`` (the paths
    that were read as traces), at least two of them read: a folder of files that are not traces (each one's
    error says so) is no job."""
    groups: dict[tuple[str, str], list[TraceFile]] = {}
    for tf in files:
        groups.setdefault((tf.run, tf.span), []).append(tf)
    enough = [(run, span, fs) for (run, span), fs in groups.items() if len(fs) >= 2]
    return [g for g in enough if read is None or sum(tf.path in read for tf in g[2]) >= 2]


def rank_label(tf: TraceFile) -> str:
    """The name a rank summary carries (its file name: ``rank_from_name`` reads a rank from it)."""
    return os.path.basename(tf.path)


def job_entry(run: str, span: str, members: Sequence[tuple[TraceFile, RankSummary | None]]) -> dict[str, Any]:
    """The ``jobs[]`` entry of one job (module docstring); its files in rank order (rank 2 before rank 10), files
    without a rank after them in name order."""
    members = sorted(members, key=lambda m: (m[0].rank is None, m[0].rank or 0, name_order(m[0].worker)))
    files = [
        {"path": tf.path, "worker": tf.worker, "rank": tf.rank, "status": "ok" if s is not None else "error"}
        for tf, s in members
    ]
    summaries = [s for _, s in members if s is not None]
    base: dict[str, Any] = {"run": run, "span": span, "files": files}
    if len(summaries) < 2:
        return {
            **base,
            "status": "error",
            "error": f"{len(summaries)} of {len(members)} traces could be analysed "
            "as ranks of a distributed run (collectives or a distributedInfo world size); a job needs two",
            "notes": [],
            "metrics": {},
            "findings": [],
            "view": None,
        }
    return {**base, "status": "ok", "error": None, **job_report(summaries)}
