"""Step-time statistics, warm-up and outliers, and how step time follows tokens per step.

Definitions (durations d_i = steps.end_ns - steps.start_ns, see ``metrics.steps.windows``; n = number of steps):
- mean, median, min, max, ``std`` (population), ``cv`` = std / mean, ``max_over_median``.
- ``first_over_rest``: d_0 / median(d_1..d_n-1) (n >= 3); ``warmup_first_step``: first_over_rest >= 1.5.
- ``cv_excluding_first``: cv of d_1..d_n-1 (n >= 3), so a cold first step does not read as variance.
- Outliers: d_i > median + max(3 x 1.4826 x MAD, 0.1 x median) (MAD = median absolute deviation).
  ``outlier_excess_share`` = sum over outliers of (d_i - median) / sum(d).
- ``mean_excess_share`` = (mean - median) / mean of d_1..d_n-1 (0 if negative): what steady steps would save.
- ``warmup_excess_share`` = (d_0 - median(rest)) / sum(d) when warmup_first_step, else 0.
- ``outlier_causes``: per outlier step, its excess over the median and the cause (``outlier_causes``).
- Tokens (``metrics.throughput.shapes``): token slots per step (padded B x L), ``tokens_cv``, and ``tokens_corr``, the
  Pearson correlation of d_1..d_n-1 with their tokens (null with < 3 such steps or constant tokens).
- ``per_step``: the report's one list of steps: per step its window (``metrics.steps.windows``), its busy/idle
  breakdown (``metrics.steps.gaps.StepBreakdown``), ``busy_share`` and ``tokens``.
``duration_stats`` is the one step-statistics function: this topic and the ``xla`` topic's step and
steady-step figures both use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.entry import (
    COUNT,
    FLAG,
    HIGHER,
    INDEX,
    LOWER,
    NEITHER,
    NS,
    PER_STEP,
    RATIO,
    SHARE,
    TEXT,
    Entry,
    Intro,
)
from tb_llmdiag.metrics.steps.gaps import StepBreakdown
from tb_llmdiag.metrics.throughput.shapes import tokens_per_window

WARMUP_RATIO = 1.5


def _cv(x: NDArray[Any]) -> float | None:
    return float(x.std() / x.mean()) if x.size and x.mean() > 0 else None


#: The keys of ``duration_stats`` (each prefixed by its caller's prefix).
DURATION_STATS = ("count", "median_ns", "mean_ns", "min_ns", "max_ns", "std_ns", "cv", "max_over_median")


def duration_stats(d: NDArray[Any], prefix: str = "") -> dict[str, Any]:
    """Statistics of step durations (ns): count, median, mean, min, max, population std (whole ns, truncated),
    cv = std / mean and max / median (None when undefined); every value None but the count when ``d`` is
    empty. Keys are ``DURATION_STATS`` with ``prefix`` (the ``xla`` topic's ``step_`` / ``steady_step_``)."""
    x = np.asarray(d, dtype=np.float64)
    vals: dict[str, Any] = dict.fromkeys(DURATION_STATS)
    vals["count"] = int(x.size)
    if x.size:
        med = float(np.median(x))
        vals.update(
            median_ns=int(med),
            mean_ns=int(x.mean()),
            min_ns=int(x.min()),
            max_ns=int(x.max()),
            std_ns=int(x.std()),
            cv=_cv(x),
            max_over_median=float(x.max() / med) if med > 0 else None,
        )
    return {f"{prefix}{k}": v for k, v in vals.items()}


def step_metrics(ctx: Context, bd: StepBreakdown) -> dict[str, Any]:
    st = ctx.steps
    if len(st) == 0:
        return {
            "available": False,
            "reason": "no step markers (ProfilerStep#N or Optimizer.step#) in the trace",
            "count": 0,
            "source": st.source,
        }
    # optimizer-step windows can come out inverted on odd traces (overlapping annotations): count them as 0
    d = np.maximum(st.duration_ns, 0).astype(np.float64)
    med = float(np.median(d))
    mad = float(np.median(np.abs(d - med)))
    thresh = med + max(3 * 1.4826 * mad, 0.1 * med)
    out_mask = (d > thresh) if d.sum() > 0 else np.zeros(d.size, bool)
    rest = d[1:] if d.size >= 3 else d
    first_over_rest = float(d[0] / np.median(rest)) if d.size >= 3 and np.median(rest) > 0 else None
    warm = first_over_rest is not None and first_over_rest >= WARMUP_RATIO
    rest_mean, rest_med = float(rest.mean()), float(np.median(rest))
    out: dict[str, Any] = {
        "available": True,
        "source": st.source,
        **duration_stats(d),
        "first_index": int(st.index[0]),
        "first_over_rest": first_over_rest,
        "warmup_first_step": bool(warm),
        "warmup_excess_share": float((d[0] - rest_med) / d.sum()) if warm and d.sum() > 0 else 0.0,
        "cv_excluding_first": _cv(d[1:]) if d.size >= 3 else None,
        "outlier_count": int(out_mask.sum()),
        "outliers": [int(i) for i in st.index[out_mask]],
        "outlier_excess_share": float((d[out_mask] - med).sum() / d.sum()) if d.sum() > 0 else 0.0,
        "mean_excess_share": max(0.0, (rest_mean - rest_med) / rest_mean) if rest_mean > 0 else 0.0,
    }
    tokens = tokens_per_window(ctx.trace.events, st.host_starts, st.host_end_ns)
    out["tokens_per_step_median"] = int(np.median(tokens)) if tokens is not None else None
    out["tokens_cv"] = _cv(tokens.astype(np.float64)) if tokens is not None else None
    corr = None
    if tokens is not None and d.size >= 4:
        t, y = tokens[1:].astype(np.float64), d[1:]
        if t.std() > 0 and y.std() > 0:
            corr = float(np.corrcoef(t, y)[0, 1])
    out["tokens_corr"] = corr
    out["outlier_causes"] = outlier_causes(bd, out_mask, tokens)
    out["outlier_main_cause"] = main_cause(out["outlier_causes"])
    rows = bd.rows()
    busy_share = bd.busy_share
    for i, row in enumerate(rows):
        row["busy_share"] = float(busy_share[i]) if bd.available else None
        row["tokens"] = int(tokens[i]) if tokens is not None else None
    out["per_step"] = rows
    return out


def outlier_causes(
    bd: StepBreakdown, outliers: NDArray[np.bool_], tokens: NDArray[np.int64] | None
) -> list[dict[str, Any]]:
    """For each outlier step (R3): its excess over the median step and the component that grew most.

    Components per step (``StepBreakdown``): GPU busy time and idle time by cause (data_loader, sync,
    host_wait, other). The cause is the component whose excess over its own median across steps is largest;
    ``gpu_work`` (busy time grew) becomes ``longer_input`` when the step also had >= 10 % more tokens than the
    median step. The first profiled step is marked ``first: true`` (warm-up is its usual cause).
    """
    if not outliers.any():
        return []
    st = bd.steps
    d = np.maximum(st.duration_ns, 0).astype(np.float64)
    med = float(np.median(d))
    comps: dict[str, NDArray[np.int64]] = {}
    if bd.available:
        comps = {name: bd.part_ns(name) for name in ("data_loader", "sync", "host_wait")}
        comps["gpu_work"] = bd.busy_ns
        comps["other"] = bd.part_ns("other")
    out = []
    for k in np.flatnonzero(outliers).tolist():
        cause, best = "other", 0.0
        for name, series in comps.items():
            delta = float(series[k]) - float(np.median(series))
            if delta > best:
                cause, best = name, delta
        if (
            cause == "gpu_work"
            and tokens is not None
            and np.median(tokens) > 0
            and tokens[k] >= 1.1 * np.median(tokens)
        ):
            cause = "longer_input"
        out.append(
            {
                "index": int(st.index[k]),
                "duration_ns": int(d[k]),
                "excess_ns": int(d[k] - med),
                "cause": cause,
                "first": k == 0,
            }
        )
    return out


def main_cause(causes: list[dict[str, Any]]) -> str | None:
    """The most frequent cause among outliers other than the first step (all outliers if only it); ties by
    total excess."""
    rows = [c for c in causes if not c["first"]] or causes
    if not rows:
        return None
    score: dict[str, tuple[int, int]] = {}
    for c in rows:
        n, ex = score.get(c["cause"], (0, 0))
        score[c["cause"]] = (n + 1, ex + c["excess_ns"])
    return max(score, key=lambda k: score[k])


# The registry's entries of the `steps` topic: one row per key (metrics/entry.py); metrics/registry.py collects them
# through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`steps` (metrics/steps/stats.py)",
    "With d_i the step durations (never negative; a negative one would count as 0) and n the count.\n`per_step` is the report's one list of steps: each step's window, its busy/idle breakdown (metrics/steps/gaps.py,\n`StepBreakdown`: the same numbers the tab's `/steps` rows and step timelines show) and its tokens.\nThe statistics come from `step_stats.duration_stats`, which the `xla` topic's `step_*` / `steady_step_*` share.",
)

# a declared table, one entry per row: left as laid out
# fmt: off
#: the shared part of the definitions of `steps.outlier_causes[]`'s fields
_OUTLIER_CAUSE_ENTRY = (
    "`outlier_causes` entry: per outlier step: `index`, `duration_ns`, `excess_ns` (over the "
    "median), `first` (the first profiled step), and `cause`: the component of the step "
    "(`steps.per_step`: GPU busy time, idle time by cause) whose excess over its own median across "
    "steps is largest: `data_loader`, `sync`, `host_wait`, `other`, or `gpu_work` (busy time grew), "
    "which becomes `longer_input` when the step had >= 10 % more tokens than the median step (R3)"
)

#: the definition shared by `steps.outliers[]` and `steps.outlier_count`
_OUTLIER = "steps with d_i > median + max(3 x 1.4826 x MAD, 0.1 x median), MAD = median absolute deviation"

#: the shared part of the definitions of the four idle causes in `steps.per_step[]`
_IN_STEP = (
    "the idle gaps (`idle`) are classified once over the whole gap (metrics/steps/gaps.py), then split at step "
    "boundaries: a gap crossing a boundary has one cause on both sides, and busy + collective + the four causes "
    "= `duration_ns`; the tab's `/steps` rows and step timelines read the same breakdown; null without device "
    "activity"
)

ENTRIES: tuple[Entry, ...] = (
    ("steps.count", COUNT, NEITHER, 0.02, "count", "n, the number of steps"),
    ("steps.cv", RATIO, LOWER, 0.1, "cv", "std / mean (coefficient of variation); null when the mean is 0"),
    ("steps.cv_excluding_first", RATIO, LOWER, 0.1, "cv excluding first",
     "cv of d_1..d_n-1 (n >= 3), so a cold first step does not read as variance"),
    ("steps.first_index", INDEX, NEITHER, 0, "first index",
     "the first profiled step's number (0 means the run's first step was profiled)"),
    ("steps.first_over_rest", RATIO, NEITHER, 0.1, "first over rest",
     "d_0 / median(d_1..d_n-1); null with fewer than 3 steps"),
    ("steps.max_ns", NS, LOWER, 0.05, "max", "maximum of the step durations d"),
    ("steps.max_over_median", RATIO, NEITHER, 0.1, "max over median", "max / median"),
    ("steps.mean_excess_share", SHARE, LOWER, 0.1, "mean excess share",
     "max(0, (mean - median) / mean) over d_1..d_n-1: what steadier steps would save"),
    ("steps.mean_ns", NS, LOWER, 0.05, "mean", "mean of the step durations d"),
    ("steps.median_ns", NS, LOWER, 0.05, "median", "median of the step durations d"),
    ("steps.min_ns", NS, LOWER, 0.05, "min", "minimum of the step durations d"),
    ("steps.outlier_count", COUNT, LOWER, 0.02, "outlier count", _OUTLIER),
    ("steps.outlier_excess_share", SHARE, LOWER, 0.1, "outlier excess share",
     "sum over outliers of (d_i - median) / sum(d)"),
    ("steps.outlier_main_cause", TEXT, NEITHER, 0, "outlier main cause",
     "the most frequent cause among outliers other than the first step (all outliers if it is the only "
     "one); ties by total excess; null without outliers"),
    ("steps.source", TEXT, NEITHER, 0, "source", "`profiler_step` / `xplane_step` / `optimizer_step` / `none`"),
    ("steps.std_ns", NS, LOWER, 0.05, "std", "population standard deviation of the step durations d"),
    ("steps.tokens_corr", RATIO, NEITHER, 0.1, "tokens corr",
     "Pearson correlation of d_1..d_n-1 with their tokens; null with fewer than 3 such steps or constant "
     "values"),
    ("steps.tokens_cv", RATIO, LOWER, 0.1, "tokens cv", "cv of the steps' `tokens` (`per_step[].tokens`)"),
    ("steps.tokens_per_step_median", PER_STEP, NEITHER, 0.05, "tokens per step median",
     "median of the steps' `tokens` (`per_step[].tokens`)"),
    ("steps.warmup_excess_share", SHARE, LOWER, 0.1, "warmup excess share",
     "(d_0 - median(d_1..)) / sum(d) when `warmup_first_step`, else 0: the window time warm-up adds"),
    ("steps.warmup_first_step", FLAG, NEITHER, 0, "warmup first step", "`first_over_rest` >= 1.5"),
    ("steps.outlier_causes[].cause", TEXT, NEITHER, 0, "outlier cause",
     "`cause` of each " + _OUTLIER_CAUSE_ENTRY),
    ("steps.outlier_causes[].duration_ns", NS, LOWER, 0.05, "outlier cause duration",
     "`duration_ns` of each " + _OUTLIER_CAUSE_ENTRY),
    ("steps.outlier_causes[].excess_ns", NS, LOWER, 0.05, "outlier cause excess",
     "`excess_ns` of each " + _OUTLIER_CAUSE_ENTRY),
    ("steps.outlier_causes[].first", FLAG, NEITHER, 0, "outlier cause first",
     "`first` of each " + _OUTLIER_CAUSE_ENTRY),
    ("steps.outlier_causes[].index", INDEX, NEITHER, 0, "outlier cause index",
     "`index` of each " + _OUTLIER_CAUSE_ENTRY),
    ("steps.outliers[]", INDEX, NEITHER, 0, "outliers", _OUTLIER),
    ("steps.per_step[].index", INDEX, NEITHER, 0, "step", "the number in the step marker's name (else the ordinal)"),
    ("steps.per_step[].name", TEXT, NEITHER, 0, "marker", "the step marker's name"),
    ("steps.per_step[].start_ns", NS, NEITHER, 0.05, "start", "where the step starts, since the trace's first event: its marker's start, or the end of earlier steps' device work when that is later"),
    ("steps.per_step[].host_end_ns", NS, NEITHER, 0.05, "host end", "where the step's host marker ends"),
    ("steps.per_step[].end_ns", NS, NEITHER, 0.05, "end",
     "where the step ends: the later of the marker's end and the end of the device work launched inside it"),
    ("steps.per_step[].duration_ns", NS, LOWER, 0.05, "step time", "d_i = end_ns - start_ns"),
    ("steps.per_step[].busy_ns", NS, HIGHER, 0.05, "busy", "the union of the device events other than collectives within the step's [start, end) (changed in report schema 3: collectives no longer count as busy); null without device activity"),
    ("steps.per_step[].collective_ns", NS, LOWER, 0.05, "communication", "device time within the step's [start, end) that only collective kernels cover (communication nothing else on the device hides; NCCL/RCCL, DeepEP, XLA collectives, `metrics.comm.collectives`); busy + collective + the four idle causes = `duration_ns`; null without device activity"),
    ("steps.per_step[].busy_share", SHARE, HIGHER, 0.1, "busy share", "busy_ns / duration_ns (collectives excluded); null without device activity"),
    ("steps.per_step[].host_wait_ns", NS, LOWER, 0.05, "host wait",
     "idle time of `host_wait` gaps within the step: " + _IN_STEP),
    ("steps.per_step[].sync_ns", NS, LOWER, 0.05, "sync",
     "idle time of `sync` gaps within the step: " + _IN_STEP),
    ("steps.per_step[].data_loader_ns", NS, LOWER, 0.05, "data loader",
     "idle time of `data_loader` gaps within the step: " + _IN_STEP),
    ("steps.per_step[].other_ns", NS, LOWER, 0.05, "other",
     "idle time of `other` gaps within the step: " + _IN_STEP),
    ("steps.per_step[].tokens", COUNT, NEITHER, 0.02, "tokens",
     "token slots B x L summed over `aten::embedding(weight [V, H], indices [B, L])` calls whose weight has the "
     "largest V seen (the token embedding) and whose start lies in the step's host window; padding included; "
     "null without recorded shapes"),
)
# fmt: on
