"""Report and comparison dicts -> Markdown to paste into an issue or a pull request (``--format md``).

The same content and numbers as the terminal text (``render/text.py``, ``render/compare_text.py``), each value formatted
by the same formatter (``units.fmt`` by registry unit) and each headline label taken from the metric registry;
laid out as headings, tables and lists. Reads only the documented schemas (docs/report_schema.md,
docs/compare.md). Untrusted strings (kernel and run names) are escaped so they cannot break a table or start markup.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from tb_llmdiag.findings.table import EVIDENCE_LABELS, EVIDENCE_UNITS, label_from_key
from tb_llmdiag.findings.whatif_text import BASIS_WORDS
from tb_llmdiag.metrics.labels import words_of
from tb_llmdiag.registry import metric, unit_of
from tb_llmdiag.render.text import (
    ANATOMY_MIN_SHARE,
    FULL_RANKS,
    anatomy_table,
    capture_sentences,
    job_evidence_items,
    job_ranks_text,
    label_of,
    rank_flags,
    shown_runs,
)
from tb_llmdiag.units import fmt, fmt_ns, fmt_share, unit_from_name

_ESCAPE = str.maketrans({c: "\\" + c for c in "\\`*_[]<|"})


def esc(text: Any) -> str:
    """Plain text safe inside Markdown and a table cell (one line): what would start markup is escaped."""
    return " ".join(str(text).split()).translate(_ESCAPE)


def prose(text: Any) -> str:
    """A sentence of ours that quotes ids in backticks (a verdict): the quoted parts stay code, the rest ``esc``."""
    parts = " ".join(str(text).split()).split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: no spans to keep
        return esc(text)
    return "".join(p.translate(_ESCAPE) if i % 2 == 0 else code(p) for i, p in enumerate(parts))


def code(text: Any) -> str:
    """An id as inline code (no escapes inside a code span; a backtick in it would end the span)."""
    return "`" + str(text).replace("`", "'") + "`"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub table; cells are already escaped."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def _label(key: str) -> str:
    m = metric(key)
    return m.label if m is not None else key.rsplit(".", 1)[-1]


def _saving(f: Mapping[str, Any]) -> tuple[str, str, str]:
    """The finding's one saving (#25): its time, its share and the step it is of, as the CLI and the tab say it."""
    s = f.get("saving")
    if not s:
        return "-", "-", "-"
    basis = BASIS_WORDS.get(str(s.get("basis")), "step")
    of = f"{fmt_ns(s['step_ns'])} {basis}" if s.get("step_ns") is not None else basis
    return fmt_ns(s.get("ns")) if s.get("ns") is not None else "-", fmt_share(s.get("share")), of


def _findings(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    if not findings:
        return []
    out = [f"### Findings ({len(findings)}, by what each saves at most)", ""]
    rows = [[str(i), esc(f["severity"]), code(f["id"]), esc(f["title"]), *_saving(f)]
            for i, f in enumerate(findings, start=1)]  # fmt: skip
    out += table(("#", "severity", "finding", "title", "saves at most", "share", "of the"), rows)
    for i, f in enumerate(findings, start=1):
        out += ["", f"**{i}. {code(f['id'])}**: {esc(f.get('summary') or f['title'])}", ""]
        units, labels = EVIDENCE_UNITS.get(f["id"], {}), EVIDENCE_LABELS.get(f["id"], {})
        if f.get("source"):
            out.append(f"- {esc(label_of('findings[].source', 'source line'))}: {code(f['source'])}")
        for k, v in (f.get("evidence") or {}).items():
            out.append(f"- {esc(labels.get(k) or label_from_key(k))}: {esc(fmt(units.get(k) or unit_from_name(k), v))}")
        fix = f.get("fix") or {}
        if fix.get("text"):
            out.append(f"- fix: {esc(fix['text'])}")
        if f.get("caveat"):
            out.append(f"- caveat: {esc(f['caveat'])}")
    return out + [""]


def _anatomy_md(a: dict[str, Any]) -> list[str]:
    """The model's parts as a table (the text report's rows: parts over 1 % of GPU busy time, then ``other``)."""
    t = anatomy_table(a)
    if t is None:
        return []
    out = ["### Step anatomy", "", f"{esc(t['intro'])}; parts over {fmt_share(ANATOMY_MIN_SHARE)} of it:", ""]
    out += table(["part", *map(esc, t["header"])], [list(map(esc, r)) for r in t["rows"]])
    if t["other_ops"]:
        out += ["", f"other's top operators: {esc(t['other_ops'])}"]
    if t["small"]:
        out += ["", f"Under {fmt_share(ANATOMY_MIN_SHARE)}: {esc(t['small'])}"]
    return out + [""]


def render_run_md(run: Mapping[str, Any]) -> list[str]:
    out = [f"## {esc(run['run'])} (worker {esc(run['worker'])}, span {esc(run['span'])}, {esc(run['source_kind'])})",
           ""]  # fmt: skip
    if run["status"] == "partial":
        out += [f"> **Partial**: {esc(run['error'])}; the figures below cover only what was read.", ""]
    elif run["status"] != "ok":
        return out + [f"> **{esc(run['status'])}**: {esc(run['error'])}", ""]
    s = run["summary"]
    dev = s.get("device")
    where = f"{dev['name']} x{dev['count']}" if dev else "no device listed"
    if s.get("distributed") and s["distributed"].get("rank") is not None:
        where += f", rank {s['distributed']['rank']}/{s['distributed'].get('world_size')}"
    out += [f"{esc(where)}; window {fmt_ns(s['window_ns'])}; {s['counts']['events']} events", ""]
    steps = ((run.get("metrics") or {}).get("steps") or {}).get("per_step") or []
    if steps:
        durs = [st["duration_ns"] for st in steps]
        out += [f"Steps: {len(steps)} ({esc(words_of(s['step_source']))}), median {fmt_ns(statistics.median(durs))}, "
                f"min {fmt_ns(min(durs))}, max {fmt_ns(max(durs))}", ""]  # fmt: skip
        out += table(("step", "duration"), [[f"#{st['index']}", fmt_ns(st["duration_ns"])] for st in steps[:12]])
        out += ["", f"({len(steps) - 12} more steps)"] if len(steps) > 12 else []
    else:
        out.append("Steps: none found (no ProfilerStep#N markers; call prof.step() each step)")
    c, t = s["counts"], s["device_time_ns"]
    out += [
        "",
        f"- device: {c['kernels']} kernels {fmt_ns(t['kernel'])}, {c['memcpys']} memcpy {fmt_ns(t['memcpy'])}, "
        f"{c['memsets']} memset {fmt_ns(t['memset'])}; busy {fmt_ns(s['device_busy_ns'])}",
        f"- host: {c['runtime_calls'] + c['driver_calls']} runtime/driver calls {fmt_ns(s['runtime_time_ns'])}, "
        f"{c['cpu_ops']} CPU ops, {c['annotations']} annotations",
        "",
    ]
    trust = capture_sentences((run.get("metrics") or {}).get("capture") or {})
    if trust:
        out += ["### Capture", "", *[f"- {esc(kind)}: {esc(text)}" for kind, text in trust], ""]
    head = {k: v for k, v in (run.get("headline") or {}).items() if v is not None}
    if head:
        rows = [[esc(_label("headline." + k)), fmt(unit_of("headline." + k), v)] for k, v in head.items()]
        out += ["### Headline", "", *table(("metric", "value"), rows), ""]
    out += _anatomy_md((run.get("metrics") or {}).get("anatomy") or {})
    out += _findings(run.get("findings") or [])
    wi = run.get("what_if")
    if wi:
        out += ["### What if (upper bounds)", "", prose(wi.get("statement") or ""), ""]
    out += [f"> warning: {esc(w)}" for w in run.get("warnings") or []]
    return out


def render_job_md(job: Mapping[str, Any]) -> list[str]:
    out = [f"## Job {esc(job['run'])} (span {esc(job['span'])}, {len(job['files'])} ranks: "
           f"{esc(job_ranks_text(dict(job)))})", ""]  # fmt: skip
    if job["status"] != "ok":
        return out + [f"> **error**: {esc(job['error'])}", ""]
    m = job.get("metrics") or {}
    rows = [
        ["step (median rank)", fmt_ns(m.get("job_step_ns"))],
        ["exposed communication", fmt_share(m.get("exposed_share"))],
        ["of which transfer", fmt_share(m.get("exposed_transfer_share"))],
        ["overlap", fmt_share(m.get("overlap_share"))],
        ["collectives matched", str(m.get("matched_collective_count"))],
    ]
    out += table(("", "value"), rows) + [""]
    out += [f"> note: {esc(n)}" for n in job.get("notes") or []]
    findings = job.get("findings") or []
    if not findings:
        out.append(
            "No job finding: no rank keeps the others waiting beyond the step-to-step noise and the profiler's own cost, and the transfers no compute hides are small."
        )
    for i, f in enumerate(findings, start=1):
        out += [f"**{i}. {code(f['id'])}**: {esc(f['title'])} ({fmt_share(f['value'])} of step)", ""]
        if f.get("summary"):
            out += [esc(f["summary"]), ""]
        for k, v in (f.get("evidence") or {}).items():
            out += [f"- {esc(label)}: {esc(value)}" for label, value in job_evidence_items(k, v)]
        if f.get("fix"):
            out.append(f"- fix: {esc(f['fix'])}")
        wi = f.get("what_if")
        if wi and wi.get("step_ns") is not None:
            out.append(f"- what if: step {fmt_ns(wi['step_ns'])} -> {fmt_ns(wi['step_after_ns'])} at best")
        out.append("")
    return out + _flagged_md(job)


def _flagged_md(job: Mapping[str, Any]) -> list[str]:
    """Past ``FULL_RANKS`` ranks: the flagged ranks (notable, outliers, not analysed) as a table; the others
    are unremarkable (the text report lists every rank)."""
    if len(job["files"]) <= FULL_RANKS:
        return []
    flags = rank_flags(dict(job))
    rows = [[str(r), esc(", ".join(fl))] for r, fl in sorted(flags.items())]
    return (
        ["Flagged ranks (the notable ranks' reports follow; the others are within the band):", ""]
        + table(("rank", "flags"), rows)
        + [""]
    )


def render_report_md(report: Mapping[str, Any], *, all_ranks: bool = False) -> str:
    out = [f"# LLM Diag report for {esc(report['root'])} ({len(report['runs'])} trace(s))", ""]
    out += [f"> warning: {esc(w)}" for w in report.get("warnings", [])]
    for j in report.get("jobs") or []:
        out += render_job_md(j)
    for r in report["runs"] if all_ranks else shown_runs(dict(report)):
        out += render_run_md(r)
    return "\n".join(out).rstrip() + "\n"
