"""Why the straggler is late: its per-step breakdown against the median rank's, and what matching it buys.

Definitions (per rank: the mean over the job's common steps; "median rank" = the median of each quantity
separately across the other ranks, the straggler left out: with 2 ranks, the other rank):
- ``CAUSES`` is data: ``(cause, quantity)``; the quantity is a per-rank-per-step matrix of ``JobTables``.
  The cause is the one whose straggler-minus-median difference (ns per step) is largest and positive.
  ``longer_gpu_compute`` becomes ``more_tokens`` when the straggler also has >= ``token_excess`` more tokens
  per step than the median rank (the extra compute has a named source). No positive difference above
  ``min_difference_ns``: ``unexplained``.
- ``host_bound_launching`` quantity = GPU idle in the step not covered by data-loader or sync ranges (the
  GPU waits for the host to launch work); ``late_step_start`` = the step starts later than the median rank's
  start of the same step, only when the ranks' clocks agree (``clock_aligned``), else not considered.
- What the straggler does that the others do not (issue #23): for a cause of host or GPU time, the activity of
  the ranks' attributions (``RankSummary.activities``) whose excess on the straggler over the median rank is
  largest (``straggler_activity``): GPU idle time inside a host activity (data loader, syncs, launching) or GPU
  time launched from one (longer compute), added to the evidence as ``activity`` and its difference per step.
- What-if (ByteDance-style, durations only): had the straggler arrived with the second-last rank in each
  collective it was last to, the others would leave ``saving_ns`` sooner; the job step shrinks by at most
  the sum of those per step: ``step_ns`` X -> X - saving (an upper bound: later collectives may absorb it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.metrics.entry import NEITHER, NS, PER_STEP, SHARE, TEXT, Entry

F64 = NDArray[np.float64]

#: (cause, the JobTables matrix it compares). Order breaks ties.
CAUSES: tuple[tuple[str, str], ...] = (
    ("longer_gpu_compute", "compute_ns"),
    ("data_loader_stall", "dataloader_ns"),
    ("host_sync", "sync_ns"),
    ("host_bound_launching", "host_idle_ns"),
    ("late_step_start", "start_offset_ns"),
)


@dataclass(frozen=True)
class JobTables:
    """Per rank x common step matrices (float64; NaN = unknown for that rank/step)."""

    step_ns: F64
    compute_ns: F64
    collective_ns: F64
    exposed_ns: F64
    idle_ns: F64
    dataloader_ns: F64
    sync_ns: F64
    launch_ns: F64
    tokens: F64
    start_offset_ns: F64  # the step's host start minus the median host start of that step across ranks
    waiting_ns: F64
    transfer_ns: F64
    exposed_waiting_ns: F64  # exposed collective time that was waiting (per collective: exposed - transfer)

    @property
    def host_idle_ns(self) -> F64:
        return np.maximum(self.idle_ns - self.dataloader_ns - self.sync_ns, 0.0)

    @property
    def exposed_transfer_ns(self) -> F64:
        """Exposed collective time that is not waiting for a peer. A collective's transfer is its tail (the rank
        waits first, then transfers), so its exposed part counts as transfer up to the transfer time and as
        waiting beyond it; unmatched collectives count as transfer."""
        return np.maximum(self.exposed_ns - self.exposed_waiting_ns, 0.0)


def per_rank_mean(m: F64) -> F64:
    """Mean over steps per rank, NaN where a rank has no known step."""
    with np.errstate(invalid="ignore", divide="ignore"):
        cnt = np.sum(~np.isnan(m), axis=1)
        return np.where(cnt > 0, np.nansum(m, axis=1) / np.maximum(cnt, 1), np.nan)


def attribute(
    t: JobTables,
    rank_pos: int,
    *,
    clock_aligned: bool,
    token_excess: float = 0.05,
    min_difference_ns: float = 1_000.0,
    activities: Sequence[Sequence[tuple[str, str, float]]] = (),
) -> dict[str, Any]:
    """The straggler's biggest difference from the median rank (see the module docstring)."""
    rows: list[dict[str, Any]] = []
    for cause, quantity in CAUSES:
        if cause == "late_step_start" and not clock_aligned:
            continue
        per_rank = per_rank_mean(getattr(t, quantity))
        others = np.delete(per_rank, rank_pos)
        if np.isnan(per_rank[rank_pos]) or np.all(np.isnan(others)):
            continue
        med = float(np.nanmedian(others))
        rows.append(
            {
                "cause": cause,
                "quantity": quantity,
                "straggler_ns_per_step": float(per_rank[rank_pos]),
                "median_rank_ns_per_step": med,
                "difference_ns_per_step": float(per_rank[rank_pos]) - med,
            }
        )
    rows.sort(key=lambda r: -r["difference_ns_per_step"])
    tokens = per_rank_mean(np.where(t.tokens >= 0, t.tokens, np.nan))
    other_tokens = np.delete(tokens, rank_pos)
    tok = None
    if not np.isnan(tokens[rank_pos]) and not np.all(np.isnan(other_tokens)):
        med_tok = float(np.nanmedian(other_tokens))
        tok = {
            "straggler_tokens_per_step": float(tokens[rank_pos]),
            "median_rank_tokens_per_step": med_tok,
            "excess_share": (float(tokens[rank_pos]) - med_tok) / med_tok if med_tok > 0 else None,
        }
    top = rows[0] if rows and rows[0]["difference_ns_per_step"] >= min_difference_ns else None
    cause = top["cause"] if top else "unexplained"
    if cause == "longer_gpu_compute" and tok and (tok["excess_share"] or 0.0) >= token_excess:
        cause = "more_tokens"
    if top is not None and cause in ACTIVITY_KIND and len(activities) > rank_pos:
        act = straggler_activity(activities, rank_pos, ACTIVITY_KIND[cause], min_difference_ns=min_difference_ns)
        top = {**top, **act} if act else top
    return {"cause": cause, "evidence": top, "tokens": tok, "compared": rows}


#: the kind of activity that explains each cause: GPU idle time inside a host activity, or GPU time launched from it
ACTIVITY_KIND: dict[str, str] = {
    "longer_gpu_compute": "busy",
    "more_tokens": "busy",
    "data_loader_stall": "idle",
    "host_sync": "idle",
    "host_bound_launching": "idle",
    # a late start: the user annotation (record_function) that holds the time only this rank spends
    "late_step_start": "annotation",
}


def straggler_activity(
    activities: Sequence[Sequence[tuple[str, str, float]]], rank_pos: int, kind: str, *, min_difference_ns: float
) -> dict[str, Any] | None:
    """What the straggler does that the others do not: among its activities of ``kind`` (``RankSummary.activities``:
    GPU idle inside a host activity, or GPU time launched from one, ns per step), the one whose excess over the
    median of the other ranks is largest. A rank that does not list the activity (it is not among its top ones)
    counts as 0 there, so the difference is an upper bound then. None below ``min_difference_ns``."""
    mine = {c: v for k, c, v in activities[rank_pos] if k == kind}
    others = [{c: v for k, c, v in a if k == kind} for i, a in enumerate(activities) if i != rank_pos]
    if not mine or not others:
        return None
    diffs = {c: v - float(np.median([o.get(c, 0.0) for o in others])) for c, v in mine.items()}
    chain = max(diffs, key=lambda c: diffs[c])
    if diffs[chain] < min_difference_ns:
        return None
    return {
        "activity": chain,
        "activity_kind": kind,
        "activity_ns_per_step": mine[chain],
        "activity_difference_ns_per_step": diffs[chain],
    }


def what_if(job_step_ns: float, saving_ns_per_step: float) -> dict[str, Any]:
    """Step time now and if the straggler had matched the median rank (an upper bound on the gain)."""
    after = max(job_step_ns - saving_ns_per_step, 0.0)
    return {
        "step_ns": job_step_ns,
        "step_after_ns": after,
        "saving_ns": job_step_ns - after,
        "saving_share": (job_step_ns - after) / job_step_ns if job_step_ns > 0 else None,
        "bound": "upper",
    }


#: what every job what-if is, in its registry entries' words
WHAT_IF_WORDS = "an upper bound on the gain, from durations only"

# The registry's entries of the straggler's cause, its tokens and its what-if (``attribute``, ``what_if``): one row
# per key (metrics/entry.py); jobs/report.py collects the job level's in registry order (``JOB_ENTRIES``)
_CAUSE = (
    "`straggler_cause_evidence`: the straggler's largest positive difference per step against the median of "
    "the other ranks (`jobs.straggler`)"
)

ENTRIES: tuple[Entry, ...] = (
    ("job.straggler_cause_evidence.cause", TEXT, NEITHER, 0, "largest difference", _CAUSE + ": which part"),
    ("job.straggler_cause_evidence.quantity", TEXT, NEITHER, 0, "quantity", _CAUSE + ": the per-step column compared"),
    (
        "job.straggler_cause_evidence.straggler_ns_per_step",
        NS,
        NEITHER,
        0.05,
        "straggler",
        _CAUSE + ": the straggler's value",
    ),
    (
        "job.straggler_cause_evidence.median_rank_ns_per_step",
        NS,
        NEITHER,
        0.05,
        "median rank",
        _CAUSE + ": the median of the other ranks",
    ),
    (
        "job.straggler_cause_evidence.difference_ns_per_step",
        NS,
        NEITHER,
        0.05,
        "difference",
        _CAUSE + ": straggler - median",
    ),
    (
        "job.straggler_tokens.straggler_tokens_per_step",
        PER_STEP,
        NEITHER,
        0.02,
        "straggler tokens",
        "token slots per step of the straggler",
    ),
    (
        "job.straggler_tokens.median_rank_tokens_per_step",
        PER_STEP,
        NEITHER,
        0.02,
        "median tokens",
        "median of the other ranks' token slots per step",
    ),
    (
        "job.straggler_tokens.excess_share",
        SHARE,
        NEITHER,
        0.1,
        "token excess",
        "straggler tokens / median tokens - 1 (above 1 when it has more than twice the tokens)",
    ),
    ("job.straggler_what_if.step_ns", NS, NEITHER, 0.05, "step", "job_step_ns"),
    (
        "job.straggler_what_if.step_after_ns",
        NS,
        NEITHER,
        0.05,
        "step if matched",
        "the step had the straggler arrived with the second-last rank (ByteDance-style); " + WHAT_IF_WORDS,
    ),
    ("job.straggler_what_if.saving_ns", NS, NEITHER, 0.05, "saving", "step_ns - step_after_ns"),
    ("job.straggler_what_if.saving_share", SHARE, NEITHER, 0.1, "saving share", "saving_ns / step_ns"),
    ("job.straggler_what_if.bound", TEXT, NEITHER, 0, "bound", "`upper`"),
)
