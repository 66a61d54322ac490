"""Registry entries of the intermittent straggler (``jobs/intermittent.py``, #25): its spike steps and the noise
they are measured against (``registry.py`` explains the fields)."""

from __future__ import annotations

from tb_llmdiag.metrics.registry_data import FLAG, INDEX, LOWER, NEITHER, NS, SHARE, Entry

SPIKE_METRICS: tuple[Entry, ...] = (
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
