"""Terminal text for a comparison (``llmdiag compare``) and a check (``llmdiag check``): the documents of
``tb_llmdiag.compare`` (docs/compare.md), whose verdict and regression lines are already words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tb_llmdiag.compare.verdict import band_text, change_text, named
from tb_llmdiag.units import fmt


def judgement(row: Mapping[str, Any]) -> str:
    if not row["comparable"]:
        return "not compared" if row["before"] is not None and row["after"] is not None else "one side"
    if row["direction"] == "same":
        return "same"
    words = [row["direction"]]
    words.append("beyond tolerance" if row["beyond_tolerance"] else "within tolerance")
    if row["beyond_noise"] is not None:
        words.append("beyond noise" if row["beyond_noise"] else "within noise")
    if row["regressed"]:
        words.append("REGRESSED")
    return ", ".join(words)


def _side(role: str, s: Mapping[str, Any]) -> str:
    if s.get("level") == "job":
        return (
            f"{role}: {s['source']} (job {s['run']}, span {s['span']}, {s['rank_count']} ranks, "
            f"{s['step_count']} common steps)"
        )
    return f"{role}: {s['source']} (run {s['run']}, {s['step_count']} steps)"


def _ms(v: Any) -> str:
    return fmt("ns", v) if isinstance(v, (int, float)) else "-"


def rank_lines(doc: Mapping[str, Any]) -> list[str]:
    """A job comparison's per-rank table: each rank's step median (its own report) and its part of the job."""
    if not doc.get("ranks"):
        return []
    header = ("rank", "step before", "step after", "change", "noise band", "waiting before", "waiting after")
    rows = [header]
    for r in doc["ranks"]:
        n = r.get("noise") or {}
        band = (
            f"{100 * n['band_lo_change']:+.1f} .. {100 * n['band_hi_change']:+.1f} %"
            if n.get("band_lo_change") is not None
            else "-"
        )
        rows.append(
            (
                str(r["rank"]),
                _ms(r["step_median_ns_before"]),
                _ms(r["step_median_ns_after"]),
                f"{100 * r['change']:+.1f} %" if r["change"] is not None else "-",
                band,
                _ms(r["job_waiting_ns_before"]),
                _ms(r["job_waiting_ns_after"]),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["", "ranks (each rank's step median; its waiting per step in the job):"] + [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows
    ]


def render_compare(doc: Mapping[str, Any]) -> str:
    out = [
        "LLM Diag compare",
        "  " + _side("BEFORE", doc["before"]),
        "  " + _side("AFTER ", doc["after"]),
        "",
        doc["verdict"],
        "",
    ]
    wk = doc["work"]
    if wk["differs"]:
        out.append(
            f"work: {wk['tokens_per_step_before']:.0f} -> {wk['tokens_per_step_after']:.0f} tokens per step "
            f"({wk['ratio']:.2g}x): step times are shown, not judged; tokens/s is"
        )
    elif not wk["known"]:
        out.append(
            "work: tokens per step unknown on a side (profile with record_shapes=True): step times are "
            "compared as they are"
        )
    nm = doc["noise_model"]
    out.append(
        f"noise: bootstrap {100 * nm['level']:.0f} % band of AFTER - BEFORE over the per-step values "
        f"({nm['resamples']} resamples, seed {nm['seed']})"
        if nm["modelled"]
        else f"noise: not modelled (fewer than {nm['min_steps']} steps on a side); tolerances alone decide"
    )
    header = ("metric", "before", "after", "change", "noise band", "judgement")
    rows = [header] + [
        (
            r["label"]
            if not r["key"].startswith("kernels.by_category.")
            else f"kernels: {r['key'].split('.')[2]} share",
            fmt(r["unit"], r["before"]),
            fmt(r["unit"], r["after"]),
            change_text(r),
            band_text(r),
            judgement(r),
        )
        for r in doc["metrics"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    out.append("")
    for row in rows:
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
    out += rank_lines(doc)
    fd = doc["findings"]
    out += ["", "job findings:" if doc.get("level") == "job" else "findings:"]
    labels = (("resolved", "resolved"), ("new", "new"), ("changed", "changed"), ("unchanged", "unchanged"))
    for key, label in labels:
        items = fd[key]
        if not items:
            out.append(f"  {label}: none")
            continue
        parts = []
        for f in items:
            sb, sa = f["saving_share_before"], f["saving_share_after"]
            name = named(f)  # its title, never its id (#25)
            if key == "resolved":
                parts.append(f"{name} (saved ~{fmt('share', sb)})" if sb is not None else name)
            elif key == "new":
                parts.append(f"{name} (~{fmt('share', sa)})" if sa is not None else name)
            else:
                parts.append(
                    (f"{name} {fmt('share', sb)} -> {fmt('share', sa)}" if sb is not None or sa is not None else name)
                    + (f" ({f['note']})" if f.get("note") else "")
                )
        out.append(f"  {label}: " + "; ".join(parts))
    for w in doc.get("warnings", []):
        out.append(f"warning: {w}")
    return "\n".join(out) + "\n"


def render_check(result: Mapping[str, Any]) -> str:
    doc = result["compare"]
    out = [f"llmdiag check: CANDIDATE {doc['after']['source']} vs BASELINE {doc['before']['source']}"]
    if result["unjudged"]:
        out.append(f"FAIL: cannot judge: {result['unjudged']}")
    for r in result["regressions"]:
        out.append(f"REGRESSION {r['line']}")
    if result["passed"]:
        out.append(f"PASS: no metric regressed beyond its tolerance and beyond noise ({result['judged']} judged)")
    out.append(doc["verdict"])
    return "\n".join(out) + "\n"
