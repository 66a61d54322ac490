"""Report dict -> terminal text. Reads only the documented report schema (docs/report_schema.md); prints
each metric in the unit the metric registry gives it (``units.fmt``)."""

from __future__ import annotations

import re
import statistics
from typing import Any

from tb_llmdiag.findings.table import EVIDENCE_LABELS, EVIDENCE_UNITS, label_from_key
from tb_llmdiag.findings.whatif_text import saving_text
from tb_llmdiag.metrics.labels import part_words, words_of
from tb_llmdiag.registry import metric, unit_of
from tb_llmdiag.units import fmt, fmt_interval, fmt_ns, fmt_share, unit_from_name


def label_of(path: str, key: str) -> str:
    """The registry's label of ``path``, else the key's own words: never a raw key."""
    m = metric(path)
    return m.label if m is not None else label_from_key(key)


def _status_lines(run: dict[str, Any]) -> list[str]:
    """What the run's status says before any figure: a partial read, a file still being written, an error."""
    if run["status"] == "partial":  # read only in part: the figures cover the events before the problem
        rs = run.get("read_state") or {}
        what = "TRUNCATED" if "ends early" in str(run["error"]) else "PARTIAL"  # a cut file, or invalid JSON inside
        read = f"; {fmt('bytes', rs['read_bytes'])} of trace text read" if isinstance(rs.get("read_bytes"), int) else ""
        return [
            f"   {what}: {run['error']}{read}; the figures below cover only what was read (no finding "
            "that needs the whole file, no MFU)"
        ]
    if run["status"] == "writing":  # a live file: nothing analysed yet
        return [f"   {run['error']}"]
    if run["status"] != "ok":
        return [f"   error: {run['error']}"]
    return []


def _step_lines(s: dict[str, Any], steps: list[dict[str, Any]]) -> list[str]:
    """The steps: how many, where they came from, median / min / max, and the first 12."""
    if not steps:
        return ["   steps: none found (no ProfilerStep#N markers; call prof.step() each step)"]
    durs = [st["duration_ns"] for st in steps]
    return [
        f"   steps: {len(steps)} ({words_of(s['step_source'])}), median {fmt_ns(statistics.median(durs))}, "
        f"min {fmt_ns(min(durs))}, max {fmt_ns(max(durs))}",
        "     "
        + "  ".join(f"#{st['index']}: {fmt_ns(st['duration_ns'])}" for st in steps[:12])
        + ("  ..." if len(steps) > 12 else ""),
    ]


def _summary_lines(run: dict[str, Any]) -> list[str]:
    """Where the run ran, its window and events, its steps, and what the device and the host did."""
    s = run["summary"]
    dev = s.get("device")
    where = f"{dev['name']} x{dev['count']}" if dev else "no device listed"
    if s.get("distributed") and s["distributed"].get("rank") is not None:
        where += f", rank {s['distributed']['rank']}/{s['distributed'].get('world_size')}"
    lines = [f"   {where}; window {fmt_ns(s['window_ns'])}; {s['counts']['events']} events"]
    lines += _step_lines(s, ((run.get("metrics") or {}).get("steps") or {}).get("per_step") or [])
    c, t = s["counts"], s["device_time_ns"]
    lines.append(
        f"   device: {c['kernels']} kernels {fmt_ns(t['kernel'])}, {c['memcpys']} memcpy {fmt_ns(t['memcpy'])}, "
        f"{c['memsets']} memset {fmt_ns(t['memset'])}; busy {fmt_ns(s['device_busy_ns'])}"
    )
    lines.append(
        f"   host: {c['runtime_calls'] + c['driver_calls']} runtime/driver calls {fmt_ns(s['runtime_time_ns'])}, "
        f"{c['cpu_ops']} CPU ops, {c['annotations']} annotations"
    )
    return lines


def _headline_lines(head: dict[str, Any]) -> list[str]:
    """The headline numbers that are known, each by its registry label and unit."""
    if not head:
        return []
    parts = [
        f"{label_of('headline.' + k, k)} {fmt(unit_of('headline.' + k), v)}" for k, v in head.items() if v is not None
    ]
    return ["   headline: " + "; ".join(parts)]


def _told(f: dict[str, Any], evidence: list[str] | None) -> list[str]:
    """A finding's (run or job) summary, source line, caveat and evidence lines; ``evidence``: its items in words, None for none."""
    lines = []
    if f.get("summary"):
        lines.append(f"      {f['summary']}")
    if f.get("source"):
        lines.append(f"      {label_of('findings[].source', 'source line')}: {f['source']}")
    if f.get("caveat"):
        lines.append(f"      caveat: {f['caveat']}")
    if evidence is not None:
        lines.append("      evidence: " + "; ".join(evidence))
    return lines


def _finding_lines(i: int, f: dict[str, Any]) -> list[str]:
    """Finding ``i`` (from 1): its severity, title and saving, summary, caveat, evidence and fix."""
    save = f" - {saving_text(f['saving'])}" if f.get("saving") else ""
    lines = [f"   {i}. [{f['severity']}] {f['title']}{save}  (rule {f['id']})"]
    ev = f.get("evidence") or {}
    units, labels = EVIDENCE_UNITS.get(f["id"], {}), EVIDENCE_LABELS.get(f["id"], {})
    items = [f"{labels.get(k) or label_from_key(k)} {fmt(units.get(k) or unit_from_name(k), v)}" for k, v in ev.items()]
    lines += _told(f, items if ev else None)
    fix = f.get("fix") or {}
    if fix.get("text"):
        lines.append(f"      fix: {fix['text']}")
    return lines


#: the anatomy section lists the parts holding at least this share of the GPU's busy time (`other` always)
ANATOMY_MIN_SHARE = 0.01
#: its columns: registry keys under ``anatomy.parts.*``
ANATOMY_COLUMNS = ("per_step_time_ns", "share", "achieved_tflops", "efficiency_share", "identified_by")


def _anatomy_cell(key: str, fig: dict[str, Any]) -> str:
    path = f"anatomy.parts.*.{key}"
    if key == "per_step_time_ns" and fig.get(key) is None:
        return fmt("ns", fig.get("time_ns"))  # no steps: the window's time
    if key == "identified_by":
        by, share = fig.get("identified_by"), fig.get("identified_share")
        if by is None:
            return "-"
        return f"{words_of(by)} ({fmt_share(share)})" if share is not None else str(words_of(by))
    v = fig.get(key)
    return "-" if v is None else fmt(unit_of(path), v)


def anatomy_table(a: dict[str, Any]) -> dict[str, Any] | None:
    """The anatomy section of a run (``metrics.anatomy``), shared by the text and Markdown renderers, or None when
    the topic is unavailable: ``intro`` (the busy time and the share in named parts), ``header`` (registry labels),
    ``rows`` ([part, cells...], the parts at or over ``ANATOMY_MIN_SHARE`` largest first, then ``other``),
    ``other_ops`` (``other``'s top operators in words), ``small`` (the parts under the threshold, in words)."""
    parts = a.get("parts") if a.get("available") else None
    if not parts:
        return None
    named = sorted((p for p in parts if p != "other"), key=lambda p: -parts[p]["time_ns"])
    shown = [p for p in named if (parts[p].get("share") or 0) >= ANATOMY_MIN_SHARE]
    shown += ["other"] if "other" in parts else []
    small = [p for p in named if p not in shown]
    ops = (parts.get("other") or {}).get("top_ops") or []
    return {
        "intro": f"{label_of('anatomy.busy_ns', 'busy_ns')} {fmt_ns(a.get('busy_ns'))}; "
        f"{label_of('anatomy.assigned_share', 'assigned_share')} {fmt_share(a.get('assigned_share'))}",
        "header": [label_of(f"anatomy.parts.*.{k}", k) for k in ANATOMY_COLUMNS],
        "rows": [[part_words(p), *(_anatomy_cell(k, parts[p]) for k in ANATOMY_COLUMNS)] for p in shown],
        "other_ops": ", ".join(f"{o['name']} {fmt_ns(o['time_ns'])}" for o in ops),
        "small": ", ".join(f"{part_words(p)} {fmt_share(parts[p].get('share'))}" for p in small),
    }


def _anatomy_lines(a: dict[str, Any]) -> list[str]:
    """The model's parts: one aligned line each (parts over 1 % of GPU busy time, then ``other`` with its top ops)."""
    t = anatomy_table(a)
    if t is None:
        return []
    grid = [["part", *t["header"]], *t["rows"]]
    widths = [max(len(r[i]) for r in grid) for i in range(len(grid[0]))]
    lines = [f"   anatomy: {t['intro']}; parts over {fmt_share(ANATOMY_MIN_SHARE)} of it:"]
    for r in grid:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:-1], widths[1:-1])] + [r[-1]]
        lines.append("     " + "  ".join(cells).rstrip())
    if t["other_ops"]:
        lines.append(f"     other's top operators: {t['other_ops']}")
    if t["small"]:
        lines.append(f"     under {fmt_share(ANATOMY_MIN_SHARE)}: {t['small']}")
    return lines


def render_run(run: dict[str, Any]) -> str:
    lines = [f"== {run['run']}  worker {run['worker']}  span {run['span']}  ({run['source_kind']})"]
    lines += _status_lines(run)
    if run["status"] not in ("ok", "partial"):  # nothing was analysed
        return "\n".join(lines)
    lines += _summary_lines(run)
    lines += _capture_lines((run.get("metrics") or {}).get("capture") or {})
    lines += _headline_lines(run.get("headline") or {})
    lines += _anatomy_lines((run.get("metrics") or {}).get("anatomy") or {})
    findings = run.get("findings") or []
    if findings:
        lines.append(f"   findings ({len(findings)}, by what each saves at most):")
    for i, f in enumerate(findings, start=1):
        lines += _finding_lines(i, f)
    wi = run.get("what_if")
    if wi:
        lines.append(f"   what if (upper bounds): {wi.get('statement') or ''}")
    for w in run.get("warnings") or []:
        lines.append(f"   warning: {w}")
    return "\n".join(lines)


def render_run_brief(run: dict[str, Any], roles: list[str]) -> str:
    """A notable rank of a large job in brief: its summary, headline and one line per finding (its full report:
    ``llmdiag report`` on its file, or ``--all-ranks``)."""
    lines = [f"== {run['run']}  worker {run['worker']}  span {run['span']}  ({', '.join(roles)} rank; in brief)"]
    lines += _status_lines(run)
    if run["status"] not in ("ok", "partial"):
        return "\n".join(lines)
    lines += _summary_lines(run)
    lines += _headline_lines(run.get("headline") or {})
    for i, f in enumerate(run.get("findings") or [], start=1):
        save = f" - {saving_text(f['saving'])}" if f.get("saving") else ""
        lines.append(f"   {i}. [{f['severity']}] {f['title']}{save}  (rule {f['id']})")
    return "\n".join(lines)


def job_evidence_items(key: str, v: Any) -> list[tuple[str, str]]:
    """One job evidence item as (label, value) pairs, by the registry's label and unit: a dict item as its parts,
    a named value (``more_tokens``) in its words; nothing for an unknown value or a list. Shared with Markdown."""
    if v is None or isinstance(v, list):
        return []
    if isinstance(v, dict):
        return [pair for k, x in v.items() for pair in job_evidence_items(f"{key}.{k}", x)]
    shown = words_of(v)
    if isinstance(shown, str) and re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", shown):  # a named value no table words
        shown = shown.replace("_", " ")
    return [(label_of("job." + key, key.rsplit(".", 1)[-1]), fmt(unit_of("job." + key), shown))]


#: a job of more ranks than this prints its notable ranks' reports and a flag row per rank, not every report
FULL_RANKS = 8
_ROLES = ("straggler", "slowest", "fastest", "typical")


def rank_ranges(ranks: list[int]) -> str:
    """Ranks with runs of three or more consecutive numbers shortened: ``0-3, 5, 7, 8``."""
    out: list[list[int]] = []
    for r in sorted(ranks):
        if out and out[-1][1] == r - 1:
            out[-1][1] = r
        else:
            out.append([r, r])
    return ", ".join(f"{a}-{b}" if b > a + 1 else f"{a}, {b}" if b > a else str(a) for a, b in out)


def job_ranks_text(job: dict[str, Any]) -> str:
    ranks = [f["rank"] for f in job["files"] if f["rank"] is not None]
    unranked = [f["worker"] for f in job["files"] if f["rank"] is None]
    return ", ".join(([rank_ranges(ranks)] if ranks else []) + unranked)


def _job_finding_lines(findings: list[dict[str, Any]]) -> list[str]:
    if not findings:
        return [
            "   no job finding: no rank keeps the others waiting beyond the step-to-step noise and the profiler's own cost, and the transfers no compute hides are small"
        ]
    lines = []
    for i, f in enumerate(findings, start=1):
        lines.append(f"   {i}. {f['title']} ({fmt_share(f['value'])} of the job step)  (rule {f['id']})")
        ev = f.get("evidence") or {}
        items = [f"{label} {value}" for k, v in ev.items() for label, value in job_evidence_items(k, v)]
        lines += _told(f, items if ev else None)
        if f.get("fix"):
            lines.append(f"      fix: {f['fix']}")
        wi = f.get("what_if")
        if wi and wi.get("step_ns") is not None:
            lines.append(f"      what if: step {fmt_ns(wi['step_ns'])} -> {fmt_ns(wi['step_after_ns'])} at best")
    return lines


def render_job(job: dict[str, Any]) -> str:
    """The job section of one run with several ranks (``jobs[]`` of the report); past ``FULL_RANKS`` ranks, its
    notable ranks and one flag row per rank (``flag_rows``)."""
    lines = [f"== job {job['run']}  span {job['span']}  ({len(job['files'])} ranks: {job_ranks_text(job)})"]
    if job["status"] != "ok":
        lines.append(f"   error: {job['error']}")
        return "\n".join(lines)
    m = job.get("metrics") or {}
    lines.append(
        f"   step {fmt_ns(m.get('job_step_ns'))} (median rank); exposed communication "
        f"{fmt_share(m.get('exposed_share'))} of it, of which transfer {fmt_share(m.get('exposed_transfer_share'))}; "
        f"overlap {fmt_share(m.get('overlap_share'))}; {m.get('matched_collective_count')} collectives matched"
    )
    lines += [f"   note: {n}" for n in job.get("notes") or []]
    lines += _job_finding_lines(job.get("findings") or [])
    if len(job["files"]) > FULL_RANKS:
        lines += flag_rows(job)
    return "\n".join(lines)


def notable_ranks(job: dict[str, Any]) -> dict[int, list[str]]:
    """The job's notable ranks (``view.notable``: ``straggler_rank``, ``slowest_rank``...) and their roles."""
    out: dict[int, list[str]] = {}
    for role in _ROLES:
        r = ((job.get("view") or {}).get("notable") or {}).get(f"{role}_rank")
        if r is not None:
            out.setdefault(r, []).append(role)
    return out


def _rank_flags(job: dict[str, Any], notable: dict[int, list[str]]) -> dict[int, list[str]]:
    """Per rank: its roles, its outlier reasons, and "not analysed" for a rank whose analysis failed."""
    flags: dict[int, list[str]] = {r: list(roles) for r, roles in notable.items()}
    for o in (job.get("view") or {}).get("outliers") or []:
        mine = flags.setdefault(o["rank"], [])
        mine.extend(x for x in o["reasons"] if x not in mine)
    for f in job["files"]:
        if f["status"] != "ok" and f["rank"] is not None:
            flags.setdefault(f["rank"], []).append("not analysed")
    return flags


def rank_flags(job: dict[str, Any]) -> dict[int, list[str]]:
    """Per rank: its roles among the notable ranks, its outlier reasons, "not analysed" for a failed one."""
    return _rank_flags(job, notable_ranks(job))


def flag_rows(job: dict[str, Any]) -> list[str]:
    """The notable ranks, the outliers' count, then one row per rank in rank order: its mean step, against the
    median rank's, its mean exposed waiting, and its flags (``_rank_flags``)."""
    v = job.get("view") or {}
    notable = notable_ranks(job)
    flags = _rank_flags(job, notable)
    bars = {b["rank"]: b for b in v.get("bars") or []}
    steps = [b["step_ns"] for b in bars.values() if b.get("step_ns") is not None]
    med = statistics.median(steps) if steps else None
    shown = ", ".join(f"rank {r} ({', '.join(roles)})" for r, roles in notable.items())
    lines = [
        f"   notable ranks: {shown or 'none'}; {len(v.get('outliers') or [])} outlier(s). Every rank below (mean "
        "step, against the median rank's, mean exposed waiting); the notable ranks in brief after the job "
        "(--all-ranks: every rank's full report)",
    ]
    ranks = sorted({f["rank"] for f in job["files"] if f["rank"] is not None})
    w = max(len("rank"), len(str(ranks[-1]))) if ranks else 4
    lines.append(f"   {'rank':>{w}} {'step':>8} {'vs med':>7} {'waiting':>8} flags")
    for r in ranks:
        b = bars.get(r) or {}
        step, wait = b.get("step_ns"), b.get("waiting_ns")
        vs = f"{(step / med - 1) * 100:+.1f}%" if step is not None and med else "-"
        row = f"   {r:>{w}} {fmt_ns(step) if step is not None else '-':>8} {vs:>7} "
        row += f"{fmt_ns(wait) if wait is not None else '-':>8} " + ", ".join(flags.get(r, []))
        lines.append(row.rstrip())
    return lines


def large_job_roles(report: dict[str, Any]) -> dict[str, list[str] | None]:
    """Per run path of a rank of a job of more than ``FULL_RANKS`` ranks: its roles (``notable_ranks``), None
    for a rank that is not notable. Runs of smaller jobs and single runs are not listed (shown in full)."""
    out: dict[str, list[str] | None] = {}
    for job in report.get("jobs") or []:
        if len(job["files"]) > FULL_RANKS:
            roles = notable_ranks(job)
            out.update({f["path"]: roles.get(f["rank"]) if f["rank"] is not None else None for f in job["files"]})
    return out


def shown_runs(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs printed: all but the ranks of a job of more than ``FULL_RANKS`` ranks that are not notable."""
    roles = large_job_roles(report)
    return [r for r in report["runs"] if r["path"] not in roles or roles[r["path"]]]


def render_report(report: dict[str, Any], *, all_ranks: bool = False) -> str:
    """The report as text: its jobs, then its runs (``all_ranks``: every run in full; else ``shown_runs``, a large
    job's notable ranks in brief: ``render_run_brief``)."""
    out = [f"LLM Diag report for {report['root']} ({len(report['runs'])} trace(s))"]
    out.extend(f"warning: {w}" for w in report.get("warnings", []))
    out.extend(render_job(j) for j in report.get("jobs") or [])
    roles = {} if all_ranks else large_job_roles(report)
    for r in report["runs"] if all_ranks else shown_runs(report):
        mine = roles.get(r["path"])
        out.append(render_run_brief(r, mine) if mine else render_run(r))
    return "\n".join(out) + "\n"


def capture_sentences(c: dict[str, Any]) -> list[tuple[str, str]]:
    """The trust lines of a ``capture`` topic as (kind, sentence): what the capture holds, the profiler's cost
    (``capture``), then each problem (its severity). Shared by the text and the Markdown renderers."""
    if not c.get("available"):
        return []
    opts = [
        name
        for name, key in (("shapes", "record_shapes"), ("memory", "profile_memory"), ("stacks", "with_stack"))
        if c.get(key)
    ]
    held = f"{c.get('steps', 0)} steps, " + (", ".join(opts) if opts else "no shapes/memory/stacks") + " recorded"
    if c.get("graph_kernels"):
        held += f", {c['graph_kernels']} kernels from {c['graph_launches']} graph replays ({c['graphs']} graphs)"
    if c.get("hardware_counters"):
        held += f", {len(c['hardware_counters'])} hardware counters"
    out = [("capture", held)]
    share = c.get("profiler_overhead_share")
    if share is not None:
        prof = c.get("profiled_step_ns")
        unprof = c.get("unprofiled_step_ns")
        step = (
            f"; profiled step {fmt_ns(prof)} vs unprofiled {fmt_ns(unprof)}"
            if unprof is not None
            else f"; profiled step {fmt_ns(prof)}"
        )
        ci = c.get("profiler_overhead_share_95")
        ci_text = f" ({_interval_label('profiler_overhead_share_95')} {fmt_interval('share', ci)})" if ci else ""
        slow = c.get("after_window_slowdown_share")
        slow_text = (
            f"; {label_of('capture.after_window_slowdown_share', 'after_window_slowdown_share')} {fmt_share(slow)}"
            if slow is not None
            else ""
        )
        out.append(
            (
                "capture",
                f"profiler overhead {fmt_share(share)} of the profiled step{ci_text}{step}{slow_text} "
                f"({c.get('overhead_method')})",
            )
        )
    out += [(f"capture {p['severity']}", p["text"]) for p in c.get("problems") or []]
    return out


def _interval_label(key: str) -> str:
    return label_of(f"capture.{key}[]", key)


def _capture_lines(c: dict[str, Any]) -> list[str]:
    return [f"   {kind}: {text}" for kind, text in capture_sentences(c)]
