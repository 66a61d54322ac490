"""The words a comparison document holds: its one-line verdict and each regressed row's line (``check``).
Built only from the document's own fields (``core.compare``).

The verdict says what changed in throughput, which findings went or came, and where the bottleneck is now, e.g.
for two runs

    AFTER is 5.9x faster in tokens/s (1954/s -> 11.6 k/s; step 575 ms -> 365 ms at 3.1x the tokens per
    step); "Every new batch shape costs host work while the GPU waits", ... are gone; the bottleneck is
    still "The GPU waits for the host to launch work", now 64.4 % of the step (was 75.5 %).

Every number goes through ``tb_llmdiag.units.fmt`` by its registry unit, the formatter of the run report and
the tab's cards, so a figure reads the same in the verdict, the compare table and the cards (#25).

and for two jobs

    AFTER's job step is 2.8x faster (65.2 ms -> 23.2 ms; job tokens/s 126 k/s -> 354 k/s); `exposed_communication`
    is gone (was 65 % of the job step, now 1 %); no job bottleneck finding remains.

A job's clauses: the primary number (the job step when both jobs do the same work per step, else job tokens /
s), resolved / new / moved job findings (a straggler naming another rank says which), where the bottleneck is
(the job finding with the largest share of the step, and what its metric was on the other side), the rank
count when it differs, and other regressed metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tb_llmdiag.findings.job import JOB_RULES
from tb_llmdiag.findings.whatif_text import BARE_WORDS
from tb_llmdiag.units import fmt, fmt_ns

#: a ratio at least this far from 1 reads as "N.Nx"; closer ones as a percentage
TIMES_FROM = 1.5
#: at most this many other regressed metrics are named in the verdict
MAX_OTHERS = 3
#: a job finding's threshold, by id: a resolved finding whose metric is still above it was held back by a floor
_ABOVE = {rule.id: rule.above for rule in JOB_RULES}


def _row(doc: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    return next((r for r in doc["metrics"] if r["key"] == key), None)


def named(f: Mapping[str, Any]) -> str:
    """A finding in a sentence: its title in quotes (its id when it has none), never a key in backticks (#25)."""
    return f'"{f.get("title") or f["id"]}"'


def _ids(findings: Sequence[Mapping[str, Any]]) -> str:
    names = [named(f) for f in findings]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def ratio_text(ratio: float) -> str:
    """``ratio`` > 1 means faster: "2.8x faster", "12.0 % slower" (a factor from ``TIMES_FROM`` on)."""
    if ratio >= TIMES_FROM:
        return f"{ratio:.1f}x faster"
    if ratio <= 1 / TIMES_FROM:
        return f"{1 / ratio:.1f}x slower"
    return f"{abs(ratio - 1) * 100:.1f} % {'faster' if ratio > 1 else 'slower'}"


def _speed(ratio: float, what: str, who: str) -> str:
    """``ratio`` > 1 means the AFTER side (named ``who``) is faster."""
    return f"{who} is {ratio_text(ratio)} {what}"


def change_text(row: Mapping[str, Any]) -> str:
    """A row's change: +12.3 %, a factor past +900 % (126x), ``new`` from 0, ``n/a`` when a side lacks it."""
    if row["change"] is not None:
        if abs(row["change"]) >= 9:
            return f"{1 + row['change']:.3g}x"
        return f"{100 * row['change']:+.1f} %"
    if row["before"] is None or row["after"] is None:
        return "n/a"
    return "new" if row["before"] == 0 and row["after"] != 0 else "0"


def _band(row: Mapping[str, Any]) -> str:
    n = row.get("noise")
    if not n or n.get("band_lo_change") is None:
        return "noise not modelled"
    return f"noise band {_pct(n['band_lo_change'])} .. {_pct(n['band_hi_change'])}"


def _steps(doc: Mapping[str, Any]) -> str:
    step = _row(doc, "headline.step_median_ns")
    if step is None or step["before"] is None or step["after"] is None:
        return ""
    out = f"step {fmt_ns(step['before'])} -> {fmt_ns(step['after'])}"
    wk = doc["work"]
    if wk["differs"]:
        out += f" at {wk['ratio']:.2g}x the tokens per step"
    elif not wk["known"]:
        out += ", tokens per step unknown"
    return out


def _unchanged(row: Mapping[str, Any], what: str, detail: str) -> str | None:
    """ "no change ``what`` (...)" when the primary number did not move, or not beyond noise or its tolerance; else
    None (then the clause says how much faster or slower)."""
    b, a = row["before"], row["after"]
    if a == b:
        return f"no change {what} ({detail})"
    if row["beyond_noise"] is False or not row["beyond_tolerance"]:
        why = "noise" if row["beyond_noise"] is False else f"its {row['tolerance'] * 100:g} % tolerance"
        return f"no change {what} beyond {why} ({detail}, {_pct(a / b - 1)}; {_band(row)})"
    return None


def throughput(doc: Mapping[str, Any]) -> str:
    """The first clause: the primary metric's change, or that it did not change beyond noise."""
    key = doc["work"]["primary"]
    row = _row(doc, key)
    if row is None or row["before"] is None or row["after"] is None or not row["comparable"]:
        return "no throughput number on both sides to compare (no steps found)"
    b, a = row["before"], row["after"]
    tokens = key == "headline.tokens_per_s"
    what = "in tokens/s" if tokens else "per step"
    values = f"{fmt('per_s', b)} -> {fmt('per_s', a)}" if tokens else ""
    steps = _steps(doc)
    detail = "; ".join(x for x in (values, steps) if x)
    if b <= 0 or a <= 0:
        return f"{row['label']} {fmt(row['unit'], b)} -> {fmt(row['unit'], a)}"
    unchanged = _unchanged(row, what, detail)
    if unchanged is not None:
        return unchanged
    ratio = a / b if tokens else b / a
    return f"{_speed(ratio, what, doc['roles']['after'])} ({detail})"


def findings_clause(doc: Mapping[str, Any]) -> list[str]:
    fd = doc["findings"]
    out = []
    gone, new = fd["resolved"], fd["new"]
    if gone:
        out.append(f"{_ids(gone)} {'is' if len(gone) == 1 else 'are'} gone")
    if new:
        out.append(f"{_ids(new)} {'is' if len(new) == 1 else 'are'} new")
    return out


def _of_step(f: Mapping[str, Any]) -> str:
    """ "of the step", or of the step without the profiler's own cost where the saving is on it (#37)."""
    return "of the step" + (BARE_WORDS if f.get("step_basis") == "without_profiler" else "")


def bottleneck_clause(doc: Mapping[str, Any]) -> str | None:
    b, a = doc["bottleneck"]["before"], doc["bottleneck"]["after"]
    if a and b and a["id"] == b["id"]:
        was = "" if _of_step(a) == _of_step(b) else f" {_of_step(b)}"
        return (
            f"the bottleneck is still {named(a)}, now {fmt('share', a['share'])} {_of_step(a)} "
            f"(was {fmt('share', b['share'])}{was})"
        )
    if a and b:
        return (
            f"the bottleneck moved from {named(b)} ({fmt('share', b['share'])} {_of_step(b)}) to "
            f"{named(a)} ({fmt('share', a['share'])}{'' if _of_step(a) == _of_step(b) else ' ' + _of_step(a)})"
        )
    if a:
        return f"the bottleneck is now {named(a)} ({fmt('share', a['share'])} {_of_step(a)})"
    if b:
        return f"no bottleneck finding remains (was {named(b)}, {fmt('share', b['share'])} {_of_step(b)})"
    return None


def others_clause(doc: Mapping[str, Any]) -> str | None:
    primary = doc["work"]["primary"]
    worse = [r for r in doc["metrics"] if r["regressed"] and r["key"] != primary]
    if not worse:
        return None
    parts = [
        f"{r['label']} {change_text(r)}"
        if r["change"] is not None
        else f"{r['label']} {fmt(r['unit'], r['before'])} -> {fmt(r['unit'], r['after'])}"
        for r in worse[:MAX_OTHERS]
    ]
    more = f" and {len(worse) - MAX_OTHERS} more" if len(worse) > MAX_OTHERS else ""
    return "also regressed: " + ", ".join(parts) + more


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
        parts.append(f"job tokens/s {fmt('per_s', tps['before'])} -> {fmt('per_s', tps['after'])}")
    if wk["differs"]:
        parts.append(f"at {wk['ratio']:.2g}x the tokens per job step")
    detail = "; ".join(parts)
    what = "job step" if use_step else "job tokens/s"
    unchanged = _unchanged(row, f"in the {what}", detail)
    if unchanged is not None:
        return unchanged
    ratio = b / a if use_step else a / b
    return f"{who}'s {what} is {ratio_text(ratio)} ({detail})"


def _about(f: Mapping[str, Any], side: str) -> str:
    sub = f.get(f"subject_{side}") or {}
    bits = []
    if sub.get("rank") is not None:
        bits.append(f"rank {sub['rank']}")
    if sub.get("cause"):
        bits.append(str(sub["cause"]).replace("_", " "))
    return named(f) + (f" ({', '.join(bits)})" if bits else "")


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
            out.append(f"{named(f)} changed: {f['note']}")
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
        return f"the job bottleneck is still {named(a)}{rank}, now {fmt('share', a['share'])} of the job step{was_text}"
    return f"the job bottleneck is now {named(a)}{rank}, {fmt('share', a['share'])} of the job step{was_text}"


def verdict(doc: Mapping[str, Any]) -> str:
    """The document's one-line verdict (module docstring)."""
    if doc["level"] == "run":
        clauses: list[str | None] = [throughput(doc), *findings_clause(doc), bottleneck_clause(doc)]
        clauses.append(others_clause(doc))
        return "; ".join(c for c in clauses if c) + "."
    clauses = [job_throughput(doc), *job_findings_clauses(doc), job_bottleneck_clause(doc)]
    rc = doc["rank_counts"]
    if rc["before"] != rc["after"]:
        clauses.append(
            f"the jobs have different rank counts ({rc['before']} -> {rc['after']}): per-rank rows cover "
            f"{len(doc['ranks'])} rank(s) on both sides"
        )
    primary = ("job.tokens_per_s", "job.job_step_ns")  # the first clause names both
    clauses.append(others_clause({**doc, "metrics": [r for r in doc["metrics"] if r["key"] not in primary]}))
    return "; ".join(c for c in clauses if c) + "."


def band_text(row: Mapping[str, Any]) -> str:
    n = row.get("noise")
    if not n:
        return "-"
    if n.get("band_lo_change") is None:
        return f"{fmt(row['unit'], n['band_lo'])} .. {fmt(row['unit'], n['band_hi'])}"
    return f"{100 * n['band_lo_change']:+.1f} .. {100 * n['band_hi_change']:+.1f} %"


def regression_line(row: Mapping[str, Any]) -> str:
    """One regressed row in a line (``check``'s ``regressions[].line``)."""
    n = row.get("noise")
    noise = f"noise band {band_text(row)}" if n else "noise not modelled (one value per run)"
    return (
        f"{row['label']} ({row['key']}) regressed: {fmt(row['unit'], row['before'])} -> "
        f"{fmt(row['unit'], row['after'])} ({change_text(row)}; better {row['better']}; tolerance "
        f"{100 * row['tolerance']:g} %; {noise})"
    )
