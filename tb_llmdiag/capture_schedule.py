"""The profiler schedule of `tb_llmdiag.capture`: which steps are skipped, warmed up and recorded.

Pure Python (no torch): `ProfileSchedule` holds `torch.profiler.schedule`'s arguments and answers each step's phase.
"""

from __future__ import annotations

import dataclasses

DEFAULT_SKIP_FIRST = 10
"""Steps skipped before the profiler starts, in steady-state mode. The capture helper times them: they are the job as
it runs before any profiler (the steps after a window can run slower: docs/captures_5.md); the report leaves the first
out and measures the profiler's cost against the other 9."""

DEFAULT_WARMUP = 1
"""Profiler warm-up steps (profiler on, events dropped) before the active window, in steady-state mode."""

DEFAULT_ACTIVE = 3


@dataclasses.dataclass(frozen=True)
class ProfileSchedule:
    """The arguments of `torch.profiler.schedule`, with the same meaning.

    Step k (0-based, counted by `prof.step()` calls) is: skipped while k < skip_first; then, in each
    cycle of `wait + warmup + active` steps, idle for `wait`, warming up for `warmup`, recorded for
    `active`. After `repeat` cycles (repeat >= 1) nothing more is recorded.
    """

    skip_first: int = DEFAULT_SKIP_FIRST
    wait: int = 0
    warmup: int = DEFAULT_WARMUP
    active: int = DEFAULT_ACTIVE
    repeat: int = 1

    def __post_init__(self) -> None:
        for field in ("skip_first", "wait", "warmup"):
            if getattr(self, field) < 0:
                raise ValueError(f"{field} must be >= 0, got {getattr(self, field)}")
        if self.active < 1:
            raise ValueError(f"active must be >= 1, got {self.active}")
        if self.repeat < 1:
            raise ValueError(f"repeat must be >= 1 (0 would profile forever), got {self.repeat}")

    @property
    def cycle_steps(self) -> int:
        return self.wait + self.warmup + self.active

    @property
    def total_steps(self) -> int:
        """Number of `prof.step()` calls after which every active window has been written."""
        return self.skip_first + self.cycle_steps * self.repeat

    def phase(self, step: int) -> str:
        """'skip', 'wait', 'warmup', 'active' or 'done' for step `step` (mirrors torch's schedule_fn)."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if step < self.skip_first:
            return "skip"
        k = step - self.skip_first
        if k // self.cycle_steps >= self.repeat:
            return "done"
        k %= self.cycle_steps
        if k < self.wait:
            return "wait"
        if k < self.wait + self.warmup:
            return "warmup"
        return "active"

    def active_steps(self) -> tuple[int, ...]:
        """The recorded step indices, in order (they become `ProfilerStep#<index>` in the trace)."""
        return tuple(s for s in range(self.total_steps) if self.phase(s) == "active")

    def torch_kwargs(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def plan_schedule(
    *,
    from_step0: bool = False,
    active: int = DEFAULT_ACTIVE,
    skip_first: int | None = None,
    wait: int = 0,
    warmup: int | None = None,
    repeat: int = 1,
) -> ProfileSchedule:
    """Steady state by default (skip `DEFAULT_SKIP_FIRST`, warm up 1); `from_step0` records from the first step."""
    if from_step0:
        if skip_first or wait or warmup:
            raise ValueError("from_step0=True records from step 0: leave skip_first, wait and warmup at 0")
        return ProfileSchedule(skip_first=0, wait=0, warmup=0, active=active, repeat=repeat)
    return ProfileSchedule(
        skip_first=DEFAULT_SKIP_FIRST if skip_first is None else skip_first,
        wait=wait,
        warmup=DEFAULT_WARMUP if warmup is None else warmup,
        active=active,
        repeat=repeat,
    )
