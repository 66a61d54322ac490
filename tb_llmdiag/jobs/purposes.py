"""Communication by purpose over a job's ranks (#33): per purpose (``metrics.comm_purpose.PURPOSES``), from the
ranks' summaries: collectives and bytes per step (the median rank's), exposed time per step and its share of the
job step (the median rank's), the median message and the largest group size stated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tb_llmdiag.jobs.rank_summary import RankSummary
from tb_llmdiag.metrics.comm_purpose import PURPOSES


def purposes_of_job(ranks: Sequence[RankSummary], job_step_ns: float) -> list[dict[str, Any]]:
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
            }
        )
    return sorted(rows, key=lambda r: -r["exposed_ns_per_step"])
