"""An intermittent straggler: a rank that keeps the others waiting a lot in a few steps only (#25).

The straggler rule's floors (``jobs.findings``: waited for most in most steps, a wait beyond the step-to-step
noise at 95 % confidence) hold back a rank that is slow in one or two steps by a lot: its wait is most of the job
step on average, but its spread over the steps is as large as the wait. Such a rank is still a straggler, with a
different fix (what it does in those steps), so it is named as *intermittent*, with its steps and their waits.

Definitions (over the common steps, from ``JobAnalysis.caused_wait_by_step_ns`` of the rank that caused the most
waiting and ``JobTables.step_ns``):
- ``typical_step_ns`` = the median over ranks and common steps of the step times: the step without the spikes.
- ``noise_ns`` = 1.4826 x the median absolute deviation of the rank's per-step caused wait (a robust standard
  deviation: the spikes, fewer than half the steps, do not move it).
- A *spike step*: its caused wait is at least ``SPIKE_STEP_SHARE`` (half) of the typical step **and** exceeds the
  rank's median per-step wait by more than ``SPIKE_SIGMAS`` (3) noise: large against the step and against the noise,
  so the noise floor still holds for waits that are small against it.
- Intermittent: at least one and at most half of the common steps spike (more: a consistent straggler, the rule's
  own case), and the spikes' waits summed over all common steps are above the straggler rule's threshold share of
  the typical step (they matter on average, not only in their steps).
``spike_steps`` (step numbers), ``spike_wait_ns`` (per spike step), ``spike_share`` (summed spike wait / (common
steps x typical step)), ``noise_ns`` and ``typical_step_ns``; all null or empty when it does not apply.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.metrics.entry import FLAG, INDEX, LOWER, NEITHER, NS, SHARE, Entry

#: a spike's wait is at least this share of the typical step ("by a lot": half a step)
SPIKE_STEP_SHARE = 0.5
#: and above the rank's median wait by more than this many robust standard deviations of its per-step wait
SPIKE_SIGMAS = 3.0
#: the MAD of a normal sample times this is its standard deviation
MAD_TO_SD = 1.4826


def spikes(
    wait_by_step_ns: NDArray[np.float64], step_ns: NDArray[np.float64], steps: NDArray[np.int64], threshold: float
) -> dict[str, Any]:
    """The intermittent-straggler metrics of one rank (module docstring). ``wait_by_step_ns``: its caused wait per
    common step; ``step_ns``: ranks x common steps; ``steps``: the common step numbers; ``threshold``: the straggler
    rule's share of the job step."""
    none: dict[str, Any] = {
        "intermittent": False,
        "spike_steps": [],
        "spike_wait_ns": [],
        "spike_share": None,
        "noise_ns": None,
        "typical_step_ns": None,
    }
    w = np.asarray(wait_by_step_ns, dtype=np.float64)
    st = np.asarray(step_ns, dtype=np.float64)
    n = int(w.size)
    if n < 2 or st.size == 0 or not np.isfinite(st).any():
        return none
    typical = float(np.nanmedian(st))
    med = float(np.median(w))
    noise = MAD_TO_SD * float(np.median(np.abs(w - med)))
    if typical <= 0:
        return none
    spike = (w >= SPIKE_STEP_SHARE * typical) & (w - med > SPIKE_SIGMAS * noise)
    k = int(spike.sum())
    share = float(w[spike].sum()) / (n * typical)
    out = {
        **none,
        "spike_steps": [int(s) for s in np.asarray(steps)[spike]],
        "spike_wait_ns": [float(x) for x in w[spike]],
        "spike_share": share if k else None,
        "noise_ns": noise,
        "typical_step_ns": typical,
    }
    out["intermittent"] = bool(1 <= k <= n // 2 and share > threshold)
    return out


# The registry's entries of the intermittent straggler (#25): its spike steps and the noise they are measured against;
# one row per key (metrics/entry.py); jobs/report.py collects the job level's in registry order (``JOB_ENTRIES``)
ENTRIES: tuple[Entry, ...] = (
    (
        "job.straggler_intermittent",
        FLAG,
        NEITHER,
        0,
        "intermittent",
        "the straggler keeps the others waiting a lot in a few steps only: 1 to half the common steps are spike steps "
        "and their waits summed are above the rule's threshold share of the typical step (jobs/intermittent.py)",
    ),
    (
        "job.straggler_spike_steps[]",
        INDEX,
        NEITHER,
        0,
        "spike steps",
        "steps whose caused wait is at least half the typical step and more than 3 robust sd above the straggler's median "
        "per-step wait",
    ),
    ("job.straggler_spike_wait_ns[]", NS, LOWER, 0.05, "spike wait", "the caused wait in each spike step"),
    (
        "job.straggler_spike_share",
        SHARE,
        LOWER,
        0.1,
        "spike share",
        "the spike steps' waits summed / (common steps x typical step); null without a spike",
    ),
    (
        "job.straggler_others_wait_noise_ns",
        NS,
        NEITHER,
        0.05,
        "wait noise",
        "1.4826 x the median absolute deviation of the straggler's per-step caused wait (a robust sd)",
    ),
    (
        "job.straggler_typical_step_ns",
        NS,
        NEITHER,
        0.05,
        "typical step",
        "the median of every rank's step times over the common steps: the step without the spikes",
    ),
)
