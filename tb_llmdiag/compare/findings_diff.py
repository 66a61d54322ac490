"""Findings of two runs, matched by id: resolved (BEFORE only), new (AFTER only), changed and unchanged (both).

A finding present on both sides is ``changed`` when its severity differs or its estimated saving moved by at
least ``SAVING_FLOOR`` of the step (1 percentage point); both carry the savings before and after. The
*bottleneck* of a run is its top finding with a saving (the engine's rank: severity, then the saving each finding
shows, ``saving.share`` of its step), so a comparison names the finding the report shows first, with its one saving.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

SAVING_FLOOR = 0.01


def _saving(f: Mapping[str, Any] | None, field: str) -> Any:
    s = (f or {}).get("saving")
    return s.get(field) if isinstance(s, Mapping) else None


def _entry(fid: str, b: Mapping[str, Any] | None, a: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        "id": fid,
        "title": (a or b or {}).get("title"),
        "severity_before": (b or {}).get("severity"),
        "severity_after": (a or {}).get("severity"),
        "saving_share_before": _saving(b, "share"),
        "saving_share_after": _saving(a, "share"),
        "saving_ns_before": _saving(b, "ns"),
        "saving_ns_after": _saving(a, "ns"),
    }


def _moved(b: Mapping[str, Any], a: Mapping[str, Any]) -> bool:
    if b.get("severity") != a.get("severity"):
        return True
    sb, sa = _saving(b, "share"), _saving(a, "share")
    if (sb is None) != (sa is None):
        return True
    return sb is not None and abs(sa - sb) >= SAVING_FLOOR


Entry = Callable[[str, Mapping[str, Any] | None, Mapping[str, Any] | None], dict[str, Any]]
Moved = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]


def diff_by_id(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], entry: Entry, moved: Moved
) -> dict[str, list[dict[str, Any]]]:
    """``{"resolved", "new", "changed", "unchanged"}`` of two finding lists matched by ``id``, each in its side's
    rank order (AFTER's for the last two); ``entry`` writes a row, ``moved`` tells changed from unchanged."""
    by_b = {str(f.get("id")): f for f in before}
    by_a = {str(f.get("id")): f for f in after}
    both = [fid for fid in by_a if fid in by_b]
    return {
        "resolved": [entry(fid, by_b[fid], None) for fid in by_b if fid not in by_a],
        "new": [entry(fid, None, by_a[fid]) for fid in by_a if fid not in by_b],
        "changed": [entry(fid, by_b[fid], by_a[fid]) for fid in both if moved(by_b[fid], by_a[fid])],
        "unchanged": [entry(fid, by_b[fid], by_a[fid]) for fid in both if not moved(by_b[fid], by_a[fid])],
    }


def findings_diff(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """The run findings' diff (``diff_by_id`` with severity and the saving share, see the module docstring)."""
    return diff_by_id(before, after, _entry, _moved)


def bottleneck(findings: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``{"id", "share"}`` of the first finding in the report's order with a saving (see the module docstring);
    None when no finding has one."""
    for f in findings:
        share = _saving(f, "share")
        if isinstance(share, (int, float)) and share > 0:
            return {"id": f["id"], "title": f.get("title"), "share": float(share)}
    return None
