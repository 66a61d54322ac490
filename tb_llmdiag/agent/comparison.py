"""The ``compare`` and ``check`` tools: two runs (or two jobs) of the logdir, as ``llmdiag compare`` / ``check``.

The document is the front door's (``api.compare``; ``gate`` for ``check``) from the
same reports the CLI reads, so the verdict and every row equal ``llmdiag compare BEFORE AFTER --json``. By default the
answer keeps the verdict, the work and noise model, each metric row's judgement and the finding diff, cut to a few
KB; ``detail`` gives the whole document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tb_llmdiag import api
from tb_llmdiag.agent.answers import budget
from tb_llmdiag.agent.fit import fit
from tb_llmdiag.agent.workspace import Workspace
from tb_llmdiag.errors import LlmDiagError, TraceFormatError, cut

if TYPE_CHECKING:
    from tb_llmdiag.compare.names import Target

_ROW = ("key", "label", "unit", "before", "after", "change", "direction", "beyond_tolerance", "beyond_noise")
_FINDING = ("id", "saving_share_before", "saving_share_after", "note")


class MixedLevels(LlmDiagError):
    """One side is a job, the other a single run (a bad argument: exit code 2, as the CLI's)."""

    exit_code = 2


def _side(ws: Workspace, name: str, role: str) -> tuple[Target, Any, list[str]]:
    target = ws.target(name, role)
    if target.level == "job":
        job, runs = ws.job(target)
        if job.get("status") != "ok":
            raise TraceFormatError(f"{role} {cut(name)} could not be analysed as a job: {job.get('error')}")
        return target, (job, [r for r in runs if r.get("status") in ("ok", "partial")]), []
    rep = ws.run_report(target)
    partial = rep.get("status") == "partial"
    return target, rep, [f"{role} {cut(name)}: analysed from a partial trace ({rep.get('error')})"] if partial else []


def document(ws: Workspace, before: str, after: str, roles: tuple[str, str], **kw: Any) -> dict[str, Any]:
    """The comparison document of two names (``roles[0]`` is the baseline); ``kw`` as ``api.compare``."""
    bt, b, bw = _side(ws, before, roles[0])
    at, a, aw = _side(ws, after, roles[1])
    if bt.level != at.level:
        job, role = (bt, roles[0]) if bt.level == "job" else (at, roles[1])
        other = roles[1] if role == roles[0] else roles[0]
        raise MixedLevels(
            f"{role} is a job ({job.name}, {len(job.files)} ranks) and {other} a single run: compare one rank "
            f"(run/worker/span, see list_runs), or give {other} a job too"
        )
    return api.compare(b, a, warnings=bw + aw, sources=(before, after), roles=roles, **kw)


def _brief(doc: Mapping[str, Any]) -> dict[str, Any]:
    nm = doc.get("noise_model") or {}
    rows = []
    for r in doc.get("metrics") or []:
        n = r.get("noise") or {}
        rows.append(
            {
                **{k: r.get(k) for k in _ROW},
                "noise": {k: n.get(k) for k in ("band_lo_change", "band_hi_change")} if n else None,
                "regressed": r.get("regressed"),
            }
        )
    fd = doc.get("findings") or {}
    return {
        "verdict": doc.get("verdict"),
        "level": doc.get("level"),
        "before": {k: (doc.get("before") or {}).get(k) for k in ("source", "run", "step_count")},
        "after": {k: (doc.get("after") or {}).get(k) for k in ("source", "run", "step_count")},
        "work": doc.get("work"),
        "noise_model": {k: nm.get(k) for k in ("modelled", "level", "resamples", "seed")},
        "bottleneck": doc.get("bottleneck"),
        "findings": {k: [{x: f.get(x) for x in _FINDING} for f in fd.get(k) or []] for k in fd},
        "metrics": rows,
        "warnings": doc.get("warnings"),
    }


def compare(ws: Workspace, before: str, after: str, detail: bool = False) -> dict[str, Any]:
    """``llmdiag compare BEFORE AFTER`` over two names of the logdir."""
    doc = document(ws, before, after, ("BEFORE", "AFTER"))
    return fit(doc if detail else _brief(doc), budget(detail), "compare(..., detail=true) for the whole document")


def check(
    ws: Workspace, candidate: str, baseline: str, max_regression: float | None = None, detail: bool = False
) -> dict[str, Any]:
    """``llmdiag check CANDIDATE --baseline BASELINE [--max-regression P]``: pass or fail, the regressions."""
    result = document(ws, baseline, candidate, ("BASELINE", "CANDIDATE"), max_regression=max_regression, gate=True)
    doc = result["compare"]
    answer = {
        **{k: result[k] for k in ("passed", "judged", "unjudged")},
        "regressions": [r["line"] for r in result["regressions"]] if not detail else result["regressions"],
        "exit_code": 0 if result["passed"] else 1,
        # the regression lines name every metric that failed; the rows themselves come with detail
        "compare": doc if detail else {k: v for k, v in _brief(doc).items() if k != "metrics"},
    }
    return fit(answer, budget(detail), "check(..., detail=true) for the whole comparison")
