"""The batch-3 GPU captures (docs/captures_3.md): each truth.json agrees with its own trace(s) and with itself.

An independent check of the fixtures the findings tests rely on: the traces are read with gzip + json
(no product code), and every number truth.json derives (medians, the cause's cost, the profiler's share)
is recomputed from the per-step lists it was derived from.
"""

from __future__ import annotations

import gzip
import json
import statistics
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent / "data"

#: capture -> (planted: a without-cause reference exists, with_stack, record_shapes + profile_memory)
CAPTURES: dict[str, tuple[bool, bool, bool]] = {
    "blame_release_memory": (True, False, True),
    "blame_release_memory_stack": (True, True, True),
    "blame_no_cache_alloc": (True, False, True),
    "blame_host_python": (True, True, True),
    "blame_host_pause": (True, False, True),
    "blame_masked_select": (True, False, True),
    "blame_module_hooks": (True, False, True),
    "trust_host_full": (False, True, True),
    "trust_host_default": (False, False, True),
    "trust_host_min": (False, False, False),
    "trust_gpu_full": (False, True, True),
    "trust_gpu_default": (False, False, True),
    "trust_gpu_min": (False, False, False),
    "trust4_host_full": (False, True, True),
    "trust4_host_default": (False, False, True),
    "trust4_host_min": (False, False, False),
    "trust4_gpu_full": (False, True, True),
    "trust4_gpu_default": (False, False, True),
    "trust4_gpu_min": (False, False, False),
    "trust_reduce_overhead": (True, False, True),
    "ddp_intermittent_straggler": (True, False, True),
    "ddp_intermittent_noise": (False, False, True),
}

# a recorded step's ProfilerStep span vs the host clock of truth.json (or 3 %); the window's first span starts after
# the profiler's warmup-to-active switch, 0.4-1.5 ms into the step (1.52 ms on trust4_host_full, with_stack)
STEP_TOLERANCE_MS = 2.0
STEP_TOLERANCE_SHARE = 0.03


@cache
def truth(name: str) -> dict[str, Any]:
    return json.loads((DATA / name / "truth.json").read_text())


@cache
def trace(name: str, rank: int) -> dict[str, Any]:
    (file,) = truth(name)["ranks"][rank]["trace_files"]
    with gzip.open(DATA / name / file, "rt") as f:
        return json.load(f)


def events(name: str, rank: int = 0) -> list[dict[str, Any]]:
    return trace(name, rank)["traceEvents"]


def profiler_steps(name: str, rank: int = 0) -> dict[int, dict[str, Any]]:
    """ProfilerStep#N host annotations by N."""
    return {
        int(e["name"].split("#")[1]): e
        for e in events(name, rank)
        if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")
    }


def inside(e: dict[str, Any], span: dict[str, Any]) -> bool:
    return span["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= span["ts"] + span["dur"]


def median_ns(ms: list[float]) -> int:
    return int(round(statistics.median(ms) * 1e6))


def ref_steps(t: dict[str, Any]) -> int:
    """The reference steps capture_run.py timed: --ref-steps on its command line, 6 by default."""
    argv = t["argv"]
    return int(argv[argv.index("--ref-steps") + 1]) if "--ref-steps" in argv else 6


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_trace_steps_agree_with_truth(name):
    t = truth(name)
    active = t["profiler"]["active_steps"]
    assert t["profiled_steps"] == active and 1 <= len(active) <= 6
    assert len(t["ranks"]) == t["world_size"]
    for rank, r in enumerate(t["ranks"]):
        assert r["rank"] == rank
        steps = profiler_steps(name, rank)
        assert sorted(steps) == active, name
        host_ms = r["profiled"]["host_ms"]
        for s in active[:-1]:
            span_ms = steps[s]["dur"] / 1000
            assert abs(span_ms - host_ms[s]) <= max(STEP_TOLERANCE_MS, STEP_TOLERANCE_SHARE * host_ms[s]), (
                name,
                rank,
                s,
            )
        # the last span also holds the profiler's stop, so it can only be longer
        assert steps[active[-1]]["dur"] / 1000 >= host_ms[active[-1]] - STEP_TOLERANCE_MS


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_truth_summary_is_derived_from_its_lists(name):
    t = truth(name)
    planted, _, _ = CAPTURES[name]
    r0 = t["ranks"][0]
    prof_ms = [r0["profiled"]["host_ms"][s] for s in t["profiled_steps"]]
    assert t["profiled_step_ns"] == [int(round(x * 1e6)) for x in prof_ms]
    assert t["profiled_step_median_ns"] == median_ns(prof_ms)
    with_ms = r0["reference"]["wall_ms"]
    assert len(with_ms) == ref_steps(t) and all(x > 0 for x in with_ms)
    assert t["unprofiled_with_cause_step_ns"] == [int(round(x * 1e6)) for x in with_ms]
    assert t["unprofiled_with_cause_median_ns"] == median_ns(with_ms)
    p, w = statistics.median(prof_ms), statistics.median(with_ms)
    assert t["measured_profiler_overhead_share"] == pytest.approx((p - w) / p, abs=1e-4)
    assert t["planted"] is planted and bool(t["what"])
    if planted:
        without_ms = r0["reference_without_cause"]["wall_ms"]
        assert len(without_ms) == 6
        assert t["unprofiled_without_cause_step_ns"] == [int(round(x * 1e6)) for x in without_ms]
        assert t["unprofiled_without_cause_median_ns"] == median_ns(without_ms)
        assert t["cause_cost_median_ns"] == pytest.approx((w - statistics.median(without_ms)) * 1e6, abs=1)
    else:
        assert t["unprofiled_without_cause_step_ns"] is None and t["cause_cost_median_ns"] is None


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_helper_metadata_holds_the_unprofiled_skipped_steps(name):
    t = truth(name)
    _, with_stack, shapes_memory = CAPTURES[name]
    opts = t["profiler"]
    assert opts["with_stack"] is with_stack
    assert opts["record_shapes"] is shapes_memory and opts["profile_memory"] is shapes_memory
    for rank, r in enumerate(t["ranks"]):
        meta = trace(name, rank)["llmdiag_unprofiled_step_ns"]
        assert meta["steps"] == list(range(opts["skip_first"])) == r["helper_unprofiled"]["steps"]
        assert meta["step_ns"] == r["helper_unprofiled"]["step_ns"] and min(meta["step_ns"]) > 0
        assert meta["synchronized"] is True
        assert meta["profiler_options"] == {
            "record_shapes": shapes_memory,
            "profile_memory": shapes_memory,
            "with_stack": with_stack,
            "with_flops": False,
        }
        kinds = Counter(e.get("cat") for e in events(name, rank))
        assert (kinds["python_function"] > 0) is with_stack
        assert (kinds["cpu_instant_event"] > 0) is (shapes_memory or name == "trust_reduce_overhead")
        shapes = sum(1 for e in events(name, rank) if "Input Dims" in (e.get("args") or {}))
        assert (shapes > 0) is shapes_memory


AFTER_WINDOW = sorted(n for n in CAPTURES if n.startswith("trust4_"))


@pytest.mark.parametrize("name", AFTER_WINDOW)
def test_helper_metadata_of_schema_2_holds_the_steps_after_the_window(name):
    """Batch 4 (docs/captures_4.md): the helper timed --time-after steps right after the profiled window, and the
    truth's reference steps come right after those."""
    t = truth(name)
    (r,) = t["ranks"]
    meta = trace(name, 0)["llmdiag_unprofiled_step_ns"]
    n_after = t["profiler"]["time_steps_after"]
    argv = t["argv"]
    assert n_after == int(argv[argv.index("--time-after") + 1]) == meta["steps_after_window"] == 10
    assert meta["schema"] == 2 and meta["synchronized"] is True
    last_profiled = t["profiled_steps"][-1]
    assert meta["window_steps"] == [t["profiled_steps"][0], last_profiled]
    assert meta["after_steps"] == list(range(last_profiled + 1, last_profiled + 1 + n_after)) == r["helper_unprofiled"]["after_steps"]
    assert meta["after_step_ns"] == r["helper_unprofiled"]["after_step_ns"] == t["helper_after_window_step_ns"]
    assert min(meta["after_step_ns"]) > 0
    assert t["helper_after_window_median_ns"] == pytest.approx(statistics.median(meta["after_step_ns"]), abs=1)
    assert r["reference"]["steps"] == list(range(meta["after_steps"][-1] + 1, meta["after_steps"][-1] + 1 + ref_steps(t)))


def runtime_calls_in_steps(name: str, api: str) -> list[int]:
    steps = profiler_steps(name)
    calls = [e for e in events(name) if e.get("cat") == "cuda_runtime" and e["name"] == api]
    return [sum(1 for e in calls if inside(e, steps[s])) for s in sorted(steps)]


@pytest.mark.parametrize("name", ["blame_release_memory", "blame_release_memory_stack"])
def test_release_memory_frees_inside_its_annotation_every_step(name):
    steps = profiler_steps(name)
    ranges = [e for e in events(name) if e.get("cat") == "user_annotation" and e["name"] == "release_memory"]
    assert sorted(s for s, span in steps.items() for r in ranges if inside(r, span)) == sorted(steps)
    frees = [e for e in events(name) if e.get("cat") == "cuda_runtime" and e["name"] == "cudaFree"]
    for r in ranges:
        assert sum(1 for e in frees if inside(e, r)) >= 15  # the cached blocks, given back
    assert min(runtime_calls_in_steps(name, "cudaMalloc")) >= 15  # and allocated again
    t = truth(name)
    # what the release costs on the host, timed around it, is the step's extra time unprofiled (within 25 %)
    release_ms = statistics.median(t["ranks"][0]["host_work_ms"]["release_memory_ms"][-6:])  # the reference steps
    assert t["cause_cost_median_ns"] / 1e6 == pytest.approx(release_ms, rel=0.25)


def test_no_cache_alloc_mallocs_every_allocation():
    t = truth("blame_no_cache_alloc")
    assert t["env"] == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    assert t["ranks"][0]["reference_without_cause"]["env"] == {}
    assert min(runtime_calls_in_steps("blame_no_cache_alloc", "cudaMalloc")) >= 300
    assert min(runtime_calls_in_steps("blame_no_cache_alloc", "cudaFree")) >= 300
    assert max(runtime_calls_in_steps("blame_host_pause", "cudaMalloc")) == 0  # the caching allocator's steady state


def test_host_python_frame_names_the_user_line_every_step():
    steps = profiler_steps("blame_host_python")
    frames = [
        e for e in events("blame_host_python") if e.get("cat") == "python_function" and "build_masks" in e["name"]
    ]
    assert {e["name"] for e in frames} == {"capture_run.py(251): build_masks"}
    assert sorted(s for s, span in steps.items() for e in frames if inside(e, span)) == sorted(steps)
    t = truth("blame_host_python")
    masks_ms = statistics.median(t["ranks"][0]["host_work_ms"]["build_masks_ms"][-6:])  # the reference steps
    assert 20 <= masks_ms <= 150
    assert t["cause_cost_median_ns"] / 1e6 == pytest.approx(masks_ms, rel=0.35)


def test_host_pause_costs_its_sleep():
    t = truth("blame_host_pause")
    assert min(t["ranks"][0]["host_work_ms"]["log_metrics_ms"]) >= 100
    assert t["cause_cost_median_ns"] / 1e6 == pytest.approx(100, abs=25)
    # nothing recorded around it: no annotation or op of ours names it
    assert not [e for e in events("blame_host_pause") if "log_metrics" in e.get("name", "")]


def test_masked_select_syncs_on_nonzero_with_varying_tokens():
    t = truth("blame_masked_select")
    assert len(set(t["ranks"][0]["tokens_per_step"])) > 3
    steps = profiler_steps("blame_masked_select")
    nonzero = [e for e in events("blame_masked_select") if e.get("cat") == "cpu_op" and e["name"] == "aten::nonzero"]
    assert all(sum(1 for e in nonzero if inside(e, span)) >= 2 for span in steps.values())
    assert min(runtime_calls_in_steps("blame_masked_select", "cudaStreamSynchronize")) >= 3


def test_module_hooks_double_the_launches():
    t = truth("blame_module_hooks")
    assert t["ranks"][0]["activation_stats_hooks"] >= 50
    kernels = {
        n: sum(1 for e in events(n) if e.get("cat") == "kernel") for n in ("blame_module_hooks", "blame_host_pause")
    }
    assert kernels["blame_module_hooks"] > 2 * kernels["blame_host_pause"]


def test_reduce_overhead_replays_graphs_without_graph_ids():
    t = truth("trust_reduce_overhead")
    assert t["model"]["compile"] is None and "reduce-overhead" in t["argv"]
    n = len(t["profiled_steps"])
    assert runtime_calls_in_steps("trust_reduce_overhead", "cudaGraphLaunch") == [1] * n
    kernels = [e for e in events("trust_reduce_overhead") if e.get("cat") == "kernel"]
    with_ids = sum(1 for e in kernels if "graph id" in e.get("args", {}))
    assert with_ids == t["ranks"][0]["trace_facts"]["kernels_with_graph_id"] == 0  # torch 2.11's Kineto writes none
    assert t["ranks"][0]["trace_facts"]["kernels"] == len(kernels)


def test_intermittent_straggler_waits_in_two_steps_only():
    t = truth("ddp_intermittent_straggler")
    r0, r1 = t["ranks"]
    assert r0["delay"] is None and r1["delay"]["profiled_steps"] == [5, 8]
    assert min(r1["host_work_ms"]["tokenise_ms"]) >= 400
    for r in (r0, r1):
        slow = [s for s in t["profiled_steps"] if r["profiled"]["host_ms"][s] > 300]
        assert len(slow) == 2
        assert sum(1 for x in r["reference"]["wall_ms"] if x > 300) == 2
        assert max(r["reference_without_cause"]["wall_ms"]) < 60
    nccl = [
        e["dur"]
        for e in events("ddp_intermittent_straggler", 0)
        if e.get("cat") == "kernel" and "nccl" in e["name"].lower()
    ]
    assert max(nccl) > 300_000  # rank 0 waits in the all-reduce (us)
    twin = truth("ddp_intermittent_noise")
    for rank in (0, 1):
        assert max(twin["ranks"][rank]["profiled"]["host_ms"][s] for s in twin["profiled_steps"]) < 60
        nccl = [
            e["dur"]
            for e in events("ddp_intermittent_noise", rank)
            if e.get("cat") == "kernel" and "nccl" in e["name"].lower()
        ]
        assert max(nccl) < 50_000
