"""Findings of two sides, matched by id: resolved (BEFORE only), new (AFTER only), changed and unchanged (both).

Each finding is read as a ``side.FindingView``: a run finding's saving is its ``saving.share`` of the median step;
a job finding's is its value (the share of the job step its metric reports: the straggler's caused wait, the
exposed transfer) and its what-if's saving in ns. A finding present on both sides is ``changed`` when its
severity differs, its saving moved by at least ``SAVING_FLOOR`` of the step (1 percentage point), or (a job
finding) it names a different rank (the straggler moved), cause or top collective; ``note`` says which.

The *bottleneck* of a side is its finding with the largest saving (a run finding's one ``saving.share``, #25;
a job finding's value), the first in rank order on a tie. A job's bottleneck also names
the job metric it reads (so the verdict can say what that metric was on the other side) and its rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tb_llmdiag.compare.side import FindingView

SAVING_FLOOR = 0.01


def _note(b: FindingView, a: FindingView) -> str | None:
    """What moved in a job finding's subject (None for run findings, which have none)."""
    if b.subject is None or a.subject is None:
        return None
    sb, sa = b.subject, a.subject
    parts = []
    if sb["rank"] != sa["rank"]:
        parts.append(f"now rank {sa['rank']} (was rank {sb['rank']})")
    if sb["cause"] != sa["cause"]:
        parts.append(f"cause now {sa['cause']} (was {sb['cause']})")
    if sb["kind"] != sa["kind"]:
        parts.append(f"top collective now {sa['kind']} (was {sb['kind']})")
    return "; ".join(parts) or None


def _entry(fid: str, b: FindingView | None, a: FindingView | None) -> dict[str, Any]:
    either = a or b
    assert either is not None  # a finding is on at least one side
    job = either.subject is not None
    out: dict[str, Any] = {"id": fid, "title": either.title}
    if job:
        out["metric"] = either.metric
    out.update(
        severity_before=b.severity if b else None,
        severity_after=a.severity if a else None,
        saving_share_before=b.share if b else None,
        saving_share_after=a.share if a else None,
        saving_ns_before=b.saving_ns if b else None,
        saving_ns_after=a.saving_ns if a else None,
    )
    if job:
        out.update(
            subject_before=b.subject if b else None,
            subject_after=a.subject if a else None,
            note=_note(b, a) if a is not None and b is not None else None,
        )
    return out


def _moved(b: FindingView, a: FindingView) -> bool:
    if b.severity != a.severity or _note(b, a) is not None:
        return True
    sb, sa = b.share, a.share
    if (sb is None) != (sa is None):
        return True
    return sb is not None and abs(sa - sb) >= SAVING_FLOOR


def findings_diff(before: Sequence[FindingView], after: Sequence[FindingView]) -> dict[str, list[dict[str, Any]]]:
    """``{"resolved", "new", "changed", "unchanged"}`` of two finding lists matched by ``id``, each in its side's
    rank order (AFTER's for the last two); see the module docstring."""
    by_b = {str(f.id): f for f in before}
    by_a = {str(f.id): f for f in after}
    both = [fid for fid in by_a if fid in by_b]
    return {
        "resolved": [_entry(fid, by_b[fid], None) for fid in by_b if fid not in by_a],
        "new": [_entry(fid, None, by_a[fid]) for fid in by_a if fid not in by_b],
        "changed": [_entry(fid, by_b[fid], by_a[fid]) for fid in both if _moved(by_b[fid], by_a[fid])],
        "unchanged": [_entry(fid, by_b[fid], by_a[fid]) for fid in both if not _moved(by_b[fid], by_a[fid])],
    }


def bottleneck(findings: Sequence[FindingView]) -> dict[str, Any] | None:
    """``{"id", "share"}`` (a job's: and ``"metric"``, ``"rank"``) of the finding with the largest own saving
    bound (module docstring); None when no finding has one."""
    best: dict[str, Any] | None = None
    for f in findings:
        share = f.bottleneck_share
        if isinstance(share, (int, float)) and share > 0 and (best is None or share > best["share"]):
            best = {"id": f.id, "title": f.title, "share": float(share)}
            if f.step_basis is not None:
                best["step_basis"] = f.step_basis
            if f.subject is not None:
                best.update(metric=f.metric, rank=f.subject["rank"])
    return best
