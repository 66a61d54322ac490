"""Over the run: periodic and triggered profiler windows in one training run, within a cost budget.

    from tb_llmdiag.capture import profile_run

    with profile_run("runs", run="lora", every=100, trigger=0.5, total_steps=len(loader)) as prof:
        for batch in loader:
            train_step(batch)
            prof.step(tokens=int(batch["attention_mask"].sum()))   # once per optimizer step

Every step is timed on the host clock between two `step()` calls (no profiler, no synchronize: cheap). Windows:

- **first**: at step `first_step` (default 10: the steps before it are the job before any profiler ran);
- **periodic**: then at every multiple of `every` (widened by the budget, below);
- **triggered** (`trigger=share`): after `trigger_confirm_steps` (2) unprofiled steps in a row that each ran more
  than `share` over the median of the last 50 unprofiled steps, at most once per `cooldown_steps` steps. The window
  opens at the next step: it records a slowdown that lasts a few steps (a slow shard, a neighbour, thrashing); the slow
  steps themselves are in the window's metadata. One slow step alone opens nothing (a collection, a log flush).

A window opens only when the run (`total_steps`, when known) has room for all its steps. It is `warmup` (1) steps
with the profiler on and discarded, then `active` (3) recorded steps, with low-overhead
defaults (shapes on; memory and Python stacks off); the device is synchronized where it opens and where it closes.
Its trace is one `tensorboard_trace_handler`-named file, `<logdir>/<run>/<worker>.<ns>.pt.trace.json.gz`, with
`ProfilerStep#<global step>` markers, written once the `time_steps_after` (3) steps after it have run unprofiled and
been timed, with two top-level keys: `llmdiag_unprofiled_step_ns` (the steps before and after it, schema 3 of
`tb_llmdiag.capture`) and `llmdiag_window` (`WINDOW_SCHEMA`: the series, why the window was taken, the trigger, the
tokens a step of its recorded steps, the unprofiled steps before and after it, the cost so far).

The training process only exports the profiler's raw JSON; a separate process (`tb_llmdiag.capture_summary`, one at
a time, started with `subprocess`) gzips it into place and reads it with the report engine; its summary becomes
TensorBoard scalars at the window's step (`tb_llmdiag.capture_scalars`), polled at each `step()`.

**Budget** (`budget=0.02`, `tb_llmdiag.capture_budget`): each window's cost is measured (the wall time from the call
that opens it to the end of the steps timed after it, less that many unprofiled steps); windows open only while the
cost so far plus the expected cost of the windows still to come stays under `budget` x the run's wall time (known
`total_steps`: the projected run). Periodic windows widen their interval to a multiple of `every` that fits, and a slot
that does not fit is skipped; both are in the metadata (`every_effective`, `cost.skipped_steps`).
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

from tb_llmdiag.capture_budget import (
    DEFAULT_BUDGET_SHARE,
    DEFAULT_TRIGGER_CONFIRM_STEPS,
    Budget,
    RecentSteps,
    Trigger,
)
from tb_llmdiag.capture_scalars import ScalarSink, helper_scalars, report_scalars

WINDOW_KEY = "llmdiag_window"
"""Top-level trace key of an over-the-run window's own metadata (module docstring)."""

WINDOW_SCHEMA = 1
UNPROFILED_STEPS_KEY = "llmdiag_unprofiled_step_ns"  # the same key and schema as tb_llmdiag.capture writes
UNPROFILED_STEPS_SCHEMA = 3
DEFAULT_FIRST_STEP = 10
DEFAULT_COOLDOWN_STEPS = 200
BEFORE_STEPS_KEPT = 20
"""Unprofiled steps before a window written into its metadata (the latest, since the previous window)."""

LOW_OVERHEAD_OPTIONS = {"record_shapes": True, "profile_memory": False, "with_stack": False, "with_flops": False}


@dataclasses.dataclass
class _Window:
    index: int
    reason: str  # "first", "periodic" or "triggered"
    warmup_step: int  # global step of its first profiled step (its warm-up, or its first active one)
    first_step: int  # its first recorded step
    last_step: int
    opened_ns: int  # perf_counter_ns where the step() call that opened it began
    before: list[tuple[int, int]]
    every_effective: int | None
    trigger: dict[str, Any] | None
    tokens_per_step: float | None
    skipped_steps: list[int]
    steps_ns: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    after: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    start_ns: int = 0  # time inside the profiler's calls that started it
    stop_ns: int = 0  # time inside the call that stopped it and exported its raw JSON
    raw: str | None = None
    end_ns: int = 0


def _import_torch() -> Any:
    import torch
    import torch.profiler  # noqa: F401

    return torch


class RunProfiler:
    """Periodic and triggered profiler windows over a whole run (module docstring); use as a context manager and call
    `step()` once per optimizer step."""

    def __init__(
        self,
        logdir: str | os.PathLike[str],
        run: str,
        *,
        every: int | None = 100,
        first_step: int | None = DEFAULT_FIRST_STEP,
        warmup: int = 1,
        active: int = 3,
        trigger: float | None = None,
        cooldown_steps: int = DEFAULT_COOLDOWN_STEPS,
        trigger_confirm_steps: int = DEFAULT_TRIGGER_CONFIRM_STEPS,
        budget: float = DEFAULT_BUDGET_SHARE,
        total_steps: int | None = None,
        start_step: int = 0,
        time_steps_after: int = 3,
        worker: str = "rank0",
        scalars_dir: str | None = None,
        summary_writer: Any = None,
        write_scalars: bool = True,
        analyze: bool = True,
        use_gzip: bool = True,
        clock: Any = time.perf_counter_ns,
        **profiler_options: Any,
    ) -> None:
        if every is not None and every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        if active < 1 or warmup < 0 or time_steps_after < 0:
            raise ValueError("active must be >= 1, warmup and time_steps_after >= 0")
        unknown = set(profiler_options) - set(LOW_OVERHEAD_OPTIONS)
        if unknown:
            raise TypeError(f"unknown profiler options: {sorted(unknown)}")
        self.output_dir = os.path.join(os.fspath(logdir), run) if run not in ("", ".") else os.fspath(logdir)
        self.options = {**LOW_OVERHEAD_OPTIONS, **profiler_options}
        self.every, self.first_step, self.warmup, self.active = every, first_step, warmup, active
        self.trigger = (
            Trigger(trigger, cooldown_steps, confirm_steps=trigger_confirm_steps) if trigger is not None else None
        )
        self.budget = Budget(budget, total_steps)
        self.start_step, self.time_steps_after, self.worker = start_step, time_steps_after, worker
        self.use_gzip, self.analyze = use_gzip, analyze
        self.series = uuid.uuid4().hex[:16]
        self.clock = clock  # ns; tests drive a clock of their own
        self.sink = ScalarSink(scalars_dir or self.output_dir, summary_writer) if write_scalars else None
        self.step_num = 0  # step() calls so far; the step now running is global step start_step + step_num
        self.recent = RecentSteps()
        self.windows: list[_Window] = []  # every window opened, in order
        self.written: list[str] = []  # trace files written, in order
        self.summaries: dict[int, dict[str, Any]] = {}  # window index -> its report summary (or error)
        self._since: list[tuple[int, int]] = []  # unprofiled steps since the last window's steps after it
        self._tokens: collections.deque[tuple[int, float]] = collections.deque(maxlen=BEFORE_STEPS_KEPT)
        self._window: _Window | None = None  # the window being recorded
        self._waiting: _Window | None = None  # recorded, its steps after it being timed
        self._plan: dict[int, Any] = {}
        self._next_periodic: int | None = None
        self._skipped: list[int] = []
        self._queue: list[tuple[_Window, dict[str, Any]]] = []
        self._proc: tuple[_Window, subprocess.Popen[str]] | None = None
        self.profiler: Any = None
        self._torch: Any = None
        self._sync: Any = None
        self._started_ns = 0
        self._began_ns = 0
        self._closed = False

    # --- the loop ---------------------------------------------------------------------------------------------------

    @property
    def global_step(self) -> int:
        return self.start_step + self.step_num

    def start(self) -> RunProfiler:
        if self.profiler is not None:
            raise RuntimeError("profiler already started")
        torch = self._torch = _import_torch()
        os.makedirs(self.output_dir, exist_ok=True)
        acts = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(torch.profiler.ProfilerActivity.CUDA)
            self._sync = torch.cuda.synchronize
        self.profiler = torch.profiler.profile(
            activities=acts, schedule=self._action, on_trace_ready=self._trace_ready, **self.options
        )
        if self.sink is not None:
            self.sink.prepare()  # TensorBoard's writer imported now, not inside a timed step
        self.profiler.step_num = self.start_step  # ProfilerStep#<global step>
        self.profiler.start()
        atexit.register(self.stop)
        self._started_ns = self._began_ns = self.clock()
        return self

    def step(self, tokens: float | None = None) -> None:
        """End of one optimizer step; `tokens`: the step's token count (for `llm_diag/tokens_per_s`)."""
        now = self.clock()
        if self._closed or self.profiler is None:
            self.step_num += 1
            return
        g, step_ns = self.global_step, now - self._began_ns
        if tokens is not None:
            self._tokens.append((g, float(tokens)))
        if self._window is not None:
            self._window.steps_ns.append((g, step_ns))
            self._advance_window(g)
        else:
            fired = self._unprofiled(g, step_ns, now)
            self._maybe_open(g, step_ns, fired, now)
        self._booked(self._poll)
        self.step_num += 1
        self._began_ns = self.clock()

    def _action(self, step: int) -> Any:
        """torch's schedule: what the profiler does at global step `step` (the plan of the window open, else NONE)."""
        return self._plan.get(step, self._torch.profiler.ProfilerAction.NONE)

    def _unprofiled(self, g: int, step_ns: int, now: int) -> bool:
        """Book an unprofiled step; whether it fires the trigger."""
        w = self._waiting
        if w is not None:
            w.after.append((g, step_ns))
            if len(w.after) >= self.time_steps_after:
                w.end_ns = now
                self._waiting = None
                self._booked(self._hand_off, w)
            return False
        fired = self.trigger is not None and self.trigger.fires(g, step_ns, self.recent)
        self.recent.add(g, step_ns)
        self._since.append((g, step_ns))
        del self._since[:-BEFORE_STEPS_KEPT]
        return fired

    def _maybe_open(self, g: int, step_ns: int, fired: bool, now: int) -> None:
        """After unprofiled step `g`: open a window at `g + 1` when one is due and the budget lets it."""
        nxt = g + 1
        if self._waiting is not None:
            self.profiler.step()
            return
        reason, every_eff, trigger = None, None, None
        elapsed, median = now - self._started_ns, self.recent.median_ns()
        if fired and self.trigger is not None and self.budget.fits(1, elapsed, g, median):
            reason = "triggered"
            slow = self.trigger.streak
            trigger = {
                "step": slow[0][0],
                "step_ns": slow[0][1],
                "median_ns": median,
                "threshold_share": self.trigger.share,
                "confirm_steps": self.trigger.confirm_steps,
                "slow_steps": [s for s, _ in slow],
                "slow_step_ns": [t for _, t in slow],
            }
            self.trigger.fired(g)
        elif self._periodic_due(nxt):
            every_eff = self.budget.periodic_every(self.every, elapsed, nxt, median) if self.every else None
            if not self.windows:
                reason = "first"
            elif nxt > (self._next_periodic or nxt):
                every_eff = self.every  # the slot passed inside another window (or the steps after it): the next
            elif every_eff is not None:
                reason = "periodic"
            else:
                self._skipped.append(nxt)
            self._next_periodic = self._next_grid(nxt, every_eff or self.every)
        total = self.budget.total_steps
        if reason is not None and total is not None and nxt + self.warmup + self.active > total:
            reason = None  # the run ends before the window could record its steps
        if reason is None:
            self.profiler.step()
            return
        self._open(nxt, reason, every_eff, trigger, now)

    def _periodic_due(self, step: int) -> bool:
        if self._next_periodic is None:
            self._next_periodic = self.first_step if self.first_step is not None else self._next_grid(0, self.every)
        return self._next_periodic is not None and step >= self._next_periodic

    def _next_grid(self, step: int, every: int | None) -> int | None:
        """The next periodic slot after `step`: the next multiple of `every` (None: no periodic windows)."""
        if not every:
            return None
        return (step // every + 1) * every

    def _open(self, g: int, reason: str, every_eff: int | None, trigger: dict[str, Any] | None, now: int) -> None:
        torch = self._torch
        A = torch.profiler.ProfilerAction
        first, last = g + self.warmup, g + self.warmup + self.active - 1
        self._plan = {s: A.WARMUP for s in range(g, first)}
        self._plan.update({s: A.RECORD for s in range(first, last)})
        self._plan[last] = A.RECORD_AND_SAVE
        tokens = [t for s, t in self._tokens if s <= g - 1]
        w = _Window(
            index=len(self.windows),
            reason=reason,
            warmup_step=g,
            first_step=first,
            last_step=last,
            opened_ns=now,
            before=list(self._since),
            every_effective=every_eff,
            trigger=trigger,
            tokens_per_step=float(statistics.median(tokens)) if tokens else None,
            skipped_steps=self._skipped,
        )
        self._skipped = []
        self.windows.append(w)
        self._window = w
        if self._sync is not None:
            self._sync()
        t0 = self.clock()
        self.profiler.step()  # NONE -> WARMUP (or RECORD): the profiler starts
        w.start_ns = self.clock() - t0

    def _advance_window(self, g: int) -> None:
        """After a profiled step `g` of the open window: step the profiler; after its last, stop it."""
        w = self._window
        assert w is not None
        closing = g == w.last_step
        if closing and self._sync is not None:
            self._sync()
        t0 = self.clock()
        self.profiler.step()  # the last step: RECORD_AND_SAVE -> NONE, _trace_ready exports the raw JSON
        spent = self.clock() - t0
        if g == w.warmup_step and self.warmup:
            w.start_ns += spent  # WARMUP -> RECORD: the recording starts
        if closing:
            w.stop_ns = spent
            self._window, self._plan, self._since = None, {}, []
            if self.time_steps_after == 0:
                w.end_ns = self.clock()
                self._hand_off(w)
            else:
                self._waiting = w

    def _trace_ready(self, prof: Any) -> None:
        """torch's `on_trace_ready`: export the window's raw JSON to a hidden file (its results go at the next start)."""
        w = self._window
        if w is None:
            return
        os.makedirs(self.output_dir, exist_ok=True)
        w.raw = os.path.join(self.output_dir, f".{self.worker}.{os.getpid()}.{self.series}.{w.index}.raw.tmp")
        prof.export_chrome_trace(w.raw)

    # --- a recorded window: its cost, its file, its scalars ---------------------------------------------------------

    def _hand_off(self, w: _Window) -> None:
        """The steps after `w` are timed (or the run stops): book its cost, queue its file, write its cheap scalars."""
        ref = self._reference_ns(w)
        recorded = [t for s, t in self._tokens if w.first_step <= s <= w.last_step]
        if recorded:  # the tokens of the steps the trace holds (a triggered window follows a change of them)
            w.tokens_per_step = float(statistics.median(recorded))
        n = len(w.steps_ns) + len(w.after)
        cost = max(0, (w.end_ns - w.opened_ns) - n * ref) if ref else 0
        self.budget.add(cost, one_time_ns=w.start_ns if w.index == 0 else 0)
        elapsed = w.end_ns - self._started_ns
        meta = self.window_metadata(w, ref, cost, elapsed)
        if self.sink is not None:
            self.sink.write(w.first_step, helper_scalars(meta))
        if w.raw is None:
            return
        spec = {
            "raw": w.raw,
            "out_dir": self.output_dir,
            "worker": self.worker,
            "use_gzip": self.use_gzip,
            "keys": {UNPROFILED_STEPS_KEY: self.unprofiled_metadata(w), WINDOW_KEY: meta},
            "analyze": self.analyze,
        }
        self._queue.append((w, spec))

    def _booked(self, fn: Any, *args: Any) -> None:
        """Run a piece of the helper's own work on the training thread and book its time in the budget."""
        t0 = self.clock()
        fn(*args)
        self.budget.add_helper(self.clock() - t0)

    def _reference_ns(self, w: _Window) -> int | None:
        """The unprofiled step a window's cost is measured against: the larger of the medians of the steps before
        and after it (a job that got slower at the window, as a triggered one follows a change, is not the capture's
        cost; a profiler that slows the steps after it for the rest of the run is not seen per window either)."""
        medians = [int(statistics.median(t for _, t in xs)) for xs in (w.before, w.after) if xs]
        return max(medians) if medians else self.recent.median_ns()

    def unprofiled_metadata(self, w: _Window) -> dict[str, Any]:
        """The `UNPROFILED_STEPS_KEY` object of window `w`, as `tb_llmdiag.capture` writes it (schema 3); a triggered
        window's steps before it start at the trigger step (fewer than 3: the reader takes the steps after it), all of
        them are in `WINDOW_KEY`'s `before_steps`."""
        before = w.before
        if w.trigger is not None:  # the job changed at the trigger step: the steps before it are another job's
            before = [(s, t) for s, t in before if s >= w.trigger["step"]]
        return {
            "schema": UNPROFILED_STEPS_SCHEMA,
            "steps": [s for s, _ in before],
            "step_ns": [t for _, t in before],
            "after_steps": [s for s, _ in w.after],
            "after_step_ns": [t for _, t in w.after],
            "window_steps": [w.first_step, w.last_step],
            "synchronized": "run_edges" if self._sync is not None else False,
            "profiler_options": dict(self.options),
            "steps_after_window": self.time_steps_after,
        }

    def window_metadata(self, w: _Window, ref_ns: int | None, cost_ns: int, elapsed_ns: int) -> dict[str, Any]:
        """The `WINDOW_KEY` object of window `w` (`WINDOW_SCHEMA`)."""
        return {
            "schema": WINDOW_SCHEMA,
            "series": self.series,
            "index": w.index,
            "reason": w.reason,
            "global_step": w.first_step,
            "warmup_steps": [w.warmup_step, w.first_step - 1] if w.first_step > w.warmup_step else [],
            "window_steps": [w.first_step, w.last_step],
            "profiled_step_ns": [t for s, t in w.steps_ns if s >= w.first_step],
            "before_steps": [s for s, _ in w.before],
            "before_step_ns": [t for _, t in w.before],
            "after_steps": [s for s, _ in w.after],
            "after_step_ns": [t for _, t in w.after],
            "step_ns": ref_ns,
            "tokens_per_step": w.tokens_per_step,
            "every": self.every,
            "every_effective": w.every_effective,
            "first_step": self.first_step,
            "trigger": w.trigger,
            "cooldown_steps": self.trigger.cooldown_steps if self.trigger else None,
            "cost": {
                "window_ns": cost_ns,
                "profiler_start_ns": w.start_ns,
                "profiler_stop_export_ns": w.stop_ns,
                "spent_ns": self.budget.spent_ns,
                "one_time_ns": self.budget.one_time_ns,
                "helper_ns": self.budget.helper_ns,
                "elapsed_ns": elapsed_ns,
                "spent_share": self.budget.spent_share(elapsed_ns),
                "budget_share": self.budget.share,
                "total_steps": self.budget.total_steps,
                "skipped_steps": list(w.skipped_steps),
            },
        }

    def _poll(self, wait: bool = False) -> None:
        """Collect the finished summary process (its file, its scalars) and start the next one queued."""
        while True:
            if self._proc is not None:
                w, proc = self._proc
                if not wait and proc.poll() is None:
                    return
                out, _ = proc.communicate()
                self._proc = None
                self._collect(w, out)
            if not self._queue:
                return
            w, spec = self._queue.pop(0)
            proc = subprocess.Popen(
                [sys.executable, "-m", "tb_llmdiag.capture_summary"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=_child_env(),
            )
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(spec, allow_nan=False))
            proc.stdin.close()
            proc.stdin = None  # communicate() must not flush the closed pipe
            self._proc = (w, proc)
            if not wait:
                return

    def _collect(self, w: _Window, out: str) -> None:
        try:
            result = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"error": "no output"}
        except ValueError:
            result = {"error": "unreadable output"}
        self.summaries[w.index] = result
        if result.get("path"):
            self.written.append(result["path"])
        summary = result.get("summary")
        if self.sink is not None and isinstance(summary, dict):
            meta = {"step_ns": self._reference_ns(w), "tokens_per_step": w.tokens_per_step}
            self.sink.write(w.first_step, report_scalars(meta, summary))

    # --- the end ----------------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop profiling; write every window still waiting (one cut short too), wait for their summaries."""
        if self._closed or self.profiler is None:
            return
        self._closed = True
        atexit.unregister(self.stop)
        now = self.clock()
        w = self._window or self._waiting
        try:
            self.profiler.stop()  # a window cut short: _trace_ready exports what it holds
        finally:
            if w is not None:
                w.end_ns = now
                self._window = self._waiting = None
                self._hand_off(w)
            self._poll(wait=True)
            if self.sink is not None:
                self.sink.close()

    def __enter__(self) -> RunProfiler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _child_env() -> dict[str, str]:
    """The summary process's environment: this one, with the directory holding `tb_llmdiag` on its path."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env
