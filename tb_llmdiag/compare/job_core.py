"""``compare_jobs(before_job, after_job, before_runs, after_runs)``: two distributed jobs (the report's ``jobs[]``
entries and their ranks' run reports) in, one JSON-ready document out, ``level: "job"`` (docs/compare.md). Pure
over report dicts, like ``core.compare_runs``; the document has the run comparison's fields (so ``gate.check``
and the renderers read both) plus ``ranks`` (per rank: its step before and after) and ``rank_counts``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tb_llmdiag.compare import stats
from tb_llmdiag.compare.core import head, metric_row, noise_model
from tb_llmdiag.compare.job_findings import job_bottleneck, job_findings_diff
from tb_llmdiag.compare.job_series import (
    job_matrices,
    job_ranks,
    job_step_per_step,
    job_values,
    rank_reports,
)
from tb_llmdiag.compare.job_table import JOB_ROWS, JOB_STATISTICS
from tb_llmdiag.compare.job_verdict import job_verdict
from tb_llmdiag.compare.series import step_columns, value_at
from tb_llmdiag.compare.table import STATISTICS, beyond_tolerance, gated, lookup
from tb_llmdiag.jsonsafe import jsonable

TOKENS_KEY = "job.tokens_per_step"


def describe_job(job: Mapping[str, Any], source: str) -> dict[str, Any]:
    """What a job side is: where from, the run and span, its ranks, its common steps and per-step job step."""
    mats = job_matrices(job)
    view = job.get("view") if isinstance(job.get("view"), Mapping) else {}
    per_step = job_step_per_step(mats)
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


def job_work(vb: Mapping[str, Any], va: Mapping[str, Any]) -> dict[str, Any]:
    """Tokens per job step on each side and whether they differ beyond their tolerance (as ``core.work``)."""
    tb, ta = vb.get(TOKENS_KEY), va.get(TOKENS_KEY)
    known = isinstance(tb, (int, float)) and isinstance(ta, (int, float)) and tb > 0 and ta > 0
    differs = False
    if isinstance(tb, (int, float)) and isinstance(ta, (int, float)) and known:
        differs = beyond_tolerance("count_per_step", float(tb), float(ta), lookup(TOKENS_KEY).tolerance)
    both_tps = vb.get("job.tokens_per_s") is not None and va.get("job.tokens_per_s") is not None
    return {
        "tokens_per_step_before": tb,
        "tokens_per_step_after": ta,
        "ratio": ta / tb if known and isinstance(ta, (int, float)) and isinstance(tb, (int, float)) else None,
        "known": known,
        "differs": bool(differs),
        "primary": "job.tokens_per_s" if both_tps else "job.job_step_ns",
    }


def _columns(job: Mapping[str, Any], tokens: Any) -> dict[str, np.ndarray]:
    """The heatmap's matrices, and ``tokens``: the job's tokens per step spread evenly over the ranks (the sum
    over ranks is what the tokens / s statistic reads; it is one value per job)."""
    mats = job_matrices(job)
    if mats and isinstance(tokens, (int, float)) and tokens > 0:
        n_ranks = mats["step_ns"].shape[0]
        mats["tokens"] = np.full(mats["step_ns"].shape, float(tokens) / n_ranks)
    return mats


def _rank_band(rb: Mapping[str, Any], ra: Mapping[str, Any], seed: int, resamples: int) -> dict[str, Any] | None:
    cb, ca = step_columns(rb), step_columns(ra)
    nb, na = (int(c["duration_ns"].size) if c else 0 for c in (cb, ca))
    idx = stats.paired_indexes(nb, na, seed, resamples)
    if idx is None:
        return None
    band = stats.bootstrap_band(STATISTICS["median_duration"].fn, cb, ca, *idx)
    if band is None:
        return None
    return {"band_lo_change": band.change_lo, "band_hi_change": band.change_hi, "beyond": band.beyond_noise}


def _bar(job: Mapping[str, Any], pos: int, key: str) -> Any:
    bars = (job.get("view") or {}).get("bars") or []
    return bars[pos].get(key) if pos < len(bars) and isinstance(bars[pos], Mapping) else None


def _caused(job: Mapping[str, Any], pos: int) -> Any:
    per = ((job.get("view") or {}).get("per_rank") or {}).get("caused_wait_ns_per_step") or []
    return per[pos] if pos < len(per) else None


def rank_rows(
    jobs: tuple[Mapping[str, Any], Mapping[str, Any]],
    runs: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]],
    seed: int,
    resamples: int,
) -> list[dict[str, Any]]:
    """Per rank present on both sides (BEFORE's order): its own step median (its run report) before and after,
    the change and its noise band, and its mean step, waiting, compute and caused wait inside the job."""
    names = (job_ranks(jobs[0]), job_ranks(jobs[1]))
    reps = (rank_reports(jobs[0], runs[0]), rank_reports(jobs[1], runs[1]))
    out = []
    for pb, rank in enumerate(names[0]):
        if rank not in names[1]:
            continue
        pa = names[1].index(rank)
        rb, ra = reps[0][pb], reps[1][pa]
        sb = value_at(rb, "headline.step_median_ns") if rb is not None else None
        sa = value_at(ra, "headline.step_median_ns") if ra is not None else None
        change = sa / sb - 1 if isinstance(sb, (int, float)) and isinstance(sa, (int, float)) and sb > 0 else None
        row: dict[str, Any] = {"rank": rank, "step_median_ns_before": sb, "step_median_ns_after": sa, "change": change}
        for key in ("step_ns", "compute_ns", "waiting_ns", "exposed_transfer_ns"):
            row[f"job_{key}_before"], row[f"job_{key}_after"] = _bar(jobs[0], pb, key), _bar(jobs[1], pa, key)
        row["caused_wait_ns_per_step_before"] = _caused(jobs[0], pb)
        row["caused_wait_ns_per_step_after"] = _caused(jobs[1], pa)
        for side, rep in (("before", rb), ("after", ra)):
            row[f"tokens_per_step_{side}"] = value_at(rep, "steps.tokens_per_step_median") if rep else None
        row["noise"] = _rank_band(rb, ra, seed, resamples) if rb is not None and ra is not None else None
        out.append(row)
    return out


def compare_jobs(
    before_job: Mapping[str, Any],
    after_job: Mapping[str, Any],
    before_runs: Sequence[Mapping[str, Any]],
    after_runs: Sequence[Mapping[str, Any]],
    *,
    sources: tuple[str, str] = ("", ""),
    roles: tuple[str, str] = ("BEFORE", "AFTER"),
    tolerances: Mapping[str, float] | None = None,
    max_regression: float | None = None,
    seed: int = stats.SEED,
    resamples: int = stats.RESAMPLES,
) -> dict[str, Any]:
    """The job comparison document (docs/compare.md). ``*_runs``: run reports holding each job's ranks (others
    are ignored; ranks are matched by file name). Tolerances as ``core.compare_runs``."""
    tolerances = dict(tolerances or {})
    vb, va = job_values(before_job, before_runs), job_values(after_job, after_runs)
    cb, ca = _columns(before_job, vb.get(TOKENS_KEY)), _columns(after_job, va.get(TOKENS_KEY))
    nb = int(cb["step_ns"].shape[1]) if cb else 0
    na = int(ca["step_ns"].shape[1]) if ca else 0
    idx = stats.paired_indexes(nb, na, seed, resamples)
    wk = job_work(vb, va)
    rows = []
    for row in JOB_ROWS:
        m = lookup(row.key)
        tol = tolerances.get(row.key, max_regression if (max_regression is not None and gated(row, m)) else m.tolerance)
        r = metric_row(
            row,
            {},
            {},
            wk,
            (cb, ca),
            idx,
            float(tol),
            values=(vb.get(row.key), va.get(row.key)),
            statistics=JOB_STATISTICS,
        )
        if r is not None:
            rows.append(r)
    fb = [f for f in before_job.get("findings") or [] if isinstance(f, Mapping)]
    fa = [f for f in after_job.get("findings") or [] if isinstance(f, Mapping)]
    kb, ka = len(job_ranks(before_job)), len(job_ranks(after_job))
    warnings = []
    if kb != ka:
        warnings.append(
            f"the jobs have different rank counts ({kb} -> {ka}): per-rank rows cover the ranks on both sides only"
        )
    doc: dict[str, Any] = {
        **head("job", roles, (describe_job(before_job, sources[0]), describe_job(after_job, sources[1]))),
        "noise_model": noise_model(
            resamples,
            seed,
            (nb, na),
            idx is not None,
            resampled="common steps of the job (every rank's values of a step together)",
        ),
        "work": wk,
        "metrics": rows,
        "findings": job_findings_diff(fb, fa),
        "bottleneck": {"before": job_bottleneck(fb), "after": job_bottleneck(fa)},
        "rank_counts": {"before": kb, "after": ka},
        "ranks": rank_rows((before_job, after_job), (before_runs, after_runs), seed, resamples),
        "warnings": warnings,
    }
    doc["verdict"] = job_verdict(doc)
    return jsonable(doc)
