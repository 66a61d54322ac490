"""When the over-the-run capture (`tb_llmdiag.capture_series`) opens a window: the trigger and the budget.

Pure Python (no torch), so the rules are tested without a profiler.

- `RecentSteps` keeps the last `size` unprofiled step times (host clock, ns) and answers their median.
- `Trigger`: `confirm_steps` (2) consecutive steps that each ran more than `share` over the recent median (at least
  `min_samples` of them) open a window, at most once per `cooldown_steps` steps. One slow step alone (a collection, a
  neighbour's burst, a log flush) does not: on the device a single 83 ms step among 43 ms ones opened a window that
  held nothing and used the cooldown; a slowdown worth a window lasts (a slow shard, thrashing, a throttled GPU).
- `Budget`: the capture's cost so far against the run's wall time. A window's cost is the wall time of the span from the
  `step()` call that opens it to the end of the unprofiled steps timed after it, less that many steps at the median of
  the unprofiled steps before it (so it holds the profiled steps' extra time, the profiler's start, stop and export,
  and any slowdown of the steps right after). A window opens only while

      spent_ns + expected_ns x windows_left  <=  budget_share x horizon_ns

  `expected_ns` is the median cost of the windows so far, the first window's one-time start left out (its profiler
  start loads the tracing library: `one_time_ns`); `horizon_ns` is the run's wall time so far plus, when the number of
  steps is known, the remaining steps at the recent median (else the next window's expected cost). A periodic window
  reserves room for the periodic windows after it: `windows_left` is 1 + the periodic windows the rest of the run
  holds at the effective interval; the interval widens to the smallest multiple of `every` that fits
  (`effective_every`), and a slot that does not fit even at the widest is skipped. A triggered window needs room for
  itself only (`windows_left` = 1).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import statistics

DEFAULT_BUDGET_SHARE = 0.02
DEFAULT_RECENT_STEPS = 50
DEFAULT_TRIGGER_MIN_SAMPLES = 10
DEFAULT_TRIGGER_CONFIRM_STEPS = 2


class RecentSteps:
    """The last `size` unprofiled step times, with their median."""

    def __init__(self, size: int = DEFAULT_RECENT_STEPS) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self._steps: collections.deque[tuple[int, int]] = collections.deque(maxlen=size)

    def add(self, step: int, step_ns: int) -> None:
        self._steps.append((step, step_ns))

    def __len__(self) -> int:
        return len(self._steps)

    def median_ns(self) -> int | None:
        return int(statistics.median(t for _, t in self._steps)) if self._steps else None

    def since(self, step: int) -> list[tuple[int, int]]:
        """The kept steps at or after `step`, in order."""
        return [(s, t) for s, t in self._steps if s >= step]


@dataclasses.dataclass
class Trigger:
    """Opens a window after `confirm_steps` consecutive steps each more than `share` over the recent median (docstring
    of the module); `streak` holds the slow steps seen in a row (step, ns), the first of them the trigger's step."""

    share: float
    cooldown_steps: int
    min_samples: int = DEFAULT_TRIGGER_MIN_SAMPLES
    confirm_steps: int = DEFAULT_TRIGGER_CONFIRM_STEPS
    last_fired_step: int | None = None
    streak: list[tuple[int, int]] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if not (self.share > 0 and math.isfinite(self.share)):
            raise ValueError(f"trigger share must be > 0, got {self.share}")
        if self.cooldown_steps < 0:
            raise ValueError(f"cooldown_steps must be >= 0, got {self.cooldown_steps}")
        if self.confirm_steps < 1:
            raise ValueError(f"confirm_steps must be >= 1, got {self.confirm_steps}")

    def fires(self, step: int, step_ns: int, recent: RecentSteps) -> bool:
        """Book unprofiled step `step` (`step_ns` long, `recent` not holding it yet); whether it is the last of
        `confirm_steps` slow ones in a row that the cooldown lets through (not recorded as fired: `fired` does that
        once the window is allowed). A step that is not slow, or one after a gap, starts the count again."""
        median = recent.median_ns()
        cooling = self.last_fired_step is not None and step - self.last_fired_step < self.cooldown_steps
        if median is None or len(recent) < self.min_samples or cooling or step_ns <= (1.0 + self.share) * median:
            self.streak = []
            return False
        if self.streak and self.streak[-1][0] != step - 1:
            self.streak = []
        self.streak.append((step, step_ns))
        return len(self.streak) >= self.confirm_steps

    def fired(self, step: int) -> None:
        self.last_fired_step = self.streak[0][0] if self.streak else step
        self.streak = []


@dataclasses.dataclass
class Budget:
    """The capture's cost ledger and the rule that keeps it under `share` of the run's wall time (module docstring)."""

    share: float = DEFAULT_BUDGET_SHARE
    total_steps: int | None = None
    spent_ns: int = 0
    one_time_ns: int = 0
    helper_ns: int = 0
    costs_ns: list[int] = dataclasses.field(default_factory=list)
    skipped_steps: list[int] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if not (0 < self.share <= 1):
            raise ValueError(f"budget share must be in (0, 1], got {self.share}")

    def add(self, cost_ns: int, one_time_ns: int = 0) -> None:
        """Book one window's cost (`one_time_ns` of it the profiler's first start, left out of the expectation)."""
        self.spent_ns += cost_ns
        self.one_time_ns += one_time_ns
        self.costs_ns.append(cost_ns - one_time_ns)

    def add_helper(self, ns: int) -> None:
        """Book the helper's own time outside the windows (handing a window to its summary process, collecting the
        summary, writing scalars): spent, but no window's cost."""
        self.spent_ns += max(0, ns)
        self.helper_ns += max(0, ns)

    def expected_ns(self) -> int:
        """The next window's expected cost: the median of the costs so far (0 before any)."""
        return max(0, int(statistics.median(self.costs_ns))) if self.costs_ns else 0

    def horizon_ns(self, elapsed_ns: int, step: int, median_ns: int | None) -> int:
        if self.total_steps is not None and median_ns:
            return elapsed_ns + max(0, self.total_steps - step) * median_ns
        return elapsed_ns + self.expected_ns()

    def fits(self, windows: int, elapsed_ns: int, step: int, median_ns: int | None) -> bool:
        need = self.spent_ns + self.expected_ns() * windows
        return need <= self.share * self.horizon_ns(elapsed_ns, step, median_ns)

    def periodic_every(self, every: int, elapsed_ns: int, step: int, median_ns: int | None) -> int | None:
        """The effective interval for a periodic window opening at `step`: the smallest multiple of `every` whose
        windows (this one and those the rest of the run holds) fit; None when not even this one alone fits."""
        if self.total_steps is None:
            return every if self.fits(1, elapsed_ns, step, median_ns) else None
        remaining = max(0, self.total_steps - step)
        for m in range(1, max(1, remaining // every) + 2):
            interval = m * every
            if self.fits(1 + remaining // interval, elapsed_ns, step, median_ns):
                return interval
        return None

    def spent_share(self, elapsed_ns: int) -> float:
        return self.spent_ns / elapsed_ns if elapsed_ns > 0 else 0.0
