"""#25: an intermittent straggler (one rank slow in one or two steps by a lot) is found by its spike steps, while
waits small against the step or the noise stay within the noise floor. Per-step waits as jobs.analysis measures
them on the real captures (printed from their job analyses; tests/jobs/test_captures.py reads the traces)."""

from __future__ import annotations

import numpy as np
import pytest

from tb_llmdiag.jobs.intermittent import spikes

MS = 1e6
STEPS = np.arange(4, 10)


def _steps(ms: float, shape: tuple[int, int] = (2, 6)) -> np.ndarray:
    return np.full(shape, ms * MS)


def test_two_spike_steps_of_400_ms_are_an_intermittent_straggler() -> None:
    # ddp_intermittent_straggler: rank 1 tokenises for 400 ms in steps 5 and 8; rank 0 waits 396 ms in each
    wait = np.array([0.0, 396.11, 0.0, 0.0, 395.89, 0.04]) * MS
    step = np.array([[32.8, 427.8, 33.5, 33.0, 428.0, 26.5], [433.2, 32.2, 29.2, 431.6, 27.9, 26.2]]) * MS
    got = spikes(wait, step, STEPS, 0.05)
    assert got["intermittent"] and got["spike_steps"] == [5, 8]
    assert got["spike_wait_ns"] == [396.11 * MS, 395.89 * MS]
    typical = float(np.median(step))  # 33.25 ms: the steps without the spikes
    assert got["typical_step_ns"] == typical and got["spike_share"] == pytest.approx(792.0 * MS / (6 * typical))


@pytest.mark.parametrize(("name", "wait_ms", "step_ms"), [
    # the noise-only twin: rank 0 late in every step by 4-12 ms of a 34 ms step (no step by half a step)
    ("ddp_intermittent_noise", [3.62, 5.72, 9.7, 9.83, 10.87, 12.12], 34.2),
    # ddp_balanced: rank 1's waits, 0 to 6.2 ms of a 26 ms step
    ("ddp_balanced", [0.0, 1.57, 1.27, 6.21, 5.26, 0.0], 26.0),
    # ddp_straggler: a consistent straggler (the rule's own case), never a spike
    ("ddp_straggler", [5.51, 5.23, 7.39, 6.4, 11.67, 6.0], 31.5),
])
def test_waits_small_against_the_step_or_the_noise_are_no_spike(name: str, wait_ms: list, step_ms: float) -> None:
    got = spikes(np.array(wait_ms) * MS, _steps(step_ms), STEPS, 0.05)
    assert not got["intermittent"] and got["spike_steps"] == [], name


def test_a_spike_in_most_steps_is_a_consistent_straggler_and_one_below_the_threshold_does_not_count() -> None:
    every = spikes(np.array([0, 300, 300, 300, 300, 0.0]) * MS, _steps(30), STEPS, 0.05)
    assert every["spike_steps"] == [] or not every["intermittent"]  # 4 of 6 steps: the rule's floors decide
    # a 20 ms spike in 1 of 60 steps of 30 ms: 1.1 % of the job's time, below the 5 % threshold
    wait = np.zeros(60)
    wait[7] = 20 * MS
    small = spikes(wait, _steps(30, (2, 60)), np.arange(60), 0.05)
    assert small["spike_steps"] == [7] and not small["intermittent"]
    assert spikes(np.array([5.0 * MS]), _steps(30, (2, 1)), np.arange(1), 0.05)["intermittent"] is False
