"""tb_llmdiag.capture: schedule, naming and wiring, tested with a fake torch (CI has no torch)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import types

import pytest

from tb_llmdiag import capture
from tb_llmdiag.capture import ProfileSchedule, detect_rank, plan_schedule, profile_steps, worker_name

# --- schedule -----------------------------------------------------------------------------------


def torch_schedule_reference(skip_first, wait, warmup, active, repeat, step):
    """torch.profiler.schedule's schedule_fn, transcribed (torch 2.x), mapped to our phase names."""
    if step < skip_first:
        return "skip"
    step -= skip_first
    num_steps = wait + warmup + active
    if repeat > 0 and step / num_steps >= repeat:
        return "done"
    mod_step = step % num_steps
    if mod_step < wait:
        return "wait"
    if mod_step < wait + warmup:
        return "warmup"
    return "active"


@pytest.mark.parametrize(
    "skip_first,wait,warmup,active,repeat",
    [(3, 0, 1, 3, 1), (0, 0, 0, 4, 1), (2, 1, 1, 2, 2), (0, 2, 0, 1, 3), (5, 0, 2, 6, 1)],
)
def test_phase_matches_torch_schedule(skip_first, wait, warmup, active, repeat):
    s = ProfileSchedule(skip_first=skip_first, wait=wait, warmup=warmup, active=active, repeat=repeat)
    for step in range(s.total_steps + 5):
        assert s.phase(step) == torch_schedule_reference(skip_first, wait, warmup, active, repeat, step), step
    assert len(s.active_steps()) == active * repeat
    assert s.phase(s.total_steps) == "done"
    assert s.phase(s.total_steps - 1) == "active"


def test_steady_state_is_the_default():
    s = plan_schedule()
    assert s.skip_first == capture.DEFAULT_SKIP_FIRST == 10  # step 0 left out, 9 unprofiled steps to measure against
    assert s.warmup == 1 and s.wait == 0 and s.repeat == 1
    assert s.active_steps() == (11, 12, 13)
    assert s.total_steps == 14
    assert [s.phase(i) for i in range(12)] == ["skip"] * 10 + ["warmup", "active"]


def test_from_step0_records_the_first_steps():
    s = plan_schedule(from_step0=True, active=4)
    assert s.active_steps() == (0, 1, 2, 3)
    assert s.total_steps == 4
    with pytest.raises(ValueError):
        plan_schedule(from_step0=True, skip_first=2)


@pytest.mark.parametrize("kwargs", [dict(active=0), dict(repeat=0), dict(skip_first=-1), dict(warmup=-1)])
def test_schedule_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        ProfileSchedule(**kwargs)


def test_torch_kwargs_are_the_schedule_arguments():
    s = plan_schedule(skip_first=5, warmup=2, active=6)
    assert s.torch_kwargs() == dict(skip_first=5, wait=0, warmup=2, active=6, repeat=1)


# --- naming -------------------------------------------------------------------------------------


def test_worker_name_carries_the_rank():
    assert worker_name(0) == "rank0"
    assert worker_name(None) == "rank0"
    assert worker_name(7) == "rank7"
    assert worker_name(3, prefix="node a/b") == "node-a-b_rank3"


class FakeDist:
    def __init__(self, initialized, rank=0):
        self._init, self._rank = initialized, rank

    def is_available(self):
        return True

    def is_initialized(self):
        return self._init

    def get_rank(self):
        return self._rank


def test_detect_rank_prefers_torch_distributed_then_env():
    assert detect_rank({}, None) is None
    assert detect_rank({"RANK": "3"}, None) == 3
    assert detect_rank({"SLURM_PROCID": "5"}, None) == 5
    assert detect_rank({"RANK": "x"}, None) is None
    assert detect_rank({"RANK": "3"}, FakeDist(True, 6)) == 6
    assert detect_rank({"RANK": "3"}, FakeDist(False)) == 3


# --- wiring, with a fake torch ------------------------------------------------------------------


class FakeResults:
    """One window's results (torch.autograd.profiler.profile): exports a small Kineto-like JSON naming its steps."""

    def __init__(self, steps):
        self.steps = steps  # the ProfilerStep numbers recorded into it

    def export_chrome_trace(self, path):
        events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "ts": s, "dur": 1}
                  for s in self.steps]
        with open(path, "w") as f:  # laid out as Kineto writes it: white space first, the events after the header
            f.write('\n  {\n    "schemaVersion": 1,\n  "traceEvents": ' + json.dumps(events) + "\n}")


class FakeProfile:
    """torch.profiler.profile's schedule transitions, transcribed: a window's trace is ready when its cycle's last
    active step ends or when stop() cuts it short; a new cycle's results replace the last (torch's prepare_trace)."""

    def __init__(self, log, **kwargs):
        self.log, self.kwargs = log, kwargs
        self.sched = ProfileSchedule(**kwargs["schedule"][1])
        self.steps = 0
        self.profiler = FakeResults([])
        log.append(("profile", kwargs))
        FakeProfile.last = self

    def start(self):
        self.log.append(("start",))
        if self.sched.phase(self.steps) == "active":
            self.profiler.steps.append(self.steps)

    def step(self):
        ended, self.steps = self.steps, self.steps + 1
        self.log.append(("step", self.steps))
        s = self.sched
        if s.phase(ended) == "active" and (ended - s.skip_first) % s.cycle_steps == s.cycle_steps - 1:
            self.kwargs["on_trace_ready"](self)
            self.profiler = FakeResults([])  # the next cycle's
        if s.phase(self.steps) == "active":
            self.profiler.steps.append(self.steps)

    def stop(self):
        self.log.append(("stop",))
        if self.sched.phase(self.steps) == "active":
            self.kwargs["on_trace_ready"](self)


log_owner = [None]  # the fake torch of the running test (its cuda counts the syncs)


class FakeCuda:
    def __init__(self, available):
        self.available = available
        self.syncs = 0

    def is_available(self):
        return self.available

    def synchronize(self):
        self.syncs += 1


def make_fake_torch(log, cuda=True):
    profiler = types.SimpleNamespace(
        ProfilerActivity=types.SimpleNamespace(CPU="CPU", CUDA="CUDA"),
        schedule=lambda **kw: ("schedule", kw),
        profile=lambda **kw: FakeProfile(log, **kw),
    )
    return types.SimpleNamespace(
        profiler=profiler,
        cuda=FakeCuda(cuda),
        distributed=FakeDist(False),
    )


@pytest.fixture
def fake_torch(monkeypatch):
    log = []
    fake = make_fake_torch(log)
    monkeypatch.setattr(capture, "_import_torch", lambda: fake)
    log_owner[0] = fake
    monkeypatch.delenv("RANK", raising=False)
    return log


@pytest.fixture
def clock(monkeypatch):
    """Each read of the helper's clock is 1000 ns after the last."""
    ticks = iter(range(0, 10**9, 1000))
    monkeypatch.setattr(capture.time, "perf_counter_ns", lambda: next(ticks))


def read(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def recorded(trace):
    return [int(e["name"].split("#")[1]) for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#")]


OPTIONS = {"record_shapes": True, "profile_memory": True, "with_stack": False, "with_flops": False}


def test_profile_steps_writes_one_gzip_trace_per_rank_after_the_steps_after_it(tmp_path, fake_torch):
    with profile_steps(tmp_path, run="myrun", skip_first=3, active=2) as prof:
        assert prof.output_dir == str(tmp_path / "myrun")
        assert (tmp_path / "myrun").is_dir()
        kind, kwargs = fake_torch[0]
        assert kind == "profile"
        assert kwargs["activities"] == ["CPU", "CUDA"]
        assert kwargs["schedule"] == ("schedule", dict(skip_first=3, wait=0, warmup=1, active=2, repeat=1))
        assert kwargs["on_trace_ready"] == prof._window_ready
        assert kwargs["record_shapes"] and kwargs["profile_memory"] and not kwargs["with_stack"]
        assert prof.total_steps == 6 + capture.DEFAULT_TIME_STEPS_AFTER == 9
        for n in range(10):
            prof.step()
            assert prof.finished == (n >= 8)
            assert len(prof.trace_files()) == (1 if n >= 8 else 0), n  # written once steps 6, 7, 8 are timed
    steps = [e for e in fake_torch if e[0] == "step"]
    # the real profiler is stepped through its schedule only, then stopped: the steps after it run without it
    assert len(steps) == prof.schedule.total_steps == 6
    assert [e[0] for e in fake_torch].count("stop") == 1
    assert prof.finished and prof.step_num == 10
    (path,) = prof.trace_files()
    assert prof.written == [path]
    name = path.rsplit("/", 1)[1]
    assert name.startswith("rank0.") and name.endswith(".pt.trace.json.gz") and name.split(".")[1].isdigit()
    trace = read(path)
    assert recorded(trace) == [4, 5] and trace["schemaVersion"] == 1
    assert list(trace)[0] == "llmdiag_unprofiled_step_ns"  # the key is inserted first, the rest kept as exported
    assert sorted((tmp_path / "myrun").iterdir()) == [tmp_path / "myrun" / name]  # no temporary file left


def test_profile_steps_rank_from_env(tmp_path, fake_torch, monkeypatch):
    monkeypatch.setenv("RANK", "2")
    prof = profile_steps(tmp_path, run="r", from_step0=True, active=1, with_stack=True, time_steps_after=0)
    assert prof.worker == "rank2" and prof.rank == 2
    prof.start()
    _, kwargs = fake_torch[0]
    assert kwargs["with_stack"] is True
    assert kwargs["schedule"][1]["skip_first"] == 0 and kwargs["schedule"][1]["warmup"] == 0
    prof.step()
    assert prof.finished
    assert fake_torch[-1] == ("stop",)
    (path,) = prof.trace_files()
    assert path.rsplit("/", 1)[1].startswith("rank2.")


def test_exit_mid_window_stops_once_and_writes_the_window_cut_short(tmp_path, fake_torch):
    with profile_steps(tmp_path, active=3) as prof:
        prof.step()
    assert [e[0] for e in fake_torch] == ["profile", "start", "step", "stop"]
    assert prof.phase == "skip" and prof.trace_files() == []
    with profile_steps(tmp_path, run="cut", skip_first=1, warmup=0, active=3) as prof:
        prof.step()
        prof.step()  # step 2, the second recorded, runs when the loop stops
    (path,) = prof.trace_files()
    trace = read(path)
    assert recorded(trace) == [1, 2]
    meta = trace["llmdiag_unprofiled_step_ns"]
    assert meta["window_steps"] == [1, 2] and meta["after_steps"] == [] and meta["steps"] == [0]


def test_steps_before_and_after_the_window_are_timed_and_written_once(tmp_path, fake_torch, clock):
    with profile_steps(tmp_path, run="r", skip_first=2, wait=1, warmup=1, active=2) as prof:
        for _ in range(12):
            prof.step()
            if prof.finished:
                break
    # steps 0, 1 skipped and 2 waiting are timed (one clock read at each edge); 3 warms up; 4, 5 recorded; 6, 7, 8
    # timed after the window
    assert prof.step_num == 9
    assert prof.unprofiled_steps == [0, 1, 2, 6, 7, 8]
    assert prof.unprofiled_step_ns == [1000] * 6
    assert log_owner[0].cuda.syncs == 4  # a synchronize at the edges of each run of timed steps: 0-2 and 6-8
    (path,) = prof.trace_files()
    assert read(path)["llmdiag_unprofiled_step_ns"] == {
        "schema": 3,
        "steps": [0, 1, 2],
        "step_ns": [1000, 1000, 1000],
        "after_steps": [6, 7, 8],
        "after_step_ns": [1000, 1000, 1000],
        "window_steps": [4, 5],
        "synchronized": "run_edges",
        "profiler_options": OPTIONS,
        "schedule": {"skip_first": 2, "wait": 1, "warmup": 1, "active": 2, "repeat": 1},
        "steps_after_window": 3,
    }


def test_a_loop_that_stops_before_the_steps_after_writes_what_was_timed(tmp_path, fake_torch, clock):
    with profile_steps(tmp_path, run="r", skip_first=1, active=2) as prof:
        for _ in range(5):  # 0 skipped, 1 warm-up, 2 and 3 recorded, 4 timed after
            prof.step()
        assert prof.trace_files() == [] and not prof.finished
        assert prof.phase == "after"
    (path,) = prof.trace_files()
    meta = read(path)["llmdiag_unprofiled_step_ns"]
    assert (meta["steps"], meta["after_steps"], meta["after_step_ns"]) == ([0], [4], [1000])
    assert prof.unprofiled_steps == [0, 4]  # step 5 was running when the loop stopped: not timed


def test_each_window_of_a_repeated_schedule_is_written_once_with_the_steps_after_it(tmp_path, fake_torch, clock):
    # wait 2: window 0 gets the next cycle's two wait steps (its warm-up is profiled); the last gets 3
    with profile_steps(tmp_path, run="r", skip_first=1, wait=2, warmup=1, active=2, repeat=2) as prof:
        written = []
        while not prof.finished:
            prof.step()
            written.append(len(prof.trace_files()))
    assert prof.step_num == 1 + 2 * 5 + 3 == 14
    assert written == [0] * 7 + [1] * 6 + [2]  # window 0 once steps 6, 7 are timed (after the 8th step())
    first, last = (read(p) for p in prof.trace_files())
    assert (recorded(first), recorded(last)) == ([4, 5], [9, 10])
    m0, m1 = first["llmdiag_unprofiled_step_ns"], last["llmdiag_unprofiled_step_ns"]
    assert (m0["steps"], m0["after_steps"], m0["window_steps"]) == ([0, 1, 2], [6, 7], [4, 5])
    assert (m1["steps"], m1["after_steps"], m1["window_steps"]) == ([0, 1, 2, 6, 7], [11, 12, 13], [9, 10])
    assert [e[0] for e in fake_torch].count("stop") == 1


def test_without_wait_steps_an_earlier_window_is_written_as_it_ends(tmp_path, fake_torch, clock):
    with profile_steps(tmp_path, run="r", skip_first=1, warmup=1, active=2, repeat=2) as prof:
        for _ in range(4):
            prof.step()
        assert len(prof.trace_files()) == 1  # steps 2, 3 recorded; step 4 warms up the next cycle: nothing to time
        while not prof.finished:
            prof.step()
    metas = [read(p)["llmdiag_unprofiled_step_ns"] for p in prof.trace_files()]
    assert [(m["window_steps"], m["after_steps"]) for m in metas] == [([2, 3], []), ([5, 6], [7, 8, 9])]


def test_from_step0_times_only_the_steps_after(tmp_path, fake_torch):
    with profile_steps(tmp_path, run="r", from_step0=True, active=2, with_stack=True) as prof:
        while not prof.finished:
            prof.step()
    (path,) = prof.trace_files()
    value = read(path)["llmdiag_unprofiled_step_ns"]
    assert value["steps"] == [] and value["step_ns"] == [] and value["profiler_options"]["with_stack"] is True
    assert value["after_steps"] == [2, 3, 4] and value["window_steps"] == [0, 1]
    assert log_owner[0].cuda.syncs == 2  # one run of timed steps (2-4): a synchronize at each of its edges


def test_timing_can_be_turned_off(tmp_path, fake_torch):
    with profile_steps(tmp_path, run="r", skip_first=3, active=1, time_skipped_steps=False, time_steps_after=0) as prof:
        for n in range(5):
            prof.step()
            assert len(prof.trace_files()) == (1 if n >= 4 else 0)  # written as the window ends, as torch's handler
    assert prof.unprofiled_steps == [] and log_owner[0].cuda.syncs == 0
    value = read(prof.trace_files()[0])["llmdiag_unprofiled_step_ns"]
    assert value["steps"] == [] and value["after_steps"] == []
    with pytest.raises(ValueError):
        profile_steps(tmp_path, time_steps_after=-1)


def test_a_window_still_waiting_is_written_at_exit(tmp_path, fake_torch, monkeypatch):
    registered = []
    monkeypatch.setattr(capture, "atexit", types.SimpleNamespace(register=registered.append,
                                                                 unregister=registered.remove))
    prof = profile_steps(tmp_path, run="r", skip_first=0, warmup=0, active=1).start()
    prof.step()  # step 0 recorded; its trace waits for steps 1-3, and the loop never calls stop()
    assert registered == [prof.stop] and prof.trace_files() == []
    registered[0]()  # what the interpreter's exit runs
    assert len(prof.trace_files()) == 1 and registered == []
    prof.stop()  # a second stop is a no-op
    assert len(prof.trace_files()) == 1


def test_cpu_only_activities(tmp_path, monkeypatch):
    log = []
    monkeypatch.setattr(capture, "_import_torch", lambda: make_fake_torch(log, cuda=False))
    prof = profile_steps(tmp_path, rank=0).start()
    assert log[0][1]["activities"] == ["CPU"]
    prof.stop()


def test_trace_files_lists_this_worker_only(tmp_path, fake_torch):
    prof = profile_steps(tmp_path, run="r", rank=1)
    (tmp_path / "r").mkdir()
    for name in ["rank1.200.pt.trace.json.gz", "rank1.100.pt.trace.json.gz", "rank10.1.pt.trace.json.gz", "x.txt"]:
        (tmp_path / "r" / name).write_bytes(b"")
    assert [p.rsplit("/", 1)[1] for p in prof.trace_files()] == [
        "rank1.100.pt.trace.json.gz",
        "rank1.200.pt.trace.json.gz",
    ]


# --- import hygiene and the HF callback -------------------------------------------------------


def test_import_pulls_in_neither_torch_nor_transformers():
    code = (
        "import sys, tb_llmdiag, tb_llmdiag.capture as c; "
        "from tb_llmdiag.capture import *; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_callback_steps_per_optimizer_step(tmp_path, fake_torch, monkeypatch):
    class TrainerCallback:  # the fake base class
        pass

    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(TrainerCallback=TrainerCallback))
    monkeypatch.setattr(capture, "_LAZY", {})
    cls = capture.ProfilerCallback
    assert issubclass(cls, TrainerCallback)
    assert capture.ProfilerCallback is cls  # created once

    args = types.SimpleNamespace(logging_dir=str(tmp_path / "tb"), output_dir=str(tmp_path), process_index=3)
    cb = cls(run="hf", skip_first=3, active=2)
    cb.on_train_begin(args, None, None)
    assert cb.prof.output_dir == str(tmp_path / "tb" / "hf")
    assert cb.prof.worker == "rank3"
    for _ in range(8):
        cb.on_step_end(args, None, None)
    assert cb.prof.trace_files() == []  # waiting for step 8, the third after the window
    cb.on_train_end(args, None, None)
    assert [e[0] for e in fake_torch].count("step") == 6
    assert [e[0] for e in fake_torch].count("stop") == 1
    (path,) = cb.prof.trace_files()  # training ended first: written with the two steps timed after the window
    assert read(path)["llmdiag_unprofiled_step_ns"]["after_steps"] == [6, 7]


def test_callback_falls_back_to_output_dir(tmp_path, fake_torch, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(TrainerCallback=object))
    monkeypatch.setattr(capture, "_LAZY", {})
    args = types.SimpleNamespace(logging_dir=None, output_dir=str(tmp_path), process_index=0)
    cb = capture.ProfilerCallback(from_step0=True, active=1, with_stack=True)
    cb.on_train_begin(args, None, None)
    assert cb.prof.output_dir == str(tmp_path / "runs" / "profile")
    assert fake_torch[0][1]["with_stack"] is True
    cb.on_train_end(args, None, None)


def test_unknown_attribute_still_raises():
    with pytest.raises(AttributeError):
        capture.NoSuchThing  # noqa: B018


# --- with real torch (skipped in CI) ------------------------------------------------------------


def test_real_torch_writes_one_gzip_trace_with_steps(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("RANK", raising=False)
    x = torch.randn(64, 64)
    with capture.profile_steps(tmp_path, run="cpu", skip_first=1, warmup=1, active=2, profile_memory=False) as prof:
        for _ in range(6):
            (x @ x).sum()
            prof.step()
        assert prof.trace_files() == []  # steps 4 and 5 timed after the window; step 6 not run yet
    files = prof.trace_files()
    assert len(files) == 1 and files[0].endswith(".pt.trace.json.gz")
    assert files[0].rsplit("/", 1)[1].startswith("rank0.")
    assert sorted(p.name for p in (tmp_path / "cpu").iterdir()) == [files[0].rsplit("/", 1)[1]]
    with gzip.open(files[0], "rt") as f:
        trace = json.load(f)
    steps = sorted(e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    assert trace["llmdiag_unprofiled_step_ns"]["after_steps"] == [4, 5]
    assert trace["deviceProperties"] is not None and trace["schemaVersion"] == 1  # torch's own header kept


def test_real_torch_writes_unprofiled_steps_and_stack_frames(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("RANK", raising=False)
    x = torch.randn(64, 64)

    def user_work():
        return (x @ x).sum()

    with capture.profile_steps(tmp_path, run="cpu", skip_first=3, warmup=1, active=2, with_stack=True) as prof:
        while not prof.finished:
            user_work()
            prof.step()
    assert prof.step_num == 9
    (path,) = prof.trace_files()
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    meta = trace["llmdiag_unprofiled_step_ns"]
    assert meta["steps"] + meta["after_steps"] == [0, 1, 2, 6, 7, 8] == prof.unprofiled_steps
    assert meta["step_ns"] + meta["after_step_ns"] == prof.unprofiled_step_ns
    assert all(isinstance(n, int) and n > 0 for n in prof.unprofiled_step_ns)
    assert meta["window_steps"] == [4, 5] and meta["schema"] == 3
    assert meta["profiler_options"] == {
        "record_shapes": True,
        "profile_memory": True,
        "with_stack": True,
        "with_flops": False,
    }
    assert meta["synchronized"] == ("run_edges" if torch.cuda.is_available() else False)
    frames = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "python_function"]
    assert any("test_capture.py" in n and "user_work" in n for n in frames), frames[:20]


def test_real_torch_repeated_windows_each_keep_their_own_events(tmp_path, monkeypatch):
    """torch replaces a window's results when the next cycle starts: the helper keeps each until it is written."""
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("RANK", raising=False)
    x = torch.randn(32, 32)
    with capture.profile_steps(tmp_path, run="rep", skip_first=1, wait=1, warmup=1, active=2, repeat=2) as prof:
        for _ in range(10):  # stops one step short of the three after the last window
            (x @ x).sum()
            prof.step()
    assert not prof.finished
    traces = []
    for path in prof.trace_files():
        with gzip.open(path, "rt") as f:
            traces.append(json.load(f))
    steps = [sorted(e["name"] for e in t["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")) for t in traces]
    assert steps == [["ProfilerStep#3", "ProfilerStep#4"], ["ProfilerStep#7", "ProfilerStep#8"]]
    metas = [t["llmdiag_unprofiled_step_ns"] for t in traces]
    assert [(m["steps"], m["after_steps"]) for m in metas] == [([0, 1], [5]), ([0, 1, 5], [9])]
    from tb_llmdiag.ingest import load_trace

    meta = load_trace(prof.trace_files()[1]).metadata  # the product reads the step after the window
    assert meta["unprofiled_when"] == "after_window" and meta["unprofiled_step_ns"] == metas[1]["after_step_ns"]
