"""A job: the ranks of one run, their collectives matched, waiting split from transfer, the straggler.

Definitions:
- Ranks: ``RankSummary.rank`` (``distributedInfo``), else a number in the label (``RANK_FROM_NAME``). A rank
  seen twice keeps its first summary (the others are stated as duplicates); ranks below the world size (or
  below the largest rank seen) that no summary has are stated as missing.
- Matching: collectives are matched across ranks by (process group, sequence number) when every
  collective of the group carries one, else by (process group, step number, kind, order among the step's
  collectives of that kind): collectives of different kinds on different streams (FSDP's all-gathers and
  reduce-scatters) may start in a different order on different ranks.
  Without process-group args all collectives of a rank form one group. A match counts only when every rank
  that has the group has it and all agree on its kind; the rest are stated as unmatched.
- For a matched collective, all ranks leave together once the last one has arrived (a collective
  completes on every rank at once), so durations alone tell who was late, even across hosts whose clocks
  differ: ``transfer_ns`` = the minimum duration across ranks (what the last arrival still took,
  TraceLens's latency); each rank's ``waiting_ns`` = its duration - transfer; the last arrival is the rank
  with the minimum duration (ties: the later start). A rank's *exposed* waiting in a collective is the part
  of its waiting no compute of its own overlaps (the transfer is the kernel's tail, so: exposed time beyond
  the transfer); waiting hidden under compute costs nothing. ``caused_wait_ns`` of a rank = the mean exposed
  waiting of the other ranks in the collectives it arrived last to. ``saving_ns`` = min(second-smallest
  duration - smallest, the largest exposed waiting): how much sooner the others would have been free had the
  last arrival come with the second-last.
- The straggler is the rank that caused the most waiting, when it caused at least ``consistency_share`` of
  all caused waiting and itself waited no more than the median rank: the rank everyone waits for, never the
  rank that waits longest. Its cause: ``jobs.straggler``.
- Its step-to-step noise (what the straggler rule's floors read, ``findings/job.py``): ``caused_wait_by_step_ns``
  = per rank and common step, the exposed waiting it caused the others in that step's collectives it arrived
  last to (a collective's step: the last arrival's); its mean over the steps is ``caused_wait_ns``.
  ``straggler_last_steps`` = the common steps in which the straggler caused more waiting than any other rank
  (and some). ``straggler_wait_sd_ns`` = the sample standard deviation of its per-step caused waiting over the
  common steps; ``straggler_wait_low_ns`` = its mean - t x sd / sqrt(steps), t = Student's one-sided 95 %
  quantile with steps - 1 degrees of freedom (``t95``): the per-step wait the capture supports with 95 %
  confidence, given how much it varies from step to step. Both null with fewer than two common steps (and
  ``straggler_last_steps`` without a common step).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.jobs.matching import Matched, busbw_by_kind, group_starts, match_collectives
from tb_llmdiag.jobs.pipeline import pipeline_model
from tb_llmdiag.jobs.purposes import purposes_of_job
from tb_llmdiag.jobs.rank_summary import RankSummary
from tb_llmdiag.jobs.straggler import JobTables, attribute, per_rank_mean, what_if
from tb_llmdiag.metrics.comm.collectives import KINDS

I64 = NDArray[np.int64]

#: Rank numbers in file or worker names, tried in order (``rank3``, ``rank_3``, ``worker3``, ``gpu3``).
RANK_FROM_NAME: tuple[str, ...] = (r"rank[_\-]?(\d+)", r"worker[_\-]?(\d+)", r"gpu[_\-]?(\d+)", r"node\d+[_\-](\d+)")
_RANK_RX = tuple(re.compile(rx, re.IGNORECASE) for rx in RANK_FROM_NAME)


def rank_from_name(label: str) -> int | None:
    """The rank a file or worker name states, None when none of ``RANK_FROM_NAME`` matches."""
    base = label.replace("\\", "/").rsplit("/", 1)[-1]
    for rx in _RANK_RX:
        m = rx.search(base)
        if m:
            return int(m.group(1))
    return None


def resolve_ranks(summaries: Sequence[RankSummary]) -> tuple[list[RankSummary], list[str]]:
    """The summaries to analyse, one per rank, sorted by rank; and notes on duplicates and missing ranks."""
    notes: list[str] = []
    by_rank: dict[int, RankSummary] = {}
    unranked = []
    for s in summaries:
        r = s.rank if s.rank is not None else rank_from_name(s.label)
        if r is None:
            unranked.append(s.label)
            continue
        if r in by_rank:
            notes.append(f"rank {r} appears twice ({by_rank[r].label}, {s.label}): the second is ignored")
            continue
        by_rank[r] = s if s.rank == r else s.replace(rank=r, rank_source="file_name")
    if unranked:
        notes.append(
            f"{len(unranked)} trace(s) state no rank (no distributedInfo, no rank in the name): "
            f"left out: {', '.join(unranked[:5])}"
        )
    sizes = [s.world_size for s in by_rank.values() if s.world_size]
    world = max(sizes) if sizes else (max(by_rank) + 1 if by_rank else 0)
    missing = sorted(set(range(world)) - set(by_rank))
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        notes.append(f"{len(missing)} of {world} ranks missing: {shown}")
    return [by_rank[r] for r in sorted(by_rank)], notes


def _common_steps(ranks: Sequence[RankSummary]) -> I64:
    """Step numbers every rank has (sorted)."""
    if not ranks:
        return np.zeros(0, np.int64)
    idx = np.concatenate([np.unique(s.steps["index"]) for s in ranks])
    values, counts = np.unique(idx, return_counts=True)
    return np.asarray(values[counts == len(ranks)].astype(np.int64))


def _tables(ranks: Sequence[RankSummary], common: I64, m: Matched) -> JobTables:
    """Per rank x common step matrices of the step columns, waiting and transfer."""
    R, S = len(ranks), common.size
    cols = (
        "host_start_ns",
        "start_ns",
        "end_ns",
        "compute_ns",
        "collective_ns",
        "exposed_ns",
        "idle_ns",
        "dataloader_ns",
        "sync_ns",
        "launch_ns",
        "tokens",
    )
    mats = {c: np.full((R, S), np.nan) for c in cols}
    if S:
        origin = min(int(s.steps["start_ns"].min()) for s in ranks if s.n_steps)  # floats only after this shift
        rank_pos = np.concatenate([np.full(s.n_steps, i, np.int64) for i, s in enumerate(ranks)])
        index = np.concatenate([s.steps["index"] for s in ranks])
        pos = np.clip(np.searchsorted(common, index), 0, S - 1)
        hit = common[pos] == index
        for c in cols:
            vals = np.concatenate([s.steps[c] for s in ranks])
            vals = (vals - origin if c in ("host_start_ns", "start_ns", "end_ns") else vals).astype(np.float64)
            mats[c][rank_pos[hit], pos[hit]] = vals[hit]
    waiting = np.zeros((R, S))
    transfer = np.zeros((R, S))
    exposed_waiting = np.zeros((R, S))
    if S and m.member_step.size:
        pos = np.clip(np.searchsorted(common, m.member_step), 0, S - 1)
        hit = common[pos] == m.member_step
        cell = (m.member_rank_pos[hit], pos[hit])
        tr = m.transfer_ns[m.member_match[hit]]
        np.add.at(waiting, cell, m.member_waiting_ns[hit])
        np.add.at(transfer, cell, tr)
        # the transfer is the collective's tail: its exposed part is exposed transfer first, the rest waiting
        np.add.at(exposed_waiting, cell, np.maximum(m.member_exposed_ns[hit] - tr, 0))
    with np.errstate(invalid="ignore"):
        host = mats["host_start_ns"]
        offset = host - np.nanmedian(host, axis=0, keepdims=True) if S else host
    return JobTables(
        step_ns=mats["end_ns"] - mats["start_ns"],
        compute_ns=mats["compute_ns"],
        collective_ns=mats["collective_ns"],
        exposed_ns=mats["exposed_ns"],
        idle_ns=mats["idle_ns"],
        dataloader_ns=mats["dataloader_ns"],
        sync_ns=mats["sync_ns"],
        launch_ns=mats["launch_ns"],
        tokens=mats["tokens"],
        start_offset_ns=offset,
        waiting_ns=waiting,
        transfer_ns=transfer,
        exposed_waiting_ns=exposed_waiting,
    )


def _match_steps(m: Matched) -> I64:
    """The step number of each match: the last arrival's step."""
    out = np.full(m.kind.size, -1, np.int64)
    own = m.member_rank_pos == m.last_rank_pos[m.member_match]
    out[m.member_match[own]] = m.member_step[own]
    return out


@dataclass(frozen=True)
class JobAnalysis:
    """Everything the job findings and the job view read. Per-rank arrays follow ``ranks``."""

    ranks: tuple[int, ...]
    labels: tuple[str, ...]
    notes: tuple[str, ...]
    pg_labels: tuple[str, ...]
    steps: I64  # common step numbers
    tables: JobTables
    matched: Matched
    caused_wait_ns: NDArray[np.float64]  # per rank, per step
    last_count: I64  # per rank: matched collectives it arrived last to (someone waited for it)
    saving_ns: NDArray[np.float64]  # per rank, per step: what-if saving had it not been last
    clock_aligned: bool
    job_step_ns: float  # median rank's mean step time
    straggler_pos: int | None
    straggler_consistency_share: float | None
    attribution: dict[str, Any] | None
    by_kind: list[dict[str, Any]]
    kernel_ns_by_kind: I64  # all ranks' collective kernel time per kind (KINDS order), matched or not
    top_finding_ids: tuple[tuple[str, ...], ...] = ()
    caused_wait_by_step_ns: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 0)))
    straggler_last_steps: int | None = None
    straggler_wait_sd_ns: float | None = None
    straggler_wait_low_ns: float | None = None
    #: per rank: the profiler's own cost in its profiled step (``RankSummary.profiler_overhead_ns``; NaN: unknown)
    #: and how it was estimated
    profiler_overhead_ns: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    overhead_basis: tuple[str, ...] = ()
    #: the pipeline's figures (``jobs.pipeline``), None without send/recv; the stage straggler's attribution
    pipeline: dict[str, Any] | None = None
    pipeline_attribution: dict[str, Any] | None = None
    #: communication by purpose over the ranks (``jobs.purposes``)
    purposes: list[dict[str, Any]] = field(default_factory=list)
    #: the ranks' GPU as their traces name it (the first rank that names one): the link table's key
    device_name: str | None = None


#: Student's t, one-sided 95 % quantile, by degrees of freedom 1..30 (the textbook table); beyond, ``t95``
#: uses the Cornish-Fisher expansion (within 0.001 of the exact value from 30 on).
T95_ONE_SIDED: tuple[float, ...] = (
    6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
    1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
    1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697,
)  # fmt: skip
_Z95 = 1.6448536269514722


def t95(dof: int) -> float:
    """Student's t one-sided 95 % quantile for ``dof`` >= 1 degrees of freedom."""
    if dof <= len(T95_ONE_SIDED):
        return T95_ONE_SIDED[max(dof, 1) - 1]
    z = _Z95
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def wait_floor(per_step_ns: NDArray[np.float64]) -> tuple[float | None, float | None]:
    """(sample standard deviation, lower one-sided 95 % confidence bound of the mean) of one rank's per-step
    caused waiting; (None, None) with fewer than two steps (no step-to-step spread to measure)."""
    n = int(per_step_ns.size)
    if n < 2:
        return None, None
    sd = float(np.std(per_step_ns, ddof=1))
    return sd, float(np.mean(per_step_ns)) - t95(n - 1) * sd / float(np.sqrt(n))


def _caused_by_step(m: Matched, mstep: I64, common: I64, n_ranks: int) -> NDArray[np.float64]:
    """Ranks x common steps: the exposed waiting each rank caused the others in the step (see the docstring)."""
    out = np.zeros((n_ranks, common.size))
    if common.size and mstep.size:
        pos = np.clip(np.searchsorted(common, mstep), 0, common.size - 1)
        hit = common[pos] == mstep
        np.add.at(out, (m.last_rank_pos[hit], pos[hit]), m.caused_wait_ns[hit])
    return out


def _clock_aligned(m: Matched, job_step_ns: float) -> bool:
    """Whether the ranks' clocks agree: matched collectives end together on absolute times (median spread of
    their ends under 5 % of a step and under 1 ms)."""
    if m.kind.size == 0:
        return False
    first = np.flatnonzero(group_starts(m.member_match))
    spread = np.maximum.reduceat(m.member_end_ns, first) - np.minimum.reduceat(m.member_end_ns, first)
    return bool(float(np.median(spread)) < min(0.05 * job_step_ns, 1e6)) if job_step_ns > 0 else False


def analyze_job(summaries: Sequence[RankSummary], *, consistency_share: float = 0.5) -> JobAnalysis:
    """The job analysis of the given per-rank summaries (see the module docstring)."""
    ranks, notes = resolve_ranks(summaries)
    m, pg_labels, match_notes = match_collectives(ranks)
    notes += match_notes
    common = _common_steps(ranks)
    if len(ranks) and common.size == 0:
        notes.append("the ranks share no step number: per-step comparisons are unavailable")
    t = _tables(ranks, common, m)
    R, S = len(ranks), max(common.size, 1)
    mstep = _match_steps(m)
    in_common = np.isin(mstep, common) if common.size else np.ones(mstep.size, bool)
    caused = np.bincount(m.last_rank_pos[in_common], weights=m.caused_wait_ns[in_common], minlength=R) / S
    saving = np.bincount(m.last_rank_pos[in_common], weights=m.saving_ns[in_common], minlength=R) / S
    late = m.caused_wait_ns > 0  # a tie (nobody waited) makes no one the last arrival
    last_count = np.bincount(m.last_rank_pos[late], minlength=R).astype(np.int64)
    step_mean = per_rank_mean(t.step_ns)
    job_step = float(np.nanmedian(step_mean)) if R and not np.all(np.isnan(step_mean)) else 0.0
    clock = _clock_aligned(m, job_step)
    by_step = _caused_by_step(m, mstep, common, R)
    pos, consistency, attr = None, None, None
    last_steps, sd, low = None, None, None
    if R >= 2 and caused.sum() > 0:
        cand = int(np.argmax(caused))
        consistency = float(caused[cand] / caused.sum())
        waited = per_rank_mean(t.waiting_ns)
        if consistency >= consistency_share and waited[cand] <= float(np.nanmedian(waited)):
            pos = cand
            attr = attribute(t, cand, clock_aligned=clock, activities=[s.activities for s in ranks])
            attr["what_if"] = what_if(job_step, float(saving[cand]))
            others = np.delete(by_step, cand, axis=0).max(axis=0, initial=0.0)
            last_steps = int(np.sum((by_step[cand] > others) & (by_step[cand] > 0))) if common.size else None
            sd, low = wait_floor(by_step[cand])
    pipe = pipeline_model(ranks, t, job_step)
    pipe_attr = None
    if pipe is not None and pipe["straggler_stage_pos"] is not None:
        pipe_attr = attribute(
            t, pipe["straggler_stage_pos"], clock_aligned=clock, activities=[s.activities for s in ranks]
        )
    return JobAnalysis(
        pipeline=pipe,
        pipeline_attribution=pipe_attr,
        purposes=purposes_of_job(ranks, job_step, m),
        device_name=next((s.device_name for s in ranks if s.device_name), None),
        ranks=tuple(int(s.rank) for s in ranks if s.rank is not None),
        labels=tuple(s.label for s in ranks),
        notes=tuple(notes),
        pg_labels=tuple(pg_labels),
        steps=common,
        tables=t,
        matched=m,
        caused_wait_ns=caused,
        last_count=last_count,
        saving_ns=saving,
        clock_aligned=clock,
        job_step_ns=job_step,
        straggler_pos=pos,
        straggler_consistency_share=consistency,
        attribution=attr,
        by_kind=busbw_by_kind(m, R),
        kernel_ns_by_kind=_kernel_ns_by_kind(ranks),
        top_finding_ids=tuple(s.top_finding_ids for s in ranks),
        caused_wait_by_step_ns=by_step,
        straggler_last_steps=last_steps,
        straggler_wait_sd_ns=sd,
        straggler_wait_low_ns=low,
        profiler_overhead_ns=np.array(
            [np.nan if s.profiler_overhead_ns is None else s.profiler_overhead_ns for s in ranks], np.float64
        ),
        overhead_basis=tuple(s.overhead_basis for s in ranks),
    )


def _kernel_ns_by_kind(ranks: Sequence[RankSummary]) -> I64:
    out = np.zeros(len(KINDS), np.int64)
    for s in ranks:
        c = s.collectives
        out += np.bincount(c["kind"], weights=c["end_ns"] - c["start_ns"], minlength=len(KINDS)).astype(np.int64)
    return out
