"""Capture over the run (#34): periodic, first and triggered windows written by a real torch profiler on the CPU, their
metadata, the budget, and the llm_diag/* scalars read back with TensorBoard's own reader.

GIVEN a tiny model trained on the CPU whose step also sleeps a fixed time (so the step's length is known, whatever
else runs on the machine), and planted slow steps (a longer sleep).
WHEN `tb_llmdiag.capture.profile_run` drives it.
THEN the trace files' ProfilerStep# markers are exactly the planned windows' steps (read from the raw JSON here), the
metadata names why each window was taken and the unprofiled steps around it, a triggered window records the planted
slow steps, the budget holds, and the scalars are in the event file at each window's step.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import time
import types

import pytest

torch = pytest.importorskip("torch")

from tb_llmdiag.capture import ProfilerCallback, RunProfiler, profile_run  # noqa: E402
from tb_llmdiag.capture_budget import Budget, RecentSteps, Trigger  # noqa: E402
from tb_llmdiag.capture_series import UNPROFILED_STEPS_KEY, WINDOW_KEY  # noqa: E402

STEP_S = 0.02
STEP_NS = 20_000_000


class FakeClock:
    """The helper's clock (ns), advanced by the loop: each step takes its planned time whatever the machine does."""

    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        return self.now


def in_window(prof: RunProfiler, step: int) -> bool:
    return bool(prof.windows) and prof.windows[-1].warmup_step <= step <= prof.windows[-1].last_step


def train(
    prof: RunProfiler,
    steps: int,
    slow: dict[int, float] | None = None,
    tokens: int = 64,
    clock: FakeClock | None = None,
    profiled_extra_ns: int = 0,
) -> None:
    """A tiny model's steps; each also sleeps STEP_S (the planted ones `slow[i]` s). With `clock`, the helper sees
    each step take STEP_NS (or the planted time), plus `profiled_extra_ns` inside a window."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 50))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with prof:
        for i in range(steps):
            x = torch.randint(0, 50, (2, tokens // 2))
            loss = torch.nn.functional.cross_entropy(model(x).view(-1, 50), x.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad()
            planted = (slow or {}).get(i)
            if clock is None or planted:
                time.sleep(planted or STEP_S)
            if clock is not None:
                clock.now += int(planted * 1e9) if planted else STEP_NS
                clock.now += profiled_extra_ns if in_window(prof, i) else 0
            prof.step(tokens=tokens)


def read_trace(path: str) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def profiler_steps(doc: dict) -> dict[int, float]:
    """ProfilerStep#N -> its duration in ms, from the raw events."""
    out = {}
    for e in doc["traceEvents"]:
        m = re.fullmatch(r"ProfilerStep#(\d+)", str(e.get("name", "")))
        if m and e.get("ph") == "X":
            out[int(m.group(1))] = float(e["dur"]) / 1000
    return out


def windows_on_disk(prof: RunProfiler) -> list[dict]:
    docs = [read_trace(p) for p in prof.written]
    return sorted(docs, key=lambda d: d[WINDOW_KEY]["index"])


def test_periodic_windows_are_the_planned_steps_with_their_metadata(tmp_path):
    clock = FakeClock()
    prof = profile_run(tmp_path, "r", every=10, budget=1.0, time_steps_after=2, analyze=False, rank=0, clock=clock)
    train(prof, 45, clock=clock, profiled_extra_ns=5_000_000)
    docs = windows_on_disk(prof)
    # first at step 10 (warm-up 10, recorded 11-13); then the grid 20, 30, 40; the last one's steps after it cut at 45
    assert [d[WINDOW_KEY]["reason"] for d in docs] == ["first", "periodic", "periodic", "periodic"]
    assert [d[WINDOW_KEY]["window_steps"] for d in docs] == [[11, 13], [21, 23], [31, 33], [41, 43]]
    assert [sorted(profiler_steps(d)) for d in docs] == [[11, 12, 13], [21, 22, 23], [31, 32, 33], [41, 42, 43]]
    assert len({d[WINDOW_KEY]["series"] for d in docs}) == 1
    un = [d[UNPROFILED_STEPS_KEY] for d in docs]
    assert un[0]["steps"] == list(range(0, 10)) and un[0]["after_steps"] == [14, 15]
    assert un[1]["steps"] == list(range(16, 20)) and un[1]["after_steps"] == [24, 25]
    assert un[3]["steps"] == list(range(36, 40)) and un[3]["after_steps"] == [44]
    for u in un:
        assert u["schema"] == 3 and set(u["step_ns"] + u["after_step_ns"]) == {STEP_NS}
        assert u["profiler_options"] == {
            "record_shapes": True,
            "profile_memory": False,
            "with_stack": False,
            "with_flops": False,
        }
    w1 = docs[1][WINDOW_KEY]
    assert w1["global_step"] == 21 and w1["warmup_steps"] == [20, 20] and w1["tokens_per_step"] == 64
    assert w1["every"] == 10 and w1["every_effective"] == 10 and w1["trigger"] is None
    assert w1["step_ns"] == STEP_NS and w1["profiled_step_ns"] == [STEP_NS + 5_000_000] * 3
    # each window: 4 profiled steps 5 ms over the 20 ms of the unprofiled ones around it (the clock does not move
    # inside the helper's own calls here); the ledger sums them; the run's wall time so far on the same clock
    assert [d[WINDOW_KEY]["cost"]["window_ns"] for d in docs] == [20_000_000] * 4
    assert [d[WINDOW_KEY]["cost"]["spent_ns"] for d in docs] == [20_000_000, 40_000_000, 60_000_000, 80_000_000]
    cost = w1["cost"]
    assert cost["elapsed_ns"] == 26 * STEP_NS + 8 * 5_000_000  # steps 0-25 ended, two windows of 4 profiled steps
    assert cost["spent_share"] == pytest.approx(40_000_000 / cost["elapsed_ns"]) and cost["budget_share"] == 1.0
    names = os.listdir(tmp_path / "r")
    assert not [n for n in names if n.startswith(".")]  # no temporary file left
    assert sorted(n for n in names if ".pt.trace.json.gz" in n) == sorted(os.path.basename(p) for p in prof.written)


def test_slow_steps_in_a_row_open_a_window_that_records_the_slowdown_once_per_cooldown(tmp_path):
    # 25-28 slow (a slowdown that lasts), 32 within the cooldown, 46 alone past it (one slow step: no window), 50-53
    slow = {i: 0.25 for i in (25, 26, 27, 28, 32, 46, 50, 51, 52, 53)}
    clock = FakeClock()
    prof = profile_run(
        tmp_path, "r", every=None, first_step=None, trigger=3.0, cooldown_steps=20, budget=1.0, analyze=False, rank=0,
        clock=clock,
    )  # fmt: skip
    train(prof, 60, slow, clock=clock)
    docs = windows_on_disk(prof)
    meta = [d[WINDOW_KEY] for d in docs]
    assert [m["reason"] for m in meta] == ["triggered", "triggered"]
    assert [m["trigger"]["step"] for m in meta] == [25, 50]
    # confirmed by the second slow step in a row (26, 51): the window opens after it, warm-up then 3 recorded steps
    assert [m["warmup_steps"] for m in meta] == [[27, 27], [52, 52]]
    assert [m["window_steps"] for m in meta] == [[28, 30], [53, 55]]
    # the median of the last 50 unprofiled steps: 20 ms (step 51's holds 4 + 1 + 1 planted ones among 47)
    assert [m["trigger"] for m in meta] == [
        {
            "step": s, "step_ns": 250_000_000, "median_ns": STEP_NS, "threshold_share": 3.0, "confirm_steps": 2,
            "slow_steps": [s, s + 1], "slow_step_ns": [250_000_000, 250_000_000],
        }
        for s in (25, 50)
    ]  # fmt: skip
    assert meta[0]["before_steps"] == list(range(7, 27))  # the last 20
    assert meta[0]["profiled_step_ns"] == [250_000_000, STEP_NS, STEP_NS]
    steps = profiler_steps(docs[0])
    assert steps[28] >= 250  # the trace holds a planted slow step (a real sleep)
    # the reader's basis: the steps from the trigger on (two), so the steps after the window
    assert docs[0][UNPROFILED_STEPS_KEY]["steps"] == [25, 26]
    assert docs[0][UNPROFILED_STEPS_KEY]["after_steps"] == [31, 32, 33]


def test_budget_arithmetic():
    b = Budget(share=0.1, total_steps=100)
    assert b.periodic_every(10, elapsed_ns=100, step=10, median_ns=10) == 10  # nothing spent, nothing expected
    b.add(50)
    # horizon 100 + 90 x 10 = 1000, room 100: 50 spent + 50 x (1 + 90 // interval) <= 100 only past 90 steps
    assert b.horizon_ns(100, 10, 10) == 1000
    assert b.periodic_every(10, elapsed_ns=100, step=10, median_ns=10) == 100
    assert b.fits(1, 100, 10, 10) and not b.fits(2, 100, 10, 10)
    b.add(200, one_time_ns=150)  # the profiler's first start is left out of the expectation
    assert b.spent_ns == 250 and b.costs_ns == [50, 50] and b.expected_ns() == 50
    assert b.periodic_every(10, elapsed_ns=100, step=10, median_ns=10) is None
    unknown = Budget(share=0.5)
    unknown.add(10)
    assert unknown.horizon_ns(30, 5, 7) == 40 and unknown.fits(1, 30, 5, 7) and not unknown.fits(1, 29, 5, 7)
    with pytest.raises(ValueError):
        Budget(share=0)


def test_trigger_needs_samples_slow_steps_in_a_row_and_respects_the_cooldown():
    recent = RecentSteps(5)
    t = Trigger(share=0.5, cooldown_steps=10, min_samples=3)
    for s, ns in enumerate([100, 100]):
        recent.add(s, ns)
    assert not t.fires(2, 1000, recent)  # two samples only
    recent.add(2, 100)
    assert recent.median_ns() == 100 and not t.fires(3, 150, recent)  # 150 is not over 1.5 x 100
    assert not t.fires(4, 151, recent) and t.streak == [(4, 151)]  # slow, but alone so far
    assert not t.fires(5, 100, recent) and t.streak == []  # the next one is not: no window
    assert not t.fires(6, 151, recent) and not t.fires(8, 151, recent)  # not in a row (7 was inside a window)
    assert t.fires(9, 2000, recent) and t.streak == [(8, 151), (9, 2000)]
    t.fired(9)
    assert t.last_fired_step == 8 and t.streak == []  # the cooldown counts from the first slow step
    assert not t.fires(17, 1000, recent) and not t.fires(18, 1000, recent)  # 17 inside the cooldown: not counted
    assert t.fires(19, 1000, recent) and t.streak == [(18, 1000), (19, 1000)]
    one = Trigger(share=0.5, cooldown_steps=0, min_samples=3, confirm_steps=1)
    assert one.fires(3, 151, recent)
    with pytest.raises(ValueError):
        Trigger(share=0.5, cooldown_steps=0, confirm_steps=0)


def test_the_budget_widens_the_interval_and_holds(tmp_path):
    clock = FakeClock()
    prof = profile_run(
        tmp_path, "r", every=10, first_step=10, budget=0.02, total_steps=200, analyze=False, rank=0, clock=clock
    )
    train(prof, 200, clock=clock, profiled_extra_ns=5_000_000)
    meta = [d[WINDOW_KEY] for d in windows_on_disk(prof)]
    # a window costs 4 x 5 ms = 20 ms; the run is 200 x 20 ms = 4 s, its 2 % about 80 ms: four windows in all.
    # slot 20: elapsed 20 x 20 + 4 x 5 = 420 ms, 180 steps left: horizon 4,020 ms, room 80.4 ms; 20 spent, 20
    #   expected: 20 + 20 x (1 + 180 // k) <= 80.4 needs 180 // k <= 2: k = 70; the next slot at 70
    # slot 70: elapsed 1,440, horizon 4,040, room 80.8; 40 + 20 x (1 + 130 // k) <= 80.8: k = 70; next 140
    # slot 140: elapsed 2,860, horizon 4,060, room 81.2; 60 + 20 x (1 + 60 // k) <= 81.2: k = 70; next 210 (none)
    assert [m["reason"] for m in meta] == ["first", "periodic", "periodic", "periodic"]
    assert [m["global_step"] for m in meta] == [11, 21, 71, 141]
    assert [m["every_effective"] for m in meta] == [10, 70, 70, 70]
    assert [m["cost"]["spent_ns"] for m in meta] == [20_000_000, 40_000_000, 60_000_000, 80_000_000]
    assert prof.budget.spent_ns <= 0.02 * (200 * STEP_NS + 16 * 5_000_000)


def test_scalars_reach_tensorboard_at_each_window_step(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    prof = profile_run(tmp_path, "r", every=15, budget=1.0, rank=0)
    train(prof, 35)
    docs = windows_on_disk(prof)
    acc = EventAccumulator(str(tmp_path / "r"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for tag in (
        "llm_diag/step_ms",
        "llm_diag/tokens_per_s",
        "llm_diag/capture_cost_share",
        "llm_diag/profiled_step_ms",
    ):
        assert tag in tags
    step_ms = {e.step: e.value for e in acc.Scalars("llm_diag/step_ms")}
    tps = {e.step: e.value for e in acc.Scalars("llm_diag/tokens_per_s")}
    profiled = {e.step: e.value for e in acc.Scalars("llm_diag/profiled_step_ms")}
    expect = {d[WINDOW_KEY]["global_step"]: d[WINDOW_KEY]["step_ns"] / 1e6 for d in docs}
    # first at 10 (recorded 11-13, timed after 14-16): the slot at 15 passed inside it, the next is 30
    assert sorted(step_ms) == sorted(expect) == [11, 31]
    for s, ms in expect.items():
        assert step_ms[s] == pytest.approx(ms, rel=1e-6)  # float32 in the event file
        assert tps[s] == pytest.approx(64 / (ms / 1000), rel=1e-6)
        # the profiled step the report reads is at least the sleep of the step, measured from the markers here
        marks = profiler_steps(docs[[d[WINDOW_KEY]["global_step"] for d in docs].index(s)])
        assert profiled[s] >= STEP_S * 1000 and min(marks.values()) <= profiled[s] <= max(marks.values()) + 1
    assert all(r.get("summary") for r in prof.summaries.values())


def test_a_users_writer_gets_the_scalars_and_other_ranks_write_none(tmp_path):
    calls = []
    writer = types.SimpleNamespace(add_scalar=lambda tag, value, step: calls.append((tag, step)), flush=lambda: None)
    clock = FakeClock()
    prof = profile_run(tmp_path, "r", every=None, budget=1.0, analyze=False, rank=0, summary_writer=writer, clock=clock)
    train(prof, 16, clock=clock)
    assert ("llm_diag/step_ms", 11) in calls and not [n for n in os.listdir(tmp_path / "r") if "tfevents" in n]
    other = profile_run(tmp_path, "r1", every=None, budget=1.0, analyze=False, rank=1)
    assert other.sink is None


def test_hf_callback_captures_over_the_run_with_the_trainers_counts(tmp_path):
    pytest.importorskip("transformers")
    cb = ProfilerCallback(str(tmp_path), run="hf", every=5, first_step=2, budget=1.0, analyze=False)
    args = types.SimpleNamespace(process_index=0, output_dir=str(tmp_path))
    state = types.SimpleNamespace(max_steps=20, global_step=0, num_input_tokens_seen=0)
    cb.on_train_begin(args, state, None)
    assert isinstance(cb.prof, RunProfiler) and cb.prof.budget.total_steps == 20
    for _ in range(20):
        time.sleep(0.005)
        state.num_input_tokens_seen += 32
        state.global_step += 1
        cb.on_step_end(args, state, None)
    cb.on_train_end(args, state, None)
    meta = [read_trace(p)[WINDOW_KEY] for p in cb.prof.written]
    # first at 2 (recorded 3-5, timed after 6-8: the slot at 5 passes), then 10 (timed after 14-16: 15 passes)
    assert [m["window_steps"] for m in meta] == [[3, 5], [11, 13]]
    assert [m["tokens_per_step"] for m in meta] == [32, 32]


def test_no_window_past_the_runs_end_and_tokens_of_the_recorded_steps(tmp_path):
    clock = FakeClock()
    prof = profile_run(
        tmp_path, "r", every=10, budget=1.0, total_steps=30, time_steps_after=2, analyze=False, rank=0, clock=clock
    )
    model = torch.nn.Linear(4, 4)
    with prof:
        for i in range(30):
            model(torch.ones(2, 4)).sum().backward()
            clock.now += STEP_NS
            prof.step(tokens=64 if i < 21 else 128)  # the window at 20 records steps 21-23: 128 tokens each
    meta = [d[WINDOW_KEY] for d in windows_on_disk(prof)]
    # slot 30 is the run's end (steps 0-29): no window there; the first at 10, then 20
    assert [m["window_steps"] for m in meta] == [[11, 13], [21, 23]]
    assert [m["tokens_per_step"] for m in meta] == [64, 128]
    assert [w.warmup_step for w in prof.windows] == [10, 20]
