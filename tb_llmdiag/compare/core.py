"""``compare(before, after) -> Comparison``: two sides (``side.Side``: two runs, or two jobs) in, one JSON-ready
document out (docs/compare.md is its schema). Pure: reads report dicts only, so saved ``report --json``
documents, fresh analyses and the tab's cached reports compare the same way.

Two run reports compare at ``level: "run"``; two distributed jobs (each the report's ``jobs[]`` entry and its ranks'
run reports, a ``(job, runs)`` pair) at ``level: "job"``: the same fields (so ``gate.check`` and the renderers read
both) plus ``ranks`` (per rank: its step before and after) and ``rank_counts``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tb_llmdiag import __version__
from tb_llmdiag.compare import stats
from tb_llmdiag.compare.findings_diff import bottleneck, findings_diff
from tb_llmdiag.compare.side import JobSide, RunSide, Side, SideDoc, job_ranks, rank_reports, side_of, value_at
from tb_llmdiag.compare.table import ROWS, STATISTICS, Row, beyond_tolerance, direction, expand, gated, lookup
from tb_llmdiag.compare.verdict import verdict
from tb_llmdiag.errors import LlmDiagError, cut
from tb_llmdiag.jsonsafe import json_object

#: version of the compare / check JSON (docs/compare.md). 2: ``level`` (``run`` or ``job``) and the job comparison
COMPARE_SCHEMA = 2


def head(level: str, roles: tuple[str, str], sides: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
    """The fields every compare document starts with (docs/compare.md)."""
    return {
        "schema": COMPARE_SCHEMA,
        "kind": "compare",
        "level": level,
        "tool": {"name": "tb_llmdiag", "version": __version__},
        "roles": {"before": roles[0], "after": roles[1]},
        "before": sides[0],
        "after": sides[1],
    }


def noise_model(resamples: int, seed: int, steps: tuple[int, int], modelled: bool, **more: Any) -> dict[str, Any]:
    """How the noise bands were made: the bootstrap's resamples and seed over ``steps`` values a side."""
    return {
        "method": "bootstrap",
        "resamples": resamples,
        "seed": seed,
        "level": stats.LEVEL,
        "min_steps": stats.MIN_STEPS,
        "rank_test": "Mann-Whitney U, exact one-sided",
        "min_two_sided_rank_p": stats.min_two_sided_p(*steps),
        "modelled": modelled,
        **more,
    }


def work(before: Side, after: Side) -> dict[str, Any]:
    """Tokens per step on each side and whether they differ beyond their tolerance (work normalisation), and the
    primary metric: tokens / s when both sides know it, else the step."""
    keys = before.keys
    tb, ta = before.value(keys.tokens_per_step), after.value(keys.tokens_per_step)
    known = isinstance(tb, (int, float)) and isinstance(ta, (int, float)) and tb > 0 and ta > 0
    ratio = ta / tb if known else None
    differs = known and beyond_tolerance("count_per_step", float(tb), float(ta), lookup(keys.tokens_per_step).tolerance)
    both_tps = before.value(keys.tokens_per_s) is not None and after.value(keys.tokens_per_s) is not None
    return {
        "tokens_per_step_before": tb,
        "tokens_per_step_after": ta,
        "ratio": ratio,
        "known": known,
        "differs": bool(differs),
        "primary": keys.tokens_per_s if both_tps else keys.step,
    }


def _noise(
    row: Row,
    cols_b: Mapping[str, np.ndarray],
    cols_a: Mapping[str, np.ndarray],
    idx: tuple[np.ndarray, np.ndarray] | None,
    vb: float,
    va: float,
) -> tuple[dict[str, Any] | None, str | None]:
    """The row's noise band about the reports' figures ``vb``, ``va`` (``stats.recentred``), or None and why not."""
    if row.stat is None:
        return None, "one value per run: no noise band"
    st = STATISTICS[row.stat]
    if not all(c in cols_b and c in cols_a for c in st.needs):
        return None, "per-step values missing on a side: judged on its tolerance alone"
    if idx is None:
        return None, f"fewer than {stats.MIN_STEPS} steps on a side: judged on its tolerance alone"
    raw = stats.bootstrap_band(st.fn, cols_b, cols_a, idx[0], idx[1])
    if raw is None:
        return None, "the per-step statistic is undefined on some resample: judged on its tolerance alone"
    band = stats.recentred(raw, vb, va)
    rank_p = None
    if st.values is not None and raw.after != raw.before:
        xb, xa = st.values(cols_b), st.values(cols_a)
        if np.all(np.isfinite(xb)) and np.all(np.isfinite(xa)):
            rank_p = stats.rank_p(xb, xa, increased=raw.after > raw.before)
    return {
        "statistic": st.definition,
        "statistic_before": raw.before,
        "statistic_after": raw.after,
        "band_lo": band.lo,
        "band_hi": band.hi,
        "band_lo_change": band.change_lo,
        "band_hi_change": band.change_hi,
        "beyond": band.beyond_noise,
        "rank_p": rank_p,
    }, None


def _float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def metric_row(
    row: Row,
    values: tuple[Any, Any],
    wk: Mapping[str, Any],
    cols: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]],
    idx: tuple[np.ndarray, np.ndarray] | None,
    tolerance: float,
) -> dict[str, Any] | None:
    """One table row (docs/compare.md) from the two sides' ``values``; None when neither side has the value."""
    m = lookup(row.key)
    vb, va = _float(values[0]), _float(values[1])
    if vb is None and va is None:
        return None
    out: dict[str, Any] = {
        "key": row.key,
        "label": m.label,
        "unit": m.unit,
        "better": m.better,
        "tolerance": tolerance,
        "before": vb,
        "after": va,
        "delta": None,
        "change": None,
        "direction": None,
        "beyond_tolerance": False,
        "noise": None,
        "beyond_noise": None,
        "comparable": False,
        "gated": gated(row, m),
        "regressed": False,
        "note": f"only one side has it ({'after' if va is not None else 'before'})",
    }
    if vb is None or va is None:
        return out
    out.update(
        delta=va - vb,
        change=(va - vb) / abs(vb) if vb != 0 else None,
        direction=direction(m.better, vb, va),
        beyond_tolerance=beyond_tolerance(m.unit, vb, va, tolerance, row.key),
        note=None,
    )
    if row.same_work and wk["differs"]:
        out["note"] = (
            f"work per step differs ({wk['tokens_per_step_before']:.0f} -> "
            f"{wk['tokens_per_step_after']:.0f} tokens): judged by tokens/s instead"
        )
        return out
    band, why = _noise(row, cols[0], cols[1], idx, vb, va)
    out.update(comparable=True, noise=band, beyond_noise=band["beyond"] if band else None, note=why)
    out["regressed"] = bool(
        out["gated"] and out["direction"] == "worse" and out["beyond_tolerance"] and (band is None or band["beyond"])
    )
    return out


def _rank_band(rb: Mapping[str, Any], ra: Mapping[str, Any], seed: int, resamples: int) -> dict[str, Any] | None:
    """The noise band of one rank's median step, from its own run reports."""
    b, a = RunSide(rb), RunSide(ra)
    idx = stats.paired_indexes(b.step_count(), a.step_count(), seed, resamples)
    if idx is None:
        return None
    band = stats.bootstrap_band(STATISTICS["median_duration"].fn, b.columns(), a.columns(), *idx)
    if band is None:
        return None
    return {"band_lo_change": band.change_lo, "band_hi_change": band.change_hi, "beyond": band.beyond_noise}


def _bar(job: Mapping[str, Any], pos: int, key: str) -> Any:
    bars = (job.get("view") or {}).get("bars") or []
    return bars[pos].get(key) if pos < len(bars) and isinstance(bars[pos], Mapping) else None


def _caused(job: Mapping[str, Any], pos: int) -> Any:
    per = ((job.get("view") or {}).get("per_rank") or {}).get("caused_wait_ns_per_step") or []
    return per[pos] if pos < len(per) else None


def rank_rows(before: JobSide, after: JobSide, seed: int, resamples: int) -> list[dict[str, Any]]:
    """Per rank present on both sides (BEFORE's order): its own step median (its run report) before and after,
    the change and its noise band, and its mean step, waiting, compute and caused wait inside the job."""
    jobs = (before.job, after.job)
    names = (job_ranks(jobs[0]), job_ranks(jobs[1]))
    reps = (rank_reports(jobs[0], before.runs), rank_reports(jobs[1], after.runs))
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


class BadTolerance(LlmDiagError):
    """A tolerance that is not a number in [0, 100) (NaN, infinite, negative): a bad argument, exit code 2."""

    exit_code = 2


def check_tolerances(max_regression: float | None, tolerances: Mapping[str, float]) -> None:
    """Raise BadTolerance unless every tolerance given is a finite number in [0, 100) (``--max-regression``'s
    range): a NaN would judge nothing as regressed and pass every gate."""
    for what, v in (("max_regression", max_regression), *((f"tolerance of {k}", t) for k, t in tolerances.items())):
        if v is None and what == "max_regression":
            continue
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 100  # NaN fails both
        if not ok:
            raise BadTolerance(f"{cut(what)} must be a fraction in [0, 100) (0.05 = 5 %), not {cut(repr(v))}")


def compare(
    before: RunSide | JobSide | SideDoc,
    after: RunSide | JobSide | SideDoc,
    *,
    sources: tuple[str, str] = ("", ""),
    roles: tuple[str, str] = ("BEFORE", "AFTER"),
    tolerances: Mapping[str, float] | None = None,
    max_regression: float | None = None,
    seed: int = stats.SEED,
    resamples: int = stats.RESAMPLES,
) -> dict[str, Any]:
    """The comparison document (docs/compare.md) of two sides of one level. ``tolerances`` overrides per key;
    ``max_regression`` replaces the registry tolerance of every gated metric (a per-key override still wins).
    ``roles`` name the two sides in the verdict (``check``: BASELINE and CANDIDATE). A side is a run report, a
    ``(job, runs)`` pair (a report's ``jobs[]`` entry and the run reports holding its ranks: others are ignored,
    ranks are matched by file name) or a Side (``side.side_of``). Pure: reads the two sides only."""
    before, after = side_of(before), side_of(after)
    if before.level != after.level:
        raise ValueError(f"a {before.level} compares with a {after.level} only through one of its ranks")
    tolerances = dict(tolerances or {})
    check_tolerances(max_regression, tolerances)
    cols = before.columns(), after.columns()
    steps = before.step_count(), after.step_count()
    idx = stats.paired_indexes(*steps, seed, resamples)
    wk = work(before, after)
    rows = []
    for declared in ROWS:
        for row in expand(declared, (before, after)):
            m = lookup(row.key)
            tol = tolerances.get(
                row.key, max_regression if (max_regression is not None and gated(row, m)) else m.tolerance
            )
            r = metric_row(row, (before.value(row.key), after.value(row.key)), wk, cols, idx, float(tol))
            if r is not None:
                rows.append(r)
    fb, fa = before.findings(), after.findings()
    more = {"resampled": before.resampled} if before.resampled else {}
    doc: dict[str, Any] = {
        **head(before.level, roles, (before.describe(sources[0]), after.describe(sources[1]))),
        "noise_model": noise_model(resamples, seed, steps, idx is not None, **more),
        "work": wk,
        "metrics": rows,
        "findings": findings_diff(fb, fa),
        "bottleneck": {"before": bottleneck(fb), "after": bottleneck(fa)},
    }
    warnings = []
    if isinstance(before, JobSide) and isinstance(after, JobSide):
        kb, ka = len(before.ranks()), len(after.ranks())
        if kb != ka:
            warnings.append(
                f"the jobs have different rank counts ({kb} -> {ka}): per-rank rows cover the ranks on both sides only"
            )
        doc["rank_counts"] = {"before": kb, "after": ka}
        doc["ranks"] = rank_rows(before, after, seed, resamples)
    doc["warnings"] = warnings
    doc["verdict"] = verdict(doc)
    return json_object(doc)
