"""Collectives matched across the ranks of a job: which rows are one collective, its transfer time, who
arrived last, and each member's waiting (the definitions: ``jobs.cross_rank``'s docstring, "Matching" and
"For a matched collective")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.jobs.rank_summary import RankSummary
from tb_llmdiag.metrics.comm.collectives import KINDS, bus_bandwidth_bytes_per_s
from tb_llmdiag.metrics.comm.purpose import PURPOSE_CODE

I64 = NDArray[np.int64]


@dataclass(frozen=True)
class Matched:
    """One row per matched collective (``member_*``: one row per (collective, rank) in it)."""

    kind: NDArray[np.uint8]
    pg: NDArray[np.int64]  # job-wide process-group code (index into JobAnalysis.pg_labels)
    step: I64  # step number, -1 when matched by sequence number
    members: I64
    transfer_ns: I64
    last_rank_pos: I64  # position (in JobAnalysis.ranks) of the last arrival
    caused_wait_ns: NDArray[np.float64]
    saving_ns: I64
    bytes: I64  # -1 unknown
    group_size: I64
    member_match: I64 = field(repr=False)  # per member row: its match row
    member_rank_pos: I64 = field(repr=False)
    member_waiting_ns: I64 = field(repr=False)
    member_step: I64 = field(repr=False)  # the member's step number (per its own rank)
    member_end_ns: I64 = field(repr=False)  # absolute end time on the member's clock
    member_exposed_ns: I64 = field(repr=False)  # the member's collective time no compute of its own overlaps
    #: per match: its purpose (``metrics.comm.purpose.PURPOSES`` code), as the last arrival's rank classified it
    purpose: I64 = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)


def _flatten(ranks: Sequence[RankSummary]) -> tuple[dict[str, NDArray[Any]], list[str]]:
    """All ranks' collectives as flat columns, with a job-wide process-group code and step numbers."""
    pg_codes: dict[str, int] = {}
    cols: dict[str, list[NDArray[Any]]] = {
        k: []
        for k in ("rank_pos", "kind", "start", "dur", "bytes", "group_size", "pg", "seq", "step", "exposed", "purpose")
    }
    for pos, s in enumerate(ranks):
        # pipeline send/recv are one rank waiting for one other (the schedule's dependency): not matched as
        # collectives whose members should arrive together (``jobs.pipeline`` reads them)
        keep = s.collectives["purpose"] != PURPOSE_CODE["pipeline"]
        c = {k: v[keep] for k, v in s.collectives.items()}
        n = int(c["kind"].shape[0])
        local = np.array(
            [pg_codes.setdefault(name, len(pg_codes)) for name in s.pg_names]
            + [pg_codes.setdefault("", len(pg_codes))],
            dtype=np.int64,
        )
        pid = c["pg_id"].astype(np.int64)
        step_no = s.steps["index"]
        cols["rank_pos"].append(np.full(n, pos, np.int64))
        cols["kind"].append(c["kind"])
        cols["start"].append(c["start_ns"])
        cols["dur"].append(c["end_ns"] - c["start_ns"])
        cols["bytes"].append(c["bytes"].astype(np.int64))
        cols["group_size"].append(c["group_size"].astype(np.int64))
        cols["pg"].append(local[np.where((pid >= 0) & (pid < len(s.pg_names)), pid, len(s.pg_names))])
        cols["seq"].append(c["seq"])
        cols["exposed"].append(c["exposed_ns"])
        cols["purpose"].append(c["purpose"].astype(np.int64))
        st = c["step"].astype(np.int64)
        cols["step"].append(
            np.where(st >= 0, step_no[np.clip(st, 0, max(step_no.size - 1, 0))] if step_no.size else -1, -1)
        )
    flat = {k: (np.concatenate(v) if v else np.zeros(0, np.int64)) for k, v in cols.items()}
    labels = [""] * len(pg_codes)
    for name, code in pg_codes.items():
        labels[code] = name
    return flat, labels


def group_starts(*keys: I64) -> NDArray[np.bool_]:
    """For rows sorted by ``keys``, True where a new combination of keys begins."""
    n = keys[0].size
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for k in keys:
            new[1:] |= k[1:] != k[:-1]
    return new


def match_collectives(ranks: Sequence[RankSummary]) -> tuple[Matched, list[str], list[str]]:
    """Match the ranks' collectives (see the module docstring); returns the matches, the job's process-group
    labels and notes on what could not be matched."""
    f, pg_labels = _flatten(ranks)
    notes: list[str] = []
    n = f["kind"].size
    # groups whose every collective carries a sequence number are matched by it, the rest by step + order
    pg_all_seq = np.ones(len(pg_labels), dtype=bool)
    if n:
        np.logical_and.at(pg_all_seq, f["pg"], f["seq"] >= 0)
    by_seq = pg_all_seq[f["pg"]] if n else np.zeros(0, bool)
    step = np.where(by_seq, -1, f["step"])
    kind = f["kind"].astype(np.int64)
    order = np.lexsort((f["start"], kind, step, f["pg"], f["rank_pos"]))
    new = group_starts(f["rank_pos"][order], f["pg"][order], step[order], kind[order])
    first = np.maximum.accumulate(np.where(new, np.arange(n), 0)) if n else np.zeros(0, np.int64)
    ordinal = np.empty(n, np.int64)
    ordinal[order] = np.arange(n) - first
    ordinal = np.where(by_seq, f["seq"], ordinal)
    # one match per (pg, step, kind, ordinal); rows sorted by match, then by duration (the last arrival first)
    order = np.lexsort((-f["start"], f["dur"], ordinal, kind, step, f["pg"]))
    new = group_starts(f["pg"][order], step[order], kind[order], ordinal[order])
    match_of_sorted = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    members = np.diff(np.append(starts, n)).astype(np.int64)
    pg_m = f["pg"][order][starts] if n else np.zeros(0, np.int64)
    # ranks per group: how many distinct ranks have collectives in it
    pr = np.unique(f["pg"] * (len(ranks) + 1) + f["rank_pos"]) if n else np.zeros(0, np.int64)
    ranks_in_pg = np.bincount(pr // (len(ranks) + 1), minlength=len(pg_labels))
    kind_sorted = f["kind"][order]
    kinds_agree = np.ones(starts.size, dtype=bool)
    if n:
        np.logical_and.at(kinds_agree, match_of_sorted, kind_sorted == kind_sorted[starts][match_of_sorted])
    ok = (members == ranks_in_pg[pg_m]) & (members >= 2) & kinds_agree
    if (~ok).any() and len(ranks) > 1:
        partial = int((kinds_agree & (members < ranks_in_pg[pg_m])).sum())
        if partial:
            notes.append(
                f"{partial} collective(s) were not seen on every rank of their group (capture windows "
                "or step numbers differ): left out of waiting and straggler figures"
            )
        if (~kinds_agree).sum():
            notes.append(
                f"{int((~kinds_agree).sum())} collective position(s) have different kinds on different "
                "ranks (the order of collectives differs): left out"
            )
    dur_s = f["dur"][order]
    transfer = dur_s[starts] if n else np.zeros(0, np.int64)
    waiting = dur_s - transfer[match_of_sorted] if n else np.zeros(0, np.int64)
    # waiting no compute of the rank's own hides (its exposed time beyond the transfer tail): what waiting costs
    exposed_wait = np.clip(f["exposed"][order] - transfer[match_of_sorted], 0, waiting) if n else waiting
    sum_wait = np.bincount(match_of_sorted, weights=exposed_wait, minlength=starts.size) if n else np.zeros(0)
    max_wait = np.maximum.reduceat(exposed_wait, starts) if n else np.zeros(0, np.int64)
    second = np.where(members >= 2, dur_s[np.minimum(starts + 1, max(n - 1, 0))] if n else 0, transfer)
    keep_member = ok[match_of_sorted] if n else np.zeros(0, bool)
    remap = np.cumsum(ok) - 1
    bytes_s = f["bytes"][order]
    m = Matched(
        kind=kind_sorted[starts][ok],
        pg=pg_m[ok],
        step=step[order][starts][ok],
        members=members[ok],
        transfer_ns=transfer[ok],
        last_rank_pos=f["rank_pos"][order][starts][ok],
        caused_wait_ns=(sum_wait / np.maximum(members - 1, 1))[ok],
        saving_ns=np.minimum(second - transfer, max_wait)[ok],
        bytes=np.maximum.reduceat(bytes_s, starts)[ok] if n else np.zeros(0, np.int64),
        group_size=np.maximum.reduceat(f["group_size"][order], starts)[ok] if n else np.zeros(0, np.int64),
        member_match=remap[match_of_sorted][keep_member],
        member_rank_pos=f["rank_pos"][order][keep_member],
        member_waiting_ns=waiting[keep_member].astype(np.int64),
        member_step=f["step"][order][keep_member],
        member_end_ns=(f["start"] + f["dur"])[order][keep_member],
        member_exposed_ns=f["exposed"][order][keep_member],
        purpose=f["purpose"][order][starts][ok] if n else np.zeros(0, np.int64),
    )
    return m, pg_labels, notes


def busbw_by_kind(m: Matched, n_ranks: int) -> list[dict[str, Any]]:
    """Per kind over matched collectives: count, transfer time, known bytes and the achieved bus bandwidth
    (known bytes / their transfer time x nccl-tests factor, group size from the args else the job's ranks)."""
    out = []
    for code in np.unique(m.kind).tolist():
        sel = m.kind == code
        known = sel & (m.bytes >= 0)
        gs = m.group_size[known]
        n = int(gs.max()) if gs.size and gs.max() > 0 else n_ranks
        out.append(
            {
                "kind": KINDS[code],
                "count": int(sel.sum()),
                "transfer_ns": int(m.transfer_ns[sel].sum()),
                "bytes": int(m.bytes[known].sum()) if known.any() else None,
                "busbw_bytes_per_s": bus_bandwidth_bytes_per_s(
                    KINDS[code], int(m.bytes[known].sum()), int(m.transfer_ns[known].sum()), n
                )
                if known.any()
                else None,
            }
        )
    return sorted(out, key=lambda r: -r["transfer_ns"])
