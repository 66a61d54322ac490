"""The job as a pipeline: stage-to-stage send/recv read as the schedule's dependency, not as stragglers (#33).

Definitions (ranks whose collectives include ``pipeline`` ones, ``metrics.comm.purpose``: send/recv):
- ``stage_count`` p = the ranks with send/recv (one pipeline; a job that also replicates stages counts every
  replica's stages, an over-count the docs state); ``micro_batches`` m = the fewest send/recv per step on one rank,
  halved (an end stage sends m activations and receives m gradients, or the reverse; a middle stage does both).
- Per stage: ``wait_share`` = its send/recv time no compute of its own overlaps, per step / its step time (the
  stage waiting for another's activations or gradients); ``own_ns`` = its step time less that wait: the time the
  stage itself takes.
- ``bubble_share`` = the mean of the stages' wait shares (with a straggler stage, at most the expectation: the wait
  beyond it is the imbalance's, the straggler's finding); ``bubble_expected_share`` = (p-1)/(m+p-1), the idle
  fraction of GPipe and 1F1B with m micro-batches on p equal stages; ``bubble_at_4m_share`` = the same with 4m.
- The straggler stage: the stage whose own time is at least ``STAGE_RATIO`` x the median of the others' and exceeds
  it by at least ``STAGE_EXCESS_SHARE`` of the job step (a balanced pipeline's stages differ by the profiler's
  uneven cost: the #33 balanced capture's 1.4x, 21 % of the step); none otherwise. ``balance_saving_ns`` = its own
  time - the stages' mean own time: what an even split of the same work would take off the step, at most.
- ``host_bound_stages``: stages whose GPU sits idle waiting for the host more than ``HOST_IDLE_SHARE`` of their step:
  on those, more (smaller) micro-batches add launches per step, so the bubble's fix costs host time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tb_llmdiag.jobs.rank_summary import RankSummary
from tb_llmdiag.jobs.straggler import ENTRIES as STRAGGLER_ENTRIES
from tb_llmdiag.jobs.straggler import JobTables, per_rank_mean
from tb_llmdiag.metrics.comm.purpose import PURPOSE_CODE
from tb_llmdiag.metrics.entry import COUNT, INDEX, LOWER, NEITHER, NS, SHARE, TEXT, Entry

STAGE_RATIO = 1.5
STAGE_EXCESS_SHARE = 0.25
HOST_IDLE_SHARE = 0.2


def expected_bubble_share(stages: int, micro_batches: int) -> float:
    """(p-1)/(m+p-1): the idle fraction of a GPipe / 1F1B schedule of m micro-batches on p equal stages."""
    return (stages - 1) / (micro_batches + stages - 1) if stages >= 1 and micro_batches >= 1 else 0.0


def balance_saving_ns(own_ns: Sequence[float]) -> float:
    """What balancing the stages takes off the step at most: the slowest stage's own time - the mean."""
    own = np.asarray(own_ns, np.float64)
    return float(own.max() - own.mean()) if own.size else 0.0


def _per_rank_p2p(s: RankSummary) -> tuple[float, float]:
    """(send/recv per step, their exposed ns per step) over the rank's steps."""
    c = s.collectives
    m = (c["purpose"] == PURPOSE_CODE["pipeline"]) & (c["step"] >= 0)
    n = max(len(np.unique(c["step"][m])), 1) if m.any() else 1
    return float(m.sum()) / n, float(c["exposed_ns"][m].sum()) / n


def _rank(s: RankSummary, pos: int) -> int:
    return int(s.rank) if s.rank is not None else pos


def pipeline_model(ranks: Sequence[RankSummary], t: JobTables, job_step_ns: float) -> dict[str, Any] | None:
    """The pipeline's figures (module docstring), None when no rank sends or receives."""
    per = [_per_rank_p2p(s) for s in ranks]
    stages = [i for i, (n, _) in enumerate(per) if n > 0]
    if len(stages) < 2:
        return None
    p = len(stages)
    m = max(int(min(per[i][0] for i in stages) // 2), 1)
    step = per_rank_mean(t.step_ns)[stages]
    wait = np.array([per[i][1] for i in stages])
    own = step - wait
    idle = per_rank_mean(t.idle_ns)[stages]
    share = wait / np.where(step > 0, step, np.nan)
    slow = int(np.nanargmax(own))
    others = float(np.nanmedian(np.delete(own, slow)))
    excess = float(own[slow]) - others
    is_straggler = bool(
        own[slow] >= STAGE_RATIO * others and job_step_ns > 0 and excess >= STAGE_EXCESS_SHARE * job_step_ns
    )
    saving = balance_saving_ns(own) if is_straggler else None
    expected = expected_bubble_share(p, m)
    bubble = float(np.nanmean(share))
    return {
        "stage_count": p,
        "stage_ranks": [_rank(ranks[i], i) for i in stages],
        "micro_batches": m,
        "bubble_share": min(bubble, expected) if is_straggler else bubble,
        "bubble_expected_share": expected,
        "bubble_at_4m_share": expected_bubble_share(p, 4 * m),
        "stage_wait_shares": [float(x) for x in share],
        "stage_own_ns": [float(x) for x in own],
        "host_bound_stages": [
            _rank(ranks[stages[i]], stages[i]) for i in range(p) if step[i] > 0 and idle[i] / step[i] > HOST_IDLE_SHARE
        ],
        "straggler_stage_rank": _rank(ranks[stages[slow]], stages[slow]) if is_straggler else None,
        "straggler_stage_pos": stages[slow] if is_straggler else None,
        "straggler_own_ns": float(own[slow]) if is_straggler else None,
        "others_own_ns": others if is_straggler else None,
        "straggler_own_ratio": float(own[slow]) / others if others > 0 else None,
        "balance_saving_ns": saving,
    }


# The registry's entries of the pipeline model (``pipeline_model``) and of its slow stage's cause evidence: one row
# per key (metrics/entry.py); jobs/report.py collects the job level's in registry order (``JOB_ENTRIES``)
_PIPE = "(`jobs.pipeline`; null without send/recv)"
ENTRIES: tuple[Entry, ...] = (
    ("job.pipeline_stage_count", COUNT, NEITHER, 0, "stages", "ranks with pipeline send/recv " + _PIPE),
    ("job.pipeline_micro_batches", COUNT, NEITHER, 0, "micro-batches", "the fewest send/recv per step on a rank, halved " + _PIPE),
    ("job.pipeline_bubble_share", SHARE, LOWER, 0.1, "pipeline bubble",
     "mean over stages of their send/recv wait / their step; with a slow stage at most the expectation " + _PIPE),
    ("job.pipeline_bubble_expected_share", SHARE, NEITHER, 0, "expected bubble", "(p-1)/(m+p-1) " + _PIPE),
    ("job.pipeline_bubble_at_4m_share", SHARE, NEITHER, 0, "bubble at 4x micro-batches", "(p-1)/(4m+p-1) " + _PIPE),
    ("job.pipeline_bubble_saving_share", SHARE, NEITHER, 0.1, "bubble saving",
     "pipeline_bubble_share - pipeline_bubble_at_4m_share, at least 0: an upper bound " + _PIPE),
    ("job.pipeline_stage_ranks[]", INDEX, NEITHER, 0, "stage ranks", "the ranks of the stages " + _PIPE),
    ("job.pipeline_stage_wait_shares[]", SHARE, NEITHER, 0.1, "stage waits", "per stage, its send/recv wait / its step " + _PIPE),
    ("job.pipeline_stage_own_ns[]", NS, NEITHER, 0.05, "stage own time", "per stage, its step less its send/recv wait " + _PIPE),
    ("job.pipeline_host_bound_stages[]", INDEX, NEITHER, 0, "host-bound stages",
     "ranks of stages whose GPU idles > 20 % of their step " + _PIPE),
    ("job.pipeline_straggler_stage_rank", INDEX, NEITHER, 0, "slow stage",
     "the stage whose own time is >= 1.5x the others' median and exceeds it by >= 25 % of the job step " + _PIPE),
    ("job.pipeline_straggler_own_ns", NS, NEITHER, 0.05, "slow stage own time", "its own time " + _PIPE),
    ("job.pipeline_others_own_ns", NS, NEITHER, 0.05, "other stages own time", "the other stages' median own time " + _PIPE),
    ("job.pipeline_straggler_own_ratio", "ratio", NEITHER, 0.05, "own time ratio",
     "the slowest stage's own time / the others' median " + _PIPE),
    ("job.pipeline_balance_saving_share", SHARE, NEITHER, 0.1, "balancing saving",
     "(slow stage own time - the stages' mean own time) / job_step_ns " + _PIPE),
    ("job.pipeline_straggler_cause", TEXT, NEITHER, 0, "slow stage cause", "its largest difference (`jobs.straggler`) " + _PIPE),
)  # fmt: skip

#: the pipeline stage straggler's cause evidence: the same fields as the straggler's (``jobs.straggler``)
CAUSE_EVIDENCE_ENTRIES: tuple[Entry, ...] = tuple(
    (k.replace("job.straggler_cause_evidence.", "job.pipeline_straggler_cause_evidence."), u, b, t, label,
     d.replace("the straggler", "the slow pipeline stage"))
    for k, u, b, t, label, d in STRAGGLER_ENTRIES
    if k.startswith("job.straggler_cause_evidence.")
)  # fmt: skip
