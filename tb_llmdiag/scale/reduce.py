"""The job reduce: per-rank results -> the report's job sections, on the client.

Contract:
- ``RankResult``: what one per-rank task sends back (``api.analyze_rank``): the rank's RunReport and its
  compact ``RankSummary`` (None when the trace could not be read). Nothing else travels.
- ``job_sections(files, summaries, reports)``: one job per (run, phase, span) holding two or more trace files
  (the ranks of one run profiled together: torch's trace handler numbers spans per worker). Each job is
  ``{"run", "phase", "span", "ranks_total", "errors", **jobs.report.job_report(...)}``; a rank whose trace
  could not be read is an ``errors`` entry ``{"path", "rank", "error"}`` and the job is analysed from the
  others (``jobs`` then notes the missing rank). With fewer than two readable ranks the job has no analysis:
  ``analysis_error`` says so and ``schema``/``metrics``/``findings``/``view`` are null.
- Memory: the reduce holds only the summaries (~4-8 KB per rank) besides the reports the output needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from tb_llmdiag.ingest.discover import TraceFile
from tb_llmdiag.jobs.report import job_report
from tb_llmdiag.jobs.summary import RankSummary


@dataclass(frozen=True)
class RankResult:
    report: dict[str, Any]
    summary: RankSummary | None


def _groups(files: Sequence[TraceFile]) -> list[tuple[tuple[str, str, str], list[int]]]:
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, tf in enumerate(files):
        groups.setdefault((tf.run, tf.phase, tf.span), []).append(i)
    return sorted((k, v) for k, v in groups.items() if len(v) >= 2)


def job_sections(files: Sequence[TraceFile], summaries: Sequence[RankSummary | None],
                 reports: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The report's ``jobs`` list (see the module docstring), in (run, phase, span) order."""
    out = []
    for (run, phase, span), idx in _groups(files):
        errors = [{"path": files[i].path, "rank": files[i].rank,
                   "error": reports[i].get("error") or "the trace could not be summarised"}
                  for i in idx if summaries[i] is None]
        members = [s for i in idx if (s := summaries[i]) is not None]
        head: dict[str, Any] = {"run": run, "phase": phase, "span": span, "ranks_total": len(idx), "errors": errors}
        if len(members) >= 2:
            out.append({**head, "analysis_error": None, **job_report(members)})
        else:
            out.append({**head, "analysis_error": f"only {len(members)} of {len(idx)} ranks could be read",
                        "schema": None, "notes": [], "metrics": None, "findings": None, "view": None})
    return out


__all__ = ["RankResult", "job_sections"]
