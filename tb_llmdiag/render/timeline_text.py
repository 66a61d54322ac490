"""Timeline document (``api.timeline``, docs/timeline.md) -> terminal text and Markdown: per series, one line a
window, then the change points with what changed, the triggered windows and the capture's cost over the run. Labels
come from the metric registry; numbers through ``units``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tb_llmdiag.registry import metric
from tb_llmdiag.units import fmt_count, fmt_ns, fmt_share

#: the columns of a window's line: (registry key for the label, the window field, its formatter)
COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("capture.unprofiled_step_ns", "step_ns", fmt_ns),
    ("headline.step_median_ns", "profiled_step_ns", fmt_ns),
    ("headline.tokens_per_s", "tokens_per_s", fmt_count),
    ("headline.gpu_busy_share", "gpu_busy_share", fmt_share),
    ("headline.mfu_share", "mfu_share", fmt_share),
)


def _label(key: str) -> str:
    m = metric(key)
    return m.label if m is not None else key.rsplit(".", 1)[-1]


def _finding(f: Mapping[str, Any]) -> str:
    share = f.get("saving_share")
    return f"{f.get('id')} ({fmt_share(share)})" if share is not None else str(f.get("id"))


def window_cells(w: Mapping[str, Any]) -> list[str]:
    """A window's cells: step, why, the COLUMNS, its top finding."""
    top = w.get("findings") or []
    return [
        str(w.get("global_step")),
        str(w.get("reason")),
        *(f(w.get(field)) if w.get(field) is not None else "n/a" for _, field, f in COLUMNS),
        _finding(top[0]) if top else "-",
    ]


def headers() -> list[str]:
    return ["step", "why", *(_label(k) for k, _, _ in COLUMNS), "top finding (saving)"]


def change_lines(c: Mapping[str, Any]) -> list[str]:
    """A change point's lines: where, the step's move, tokens a step, then what changed."""
    kind = "one-off" if c.get("kind") == "transient" else "change"
    tb, ta = c.get("tokens_per_step_before"), c.get("tokens_per_step_after")
    tokens = f"; tokens a step {fmt_count(tb)} -> {fmt_count(ta)}" if tb and ta and tb != ta else ""
    lines = [
        f"{kind} at step {c.get('at_step')} (against step {c.get('from_step')}): {_label('capture.unprofiled_step_ns')} "
        f"{fmt_ns(c.get('before_ns'))} -> {fmt_ns(c.get('after_ns'))} ({_signed(c.get('change_share'))}){tokens}"
    ]
    wc = c.get("what_changed")
    if not wc:
        return [*lines, "  what changed: not known (a window without an analysed report)"]
    if wc.get("verdict"):
        lines.append(f"  {wc['verdict']}")
    for name, key, field in (("new", "findings_new", "saving_share_after"), ("grew", "findings_grown", "saving_share_after"),
                             ("gone", "findings_resolved", "saving_share_before")):  # fmt: skip
        items = wc.get(key) or []
        if items:
            lines.append(f"  {name}: " + "; ".join(f"{f.get('title')} ({fmt_share(f.get(field))})" for f in items))
    moved = wc.get("metrics") or []
    if moved:
        lines.append("  moved: " + "; ".join(f"{m.get('label')} {_signed(m.get('change'))}" for m in moved))
    return lines


def _signed(x: Any) -> str:
    if not isinstance(x, (int, float)):
        return "n/a"
    return ("+" if x >= 0 else "") + fmt_share(x)


def trigger_line(w: Mapping[str, Any]) -> str:
    t = w.get("trigger") or {}
    slow = t.get("slow_steps") or [t.get("step")]
    times = t.get("slow_step_ns") or [t.get("step_ns")]
    steps = ", ".join(f"{s} ({fmt_ns(ns)})" for s, ns in zip(slow, times))
    sd = w.get("slowdown") or {}
    held = (
        f"; {sd['recorded_slow_steps']} of its {sd['recorded_steps']} recorded steps over the same threshold"
        if sd.get("recorded_steps")
        else ""
    )
    return (
        f"triggered at step {w.get('global_step')}: slow steps {steps} against a median of {fmt_ns(t.get('median_ns'))}"
        f"{held}; the window's {_label('headline.step_median_ns')} {fmt_ns(w.get('profiled_step_ns'))}"
    )


def cost_line(cost: Mapping[str, Any] | None) -> str:
    if not cost:
        return "capture cost: not stated (windows without the capture helper's ledger)"
    skipped = cost.get("skipped_steps") or []
    tail = f"; slots the budget skipped: {', '.join(map(str, skipped))}" if skipped else ""
    return (
        f"capture cost: {fmt_ns(cost.get('spent_ns'))} over {fmt_ns(cost.get('elapsed_ns'))} of the run "
        f"({fmt_share(cost.get('spent_share'))}; budget {fmt_share(cost.get('budget_share'))}), "
        f"{cost.get('windows')} windows{tail}"
    )


def _title(s: Mapping[str, Any]) -> str:
    sid = f"series {s['series']}" if s.get("series") else "profiler schedule"
    band = fmt_share((s.get("noise") or {}).get("band_share"))
    return f"{s.get('run')} / {s.get('worker')}: {sid}, {len(s.get('windows') or [])} windows; noise band {band}"


def render_timeline(doc: Mapping[str, Any]) -> str:
    out: list[str] = []
    for s in doc.get("series") or []:
        out.append(_title(s))
        rows = [headers(), *(window_cells(w) for w in s.get("windows") or [])]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out.extend("  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)
        changes = s.get("changes") or []
        out.append("  no change beyond the noise band" if not changes else "")
        for c in changes:
            out.extend("  " + line for line in change_lines(c))
        windows = s.get("windows") or []
        out.extend("  " + trigger_line(windows[i]) for i in s.get("triggered") or [])
        out.append("  " + cost_line(s.get("cost")))
        out.append("")
    return "\n".join(out) if out else "no windows found\n"


def render_timeline_md(doc: Mapping[str, Any]) -> str:
    out: list[str] = ["# Over the run", ""]
    for s in doc.get("series") or []:
        out += [f"## {_title(s)}", ""]
        head = headers()
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += [
            "| " + " | ".join(c.replace("|", "\\|") for c in window_cells(w)) + " |" for w in s.get("windows") or []
        ]
        out.append("")
        changes = s.get("changes") or []
        if not changes:
            out.append("No change beyond the noise band.")
        for c in changes:
            first, *rest = change_lines(c)
            out += [f"- **{first}**", *(f"  - {line.strip()}" for line in rest)]
        windows = s.get("windows") or []
        out += [f"- {trigger_line(windows[i])}" for i in s.get("triggered") or []]
        out += ["", cost_line(s.get("cost")), ""]
    return "\n".join(out) if len(out) > 2 else "No windows found.\n"
