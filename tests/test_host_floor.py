"""The host floor (metrics/host/floor.py) and the what-if it bounds (findings/whatif.py, docs/whatif.md).

- A hand-built trace whose host span, blocked time and own time per step are computed by hand.
- The what-if on hand-made metrics: a device-side cut the host floor binds (the saving stops at the floor), one it
  does not bind (the saving is the same as without a floor), and a host-side cause that lowers the floor first.
- The real fp32_math capture: its bf16 fix predicted against the step the capture script measured on the bf16 run
  (tests/data/noise_a/truth.json, its own timers around each profiled step, sharing nothing with the parser).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from tb_llmdiag.findings.diagnosis import diagnose
from tb_llmdiag.findings.engine import Fix, Rule
from tb_llmdiag.findings.structs import Saving, replace
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.findings.whatif import apply_in_sequence
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.host.floor import host_floor_metrics
from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.model import Kind

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "metrics"))
from minitrace import ADD, GEMM, US, E, kernel, launch, make_trace, step  # noqa: E402


def _two_steps() -> list[E]:
    """Two 1000 us steps; in each: a launch at 0-10 us (an 800 us GEMM at 20-820 us), a device sync at
    100-820 us, a launch at 900-910 us (a 40 us add at 910-950 us)."""
    rows: list[E] = []
    for i in range(2):
        b = i * 1000 * US
        rows += [
            step(i, b, 1000 * US),
            launch(b, 10 * US, corr=2 * i + 1),
            kernel(GEMM, b + 20 * US, 800 * US, corr=2 * i + 1),
            E(Kind.RUNTIME, "cudaDeviceSynchronize", b + 100 * US, 720 * US),
            launch(b + 900 * US, 10 * US, corr=2 * i + 2),
            kernel(ADD, b + 910 * US, 40 * US, corr=2 * i + 2),
        ]
    return rows


def test_host_floor_of_a_hand_built_trace() -> None:
    trace = make_trace(_two_steps())
    got = host_floor_metrics(Context.build(trace, find_steps(trace)))
    # per step: span = last launch end 910 us - host start 0; blocked = the sync, 100-820 us (720 us), all of it
    # before the last launch; own = 910 - 720 = 190 us; both steps alike
    assert got == {"available": True, "median_ns": 190 * US, "span_median_ns": 910 * US,
                   "blocked_median_ns": 720 * US, "queue_blocked_median_ns": 0, "queue_blocked_launches": 0,
                   "steps_count": 2, "threads_count": 1}


def test_a_step_that_launches_nothing_has_no_host_floor_of_its_own() -> None:
    # step 0 as above (own 190 us); step 1 has its marker only: nothing to issue, own 0; the median of the two is
    # their mean, 95 us, so the floor compares with the median step
    rows = [r for r in _two_steps() if r.ts < 1000 * US] + [step(1, 1000 * US, 1000 * US)]
    trace = make_trace(rows)
    got = host_floor_metrics(Context.build(trace, find_steps(trace)))
    assert got == {"available": True, "median_ns": 95 * US, "span_median_ns": 455 * US,
                   "blocked_median_ns": 360 * US, "queue_blocked_median_ns": 0, "queue_blocked_launches": 0,
                   "steps_count": 1, "threads_count": 1}


def test_host_floor_is_unavailable_without_steps_or_launches() -> None:
    no_steps = make_trace([r for r in _two_steps() if r.kind != Kind.STEP])
    assert host_floor_metrics(Context.build(no_steps, find_steps(no_steps)))["available"] is False
    no_launch = make_trace([r for r in _two_steps() if r.kind != Kind.RUNTIME or r.name != "cudaLaunchKernel"])
    assert host_floor_metrics(Context.build(no_launch, find_steps(no_launch)))["available"] is False


def _full_queue_step() -> list[E]:
    """One 1000 us GPU-bound step: ten 10 us launches at 0, 10, ..., 90 us queue ten 100 us kernels back to back from
    100 us (they end at 200, 300, ..., 1100 us); the eleventh launch at 100 us finds the queue full and returns 2 us
    after the first kernel ends (100-202 us: 102 us against a 10 us median), its kernel runs 1100-1200 us; the last
    launch at 202-212 us is short again. A 50 us launch at 212-262 us ends near no kernel end: slow, not blocked."""
    rows: list[E] = [step(0, 0, 1300 * US)]
    for k in range(10):
        rows += [launch(k * 10 * US, 10 * US, corr=k + 1), kernel(GEMM, (100 + 100 * k) * US, 100 * US, corr=k + 1)]
    rows += [launch(100 * US, 102 * US, corr=11), kernel(ADD, 1100 * US, 100 * US, corr=11),
             launch(202 * US, 10 * US, corr=12), kernel(ADD, 1200 * US, 10 * US, corr=12),
             launch(212 * US, 120 * US, corr=13), kernel(ADD, 1210 * US, 10 * US, corr=13)]
    return rows


def test_launches_blocked_on_a_full_queue_are_not_the_hosts_own_time() -> None:
    trace = make_trace(_full_queue_step())
    got = host_floor_metrics(Context.build(trace, find_steps(trace)))
    # median launch 10 us (13 calls: eleven of 10 us, one of 102 us, one of 120 us); the 102 us call ends at 202 us,
    # 2 us after the first kernel's end (200 us): blocked from 100 + 10 = 110 us to 202 us, 92 us. The 120 us call
    # (212-332 us) ends 32 us after the kernel end at 300 us, beyond the 20 us slack: the host's own time.
    # span = last launch end 332 us; own = 332 - 92 = 240 us
    assert got == {"available": True, "median_ns": 240 * US, "span_median_ns": 332 * US,
                   "blocked_median_ns": 92 * US, "queue_blocked_median_ns": 92 * US, "queue_blocked_launches": 1,
                   "steps_count": 1, "threads_count": 1}


FIX = Fix("t", "p", "h")
DEV = Rule(id="dev", title="dev", metric="a.dev", above=0, fix=FIX, claims="device", saving="a.dev")
HOST = Rule(id="host", title="host", metric="a.host", above=0, fix=FIX, claims="idle", saving="a.host")


def _metrics(host_floor_ns: int | None, **shares: float) -> dict[str, Any]:
    # a 1000 ns step (mean = median), the GPU busy 800 ns of it, idle 200 ns
    m: dict[str, Any] = {"steps": {"mean_ns": 1000, "median_ns": 1000}, "idle": {"busy_share": 0.8}, "a": shares}
    if host_floor_ns is not None:
        m["host_floor"] = {"available": True, "median_ns": host_floor_ns}
    return m


def test_the_host_floor_binds_a_device_side_cut() -> None:
    # the device finding claims 50 % of the step: r = 500 / 800 of the device pool, 500 ns; alone it would take the
    # step to 500 ns, but the host needs 600 ns per step: the step stops at 600 (saves 400), the GPU's work is 300
    findings, wi = jsonable(diagnose(_metrics(600, dev=0.5), rules=(DEV,)))
    assert findings[0]["saving"] == {"basis": "median_step", "step_ns": 1000, "ns": 400, "share": 0.4,
                                     "step_ns_if_fixed": 600, "pool": "device", "bound_by": "host_floor",
                                     "unprofiled_ns": None, "step_basis": "profiled", "profiled": None}
    assert (wi["step_ns_if_fixed"], wi["host_floor_ns"], wi["compute_floor_ns"]) == (600, 600, 300)
    assert (wi["pool"], wi["bound_by"], wi["all"]["bound_by"]) == ("device", "host_floor", "host_floor")
    assert wi["all"]["step_ns_if_fixed"] == 600 and wi["all"]["compute_floor_ns"] == 300
    assert "bounded by the host's own time per step, 600 ns" in wi["statement"]


def test_a_host_floor_below_the_cut_changes_nothing() -> None:
    findings, wi = jsonable(diagnose(_metrics(400, dev=0.5), rules=(DEV,)))
    plain_findings, plain = jsonable(diagnose(_metrics(None, dev=0.5), rules=(DEV,)))
    assert findings[0]["saving"] == plain_findings[0]["saving"] == {
        "basis": "median_step", "step_ns": 1000, "ns": 500, "share": 0.5, "step_ns_if_fixed": 500, "pool": "device",
        "bound_by": "cause", "unprofiled_ns": None, "step_basis": "profiled", "profiled": None}
    assert wi["step_ns_if_fixed"] == plain["step_ns_if_fixed"] == 500
    assert wi["all"]["step_ns_if_fixed"] == plain["all"]["step_ns_if_fixed"] == 500
    assert (wi["bound_by"], wi["host_floor_ns"], plain["host_floor_ns"]) == ("cause", 400, None)
    assert "bounded by" not in wi["statement"]


def test_a_host_side_cause_lowers_the_floor_before_the_device_cut() -> None:
    # the host-side cause (10 % of the step: half of the 200 ns idle pool, 100 ns) goes first, whatever the rank:
    # step 900, host floor 600 - 100 = 500; then the device cut (500 ns of GPU work) stops at 500: it saves 400
    findings, wi = jsonable(diagnose(_metrics(600, dev=0.5, host=0.1), rules=(DEV, HOST)))
    by = {f["id"]: f["saving"] for f in findings}
    assert (by["host"]["ns"], by["host"]["bound_by"]) == (100, "cause")
    assert (by["dev"]["ns"], by["dev"]["bound_by"]) == (400, "host_floor")
    assert (wi["all"]["step_ns_if_fixed"], wi["all"]["host_floor_ns"], wi["all"]["bound_by"]) == (500, 500, "host_floor")
    assert sum(f["saving"]["share"] for f in findings) == pytest.approx(0.5)


def test_a_launch_overhead_fix_lowers_the_floor_by_its_fraction() -> None:
    # a launch-overhead fix (fewer, larger launches: ``host_floor="fraction"``, as host_bound declares) shortens the
    # host's own time itself: taking half of the 200 ns idle pool (r = 0.5) lowers the floor to
    # min(600 - 100, 600 x 0.5) = 300; the device cut (500 ns) then fits: 400
    launch_rule = Rule(id="host_bound", title="h", metric="a.host_bound", above=0, fix=FIX, claims="idle",
                       saving="a.host_bound", host_floor="fraction")
    findings, wi = jsonable(diagnose(_metrics(600, dev=0.5, host_bound=0.1), rules=(DEV, launch_rule)))
    by = {f["id"]: f["saving"] for f in findings}
    assert (wi["all"]["step_ns_if_fixed"], wi["all"]["host_floor_ns"], wi["all"]["bound_by"]) == (400, 300, "causes")
    # each finding's own saving never exceeds what fixing it alone gives (#25: its what-if is its own): the device
    # cut shows 400 (the floor as the trace shows it), though after the launch fix it adds 500
    assert (by["host_bound"]["ns"], by["dev"]["ns"], by["dev"]["bound_by"]) == (100, 400, "host_floor")


def _folder(name: str) -> Path:
    return REPO / "tests" / "data" / name


def test_fp32_to_bf16_is_predicted_within_5_percent_of_the_measured_bf16_step() -> None:
    # GIVEN the fp32 capture and the bf16 run with nothing else changed (README's predicted-vs-measured table)
    (path,) = sorted(_folder("fp32_math").glob("*.json.gz"))
    trace = load_trace(str(path))
    metrics = compute_metrics(trace, find_steps(trace))
    findings, _ = jsonable(diagnose(metrics))
    share = metrics["precision"]["saving_share"]  # the rule's own share of the summed step time
    fp32 = [replace(f, saving=Saving(share=share, ns=None)) for f in diagnose(metrics)[0] if f.id == "fp32_math"]
    # WHEN only fp32_math's cause is removed
    _, wi = jsonable(apply_in_sequence(fp32, metrics, RULES))
    assert wi is not None and wi["all"]["finding_ids"] == ["fp32_math"]
    # THEN the step stops at the host floor, within 5 % of the bf16 run's profiled steps as the capture script timed
    # them (its own timers: truth.json, active phase); without the floor the bound was 20.0 ms (README, before: +116 %
    # of tokens/s)
    after = json.loads((_folder("noise_a") / "truth.json").read_text())["ranks"][0]["profiled"]
    measured_ns = 1e6 * statistics.median(
        ms for ms, ph in zip(after["host_ms"], after["phases"]) if ph == "active")
    # (on the profiled step, ``what_if.profiled``: the what-if itself is on the step without the profiler's cost)
    prof = wi["profiled"]
    assert prof["all_step_ns_if_fixed"] == prof["host_floor_ns"] == metrics["host_floor"]["median_ns"]
    assert abs(prof["all_step_ns_if_fixed"] - measured_ns) / measured_ns < 0.05
    # and the floor is far above what the GPU alone would need: the bound without it over-promised 2x
    assert wi["all"]["compute_floor_ns"] < 0.6 * measured_ns
