"""Capture helpers: profile a training loop's steady state into a logdir that LLM Diag reads.

    from tb_llmdiag.capture import profile_steps

    with profile_steps("runs/prof", run="lora") as prof:
        for batch in loader:
            train_step(batch)
            prof.step()              # once per optimizer step
            if prof.finished:        # every window is written; stop early if you like
                break

By default the first `DEFAULT_SKIP_FIRST` (10) steps are skipped and timed (cuBLAS/allocator/optimizer-state warm-up,
torch.compile; then the job as it runs without a profiler), one warm-up step is run with the profiler on but discarded, then `active` steps are
recorded, then `DEFAULT_TIME_STEPS_AFTER` steps run unprofiled and are timed. `from_step0=True` records
steps 0..active-1 instead (warm-up included, as many users do). Each rank writes one gzipped Kineto file
`<logdir>/<run>/rank<R>.<ns>.pt.trace.json.gz`, named and gzipped as `torch.profiler.tensorboard_trace_handler`
does (`tb_llmdiag.capture_export`).

For the Hugging Face Trainer: `trainer.add_callback(ProfilerCallback("runs/prof", run="lora"))`; it
steps once per optimizer step (so a step spans all gradient-accumulation micro-batches).

`with_stack=True` (off by default: traces grow several times) records Python frames, so a report can
name the user's `file:line` that holds the time. The steps the profiler skips before its window
(`skip_first`, `wait`) and the `time_steps_after` steps after it are timed unprofiled (each on the
host clock, as the profiled steps are, with `torch.cuda.synchronize()` at the edges of each run of them when CUDA is
there) and written into the trace's metadata under
`UNPROFILED_STEPS_KEY`, with the profiler options, so a report can set the profiled step beside the
unprofiled one (docs/captures.md). The trace is written once the steps after the window are timed.

torch and transformers are imported only when a profiler is built (never at `import tb_llmdiag`),
and `ProfilerCallback` is created on first access, so this module imports without either installed.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from tb_llmdiag.capture_export import write_window
from tb_llmdiag.capture_schedule import (
    DEFAULT_ACTIVE,
    DEFAULT_SKIP_FIRST,
    DEFAULT_WARMUP,  # noqa: F401  (re-exported: users read the defaults here)
    ProfileSchedule,
    plan_schedule,
)
from tb_llmdiag.capture_series import RunProfiler

__all__ = [
    "DEFAULT_SKIP_FIRST",
    "ProfileSchedule",
    "StepProfiler",
    "plan_schedule",
    "detect_rank",
    "worker_name",
    "profile_steps",
    "profile_run",
    "RunProfiler",
    "UNPROFILED_STEPS_KEY",
    "DEFAULT_TIME_STEPS_AFTER",
]  # ProfilerCallback is left out: star-imports must not need transformers

UNPROFILED_STEPS_KEY = "llmdiag_unprofiled_step_ns"
"""Trace metadata key (top level of the Kineto JSON) holding the unprofiled step times (docs/captures.md)."""

UNPROFILED_STEPS_SCHEMA = 3
"""1: the steps before the window only (`steps`, `step_ns`); 2 adds the steps after it (`after_steps`,
`after_step_ns`) and `window_steps`; 3 times each run of consecutive unprofiled steps between two synchronizes at its
edges (`synchronized: "run_edges"`), each step on the host clock as the profiled ones are, where 1 and 2 synchronized
at every step's edges (`synchronized: true`)."""

DEFAULT_TIME_STEPS_AFTER = 3
"""Steps run unprofiled and timed after the last window before its trace is written."""


def detect_rank(env: Mapping[str, str] | None = None, dist: Any = None) -> int | None:
    """Global rank: torch.distributed when initialised, else $RANK, else None (single process).

    `dist` is a `torch.distributed`-like module; pass None to look only at the environment.
    """
    if dist is not None:
        try:
            if dist.is_available() and dist.is_initialized():
                return int(dist.get_rank())
        except (RuntimeError, AttributeError):
            pass
    env = os.environ if env is None else env
    for key in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
        value = env.get(key)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def worker_name(rank: int | None, prefix: str | None = None) -> str:
    """`rank<R>` (rank 0 when unknown: a single process), optionally `<prefix>_rank<R>`.

    tensorboard_trace_handler names files `<worker>.<time_ns>.pt.trace.json.gz`; LLM Diag (and
    torch-tb-profiler) read the rank from the `rank<R>` part when the trace has no distributedInfo.
    """
    name = f"rank{0 if rank is None else int(rank)}"
    if prefix:
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in prefix)
        name = f"{safe}_{name}"
    return name


def _import_torch() -> Any:
    """Import torch lazily (tests replace this with a fake)."""
    import torch
    import torch.profiler  # noqa: F401  (make sure the submodule is loaded)

    return torch


def _activities(torch: Any) -> list[Any]:
    acts = [torch.profiler.ProfilerActivity.CPU]
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_available():
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    return acts


@dataclasses.dataclass
class _Window:
    """A recorded window whose trace waits for the unprofiled steps after it (`StepProfiler._window_ready`)."""

    first_step: int  # its first recorded step
    last_step: int  # the step that ended it
    after: int  # how many steps after `last_step` are timed for it (0: written at once)
    export: Callable[[str], Any]  # writes the window's trace JSON to a path (torch's export_chrome_trace)


class StepProfiler:
    """A torch.profiler session driven by a `ProfileSchedule`; use as a context manager.

    Call `step()` once per optimizer step. `finished` turns True once every active window has been
    written (you may stop the loop then); `output_dir` is where the trace files go.

    Each window's trace is written once the `time_steps_after` steps after it have run unprofiled and been
    timed (after the last window: the next `time_steps_after` steps, so `finished` comes that many steps
    after the last recorded one; after an earlier window: its next cycle's `wait` steps, at most that many),
    with those times and the ones timed before it in the metadata (`UNPROFILED_STEPS_KEY`). `stop()` (or
    leaving the `with`, or the interpreter's exit) writes every window still waiting, with what was timed.
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str],
        run: str,
        schedule: ProfileSchedule,
        *,
        record_shapes: bool = True,
        profile_memory: bool = True,
        with_stack: bool = False,
        with_flops: bool = False,
        rank: int | None = None,
        worker: str | None = None,
        use_gzip: bool = True,
        time_skipped_steps: bool = True,
        time_steps_after: int = DEFAULT_TIME_STEPS_AFTER,
    ) -> None:
        if time_steps_after < 0:
            raise ValueError(f"time_steps_after must be >= 0, got {time_steps_after}")
        self.schedule = schedule
        self.output_dir = os.path.join(os.fspath(logdir), run) if run not in ("", ".") else os.fspath(logdir)
        self.rank = rank
        self.worker = worker or worker_name(rank)
        self.options = {
            "record_shapes": record_shapes,
            "profile_memory": profile_memory,
            "with_stack": with_stack,
            "with_flops": with_flops,
        }
        self.use_gzip = use_gzip
        self.step_num = 0
        self.profiler: Any = None
        self._running = False  # the torch profiler is running
        self._started = False
        self._closed = False
        self.time_skipped_steps = time_skipped_steps
        self.time_steps_after = time_steps_after
        self.unprofiled_steps: list[int] = []  # every step timed unprofiled, before and after the windows, in order
        self.unprofiled_step_ns: list[int] = []
        self.written: list[str] = []  # the trace files written, in order
        self._pending: list[_Window] = []
        self._after = _after_window_steps(schedule, time_steps_after)
        self._step_started_ns: int | None = None
        self._sync: Any = None

    @property
    def total_steps(self) -> int:
        """Number of `step()` calls after which every window has been written (the schedule's and the steps timed
        after the last window)."""
        return self.schedule.total_steps + self.time_steps_after

    @property
    def finished(self) -> bool:
        return self.step_num >= self.total_steps

    @property
    def phase(self) -> str:
        """Phase of the step now running (see `ProfileSchedule.phase`), 'after' for a step timed after the last
        window."""
        phase = self.schedule.phase(self.step_num)
        return "after" if phase == "done" and self.step_num < self.total_steps else phase

    def start(self) -> StepProfiler:
        if self._started:
            raise RuntimeError("profiler already started")
        torch = _import_torch()
        os.makedirs(self.output_dir, exist_ok=True)
        self.profiler = torch.profiler.profile(
            activities=_activities(torch),
            schedule=torch.profiler.schedule(**self.schedule.torch_kwargs()),
            on_trace_ready=self._window_ready,
            **self.options,
        )
        self.profiler.start()
        self._started = self._running = True
        atexit.register(self.stop)  # a window still waiting is written even if the loop never calls stop()
        cuda = getattr(torch, "cuda", None)
        self._sync = cuda.synchronize if cuda is not None and cuda.is_available() else None
        self._step_begins()
        return self

    def _timed(self, step: int) -> bool:
        if step in self._after:
            return True
        return self.time_skipped_steps and self.schedule.phase(step) in ("skip", "wait")

    def _step_begins(self) -> None:
        """Called as step `step_num` starts: start its clock if it runs unprofiled and is timed. The device is waited
        for only where a run of timed steps begins (the work queued before it is not its time)."""
        self._step_started_ns = None
        if self._timed(self.step_num):
            if self._sync is not None and not (self.step_num > 0 and self._timed(self.step_num - 1)):
                self._sync()
            self._step_started_ns = time.perf_counter_ns()

    def _window_ready(self, prof: Any) -> None:
        """torch's `on_trace_ready`: a window's recording has stopped (inside `step()` or `stop()`). Keep its results
        (torch replaces them when the next cycle starts) until the steps after it are timed: `step()` writes it once
        they are (at once when there are none), `stop()` whatever they are; windows are written in order."""
        last = self.step_num
        cycle = max(0, last - self.schedule.skip_first) // self.schedule.cycle_steps
        first = self.schedule.skip_first + cycle * self.schedule.cycle_steps + self.schedule.wait + self.schedule.warmup
        results = getattr(prof, "profiler", None)  # torch.autograd.profiler.profile: holds this window's events
        export = getattr(results, "export_chrome_trace", None) or prof.export_chrome_trace
        after = (
            0 if self._closed else sum(1 for s in range(last + 1, last + 1 + self.time_steps_after) if s in self._after)
        )
        self._pending.append(_Window(first_step=min(first, last), last_step=last, after=after, export=export))

    def _write_ready(self, everything: bool = False) -> None:
        """Write the waiting windows whose steps after them have all been timed (all of them: `everything`)."""
        while self._pending and (everything or self.step_num > self._pending[0].last_step + self._pending[0].after):
            w = self._pending.pop(0)
            self.written.append(
                write_window(
                    w.export,
                    self.output_dir,
                    self.worker,
                    UNPROFILED_STEPS_KEY,
                    self.metadata(w),
                    use_gzip=self.use_gzip,
                )
            )

    def metadata(self, w: _Window) -> dict[str, Any]:
        """The `UNPROFILED_STEPS_KEY` value of window `w` (docs/captures.md)."""
        timed = list(zip(self.unprofiled_steps, self.unprofiled_step_ns))
        before = [(s, t) for s, t in timed if s < w.first_step]
        after = [(s, t) for s, t in timed if w.last_step < s <= w.last_step + w.after]
        return {
            "schema": UNPROFILED_STEPS_SCHEMA,
            "steps": [s for s, _ in before],
            "step_ns": [t for _, t in before],
            "after_steps": [s for s, _ in after],
            "after_step_ns": [t for _, t in after],
            "window_steps": [w.first_step, w.last_step],
            "synchronized": "run_edges" if self._sync is not None else False,
            "profiler_options": dict(self.options),
            "schedule": self.schedule.torch_kwargs(),
            "steps_after_window": self.time_steps_after,
        }

    def step(self) -> None:
        """Mark the end of one (optimizer) step. A no-op (but for the count) once stopped."""
        if self._step_started_ns is not None:
            if self._sync is not None and not self._timed(self.step_num + 1):
                self._sync()  # the run of timed steps ends: its last step holds the device work still queued
            self.unprofiled_steps.append(self.step_num)
            self.unprofiled_step_ns.append(time.perf_counter_ns() - self._step_started_ns)
            self._step_started_ns = None
        if self._running:
            self.profiler.step()  # may end a window: _window_ready
        self.step_num += 1
        if self._closed:
            return
        self._write_ready()
        if self._running and self.step_num >= self.schedule.total_steps:
            self._running = False  # every window recorded: the steps after the last run with no profiler at all
            self.profiler.stop()
        if self.finished:
            self.stop()
        else:
            self._step_begins()

    def stop(self) -> None:
        """Stop profiling and write every window still waiting (an active window cut short too), with the steps
        timed so far. A step cut short by it is not timed."""
        if self._closed or not self._started:
            return
        self._closed = True
        self._step_started_ns = None
        atexit.unregister(self.stop)
        try:
            if self._running:
                self._running = False
                self.profiler.stop()  # a window cut short: _window_ready
        finally:
            self._write_ready(everything=True)

    def trace_files(self) -> list[str]:
        """Trace files of this worker in `output_dir`, oldest first."""
        try:
            names = os.listdir(self.output_dir)
        except FileNotFoundError:
            return []
        prefix = self.worker + "."
        found = [n for n in names if n.startswith(prefix) and ".pt.trace.json" in n]
        return [os.path.join(self.output_dir, n) for n in sorted(found)]

    def __enter__(self) -> StepProfiler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _after_window_steps(schedule: ProfileSchedule, n: int) -> frozenset[int]:
    """The steps timed after a window: the `n` after the last window; after an earlier one, the first `n` of the
    next cycle's `wait` steps (its warm-up runs under the profiler)."""
    out: set[int] = set()
    for k in range(schedule.repeat):
        last = schedule.skip_first + (k + 1) * schedule.cycle_steps - 1
        room = n if k == schedule.repeat - 1 else min(n, schedule.wait)
        out.update(range(last + 1, last + 1 + room))
    return frozenset(out)


def profile_steps(
    logdir: str | os.PathLike[str],
    run: str = "run",
    *,
    from_step0: bool = False,
    skip_first: int | None = None,
    wait: int = 0,
    warmup: int | None = None,
    active: int = DEFAULT_ACTIVE,
    repeat: int = 1,
    record_shapes: bool = True,
    profile_memory: bool = True,
    with_stack: bool = False,
    with_flops: bool = False,
    rank: int | None = None,
    worker_prefix: str | None = None,
    use_gzip: bool = True,
    time_skipped_steps: bool = True,
    time_steps_after: int = DEFAULT_TIME_STEPS_AFTER,
) -> StepProfiler:
    """A `StepProfiler` writing `<logdir>/<run>/rank<R>.<ns>.pt.trace.json.gz` (use it in a `with`).

    Defaults: steady state (skip and time the first 10 steps, 1 warm-up, 3 active), shapes and memory recorded,
    no Python stacks (`with_stack=True` records them: the trace names the user's `file:line`, but grows
    several times). The rank comes from torch.distributed or $RANK when not given.
    `time_skipped_steps`: time the skipped and wait steps unprofiled (synchronized at the edges of each run when
    CUDA is there) and write them into the trace's metadata under `UNPROFILED_STEPS_KEY`.
    `time_steps_after`: run that many steps after the last window unprofiled, timed the same way, and write the
    trace only then, with their times (0: written as the window ends, as torch's handler does). They are the
    unprofiled steps a report compares the profiled ones with: the job is in the same state as in the window,
    where the steps before it may still be warming up (docs/captures_3.md).
    """
    schedule = plan_schedule(
        from_step0=from_step0, active=active, skip_first=skip_first, wait=wait, warmup=warmup, repeat=repeat
    )
    if rank is None:
        dist = None
        with contextlib.suppress(ImportError):
            dist = _import_torch().distributed
        rank = detect_rank(dist=dist)
    return StepProfiler(
        logdir,
        run,
        schedule,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_stack=with_stack,
        with_flops=with_flops,
        rank=rank,
        worker=worker_name(rank, worker_prefix),
        use_gzip=use_gzip,
        time_skipped_steps=time_skipped_steps,
        time_steps_after=time_steps_after,
    )


def profile_run(
    logdir: str | os.PathLike[str],
    run: str = "run",
    *,
    every: int | None = 100,
    trigger: float | None = None,
    budget: float = 0.02,
    total_steps: int | None = None,
    rank: int | None = None,
    worker_prefix: str | None = None,
    scalars_rank: int | None = 0,
    **options: Any,
) -> RunProfiler:
    """A `RunProfiler` (`tb_llmdiag.capture_series`): a window every `every` steps (the first at step 10), one after a
    step `trigger` (a share, e.g. 0.5) over the recent median, the capture's cost kept under `budget` of the run's
    wall time (`total_steps`, when known, lets it plan for the whole run). Low-overhead profiler defaults: shapes on,
    memory and stacks off. Each window's summary is written as TensorBoard scalars (`llm_diag/...`) by rank
    `scalars_rank` only (None: every rank), through `summary_writer=` (the writer you log the loss with) or into an
    event file of its own in `scalars_dir` (default: the traces' folder). Other keyword arguments: those of
    `RunProfiler` (`first_step`, `warmup`, `active`, `cooldown_steps`, `trigger_confirm_steps`, `time_steps_after`,
    `start_step`, `analyze`, `record_shapes`, `profile_memory`, `with_stack`, `with_flops`, `use_gzip`, `write_scalars`)."""
    if rank is None:
        dist = None
        with contextlib.suppress(ImportError):
            dist = _import_torch().distributed
        rank = detect_rank(dist=dist)
    if scalars_rank is not None and (rank or 0) != scalars_rank:
        options["write_scalars"] = False
    return RunProfiler(
        logdir,
        run,
        every=every,
        trigger=trigger,
        budget=budget,
        total_steps=total_steps,
        worker=worker_name(rank, worker_prefix),
        **options,
    )


# --- Hugging Face Trainer callback (created on first access: transformers is optional) ---------


RUN_OPTIONS = frozenset(
    {
        "every",
        "trigger",
        "budget",
        "cooldown_steps",
        "trigger_confirm_steps",
        "first_step",
        "total_steps",
        "scalars_dir",
    }
)
"""Keyword arguments that make `ProfilerCallback` capture over the run (`profile_run`) instead of one window."""


def _tensorboard_writer(trainer: Any) -> Any:
    """A writer that forwards `add_scalar` to the Trainer's TensorBoard callback's writer (the run's own event file,
    beside the loss), or None when the trainer has no TensorBoard callback."""
    callbacks = getattr(getattr(trainer, "callback_handler", None), "callbacks", None) or []
    tb = next((c for c in callbacks if type(c).__name__ == "TensorBoardCallback"), None)
    if tb is None:
        return None

    class _Forward:
        def add_scalar(self, tag: str, value: float, step: int) -> None:
            writer = getattr(tb, "tb_writer", None)
            if writer is not None:
                writer.add_scalar(tag, value, step)

        def flush(self) -> None:
            writer = getattr(tb, "tb_writer", None)
            if writer is not None:
                writer.flush()

    return _Forward()


def _make_callback_class() -> type:
    from transformers import TrainerCallback

    class ProfilerCallback(TrainerCallback):
        """Profile a `transformers.Trainer` run, one `prof.step()` per optimizer step.

        One window of the steady state (`profile_steps`) by default; with any of `RUN_OPTIONS` (`every=100`,
        `trigger=0.5`, `budget=0.02`...) windows over the whole run (`profile_run`), `total_steps` from
        `state.max_steps`, the step's tokens from `state.num_input_tokens_seen` (`include_num_input_tokens_seen`),
        the scalars through the Trainer's TensorBoard writer when `trainer=` is given (else an event file of their own
        in `$TENSORBOARD_LOGGING_DIR`, `args.logging_dir` or the traces' folder).
        `logdir` defaults to `args.logging_dir` (beside the TensorBoard events), or `<output_dir>/runs`.
        Every rank writes its own file, named with `args.process_index`. Other keyword arguments are
        those of `profile_steps` / `profile_run` (`with_stack=True` to record Python frames, off by default).
        """

        def __init__(
            self, logdir: str | None = None, run: str = "profile", trainer: Any = None, **profile_kwargs: Any
        ) -> None:
            self.logdir = logdir
            self.run = run
            self.trainer = trainer
            self.profile_kwargs = profile_kwargs
            self.prof: StepProfiler | RunProfiler | None = None
            self._tokens_seen = 0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.prof is not None:
                return
            logdir = self.logdir or getattr(args, "logging_dir", None)
            if not logdir:
                logdir = os.path.join(getattr(args, "output_dir", None) or ".", "runs")
            kwargs_ = dict(self.profile_kwargs)
            if kwargs_.get("rank") is None:
                kwargs_["rank"] = getattr(args, "process_index", None)
            if RUN_OPTIONS & set(kwargs_):
                self.prof = self._run_profiler(logdir, args, state, kwargs_)
            else:
                self.prof = profile_steps(logdir, self.run, **kwargs_)
            self._tokens_seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
            self.prof.start()

        def _run_profiler(self, logdir: str, args: Any, state: Any, kwargs_: dict[str, Any]) -> RunProfiler:
            kwargs_.setdefault("total_steps", getattr(state, "max_steps", None) or None)
            kwargs_.setdefault("start_step", int(getattr(state, "global_step", 0) or 0))
            if "summary_writer" not in kwargs_ and self.trainer is not None:
                kwargs_["summary_writer"] = _tensorboard_writer(self.trainer)
            if kwargs_.get("summary_writer") is None and "scalars_dir" not in kwargs_:
                env_dir = os.environ.get("TENSORBOARD_LOGGING_DIR") or getattr(args, "logging_dir", None)
                if env_dir:
                    kwargs_["scalars_dir"] = env_dir
            return profile_run(logdir, self.run, **kwargs_)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if isinstance(self.prof, RunProfiler):
                seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
                tokens, self._tokens_seen = seen - self._tokens_seen, seen
                self.prof.step(tokens=tokens if tokens > 0 else None)
            elif self.prof is not None:
                self.prof.step()

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.prof is not None:
                self.prof.stop()

    ProfilerCallback.__module__ = __name__
    return ProfilerCallback


_LAZY: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name == "ProfilerCallback":
        if name not in _LAZY:
            _LAZY[name] = _make_callback_class()
        return _LAZY[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
