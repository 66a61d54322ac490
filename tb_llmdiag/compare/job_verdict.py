"""The one-line verdict of a job comparison, from the document's own fields (``job_core.compare_jobs``), e.g.

    AFTER's job step is 2.8x faster (65.2 ms -> 23.2 ms; 125617 -> 353623 job tokens/s); `exposed_communication`
    is gone (was 65 % of the job step, now 1 %); no job bottleneck finding remains.

The clauses: the primary number (the job step when both jobs do the same work per step, else job tokens / s),
resolved / new / moved job findings (a straggler naming another rank says which), where the bottleneck is
(the job finding with the largest share of the step, and what its metric was on the other side), the rank
count when it differs, and other regressed metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tb_llmdiag.compare.verdict import _band, _pct, _row, others_clause, ratio_text
from tb_llmdiag.findings.job import JOB_RULES
from tb_llmdiag.units import fmt, fmt_ns

#: a job finding's threshold, by id: a resolved finding whose metric is still above it was held back by a floor
_ABOVE = {rule.id: rule.above for rule in JOB_RULES}


def job_throughput(doc: Mapping[str, Any]) -> str:
    """The first clause: the job step (same work) or job tokens / s (work differs), or no change beyond noise."""
    who = doc["roles"]["after"]
    step = _row(doc, "job.job_step_ns")
    tps = _row(doc, "job.tokens_per_s")
    wk = doc["work"]
    use_step = step is not None and step["comparable"] and not wk["differs"]
    row = step if use_step else (tps if tps is not None and tps["comparable"] else None)
    if row is None or row["before"] is None or row["after"] is None or row["before"] <= 0 or row["after"] <= 0:
        return "no job step on both sides to compare (no common steps found)"
    b, a = row["before"], row["after"]
    parts = []
    if step is not None and step["before"] is not None and step["after"] is not None:
        parts.append(f"{fmt_ns(step['before'])} -> {fmt_ns(step['after'])}")
    if tps is not None and tps["before"] is not None and tps["after"] is not None:
        parts.append(f"{tps['before']:.0f} -> {tps['after']:.0f} job tokens/s")
    if wk["differs"]:
        parts.append(f"at {wk['ratio']:.2g}x the tokens per job step")
    detail = "; ".join(parts)
    what = "job step" if use_step else "job tokens/s"
    if a == b:
        return f"no change in the {what} ({detail})"
    if row["beyond_noise"] is False or not row["beyond_tolerance"]:
        why = "noise" if row["beyond_noise"] is False else f"its {row['tolerance'] * 100:g} % tolerance"
        return f"no change in the {what} beyond {why} ({detail}, {_pct(a / b - 1)}; {_band(row)})"
    ratio = b / a if use_step else a / b
    return f"{who}'s {what} is {ratio_text(ratio)} ({detail})"


def _about(f: Mapping[str, Any], side: str) -> str:
    sub = f.get(f"subject_{side}") or {}
    bits = []
    if sub.get("rank") is not None:
        bits.append(f"rank {sub['rank']}")
    if sub.get("cause"):
        bits.append(str(sub["cause"]).replace("_", " "))
    return f"`{f['id']}`" + (f" ({', '.join(bits)})" if bits else "")


def job_findings_clauses(doc: Mapping[str, Any]) -> list[str]:
    fd = doc["findings"]
    out = []
    for f in fd["resolved"]:
        was = f["saving_share_before"]
        now = _row(doc, f"job.{f['metric']}") if f.get("metric") else None
        tail = f" (was {fmt('share', was)} of the job step" if was is not None else ""
        if tail and now is not None and now["after"] is not None:
            tail += f", now {fmt('share', now['after'])}"
            if now["after"] > _ABOVE.get(f["id"], float("inf")):  # e.g. the straggler's wait within the noise
                tail += f", held back by the rule's floors: {doc['roles']['after']}'s notes say why"
        out.append(f"{_about(f, 'before')} is gone{tail + ')' if tail else ''}")
    for f in fd["new"]:
        now = f["saving_share_after"]
        out.append(
            f"{_about(f, 'after')} is new" + (f" ({fmt('share', now)} of the job step)" if now is not None else "")
        )
    for f in fd["changed"]:
        if f.get("note"):
            out.append(f"`{f['id']}` changed: {f['note']}")
    return out


def job_bottleneck_clause(doc: Mapping[str, Any]) -> str | None:
    b, a = doc["bottleneck"]["before"], doc["bottleneck"]["after"]
    if a is None:
        return "no job bottleneck finding remains" if b is not None else None
    row = _row(doc, f"job.{a['metric']}")
    was = row["before"] if row is not None else None
    was_text = f" (was {fmt('share', was)})" if was is not None else ""
    rank = f" (rank {a['rank']})" if a.get("rank") is not None else ""
    if b is not None and b["id"] == a["id"]:
        return (
            f"the job bottleneck is still `{a['id']}`{rank}, now {fmt('share', a['share'])} of the job step{was_text}"
        )
    return f"the job bottleneck is now `{a['id']}`{rank}, {fmt('share', a['share'])} of the job step{was_text}"


def job_verdict(doc: Mapping[str, Any]) -> str:
    clauses: list[str | None] = [job_throughput(doc), *job_findings_clauses(doc), job_bottleneck_clause(doc)]
    rc = doc["rank_counts"]
    if rc["before"] != rc["after"]:
        clauses.append(
            f"the jobs have different rank counts ({rc['before']} -> {rc['after']}): per-rank rows cover "
            f"{len(doc['ranks'])} rank(s) on both sides"
        )
    primary = ("job.tokens_per_s", "job.job_step_ns")  # the first clause names both
    clauses.append(others_clause({**doc, "metrics": [r for r in doc["metrics"] if r["key"] not in primary]}))
    return "; ".join(c for c in clauses if c) + "."
