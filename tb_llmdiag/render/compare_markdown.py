"""The Markdown comparison (``llmdiag compare --format md``): the same content and numbers as
``render/compare_text.py`` (the text renderer it shares its wording with), as tables to paste into a pull request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tb_llmdiag.compare.verdict import band_text, change_text
from tb_llmdiag.render.compare_text import judgement
from tb_llmdiag.render.markdown import code, esc, prose, table
from tb_llmdiag.units import fmt


def _side_md(role: str, s: Mapping[str, Any]) -> str:
    if s.get("level") == "job":
        return (f"- {role}: {esc(s['source'])} (job {esc(s['run'])}, span {esc(s['span'])}, {s['rank_count']} ranks, "
                f"{s['step_count']} common steps)")  # fmt: skip
    return f"- {role}: {esc(s['source'])} (run {esc(s['run'])}, {s['step_count']} steps)"


def _finding_diff(fd: Mapping[str, Any], key: str) -> str:
    parts = []
    for f in fd[key]:
        sb, sa = f["saving_share_before"], f["saving_share_after"]
        ident = code(f["id"])
        if key == "resolved":
            parts.append(f"{ident} (saved ~{fmt('share', sb)})" if sb is not None else ident)
        elif key == "new":
            parts.append(f"{ident} (~{fmt('share', sa)})" if sa is not None else ident)
        else:
            moved = f" {fmt('share', sb)} -> {fmt('share', sa)}" if sb is not None or sa is not None else ""
            parts.append(ident + moved + (f" ({esc(f['note'])})" if f.get("note") else ""))
    return "; ".join(parts) or "none"


def _ms(v: Any) -> str:
    return fmt("ns", v) if isinstance(v, (int, float)) else "-"


def _ranks(doc: Mapping[str, Any]) -> list[str]:
    """A job comparison's per-rank table (as ``render.compare_text.rank_lines``)."""
    if not doc.get("ranks"):
        return []
    rows = []
    for r in doc["ranks"]:
        n = r.get("noise") or {}
        band = (f"{100 * n['band_lo_change']:+.1f} .. {100 * n['band_hi_change']:+.1f} %"
                if n.get("band_lo_change") is not None else "-")  # fmt: skip
        rows.append([esc(r["rank"]), _ms(r["step_median_ns_before"]), _ms(r["step_median_ns_after"]),
                     f"{100 * r['change']:+.1f} %" if r["change"] is not None else "-", band,
                     _ms(r["job_waiting_ns_before"]), _ms(r["job_waiting_ns_after"])])  # fmt: skip
    header = ("rank", "step before", "step after", "change", "noise band", "waiting before", "waiting after")
    return ["Ranks (each rank's step median; its waiting per step in the job):", "", *table(header, rows), ""]


def render_compare_md(doc: Mapping[str, Any]) -> str:
    out = ["# LLM Diag compare", "", _side_md("BEFORE", doc["before"]), _side_md("AFTER", doc["after"]), "",
           f"**{prose(doc['verdict'])}**", ""]  # fmt: skip
    wk, nm = doc["work"], doc["noise_model"]
    if wk["differs"]:
        out.append(f"- work: {wk['tokens_per_step_before']:.0f} -> {wk['tokens_per_step_after']:.0f} tokens per step "
                   f"({wk['ratio']:.2g}x): step times are shown, not judged; tokens/s is")  # fmt: skip
    elif not wk["known"]:
        out.append("- work: tokens per step unknown on a side (profile with record_shapes=True): step times are "
                   "compared as they are")  # fmt: skip
    out.append(
        f"- noise: bootstrap {100 * nm['level']:.0f} % band of AFTER - BEFORE over the per-step values "
        f"({nm['resamples']} resamples, seed {nm['seed']})"
        if nm["modelled"]
        else f"- noise: not modelled (fewer than {nm['min_steps']} steps on a side); tolerances alone decide"
    )
    rows = [
        [esc(r["label"] if not r["key"].startswith("kernels.by_category.") else
             f"kernels: {r['key'].split('.')[2]} share"),
         fmt(r["unit"], r["before"]), fmt(r["unit"], r["after"]), change_text(r), band_text(r),
         esc(judgement(r))]
        for r in doc["metrics"]
    ]  # fmt: skip
    out += ["", *table(("metric", "before", "after", "change", "noise band", "judgement"), rows), ""]
    out += _ranks(doc)
    fd = doc["findings"]
    out += ["### Job findings" if doc.get("level") == "job" else "### Findings", ""]
    out += [f"- {key}: {_finding_diff(fd, key)}" for key in ("resolved", "new", "changed", "unchanged")]
    out += [f"> warning: {esc(w)}" for w in doc.get("warnings", [])]
    return "\n".join(out).rstrip() + "\n"
