"""A side of a comparison, read from report dicts: the ONE place that knows where a run report or a job keeps
what the comparison reads. Both levels answer the same ``Side`` interface:

- ``value(key)``: a number by registry key (``docs/metrics.md``), or a key the comparison derives
  (``table.DERIVED``);
- ``columns()``: the per-step values the noise model resamples, as ranks x steps float64 matrices (NaN for an
  unknown cell; one rank for a single run);
- ``findings()``: its findings, each read as a ``FindingView`` (id, saving, the subject it names);
- ``describe(source)``: what the side is, for the document's ``before`` / ``after``.

**A run** (``RunSide``): ``per_step`` knows where a run report keeps its per-step values
(``docs/report_schema.md``). Reports of schema 2 hold one list of step rows (``metrics.steps.per_step[]``);
schema 1 held parallel lists (``metrics.steps.durations_ns``, ``metrics.idle.step_breakdown.busy_ns``...): both
are read, so a committed baseline of either schema compares. ``value_at`` resolves a registry key
(``headline.*``, ``summary.*``, ``what_if.*`` are run-report sections, anything else is ``metrics.<topic>.*``).

**A job** (``JobSide``: the report's ``jobs[]`` entry, ``tb_llmdiag/jobs/report.py``, and its ranks' run reports):
its values are the registry's ``job.*`` keys (``jobs[].metrics``) and the keys the comparison derives (job tokens
/ s, tokens per job step, waiting share, load imbalance); its columns are the heatmap's ranks x common steps
matrices (``step_ns``, ``waiting_ns``, ``exposed_ns``, ``exposed_transfer_ns``; one the entry lacks, a report
saved before it was added, is left out). The job step is the job analysis's (``job.job_step_ns``: the median
across ranks of each rank's mean step over the common steps); the job's tokens per step is the sum over ranks of
each rank's tokens per step (its run report's ``steps.tokens_per_step_median``), known only when every rank's
run report states it; job tokens / s = that sum / the job step (the noise band resamples the job step only).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np

Columns = dict[str, np.ndarray]

#: the list of step rows (schema 2); a column is the rows' field of the same name
STEP_ROWS: tuple[str, ...] = ("metrics", "steps", "per_step")

#: schema 1: per-step column -> path of its list inside the run report (every list aligned with the steps)
PER_STEP_PATHS: dict[str, tuple[str, ...]] = {
    "duration_ns": ("metrics", "steps", "durations_ns"),
    "index": ("metrics", "steps", "indexes"),
    "tokens": ("metrics", "steps", "tokens"),
    "busy_ns": ("metrics", "idle", "step_breakdown", "busy_ns"),
    "host_wait_ns": ("metrics", "idle", "step_breakdown", "host_wait_ns"),
    "sync_ns": ("metrics", "idle", "step_breakdown", "sync_ns"),
    "data_loader_ns": ("metrics", "idle", "step_breakdown", "data_loader_ns"),
    "other_ns": ("metrics", "idle", "step_breakdown", "other_ns"),
}

#: run-report sections that registry keys name directly (the rest are metric topics)
SECTIONS = ("summary", "headline", "what_if")

#: a job's heatmap matrices (ranks x common steps)
MATRICES = ("step_ns", "waiting_ns", "exposed_ns", "exposed_transfer_ns")


@dataclass(frozen=True)
class Keys:
    """The registry keys a level's work normalisation and verdict read: tokens per step, tokens / s, the step."""

    tokens_per_step: str
    tokens_per_s: str
    step: str


RUN_KEYS = Keys("steps.tokens_per_step_median", "headline.tokens_per_s", "headline.step_median_ns")
JOB_KEYS = Keys("job.tokens_per_step", "job.tokens_per_s", "job.job_step_ns")


@dataclass(frozen=True)
class FindingView:
    """A finding as the comparison reads it, the same for both levels. ``share``: its saving as a share of the
    step (a run finding's ``saving.share``; a job finding's value); ``bottleneck_share``: the bound that ranks
    bottlenecks (a run finding's own ``saving.alone_share``, else its share); ``subject``: what a job finding is
    about beyond its id (None for a run finding)."""

    id: Any
    title: Any
    severity: Any
    share: Any
    saving_ns: Any
    bottleneck_share: Any
    metric: Any = None
    subject: dict[str, Any] | None = None
    step_basis: Any = None  # a run finding's ``saving.step_basis``: "without_profiler" or "profiled"


class Side(Protocol):
    """One side of a comparison (module docstring)."""

    @property
    def level(self) -> str:
        """``run`` or ``job``."""

    @property
    def keys(self) -> Keys: ...
    @property
    def resampled(self) -> str | None:
        """What the noise model resamples, when it is not a single run's steps (said in ``noise_model``)."""

    def value(self, key: str) -> Any: ...
    def columns(self) -> Columns: ...
    def step_count(self) -> int: ...
    def findings(self) -> list[FindingView]: ...
    def describe(self, source: str) -> dict[str, Any]: ...


def _walk(doc: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(part)
    return doc


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) else None


def per_step(run: Mapping[str, Any], column: str) -> np.ndarray | None:
    """One per-step column of a run report as float64, or None when the report lacks it, it holds a
    non-number (a null busy time without device activity), or its length differs from the step count."""
    rows = _walk(run, STEP_ROWS)
    if isinstance(rows, list):
        values: Any = [r.get(column) if isinstance(r, Mapping) else None for r in rows]
        durations: Any = rows
    else:
        values = _walk(run, PER_STEP_PATHS[column])
        durations = _walk(run, PER_STEP_PATHS["duration_ns"])
    if not isinstance(values, list) or not isinstance(durations, list) or len(values) != len(durations):
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return None
    return np.asarray(values, dtype=np.float64)


def step_columns(run: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Every per-step column the run report has (``duration_ns`` first; empty without steps)."""
    out = {}
    for column in PER_STEP_PATHS:
        arr = per_step(run, column)
        if arr is not None:
            out[column] = arr
    return out if "duration_ns" in out else {}


def value_at(run: Mapping[str, Any], key: str) -> Any:
    """The value a registry key names in a run report (``headline.tokens_per_s``, ``steps.median_ns``,
    ``kernels.by_category.gemm.share``); None when absent or the topic is unavailable."""
    parts = tuple(key.split("."))
    if parts[0] in SECTIONS:
        return _walk(run, parts)
    return _walk(run, ("metrics", *parts))


def _saving(f: Mapping[str, Any], field: str) -> Any:
    s = f.get("saving")
    return s.get(field) if isinstance(s, Mapping) else None


@dataclass(frozen=True)
class RunSide:
    """A single run: one run report (``RunReport`` dict)."""

    report: Mapping[str, Any]
    level: str = "run"
    keys: Keys = RUN_KEYS
    resampled: str | None = None

    def value(self, key: str) -> Any:
        if key == "work.ns_per_token":  # table.DERIVED: the median step / its tokens
            tps = value_at(self.report, "headline.tokens_per_s")
            return 1e9 / tps if isinstance(tps, (int, float)) and tps > 0 else None
        return value_at(self.report, key)

    def columns(self) -> Columns:
        return {name: col[None, :] for name, col in step_columns(self.report).items()}

    def step_count(self) -> int:
        cols = step_columns(self.report)
        return int(cols["duration_ns"].size) if cols else 0

    def findings(self) -> list[FindingView]:
        out = []
        for f in self.report.get("findings") or []:
            alone = _saving(f, "alone_share")
            out.append(
                FindingView(
                    id=f.get("id"),
                    title=f.get("title"),
                    severity=f.get("severity"),
                    share=_saving(f, "share"),
                    saving_ns=_saving(f, "ns"),
                    bottleneck_share=alone if alone is not None else _saving(f, "share"),
                    step_basis=_saving(f, "step_basis"),
                )
            )
        return out

    def describe(self, source: str) -> dict[str, Any]:
        """Where the run came from, which run, how many steps."""
        run = self.report
        cols = step_columns(run)
        return {
            "source": source,
            "run": run.get("run"),
            "worker": run.get("worker"),
            "span": run.get("span"),
            "source_kind": run.get("source_kind"),
            "path": run.get("path"),
            "step_count": int(cols["duration_ns"].size) if cols else 0,
            "step_indexes": [int(i) for i in cols["index"]] if "index" in cols else [],
            "step_durations_ns": [int(d) for d in cols["duration_ns"]] if cols else [],
        }


def job_matrices(job: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The heatmap's matrices (ranks x common steps, NaN = unknown); empty without a view."""
    view = job.get("view") or {}
    heat = view.get("heatmap") if isinstance(view, Mapping) else None
    if not isinstance(heat, Mapping):
        return {}
    out = {}
    shape = None
    for name in MATRICES:
        m = heat.get(name)
        if not isinstance(m, list) or not all(isinstance(r, list) for r in m):
            continue
        try:
            arr = np.array([[np.nan if v is None else v for v in r] for r in m], dtype=np.float64)
        except (TypeError, ValueError):
            continue
        if arr.ndim != 2 or (shape is not None and arr.shape != shape):
            continue
        shape = arr.shape
        out[name] = arr
    return out if "step_ns" in out and out["step_ns"].size else {}


def rank_means(m: np.ndarray) -> np.ndarray:
    """Mean over steps per rank (NaN where a rank has no known step), as ``jobs.straggler.per_rank_mean``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        cnt = np.sum(~np.isnan(m), axis=-1)
        return np.where(cnt > 0, np.nansum(m, axis=-1) / np.maximum(cnt, 1), np.nan)


def job_ranks(job: Mapping[str, Any]) -> list[str]:
    """The job's ranks as names (``0``, ``1``... or the file name when a rank is unknown), heatmap row order."""
    view = job.get("view") or {}
    ranks = list(view.get("ranks") or []) if isinstance(view, Mapping) else []
    labels = list(view.get("labels") or []) if isinstance(view, Mapping) else []
    if len(ranks) == len(labels):
        return [str(r) for r in ranks]
    return [str(x) for x in labels]


def rank_reports(job: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any] | None]:
    """The run report of each job rank (heatmap row order), by the rank's file name; None when absent."""
    view = job.get("view") or {}
    labels = list(view.get("labels") or []) if isinstance(view, Mapping) else []
    by_name = {os.path.basename(str(r.get("path") or "")): r for r in runs}
    return [by_name.get(str(lab)) for lab in labels]


def tokens_per_job_step(ranks: Sequence[Mapping[str, Any] | None]) -> float | None:
    """Sum over ranks of their tokens per step (module docstring); None when a rank lacks it."""
    per = [_num(value_at(r, "steps.tokens_per_step_median")) if r is not None else None for r in ranks]
    if not per or any(p is None or p <= 0 for p in per):
        return None
    return float(sum(p for p in per if p is not None))


def job_values(job: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every value a job row reads, by key (module docstring)."""
    metrics = job.get("metrics") or {}
    out: dict[str, Any] = {f"job.{k}": v for k, v in metrics.items()} if isinstance(metrics, Mapping) else {}
    mats = job_matrices(job)
    step = _num(out.get("job.job_step_ns"))
    tokens = tokens_per_job_step(rank_reports(job, runs))
    out["job.tokens_per_step"] = tokens
    out["job.tokens_per_s"] = tokens * 1e9 / step if tokens is not None and step else None
    out["job.waiting_share"] = None
    out["job.imbalance_share"] = None
    if step and "waiting_ns" in mats:
        out["job.waiting_share"] = float(np.nanmedian(rank_means(mats["waiting_ns"]))) / step
    bars = (job.get("view") or {}).get("bars") if isinstance(job.get("view"), Mapping) else None
    compute = [_num(b.get("compute_ns")) for b in bars or [] if isinstance(b, Mapping)]
    if step and len(compute) >= 2 and all(c is not None for c in compute):
        known = [c for c in compute if c is not None]
        out["job.imbalance_share"] = (max(known) - min(known)) / step
    return out


def job_step_per_step(mats: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per common step: the median across ranks of the ranks' step times (what the overlay and the rank test use)."""
    m = mats.get("step_ns")
    if m is None or not m.size:
        return np.zeros(0)
    with np.errstate(invalid="ignore"):
        return np.asarray(np.nanmedian(m, axis=0))


def _finding_num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def what_if_saving_ns(f: Mapping[str, Any]) -> float | None:
    """A job finding's what-if saving in ns: ``saving_ns``, else ``step_ns - step_after_ns``."""
    w = f.get("what_if")
    if not isinstance(w, Mapping):
        return None
    s = _finding_num(w.get("saving_ns"))
    if s is not None:
        return s
    step, after = _finding_num(w.get("step_ns")), _finding_num(w.get("step_after_ns"))
    return step - after if step is not None and after is not None else None


def subject(f: Mapping[str, Any]) -> dict[str, Any]:
    """What a job finding is about beyond its id: the straggler's rank and cause, the top collective kind."""
    ev = f.get("evidence")
    ev = ev if isinstance(ev, Mapping) else {}
    return {"rank": ev.get("straggler_rank"), "cause": ev.get("straggler_cause"), "kind": ev.get("top_collective_kind")}


@dataclass(frozen=True)
class JobSide:
    """A distributed job: the report's ``jobs[]`` entry and run reports holding its ranks (others are ignored;
    ranks are matched by file name)."""

    job: Mapping[str, Any]
    runs: Sequence[Mapping[str, Any]] = ()
    level: str = "job"
    keys: Keys = JOB_KEYS
    resampled: str | None = "common steps of the job (every rank's values of a step together)"

    @cached_property
    def _values(self) -> dict[str, Any]:
        return job_values(self.job, self.runs)

    def value(self, key: str) -> Any:
        return self._values.get(key)

    def columns(self) -> Columns:
        """The heatmap's matrices, and ``tokens``: the job's tokens per step spread evenly over the ranks (the
        sum over ranks is what the tokens / s statistic reads; it is one value per job)."""
        mats = job_matrices(self.job)
        tokens = self.value(JOB_KEYS.tokens_per_step)
        if mats and isinstance(tokens, (int, float)) and tokens > 0:
            n_ranks = mats["step_ns"].shape[0]
            mats["tokens"] = np.full(mats["step_ns"].shape, float(tokens) / n_ranks)
        return mats

    def step_count(self) -> int:
        mats = job_matrices(self.job)
        return int(mats["step_ns"].shape[1]) if mats else 0

    def findings(self) -> list[FindingView]:
        out = []
        for f in self.job.get("findings") or []:
            if not isinstance(f, Mapping):
                continue
            value = _finding_num(f.get("value"))
            out.append(
                FindingView(
                    id=f.get("id"),
                    title=f.get("title"),
                    severity=None,
                    share=value,
                    saving_ns=what_if_saving_ns(f),
                    bottleneck_share=value,
                    metric=f.get("metric"),
                    subject=subject(f),
                )
            )
        return out

    def ranks(self) -> list[str]:
        return job_ranks(self.job)

    def describe(self, source: str) -> dict[str, Any]:
        """Where the job came from, the run and span, its ranks, its common steps and per-step job step."""
        job = self.job
        per_step = job_step_per_step(job_matrices(job))
        view = job.get("view") if isinstance(job.get("view"), Mapping) else {}
        return {
            "source": source,
            "level": "job",
            "run": job.get("run"),
            "worker": None,
            "span": job.get("span"),
            "ranks": job_ranks(job),
            "rank_count": len(job_ranks(job)),
            "step_count": int(per_step.size),
            "step_indexes": [int(i) for i in (view or {}).get("steps") or []],
            "step_durations_ns": [float(x) if np.isfinite(x) else None for x in per_step],
            "notes": list(job.get("notes") or []),
        }


#: A side as ``compare`` takes it: a run report, or a job as its ``jobs[]`` entry and the run reports of its ranks.
SideDoc = Mapping[str, Any] | tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]


def side_of(side: RunSide | JobSide | SideDoc) -> RunSide | JobSide:
    """``side`` as a Side: a run report is a ``RunSide``, a ``(job, runs)`` pair a ``JobSide``; a Side is itself."""
    if isinstance(side, (RunSide, JobSide)):
        return side
    if isinstance(side, tuple):
        job, runs = side
        return JobSide(job, runs)
    return RunSide(side)
