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
    assert s.skip_first == capture.DEFAULT_SKIP_FIRST >= 2
    assert s.warmup == 1 and s.wait == 0 and s.repeat == 1
    assert s.active_steps() == (4, 5, 6)
    assert s.total_steps == 7
    assert [s.phase(i) for i in range(4)] == ["skip", "skip", "skip", "warmup"]


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


class FakeProfile:
    def __init__(self, log, **kwargs):
        self.log, self.kwargs = log, kwargs
        self.steps = 0
        self.metadata = []  # (steps taken when added, key, value): kept out of `log`
        log.append(("profile", kwargs))
        FakeProfile.last = self

    def add_metadata_json(self, key, value):
        self.metadata.append((self.steps, key, value))

    def start(self):
        self.log.append(("start",))

    def step(self):
        self.steps += 1
        self.log.append(("step", self.steps))

    def stop(self):
        self.log.append(("stop",))


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
        tensorboard_trace_handler=lambda d, worker_name=None, use_gzip=False: ("handler", d, worker_name, use_gzip),
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


def test_profile_steps_builds_a_gzip_handler_per_rank(tmp_path, fake_torch):
    with profile_steps(tmp_path, run="myrun", active=2) as prof:
        assert prof.output_dir == str(tmp_path / "myrun")
        assert (tmp_path / "myrun").is_dir()
        kind, kwargs = fake_torch[0]
        assert kind == "profile"
        assert kwargs["activities"] == ["CPU", "CUDA"]
        assert kwargs["schedule"] == ("schedule", dict(skip_first=3, wait=0, warmup=1, active=2, repeat=1))
        assert kwargs["on_trace_ready"] == ("handler", str(tmp_path / "myrun"), "rank0", True)
        assert kwargs["record_shapes"] and kwargs["profile_memory"] and not kwargs["with_stack"]
        for _ in range(10):
            prof.step()
    steps = [e for e in fake_torch if e[0] == "step"]
    # stepping the real profiler stops once the window is written; later step() calls are free
    assert len(steps) == prof.schedule.total_steps == 6
    assert [e[0] for e in fake_torch].count("stop") == 1
    assert prof.finished and prof.step_num == 10


def test_profile_steps_rank_from_env(tmp_path, fake_torch, monkeypatch):
    monkeypatch.setenv("RANK", "2")
    prof = profile_steps(tmp_path, run="r", from_step0=True, active=1, with_stack=True)
    assert prof.worker == "rank2" and prof.rank == 2
    prof.start()
    _, kwargs = fake_torch[0]
    assert kwargs["on_trace_ready"][2] == "rank2"
    assert kwargs["with_stack"] is True
    assert kwargs["schedule"][1]["skip_first"] == 0 and kwargs["schedule"][1]["warmup"] == 0
    prof.step()
    assert prof.finished
    assert fake_torch[-1] == ("stop",)


def test_exit_mid_window_stops_once(tmp_path, fake_torch):
    with profile_steps(tmp_path, active=3) as prof:
        prof.step()
    assert [e[0] for e in fake_torch] == ["profile", "start", "step", "stop"]
    assert prof.phase == "skip"


def test_skipped_steps_are_timed_and_written_once_at_the_window(tmp_path, fake_torch, monkeypatch):
    clock = iter(range(0, 10**9, 1000))  # each read of the clock is 1000 ns after the last
    monkeypatch.setattr(capture.time, "perf_counter_ns", lambda: next(clock))
    with profile_steps(tmp_path, run="r", skip_first=2, wait=1, warmup=1, active=2) as prof:
        fake = FakeProfile.last
        for _ in range(8):
            prof.step()
    # steps 0, 1 skipped and 2 waiting are timed (one clock read at each edge); 3 warms up; 4, 5 recorded
    assert prof.unprofiled_steps == [0, 1, 2]
    assert prof.unprofiled_step_ns == [1000, 1000, 1000]
    assert log_owner[0].cuda.syncs == 6  # a synchronize at both edges of each timed step
    assert len(fake.metadata) == 1
    taken, key, value = fake.metadata[0]
    assert taken == 4 and key == capture.UNPROFILED_STEPS_KEY == "llmdiag_unprofiled_step_ns"
    assert json.loads(value) == {
        "schema": 1,
        "steps": [0, 1, 2],
        "step_ns": [1000, 1000, 1000],
        "synchronized": True,
        "profiler_options": {"record_shapes": True, "profile_memory": True, "with_stack": False, "with_flops": False},
        "schedule": {"skip_first": 2, "wait": 1, "warmup": 1, "active": 2, "repeat": 1},
    }


def test_from_step0_writes_the_options_with_no_unprofiled_step(tmp_path, fake_torch):
    with profile_steps(tmp_path, run="r", from_step0=True, active=2, with_stack=True) as prof:
        fake = FakeProfile.last
        prof.step()
        prof.step()
    assert [(t, k) for t, k, _ in fake.metadata] == [(0, "llmdiag_unprofiled_step_ns")]
    value = json.loads(fake.metadata[0][2])
    assert value["steps"] == [] and value["step_ns"] == [] and value["profiler_options"]["with_stack"] is True
    assert log_owner[0].cuda.syncs == 0


def test_timing_skipped_steps_can_be_turned_off(tmp_path, fake_torch):
    with profile_steps(tmp_path, run="r", active=1, time_skipped_steps=False) as prof:
        fake = FakeProfile.last
        for _ in range(5):
            prof.step()
    assert prof.unprofiled_steps == [] and log_owner[0].cuda.syncs == 0
    assert json.loads(fake.metadata[0][2])["steps"] == []


def test_cpu_only_activities(tmp_path, monkeypatch):
    log = []
    monkeypatch.setattr(capture, "_import_torch", lambda: make_fake_torch(log, cuda=False))
    profile_steps(tmp_path, rank=0).start()
    assert log[0][1]["activities"] == ["CPU"]


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
    cb = cls(run="hf", active=2)
    cb.on_train_begin(args, None, None)
    assert cb.prof.output_dir == str(tmp_path / "tb" / "hf")
    assert cb.prof.worker == "rank3"
    for _ in range(8):
        cb.on_step_end(args, None, None)
    cb.on_train_end(args, None, None)
    assert [e[0] for e in fake_torch].count("step") == 6
    assert [e[0] for e in fake_torch].count("stop") == 1


def test_callback_falls_back_to_output_dir(tmp_path, fake_torch, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(TrainerCallback=object))
    monkeypatch.setattr(capture, "_LAZY", {})
    args = types.SimpleNamespace(logging_dir=None, output_dir=str(tmp_path), process_index=0)
    cb = capture.ProfilerCallback(from_step0=True, active=1, with_stack=True)
    cb.on_train_begin(args, None, None)
    assert cb.prof.output_dir == str(tmp_path / "runs" / "profile")
    assert fake_torch[0][1]["with_stack"] is True


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
    files = prof.trace_files()
    assert len(files) == 1 and files[0].endswith(".pt.trace.json.gz")
    assert files[0].rsplit("/", 1)[1].startswith("rank0.")
    with gzip.open(files[0], "rt") as f:
        trace = json.load(f)
    steps = sorted(e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]


def test_real_torch_writes_unprofiled_steps_and_stack_frames(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("RANK", raising=False)
    x = torch.randn(64, 64)

    def user_work():
        return (x @ x).sum()

    with capture.profile_steps(tmp_path, run="cpu", skip_first=3, warmup=1, active=2, with_stack=True) as prof:
        for _ in range(6):
            user_work()
            prof.step()
    (path,) = prof.trace_files()
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    meta = trace["llmdiag_unprofiled_step_ns"]
    assert meta["steps"] == [0, 1, 2] == prof.unprofiled_steps
    assert meta["step_ns"] == prof.unprofiled_step_ns and all(isinstance(n, int) and n > 0 for n in meta["step_ns"])
    assert meta["profiler_options"] == {
        "record_shapes": True,
        "profile_memory": True,
        "with_stack": True,
        "with_flops": False,
    }
    assert meta["synchronized"] is torch.cuda.is_available()
    frames = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "python_function"]
    assert any("test_capture.py" in n and "user_work" in n for n in frames), frames[:20]
