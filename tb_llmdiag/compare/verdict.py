"""The one-line verdict of a comparison: what changed in throughput, which findings went or came, and where the
bottleneck is now. Built only from the comparison document's own fields (``core.compare_runs``), e.g.

    AFTER is 5.9x faster in tokens/s (1954 -> 11593 tokens/s; step 575 ms -> 365 ms at 3.1x the tokens per
    step); `pageable_memcpy`, `variable_shapes` and `warmup_in_window` are gone; the bottleneck is still
    `host_bound`, now 64 % of the step (was 92 %).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tb_llmdiag.units import fmt, fmt_ns

#: a ratio at least this far from 1 reads as "N.Nx"; closer ones as a percentage
TIMES_FROM = 1.5
#: at most this many other regressed metrics are named in the verdict
MAX_OTHERS = 3


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


def throughput(doc: Mapping[str, Any]) -> str:
    """The first clause: the primary metric's change, or that it did not change beyond noise."""
    key = doc["work"]["primary"]
    row = _row(doc, key)
    if row is None or row["before"] is None or row["after"] is None or not row["comparable"]:
        return "no throughput number on both sides to compare (no steps found)"
    b, a = row["before"], row["after"]
    tokens = key == "headline.tokens_per_s"
    what = "in tokens/s" if tokens else "per step"
    values = f"{b:.0f} -> {a:.0f} tokens/s" if tokens else ""
    steps = _steps(doc)
    detail = "; ".join(x for x in (values, steps) if x)
    if b <= 0 or a <= 0:
        return f"{row['label']} {fmt(row['unit'], b)} -> {fmt(row['unit'], a)}"
    if a == b:
        return f"no change {what} ({detail})"
    if row["beyond_noise"] is False or not row["beyond_tolerance"]:
        why = "noise" if row["beyond_noise"] is False else f"its {row['tolerance'] * 100:g} % tolerance"
        return f"no change {what} beyond {why} ({detail}, {_pct(a / b - 1)}; {_band(row)})"
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


def bottleneck_clause(doc: Mapping[str, Any]) -> str | None:
    b, a = doc["bottleneck"]["before"], doc["bottleneck"]["after"]
    if a and b and a["id"] == b["id"]:
        return (
            f"the bottleneck is still {named(a)}, now {100 * a['share']:.0f} % of the step "
            f"(was {100 * b['share']:.0f} %)"
        )
    if a and b:
        return (
            f"the bottleneck moved from {named(b)} ({100 * b['share']:.0f} % of the step) to "
            f"{named(a)} ({100 * a['share']:.0f} %)"
        )
    if a:
        return f"the bottleneck is now {named(a)} ({100 * a['share']:.0f} % of the step)"
    if b:
        return f"no bottleneck finding remains (was {named(b)}, {100 * b['share']:.0f} % of the step)"
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


def verdict(doc: Mapping[str, Any]) -> str:
    clauses = [throughput(doc), *findings_clause(doc), bottleneck_clause(doc), others_clause(doc)]
    return "; ".join(c for c in clauses if c) + "."
