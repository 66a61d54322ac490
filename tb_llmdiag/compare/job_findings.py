"""Job findings of two jobs (``jobs[].findings``), matched by id: resolved, new, changed, unchanged.

A job finding's saving is its value (the share of the job step its metric reports: the straggler's caused wait,
the exposed transfer) and its what-if's saving in ns (``saving_ns``, else ``step_ns - step_after_ns``). A finding
on both sides is ``changed`` when its value moved by at least ``findings_diff.SAVING_FLOOR`` of the step, or when
it names a different rank (the straggler moved) or a different cause; ``note`` says which. The job's bottleneck
is its finding with the largest value; ``metric`` names the job metric it reads, so the verdict can say what that
metric was on the other side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tb_llmdiag.compare.findings_diff import SAVING_FLOOR, diff_by_id


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def saving_ns(f: Mapping[str, Any] | None) -> float | None:
    w = (f or {}).get("what_if")
    if not isinstance(w, Mapping):
        return None
    s = _num(w.get("saving_ns"))
    if s is not None:
        return s
    step, after = _num(w.get("step_ns")), _num(w.get("step_after_ns"))
    return step - after if step is not None and after is not None else None


def _ev(f: Mapping[str, Any] | None, key: str) -> Any:
    ev = (f or {}).get("evidence")
    return ev.get(key) if isinstance(ev, Mapping) else None


def subject(f: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a finding is about beyond its id: the straggler's rank and cause, the top collective kind."""
    return {
        "rank": _ev(f, "straggler_rank"),
        "cause": _ev(f, "straggler_cause"),
        "kind": _ev(f, "top_collective_kind"),
    }


def _note(b: Mapping[str, Any], a: Mapping[str, Any]) -> str | None:
    sb, sa = subject(b), subject(a)
    parts = []
    if sb["rank"] != sa["rank"]:
        parts.append(f"now rank {sa['rank']} (was rank {sb['rank']})")
    if sb["cause"] != sa["cause"]:
        parts.append(f"cause now {sa['cause']} (was {sb['cause']})")
    if sb["kind"] != sa["kind"]:
        parts.append(f"top collective now {sa['kind']} (was {sb['kind']})")
    return "; ".join(parts) or None


def _entry(fid: str, b: Mapping[str, Any] | None, a: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        "id": fid,
        "title": (a or b or {}).get("title"),
        "metric": (a or b or {}).get("metric"),
        "severity_before": None,
        "severity_after": None,
        "saving_share_before": _num((b or {}).get("value")),
        "saving_share_after": _num((a or {}).get("value")),
        "saving_ns_before": saving_ns(b),
        "saving_ns_after": saving_ns(a),
        "subject_before": subject(b) if b is not None else None,
        "subject_after": subject(a) if a is not None else None,
        "note": _note(b, a) if a is not None and b is not None else None,
    }


def _moved(b: Mapping[str, Any], a: Mapping[str, Any]) -> bool:
    if _note(b, a) is not None:
        return True
    vb, va = _num(b.get("value")), _num(a.get("value"))
    if (vb is None) != (va is None):
        return True
    return vb is not None and va is not None and abs(va - vb) >= SAVING_FLOOR


def job_findings_diff(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """``{"resolved", "new", "changed", "unchanged"}`` as ``findings_diff.findings_diff``, with each entry's
    ``subject_before`` / ``subject_after`` and a ``note`` when the subject moved."""
    return diff_by_id(before, after, _entry, _moved)


def job_bottleneck(findings: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``{"id", "share", "metric", "rank"}`` of the job finding with the largest value; None without one."""
    best: dict[str, Any] | None = None
    for f in findings:
        v = _num(f.get("value"))
        if v is not None and v > 0 and (best is None or v > best["share"]):
            best = {
                "id": f.get("id"),
                "title": f.get("title"),
                "share": v,
                "metric": f.get("metric"),
                "rank": subject(f)["rank"],
            }
    return best
