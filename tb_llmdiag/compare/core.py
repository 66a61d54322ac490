"""``compare_runs(before, after) -> Comparison``: two run reports in, one JSON-ready document out
(docs/compare.md is its schema). Pure: reads report dicts only, so saved ``report --json`` documents, fresh
analyses and the tab's cached reports compare the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tb_llmdiag import __version__
from tb_llmdiag.compare import stats
from tb_llmdiag.compare.findings_diff import bottleneck, findings_diff
from tb_llmdiag.compare.series import step_columns, value_at
from tb_llmdiag.compare.table import (
    ROWS,
    STATISTICS,
    Row,
    Statistic,
    beyond_tolerance,
    derived_value,
    direction,
    expand,
    gated,
    lookup,
)
from tb_llmdiag.compare.verdict import verdict
from tb_llmdiag.jsonsafe import jsonable

#: version of the compare / check JSON (docs/compare.md). 2: ``level`` (``run`` or ``job``) and the job comparison
COMPARE_SCHEMA = 2
WORK_KEY = "steps.tokens_per_step_median"


def describe(run: Mapping[str, Any], source: str) -> dict[str, Any]:
    """What a side is: where it came from, which run, how many steps."""
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


def work(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """Tokens per step on each side and whether they differ beyond their tolerance (work normalisation)."""
    tb, ta = value_at(before, WORK_KEY), value_at(after, WORK_KEY)
    known = isinstance(tb, (int, float)) and isinstance(ta, (int, float)) and tb > 0 and ta > 0
    ratio = ta / tb if known else None
    differs = known and beyond_tolerance("count_per_step", float(tb), float(ta), lookup(WORK_KEY).tolerance)
    primary = (
        "headline.tokens_per_s"
        if (
            value_at(before, "headline.tokens_per_s") is not None
            and value_at(after, "headline.tokens_per_s") is not None
        )
        else "headline.step_median_ns"
    )
    return {
        "tokens_per_step_before": tb,
        "tokens_per_step_after": ta,
        "ratio": ratio,
        "known": known,
        "differs": bool(differs),
        "primary": primary,
    }


def _noise(
    row: Row,
    cols_b: Mapping[str, np.ndarray],
    cols_a: Mapping[str, np.ndarray],
    idx: tuple[np.ndarray, np.ndarray] | None,
    vb: float,
    va: float,
    statistics: Mapping[str, Statistic] = STATISTICS,
) -> tuple[dict[str, Any] | None, str | None]:
    """The row's noise band about the reports' figures ``vb``, ``va`` (``stats.recentred``), or None and why not."""
    if row.stat is None:
        return None, "one value per run: no noise band"
    st = statistics[row.stat]
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
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    wk: Mapping[str, Any],
    cols: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]],
    idx: tuple[np.ndarray, np.ndarray] | None,
    tolerance: float,
    *,
    values: tuple[Any, Any] | None = None,
    statistics: Mapping[str, Statistic] = STATISTICS,
) -> dict[str, Any] | None:
    """One table row (docs/compare.md); None when neither side has the value. ``values``: the two values when the
    caller read them (a job), else read from the two reports; ``statistics``: where ``row.stat`` is declared."""
    m = lookup(row.key)
    raw = values if values is not None else (derived_value(before, row.key), derived_value(after, row.key))
    vb, va = _float(raw[0]), _float(raw[1])
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
    band, why = _noise(row, cols[0], cols[1], idx, vb, va, statistics)
    out.update(comparable=True, noise=band, beyond_noise=band["beyond"] if band else None, note=why)
    out["regressed"] = bool(
        out["gated"] and out["direction"] == "worse" and out["beyond_tolerance"] and (band is None or band["beyond"])
    )
    return out


def compare_runs(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    sources: tuple[str, str] = ("", ""),
    roles: tuple[str, str] = ("BEFORE", "AFTER"),
    tolerances: Mapping[str, float] | None = None,
    max_regression: float | None = None,
    seed: int = stats.SEED,
    resamples: int = stats.RESAMPLES,
) -> dict[str, Any]:
    """The comparison document (docs/compare.md). ``tolerances`` overrides per key; ``max_regression`` replaces
    the registry tolerance of every gated metric (a per-key override still wins). ``roles`` name the two sides in
    the verdict (``check``: BASELINE and CANDIDATE)."""
    tolerances = dict(tolerances or {})
    cols_b, cols_a = step_columns(before), step_columns(after)
    nb = int(cols_b["duration_ns"].size) if cols_b else 0
    na = int(cols_a["duration_ns"].size) if cols_a else 0
    idx = stats.paired_indexes(nb, na, seed, resamples)
    wk = work(before, after)
    rows = []
    for declared in ROWS:
        for row in expand(declared, before, after):
            m = lookup(row.key)
            tol = tolerances.get(
                row.key, max_regression if (max_regression is not None and gated(row, m)) else m.tolerance
            )
            r = metric_row(row, before, after, wk, (cols_b, cols_a), idx, float(tol))
            if r is not None:
                rows.append(r)
    fb, fa = list(before.get("findings") or []), list(after.get("findings") or [])
    doc: dict[str, Any] = {
        **head("run", roles, (describe(before, sources[0]), describe(after, sources[1]))),
        "noise_model": noise_model(resamples, seed, (nb, na), idx is not None),
        "work": wk,
        "metrics": rows,
        "findings": findings_diff(fb, fa),
        "bottleneck": {"before": bottleneck(fb), "after": bottleneck(fa)},
        "warnings": [],
    }
    doc["verdict"] = verdict(doc)
    return jsonable(doc)
