"""Communication by purpose over a job's ranks (#33): per purpose (``metrics.comm.purpose.PURPOSES``), from the
ranks' summaries: collectives and bytes per step (the median rank's), exposed time per step and its share of the
job step (the median rank's), the median message and the largest group size stated; and from the collectives
matched across ranks (``jobs.matching``), ``transfer_busbw_bytes_per_s``: their known bytes / their transfer time
(the last arrival's duration: no waiting in it) x the nccl-tests factor of the purpose's leading kind (group size
from the args, else the job's ranks); null without a matched collective of known size.

``link_metrics``: the link of the ranks' GPU (``metrics.comm.purpose.link_of`` on the first rank's device name)
and, for the purpose with the most exposed time among those with a median message of at least
``BANDWIDTH_BOUND_BYTES`` and a transfer bandwidth, that bandwidth against the link (``link_busbw_ratio``) and
against a 400 Gb/s NIC (``link_network_ratio``), its exposed share and median message; null without one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tb_llmdiag.jobs.matching import Matched
from tb_llmdiag.jobs.rank_summary import RankSummary
from tb_llmdiag.metrics.comm.collectives import KINDS, bus_bandwidth_bytes_per_s
from tb_llmdiag.metrics.comm.purpose import BANDWIDTH_BOUND_BYTES, NETWORK_BYTES_PER_S, PURPOSES, link_of
from tb_llmdiag.metrics.entry import BYTES, COUNT, HIGHER, LOWER, NEITHER, NS, PER_STEP, RATIO, SHARE, TEXT, Entry


def transfer_busbw(m: Matched, code: int, n_ranks: int) -> float | None:
    """The purpose's bus bandwidth over its matched collectives of known size (module docstring)."""
    known = (m.purpose == code) & (m.bytes >= 0) & (m.transfer_ns > 0)
    if not known.any():
        return None
    by_kind = np.bincount(m.kind[known], weights=m.transfer_ns[known], minlength=len(KINDS))
    gs = m.group_size[known]
    group = int(gs.max()) if gs.max() > 0 else n_ranks
    return bus_bandwidth_bytes_per_s(
        KINDS[int(np.argmax(by_kind))], int(m.bytes[known].sum()), int(m.transfer_ns[known].sum()), group
    )


def purposes_of_job(ranks: Sequence[RankSummary], job_step_ns: float, matched: Matched) -> list[dict[str, Any]]:
    """One row per purpose present on some rank, most exposed time first."""
    rows = []
    for code, name in enumerate(PURPOSES):
        count, nbytes, exposed, sizes, group = [], [], [], [], 0
        for s in ranks:
            c = s.collectives
            m = (c["purpose"] == code) & (c["step"] >= 0)
            steps = max(s.n_steps, 1)
            count.append(float(m.sum()) / steps)
            known = m & (c["bytes"] >= 0)
            nbytes.append(float(c["bytes"][known].sum()) / steps)
            exposed.append(float(c["exposed_ns"][m].sum()) / steps)
            sizes.append(c["bytes"][known])
            gs = c["group_size"][m]
            group = max(group, int(gs.max()) if gs.size else 0)
        if not any(count):
            continue
        allsizes = np.concatenate(sizes) if sizes else np.zeros(0)
        exp = float(np.median(exposed))
        rows.append(
            {
                "purpose": name,
                "count_per_step": float(np.median(count)),
                "step_bytes": float(np.median(nbytes)),
                "median_bytes": int(np.median(allsizes)) if allsizes.size else None,
                "exposed_ns_per_step": exp,
                "exposed_share": exp / job_step_ns if job_step_ns > 0 else None,
                "group_size": group or None,
                "transfer_busbw_bytes_per_s": transfer_busbw(matched, code, len(ranks)),
            }
        )
    return sorted(rows, key=lambda r: -r["exposed_ns_per_step"])


def link_metrics(rows: list[dict[str, Any]], device_name: str | None) -> dict[str, Any]:
    """The job's link figures (module docstring), as ``link_*`` job metrics."""
    link, bw = link_of(device_name)
    big = [
        r
        for r in rows
        if r["transfer_busbw_bytes_per_s"] is not None and (r["median_bytes"] or 0) >= BANDWIDTH_BOUND_BYTES
    ]
    top = max(big, key=lambda r: r["exposed_ns_per_step"]) if big else None
    busbw = top["transfer_busbw_bytes_per_s"] if top else None
    return {
        "link": link,
        "link_bytes_per_s": bw,
        "link_purpose": top["purpose"] if top else None,
        "link_busbw_bytes_per_s": busbw,
        "link_busbw_ratio": busbw / bw if busbw is not None and bw else None,
        "link_network_ratio": busbw / NETWORK_BYTES_PER_S if busbw is not None else None,
        "link_exposed_share": top["exposed_share"] if top else None,
        "link_median_bytes": top["median_bytes"] if top else None,
    }


# The registry's entries of the job's purposes (``purposes_of_job``) and of its link (``link_metrics``): one row per
# key (metrics/entry.py); jobs/report.py collects the job level's in registry order (``JOB_ENTRIES``)
_PP = "per purpose over the ranks (`jobs.purposes`; purposes: `metrics.comm.purpose`)"
ENTRIES: tuple[Entry, ...] = (
    ("job.purposes[].purpose", TEXT, NEITHER, 0, "purpose", _PP),
    ("job.purposes[].count_per_step", PER_STEP, NEITHER, 0.02, "per step", "collectives per step, the median rank's; " + _PP),
    ("job.purposes[].step_bytes", BYTES, NEITHER, 0.02, "bytes per step", "known bytes per step, the median rank's; " + _PP),
    ("job.purposes[].median_bytes", BYTES, NEITHER, 0.02, "median message", "median known message over all ranks; " + _PP),
    ("job.purposes[].exposed_ns_per_step", NS, LOWER, 0.05, "exposed per step",
     "per-collective time no compute of its rank overlaps, summed per step, the median rank's; " + _PP),
    ("job.purposes[].exposed_share", SHARE, LOWER, 0.1, "exposed share", "exposed_ns_per_step / job_step_ns"),
    ("job.purposes[].group_size", COUNT, NEITHER, 0, "group size", "largest group size stated; " + _PP),
    ("job.top_purpose", TEXT, NEITHER, 0, "top purpose", "the purpose with the most exposed time per step"),
    ("job.top_purpose_exposed_share", SHARE, LOWER, 0.1, "top purpose exposed share", "its exposed_share"),
)  # fmt: skip

_LINK = "the link (`jobs.purposes.link_metrics`; the table: `metrics.comm.purpose.LINKS`)"
LINK_ENTRIES: tuple[Entry, ...] = (
    ("job.purposes[].transfer_busbw_bytes_per_s", "bytes_per_s", HIGHER, 0.1, "transfer bus bandwidth",
     "known bytes of the purpose's matched collectives / their transfer time (no waiting) x the nccl-tests factor"),
    ("job.link", TEXT, NEITHER, 0, "link", "the fastest link the GPUs' peers on one host can share; " + _LINK),
    ("job.link_bytes_per_s", "bytes_per_s", NEITHER, 0, "link bandwidth", "its per-GPU bandwidth in one direction"),
    ("job.link_purpose", TEXT, NEITHER, 0, "purpose on the link",
     "the purpose with the most exposed time among those with a median message of at least 1 MiB"),
    ("job.link_busbw_bytes_per_s", "bytes_per_s", HIGHER, 0.1, "transfer bus bandwidth",
     "that purpose's transfer_busbw_bytes_per_s"),
    ("job.link_busbw_ratio", RATIO, HIGHER, 0.1, "vs the link", "link_busbw_bytes_per_s / link_bytes_per_s"),
    ("job.link_network_ratio", RATIO, HIGHER, 0.1, "vs a 400 Gb/s NIC", "link_busbw_bytes_per_s / 50 GB/s"),
    ("job.link_exposed_share", SHARE, LOWER, 0.1, "exposed share", "that purpose's exposed share of the job step"),
    ("job.link_median_bytes", BYTES, NEITHER, 0.1, "median message", "that purpose's median message size"),
)  # fmt: skip
