"""RankSummary: the compact per-rank record the job level reads (never the trace itself).

Contract:
- Built once per rank from its Trace and steps (``summarize_rank``); holds numpy columns only, per step
  (``CommBreakdown`` of ``metrics.comm.communication``) and per collective (kind, start, end, bytes, group size, process group,
  sequence number, step). Times are absolute ns (``Trace.origin_ns`` + ts), so ranks that share a clock
  compare directly; the job analysis itself needs only durations (see ``jobs.cross_rank``).
- ``to_dict`` / ``from_dict`` round-trip through JSON-safe dicts (lists of ints, strings); ``nbytes`` is the
  size of its columns: 8 steps and 200 collectives take ~8 KB (``bench/job_speed.py`` prints the figure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.metrics.comm.collectives import KINDS, Collectives, find_collectives
from tb_llmdiag.metrics.comm.communication import (
    StepWindows,
    comm_breakdown,
    exposed_per_collective,
    launch_step,
    window_of,
    windows,
)
from tb_llmdiag.metrics.comm.purpose import PURPOSE_CODE, classify_purposes
from tb_llmdiag.metrics.context import RowCache
from tb_llmdiag.metrics.steps.windows import Steps
from tb_llmdiag.model import Trace

SUMMARY_SCHEMA = 1

#: Per-step columns (ns unless named otherwise; -1 = unknown).
STEP_COLUMNS: dict[str, type] = {
    "index": np.int64,
    "host_start_ns": np.int64,
    "start_ns": np.int64,
    "end_ns": np.int64,
    "collective_ns": np.int64,
    "compute_ns": np.int64,
    "exposed_ns": np.int64,
    "idle_ns": np.int64,
    "dataloader_ns": np.int64,
    "sync_ns": np.int64,
    "launch_ns": np.int64,
    "sync_in_collective_ns": np.int64,
    "tokens": np.int64,
}
#: Per-collective columns (``kind`` indexes ``collectives.KINDS``, ``pg_id`` the summary's ``pg_names``,
#: ``step`` the summary's step rows; -1 = unknown or outside every step; ``exposed_ns``: the part of the
#: collective no compute kernel overlaps; ``purpose`` indexes ``comm_purpose.PURPOSES``).
COLLECTIVE_COLUMNS: dict[str, type] = {
    "kind": np.uint8,
    "start_ns": np.int64,
    "end_ns": np.int64,
    "bytes": np.int64,
    "group_size": np.int32,
    "pg_id": np.int32,
    "seq": np.int64,
    "step": np.int32,
    "exposed_ns": np.int64,
    "purpose": np.uint8,
}


@dataclass(frozen=True)
class RankSummary:
    """One rank of a job, compactly. ``steps`` and ``collectives`` map column names to equal-length arrays."""

    rank: int | None
    rank_source: str  # "distributed_info" | "file_name" | "unknown"
    label: str  # where it came from (file or worker name), for messages
    world_size: int | None
    steps: dict[str, NDArray[Any]]
    collectives: dict[str, NDArray[Any]]
    pg_names: tuple[str, ...] = ()
    top_finding_ids: tuple[str, ...] = ()
    #: what the rank's host and GPU do (its report's ``attribution``): (``"idle"`` | ``"busy"``, chain, ns per
    #: step): GPU idle time inside the activity, or GPU time launched from it
    activities: tuple[tuple[str, str, float], ...] = ()
    #: the profiler's own cost in the rank's profiled step (its report's ``capture.profiler_overhead_ns``, None when
    #: not estimated) and how it was estimated (``capture.overhead_basis``: unprofiled_steps, model or none)
    profiler_overhead_ns: float | None = None
    overhead_basis: str = "none"
    #: the rank's GPU as the trace names it (``DeviceInfo.name``; None when the trace lists none): the link table's key
    device_name: str | None = None

    @property
    def n_steps(self) -> int:
        return int(self.steps["start_ns"].shape[0])

    @property
    def n_collectives(self) -> int:
        return int(self.collectives["kind"].shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of its columns plus its strings (what 1,000 of them cost in memory, roughly)."""
        cols = sum(a.nbytes for a in self.steps.values()) + sum(a.nbytes for a in self.collectives.values())
        strings = self.pg_names + self.top_finding_ids + tuple(a[1] for a in self.activities)
        return int(cols + sum(len(s) for s in strings) + 16 * len(self.activities) + len(self.label) + 64)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: lists of ints, strings, null."""
        return {
            "schema": SUMMARY_SCHEMA,
            "rank": self.rank,
            "rank_source": self.rank_source,
            "label": self.label,
            "world_size": self.world_size,
            "kinds": list(KINDS),
            "pg_names": list(self.pg_names),
            "top_finding_ids": list(self.top_finding_ids),
            "activities": [list(a) for a in self.activities],
            "profiler_overhead_ns": self.profiler_overhead_ns,
            "overhead_basis": self.overhead_basis,
            "device_name": self.device_name,
            "steps": {k: v.tolist() for k, v in self.steps.items()},
            "collectives": {k: v.tolist() for k, v in self.collectives.items()},
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> RankSummary:
        """Inverse of ``to_dict``; kind codes are remapped if the writer's KINDS differ from ours."""
        if d.get("schema") != SUMMARY_SCHEMA:
            raise ValueError(f"rank summary schema {d.get('schema')!r} is not {SUMMARY_SCHEMA}")
        steps: dict[str, np.ndarray] = {k: np.asarray(d["steps"][k], dtype=t) for k, t in STEP_COLUMNS.items()}
        n = len(d["collectives"]["kind"])
        other = [PURPOSE_CODE["other"]] * n  # a summary written before purposes: every collective "other"
        coll: dict[str, np.ndarray] = {
            k: np.asarray(d["collectives"].get(k, other), dtype=t) for k, t in COLLECTIVE_COLUMNS.items()
        }
        theirs = list(d.get("kinds", KINDS))
        if theirs != list(KINDS):
            remap = np.array(
                [KINDS.index(k) if k in KINDS else KINDS.index("other_collective") for k in theirs], dtype=np.uint8
            )
            coll["kind"] = remap[coll["kind"]] if coll["kind"].size else coll["kind"]
        return RankSummary(
            rank=d["rank"],
            rank_source=d["rank_source"],
            label=d["label"],
            world_size=d["world_size"],
            steps=steps,
            collectives=coll,
            pg_names=tuple(d.get("pg_names", ())),
            top_finding_ids=tuple(d.get("top_finding_ids", ())),
            activities=tuple((str(k), str(c), float(v)) for k, c, v in d.get("activities", ())),
            profiler_overhead_ns=_number(d.get("profiler_overhead_ns")),
            overhead_basis=str(d.get("overhead_basis") or "none"),
            device_name=d["device_name"] if isinstance(d.get("device_name"), str) else None,
        )

    def replace(self, **changes: Any) -> RankSummary:
        vals = {f.name: getattr(self, f.name) for f in fields(self)}
        vals.update(changes)
        return RankSummary(**vals)


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) else None


def _collective_step(
    trace: Trace, coll: Collectives, w: StepWindows, has_steps: bool, cache: RowCache | None
) -> NDArray[np.int32]:
    """The step that launched each collective (-1: launched outside every step); by its start's device window
    when the launch is unknown (or when the trace has no steps: the one window over all device activity)."""
    by_time = window_of(coll.start_ns, w.start_ns, w.end_ns)
    if not has_steps:
        return by_time.astype(np.int32)
    by_launch = launch_step(trace, coll.row, w.host_start_ns, w.host_end_ns, cache)
    return np.where(by_launch == -1, by_time, np.maximum(by_launch, -1)).astype(np.int32)


def summarize_rank(
    trace: Trace,
    steps: Steps,
    *,
    label: str,
    rank: int | None = None,
    rank_source: str | None = None,
    top_finding_ids: Sequence[str] = (),
    collectives: Collectives | None = None,
    activities: Sequence[tuple[str, str, float]] = (),
    cache: RowCache | None = None,
) -> RankSummary:
    """The RankSummary of one rank. ``rank`` defaults to the trace's ``distributedInfo`` rank. ``cache``: the
    analysis's (``Context.cache``; with its ``collectives``), whose step windows and breakdown the ``communication``
    topic computed: they are read, not computed again."""
    coll = collectives if collectives is not None else find_collectives(trace)
    w = windows(trace, steps, cache)
    ws, we = w.start_ns, w.end_ns
    b = comm_breakdown(trace, coll, ws, we, w.host_start_ns, w.host_end_ns, cache)
    origin = int(trace.origin_ns)
    index = steps.index.astype(np.int64) if len(steps) else np.arange(ws.size, dtype=np.int64)
    step_cols = {
        "index": index,
        "host_start_ns": w.host_start_ns + origin,
        "start_ns": ws + origin,
        "end_ns": we + origin,
    }
    for name in STEP_COLUMNS:
        if name not in step_cols:
            step_cols[name] = np.asarray(getattr(b, name), dtype=STEP_COLUMNS[name])
    coll_cols: dict[str, np.ndarray] = {
        "kind": coll.kind,
        "start_ns": coll.start_ns + origin,
        "end_ns": coll.end_ns + origin,
        "bytes": coll.bytes,
        "group_size": coll.group_size,
        "pg_id": coll.pg_id,
        "seq": coll.seq,
        "step": _collective_step(trace, coll, w, len(steps) > 0, cache),
        "exposed_ns": exposed_per_collective(trace, coll, cache),
        "purpose": classify_purposes(trace, coll, steps, cache).purpose,
    }
    coll_cols = {k: np.ascontiguousarray(v, dtype=COLLECTIVE_COLUMNS[k]) for k, v in coll_cols.items()}
    dist = trace.distributed
    if rank is None and dist is not None and dist.rank is not None:
        rank, rank_source = int(dist.rank), "distributed_info"
    return RankSummary(
        device_name=trace.devices[0].name if trace.devices else None,
        rank=rank,
        rank_source=rank_source or ("unknown" if rank is None else "file_name"),
        label=label,
        world_size=dist.world_size if dist is not None else None,
        steps=step_cols,
        collectives=coll_cols,
        pg_names=coll.pg_names,
        top_finding_ids=tuple(top_finding_ids),
        activities=tuple(activities),
    )


def rank_activities(metrics: dict[str, Any]) -> list[tuple[str, str, float]]:
    """What a rank's host and GPU do, per step, from its attribution (``RankSummary.activities``), and its user
    annotations' host time (``annotation``: the ``annotations`` topic's top ones, not the collectives' own)."""
    att = metrics.get("attribution") or {}
    steps = max(int((metrics.get("steps") or {}).get("count") or 1), 1)
    idle = [("idle", n["chain_text"], n["idle_ns"] / steps) for n in att.get("nodes") or []]
    busy = [("busy", b["chain_text"], b["busy_ns"] / steps) for b in att.get("busy") or []]
    ann = [
        ("annotation", str(a["name"]), float(a["total_ns"]) / steps)
        for a in (metrics.get("annotations") or {}).get("top") or []
        if isinstance(a.get("total_ns"), (int, float)) and not str(a.get("name", "")).startswith(("nccl:", "c10d::"))
    ]
    return idle + busy + ann


def rank_profiler(metrics: dict[str, Any]) -> dict[str, Any]:
    """The profiler's own cost in a rank's step, from its capture topic (``RankSummary.profiler_overhead_ns``)."""
    cap = metrics.get("capture") or {}
    return {
        "profiler_overhead_ns": _number(cap.get("profiler_overhead_ns")),
        "overhead_basis": str(cap.get("overhead_basis") or "none"),
    }
