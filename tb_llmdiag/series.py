"""Over the run: the windows of one training run as a series, its change points and what changed at each (#34).

Pure over run reports (``api.report``'s ``runs[]``), so the CLI, the tab's cached reports and the agent build the same
document (docs/timeline.md is its schema). Not ``tb_llmdiag.timeline``, which is the per-step view of one window.

- **Series**: windows written by ``tb_llmdiag.capture.profile_run`` carry ``window`` (their ``llmdiag_window``
  object): they group by run, worker and series id, in global-step order. Other files of a run and worker (a plain
  ``torch.profiler`` schedule with ``repeat``: one file per cycle) form a series ordered by their first
  ``ProfilerStep#`` (else by their order on disk).
- **A window's numbers** (tokens a step: the helper's count of the recorded steps; a triggered window's from its
  trace when it holds token slots, as a count of the steps before it is the job before the change): ``step_ns``, the job's step as it ran around the window without the profiler: the median
  of the unprofiled steps the helper timed before it (a triggered window: its slow steps from the trigger on and the
  unprofiled steps timed after it, the job while the slowdown lasted; without those, its profiled steps), else the
  profiled steps; ``profiled_step_ns`` the report's
  median step; tokens a step (the helper's count, else the trace's token slots) and tokens/s over ``step_ns``; the
  report's GPU busy and MFU shares; its top findings and their savings.
- **Triggered windows** also carry ``slowdown``: the slow steps that opened it against the median they were judged
  by, and how many of the steps the trace recorded ran over the same threshold (the window holds the slowdown).
- **Noise band**: ``band_share`` = the larger of ``MIN_SHIFT_SHARE`` (5 %) and 3 x the median relative spread of the
  windows' own samples (``within_share``: 1.4826 x MAD / median, over the windows with 3 samples or more).
- **Change points**: window ``i`` against the last window before it that is not a transient (``j``): its step moved
  by more than the band, or its tokens a step changed (by more than 1 %). A move that the next window undoes (back
  within the band of ``j``, the same tokens) is a ``transient`` (a slow shard, a neighbour: what a triggered window
  is for), else a ``shift``. Each carries what changed: ``compare.compare(j, i)``'s verdict, the work change,
  the findings that appeared, grew or went, the bottleneck, and the metrics that moved beyond their noise.
- **Cost**: the capture's cost over the run from the helper's ledger in the last window (the windows' extra time
  against the unprofiled steps around them, the helper's own time, the share of the run's wall time so far, the
  budget, the slots the budget skipped).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tb_llmdiag.compare import compare
from tb_llmdiag.jsonsafe import jsonable

SERIES_SCHEMA = 1
MIN_SHIFT_SHARE = 0.05
TOKENS_CHANGE_SHARE = 0.01
TOP_FINDINGS = 3
TOP_METRICS = 3
MAX_WINDOWS = 1000
"""Windows kept per series in the document (the latest, when a run has more)."""

Run = Mapping[str, Any]


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _median(xs: Sequence[float]) -> float | None:
    return float(statistics.median(xs)) if xs else None


def _spread_share(xs: Sequence[float]) -> float | None:
    """1.4826 x the median absolute deviation over the median (a robust relative standard deviation)."""
    med = _median(xs)
    if med is None or med <= 0 or len(xs) < 3:
        return None
    return 1.4826 * float(statistics.median(abs(x - med) for x in xs)) / med


def _per_step_ns(run: Run) -> list[float]:
    per = ((run.get("metrics") or {}).get("steps") or {}).get("per_step") or []
    return [d for p in per if isinstance(p, Mapping) and (d := _num(p.get("duration_ns"))) is not None and d > 0]


def level_samples(run: Run) -> tuple[list[float], str]:
    """The step times a window's level is read from, and where they come from (module docstring)."""
    w = run.get("window") or {}
    before = [float(x) for x in w.get("before_step_ns") or [] if x > 0]
    steps = w.get("before_steps") or []
    trigger = w.get("trigger") or {}
    if w.get("reason") == "triggered" and _num(trigger.get("step")) is not None and len(steps) == len(before):
        slow = [t for s, t in zip(steps, before) if s >= trigger["step"]]
        after = [float(x) for x in w.get("after_step_ns") or [] if x > 0]
        if after:
            return slow + after, "slowdown"
        return slow + [float(x) for x in w.get("profiled_step_ns") or [] if x > 0], "slowdown_profiled"
    if before:
        return before, "unprofiled_before"
    return _per_step_ns(run), "profiled"


def _findings(run: Run) -> list[dict[str, Any]]:
    out = []
    for f in (run.get("findings") or [])[:TOP_FINDINGS]:
        out.append(
            {"id": f.get("id"), "title": f.get("title"), "saving_share": _num((f.get("saving") or {}).get("share"))}
        )
    return out


def slowdown(run: Run) -> dict[str, Any] | None:
    """A triggered window's slowdown: the slow steps that opened it, the median they were judged against, and how
    many of the window's recorded steps (in the trace) ran over the same threshold: whether it holds the slowdown."""
    w = run.get("window") or {}
    t = w.get("trigger") or {}
    median, share = _num(t.get("median_ns")), _num(t.get("threshold_share"))
    if w.get("reason") != "triggered" or median is None or share is None:
        return None
    recorded = _per_step_ns(run)
    slow = t.get("slow_step_ns") or ([t["step_ns"]] if _num(t.get("step_ns")) is not None else [])
    return {
        "slow_steps": t.get("slow_steps") or [t.get("step")],
        "slow_step_ns": slow,
        "median_ns": median,
        "threshold_share": share,
        "excess_share": (_median(slow) or median) / median - 1 if median > 0 else None,
        "recorded_steps": len(recorded),
        "recorded_slow_steps": sum(1 for d in recorded if d > (1 + share) * median),
    }


def window_point(run: Run) -> dict[str, Any]:
    """One window's numbers in the series (module docstring)."""
    w = run.get("window") or {}
    head = run.get("headline") or {}
    steps = (run.get("metrics") or {}).get("steps") or {}
    samples, source = level_samples(run)
    level = _median(samples)
    tokens = _num(w.get("tokens_per_step")) or _num(steps.get("tokens_per_step_median"))
    if w.get("reason") == "triggered" and _num(steps.get("tokens_per_step_median")):
        # the trace's own count: a helper's count of the steps before the window is the job before the change
        tokens = _num(steps.get("tokens_per_step_median"))
    first = steps.get("first_index")
    count = steps.get("count")
    window_steps = w.get("window_steps") or (
        [first, first + count - 1] if isinstance(first, int) and isinstance(count, int) and count > 0 else None
    )
    cost = w.get("cost") or {}
    return {
        "index": None,
        "reason": w.get("reason") or "schedule",
        "global_step": w.get("global_step", first if isinstance(first, int) else None),
        "window_steps": window_steps,
        "run": run.get("run"),
        "worker": run.get("worker"),
        "span": run.get("span"),
        "path": run.get("path"),
        "status": run.get("status"),
        "step_ns": level,
        "step_source": source if level is not None else None,
        "step_samples": len(samples),
        "spread_share": _spread_share(samples),
        "profiled_step_ns": _num(head.get("step_median_ns")),
        "tokens_per_step": tokens,
        "tokens_per_s": tokens / level * 1e9 if tokens and level else _num(head.get("tokens_per_s")),
        "gpu_busy_share": _num(head.get("gpu_busy_share")),
        "mfu_share": _num(head.get("mfu_share")),
        "findings": _findings(run),
        "trigger": w.get("trigger"),
        "slowdown": slowdown(run),
        "cost_ns": _num(cost.get("window_ns")),
        "cost_share_so_far": _num(cost.get("spent_share")),
    }


def _order_key(run: Run, position: int) -> tuple[float, int]:
    w = run.get("window") or {}
    first = ((run.get("metrics") or {}).get("steps") or {}).get("first_index")
    step = w.get("global_step", first)
    return (float(step) if isinstance(step, (int, float)) else float("inf"), position)


def group_runs(runs: Iterable[Run]) -> list[tuple[tuple[str, str, str | None], list[Run]]]:
    """The run reports as series: by run, worker and series id (None: files without the helper's window object),
    each in step order (module docstring); series with one window are kept (a timeline of one point)."""
    groups: dict[tuple[str, str, str | None], list[tuple[int, Run]]] = {}
    for pos, run in enumerate(runs):
        series = (run.get("window") or {}).get("series")
        key = (str(run.get("run")), str(run.get("worker")), series if isinstance(series, str) else None)
        groups.setdefault(key, []).append((pos, run))
    out = []
    for key, members in groups.items():
        ordered = sorted(members, key=lambda pr: _order_key(pr[1], pr[0]))
        out.append((key, [r for _, r in ordered][-MAX_WINDOWS:]))
    return sorted(out, key=lambda kr: (kr[0][0], kr[0][1], kr[0][2] or ""))


def noise_band(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The shift a change point needs (module docstring), with its parts."""
    spreads = [s for p in points if (s := p.get("spread_share")) is not None]
    within = _median(spreads)
    band = max(MIN_SHIFT_SHARE, 3 * within) if within is not None else MIN_SHIFT_SHARE
    return {"band_share": band, "floor_share": MIN_SHIFT_SHARE, "within_share": within}


def _tokens_moved(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    ta, tb = a.get("tokens_per_step"), b.get("tokens_per_step")
    return bool(ta and tb and abs(tb / ta - 1) > TOKENS_CHANGE_SHARE)


def _moved(a: Mapping[str, Any], b: Mapping[str, Any], band: float) -> bool:
    la, lb = a.get("step_ns"), b.get("step_ns")
    return bool(la and lb and abs(lb / la - 1) > band) or _tokens_moved(a, b)


def change_points(points: Sequence[Mapping[str, Any]], band: float) -> list[dict[str, Any]]:
    """Where the job moved beyond the band (module docstring): ``at`` / ``from`` are positions in ``points``."""
    out: list[dict[str, Any]] = []
    usable = [i for i, p in enumerate(points) if p.get("step_ns")]
    ref: int | None = None
    for k, i in enumerate(usable):
        if ref is None:
            ref = i
            continue
        a, b = points[ref], points[i]
        if not _moved(a, b, band):
            ref = i
            continue
        nxt = points[usable[k + 1]] if k + 1 < len(usable) else None
        transient = nxt is not None and not _moved(a, nxt, band)
        out.append({
            "at": i,
            "from": ref,
            "kind": "transient" if transient else "shift",
            "metric": "step_ns",
            "before_ns": a["step_ns"],
            "after_ns": b["step_ns"],
            "change_share": b["step_ns"] / a["step_ns"] - 1,
            "tokens_per_step_before": a.get("tokens_per_step"),
            "tokens_per_step_after": b.get("tokens_per_step"),
            "tokens_per_s_change_share": _ratio(a.get("tokens_per_s"), b.get("tokens_per_s")),
        })  # fmt: skip
        if not transient:
            ref = i
    return out


def _ratio(a: Any, b: Any) -> float | None:
    return b / a - 1 if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 else None


def _role(run: Run) -> str:
    step = (run.get("window") or {}).get(
        "global_step", ((run.get("metrics") or {}).get("steps") or {}).get("first_index")
    )
    return f"step {step}" if isinstance(step, int) else str(run.get("span") or "window")


def what_changed(before: Run, after: Run) -> dict[str, Any] | None:
    """The comparison's account of a change (``compare.compare``), kept short; None when a side has no
    analysed steps."""
    if before.get("status") not in ("ok", "partial") or after.get("status") not in ("ok", "partial"):
        return None
    try:
        doc = compare(before, after, roles=(_role(before), _role(after)))
    except (ValueError, KeyError, TypeError, ZeroDivisionError):
        return None
    fd = doc.get("findings") or {}
    grown = [
        f
        for f in fd.get("changed") or []
        if (_num(f.get("saving_share_after")) or 0) > (_num(f.get("saving_share_before")) or 0)
    ]
    rows = [r for r in doc.get("metrics") or [] if r.get("beyond_noise") and r.get("comparable")]
    rows.sort(key=lambda r: -abs(_num(r.get("change")) or 0))
    keep = ("id", "title", "saving_share_before", "saving_share_after")
    work = doc.get("work") or {}
    return {
        "verdict": doc.get("verdict"),
        "work": {k: work.get(k) for k in ("tokens_per_step_before", "tokens_per_step_after", "ratio")} if work.get("differs") else None,
        "findings_new": [{k: f.get(k) for k in keep} for f in fd.get("new") or []],
        "findings_grown": [{k: f.get(k) for k in keep} for f in grown],
        "findings_resolved": [{k: f.get(k) for k in keep} for f in fd.get("resolved") or []],
        "bottleneck": doc.get("bottleneck"),
        "metrics": [{k: r.get(k) for k in ("key", "label", "unit", "before", "after", "change")} for r in rows[:TOP_METRICS]],
    }  # fmt: skip


def capture_cost(runs: Sequence[Run]) -> dict[str, Any] | None:
    """The capture's cost over the run, from the helper's ledger in its latest window (module docstring)."""
    costs = [(r.get("window") or {}).get("cost") for r in runs]
    windows = [c for c in costs if isinstance(c, Mapping)]
    if not windows:
        return None
    last = max(windows, key=lambda c: _num(c.get("elapsed_ns")) or 0)
    skipped = sorted({s for c in windows for s in c.get("skipped_steps") or []})
    return {
        "windows": len(windows),
        "windows_ns": sum(_num(c.get("window_ns")) or 0 for c in windows),
        "spent_ns": _num(last.get("spent_ns")),
        "helper_ns": _num(last.get("helper_ns")),
        "one_time_ns": _num(last.get("one_time_ns")),
        "elapsed_ns": _num(last.get("elapsed_ns")),
        "spent_share": _num(last.get("spent_share")),
        "budget_share": _num(last.get("budget_share")),
        "total_steps": last.get("total_steps"),
        "skipped_steps": skipped,
    }


def build_one(key: tuple[str, str, str | None], runs: Sequence[Run]) -> dict[str, Any]:
    """One series: its windows, noise band, change points with what changed, triggered windows, cost."""
    points = [window_point(r) for r in runs]
    for i, p in enumerate(points):
        p["index"] = i
    band = noise_band(points)
    changes = change_points(points, band["band_share"])
    for c in changes:
        c["at_step"] = points[c["at"]]["global_step"]
        c["from_step"] = points[c["from"]]["global_step"]
        c["what_changed"] = what_changed(runs[c["from"]], runs[c["at"]])
    return {
        "run": key[0],
        "worker": key[1],
        "series": key[2],
        "source": "helper" if key[2] is not None else "schedule",
        "windows": points,
        "noise": band,
        "changes": changes,
        "triggered": [p["index"] for p in points if p["reason"] == "triggered"],
        "cost": capture_cost(runs),
    }


def build(runs: Iterable[Run], root: str = "") -> dict[str, Any]:
    """The timeline document of the run reports under one root (docs/timeline.md)."""
    series = [build_one(key, members) for key, members in group_runs(runs)]
    return jsonable({"schema": SERIES_SCHEMA, "kind": "timeline", "root": root, "series": series})
