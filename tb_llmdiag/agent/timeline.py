"""The MCP ``timeline`` tool's answer: the windows of a run over the run (``api.timeline`` over the
workspace's cached reports, docs/timeline.md), the change points with what changed, the triggered windows and the
capture's cost. Brief by default (each window a few numbers and its top finding, each change its verdict and the
findings that appeared or grew); ``fit`` to the answer budget like every other tool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tb_llmdiag import api
from tb_llmdiag.agent.answers import budget
from tb_llmdiag.agent.fit import fit
from tb_llmdiag.agent.workspace import Workspace
from tb_llmdiag.errors import RunNotFound

_WINDOW_BRIEF = ("index", "name", "reason", "global_step", "step_ns", "profiled_step_ns", "tokens_per_s",
                 "gpu_busy_share", "mfu_share")  # fmt: skip


def _brief_window(w: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: w.get(k) for k in _WINDOW_BRIEF}
    top = (w.get("findings") or [None])[0]
    out["top_finding"] = {"id": top.get("id"), "saving_share": top.get("saving_share")} if top else None
    return out


def _brief_change(c: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: c.get(k) for k in ("kind", "at_step", "from_step", "before_ns", "after_ns", "change_share",
                                 "tokens_per_step_before", "tokens_per_step_after")}  # fmt: skip
    wc = c.get("what_changed") or {}
    out["what_changed"] = {
        "verdict": wc.get("verdict"),
        "work": wc.get("work"),
        "findings_new": [f.get("id") for f in wc.get("findings_new") or []],
        "findings_grown": [f.get("id") for f in wc.get("findings_grown") or []],
        "findings_resolved": [f.get("id") for f in wc.get("findings_resolved") or []],
        "metrics": wc.get("metrics"),
    }
    return out


def _series(s: Mapping[str, Any], detail: bool) -> dict[str, Any]:
    if detail:
        return dict(s)
    return {
        **{k: s.get(k) for k in ("run", "worker", "series", "source", "noise", "triggered", "cost")},
        "changes": [_brief_change(c) for c in s.get("changes") or []],
        "windows": [_brief_window(w) for w in s.get("windows") or []],
    }


def timeline(ws: Workspace, run: str | None = None, detail: bool = False) -> dict[str, Any]:
    """The timeline of every run in the logdir, or of the run (folder) named ``run``."""
    index = ws.index()
    traces, _ = api.run_names(index)
    picked = [(name, tf) for name, tf in traces if run in (None, "", tf.run)]
    if run and not picked:
        raise RunNotFound(f"no run {run!r} in the logdir (see list_runs: the part of a name before the worker)")
    reports = []
    names = {}
    for name, tf in picked:
        rep, _ = ws.report(tf)
        reports.append(rep)
        names[rep.get("path")] = name
    doc = api.timeline(reports, root=ws.root)
    for s in doc["series"]:
        for w in s["windows"]:
            w["name"] = names.get(w.get("path"))  # what diagnose(run) and the other tools take
    answer = {
        "logdir": ws.root,
        "series": [_series(s, detail) for s in doc["series"]],
        "next": "diagnose(name) for one window's report; compare(before, after) for two windows in full",
    }
    return fit(answer, budget(detail), "timeline(run, detail=true) for every field")
