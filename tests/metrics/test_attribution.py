"""The host call forest (metrics/host/tree.py) and the attribution topic (metrics/attribution/topic.py) on hand-made
traces whose answer is worked out by hand in each test (issue #23)."""

from __future__ import annotations

import dataclasses

import numpy as np
from minitrace import GEMM, US, E, kernel, launch, make_trace, op, step

from tb_llmdiag.metrics import analyze
from tb_llmdiag.metrics.attribution.topic import attribute
from tb_llmdiag.metrics.host.tree import HostForest
from tb_llmdiag.model import Kind, Trace


def on_threads(trace: Trace, tids: dict[str, int]) -> Trace:
    """The trace with host events of the given names moved to other threads (all others stay on tid 1)."""
    ev = trace.events
    tid = ev.tid.copy()
    for name, t in tids.items():
        tid[(np.array(ev.names)[ev.name_id] == name) & (ev.tid >= 0)] = t
    return dataclasses.replace(trace, events=dataclasses.replace(ev, tid=tid))


def parents(trace: Trace) -> list[tuple[str, str | None]]:
    """(event, its parent) for every host event of the forest, in time order."""
    f = HostForest.build(trace)
    ev = trace.events
    pairs = []
    for pos in np.argsort(ev.ts_ns[f.rows], kind="stable").tolist():
        p = int(f.parent[pos])
        pairs.append((ev.name_of(int(f.rows[pos])), ev.name_of(int(f.rows[p])) if p >= 0 else None))
    return pairs


def parent_names(trace: Trace) -> dict[str, str | None]:
    return dict(parents(trace))


def release_memory() -> Trace:
    """One 100 us step: K1 (launched at 1-3 us) runs 5-15 us; the range ``release_memory`` (20-60 us) holds three
    cudaFree calls (22-30, 32-40, 42-50 us); aten::mm (62-70 us) launches K2 (64-66 us), which runs 70-90 us."""
    return make_trace([
        step(1, 0, 100 * US),
        launch(1 * US, 2 * US, corr=1), kernel(GEMM, 5 * US, 10 * US, corr=1),
        E(Kind.ANNOTATION, "release_memory", 20 * US, 40 * US),
        E(Kind.RUNTIME, "cudaFree", 22 * US, 8 * US), E(Kind.RUNTIME, "cudaFree", 32 * US, 8 * US),
        E(Kind.RUNTIME, "cudaFree", 42 * US, 8 * US),
        op("aten::mm", 62 * US, 8 * US), launch(64 * US, 2 * US, corr=2), kernel(GEMM, 70 * US, 20 * US, corr=2),
    ])


def test_parents_nest_the_host_events() -> None:
    # GIVEN the release_memory step WHEN its forest is built THEN each event hangs under the one enclosing it
    assert parents(release_memory()) == [
        ("cudaLaunchKernel", None), ("release_memory", None), ("cudaFree", "release_memory"),
        ("cudaFree", "release_memory"), ("cudaFree", "release_memory"), ("aten::mm", None),
        ("cudaLaunchKernel", "aten::mm")]
    f = HostForest.build(release_memory())
    names = release_memory().events.names
    # cudaLaunchKernel at the root and under aten::mm are two nodes; the three cudaFree calls one
    chains = sorted(" > ".join(names[int(f.node_name[n])] for n in f.path(i)) for i in range(f.n_nodes))
    assert chains == ["aten::mm", "aten::mm > cudaLaunchKernel", "cudaLaunchKernel", "release_memory",
                      "release_memory > cudaFree"]


def test_idle_time_goes_to_the_innermost_open_event() -> None:
    # GIVEN idle gaps 0-5, 15-70 and 90-100 us (all launched from tid 1)
    trace = release_memory()
    a = analyze(trace)
    at = attribute(a.context, a.breakdown)
    assert at is not None
    names = trace.events.names
    by_chain = {" > ".join(names[int(at.forest.node_name[n])] for n in at.forest.path(i)): i
                for i in range(at.forest.n_nodes)}
    # THEN by hand: the root launch call holds 1-3 us; release_memory 20-60 us, 24 us of it in cudaFree;
    # aten::mm 62-70 us, 2 us in its launch; nothing is open 0-1, 3-5, 15-20, 60-62 and 90-100 us (20 us)
    assert at.idle_ns == 70 * US and at.outside_ns == 20 * US
    assert at.idle[by_chain["release_memory"]] == 40 * US
    assert at.self_idle[by_chain["release_memory"]] == 16 * US
    assert at.self_idle[by_chain["release_memory > cudaFree"]] == 24 * US
    assert at.calls[by_chain["release_memory > cudaFree"]] == 3
    assert at.idle[by_chain["aten::mm"]] == 8 * US and at.self_idle[by_chain["aten::mm"]] == 6 * US
    assert at.self_idle[by_chain["cudaLaunchKernel"]] == 2 * US
    assert at.self_idle.sum() + at.outside_ns == at.idle_ns
    # and the GPU's work goes to the launch calls: K1 (10 us) at the root, K2 (20 us) under aten::mm
    assert at.busy[by_chain["aten::mm"]] == 20 * US and at.busy[by_chain["cudaLaunchKernel"]] == 10 * US


def test_the_topic_names_the_range_and_what_holds_it() -> None:
    m = analyze(release_memory()).metrics["attribution"]
    # release_memory holds 40 of the 70 us idle: it dominates; 24 us of it are in cudaFree (>= half: allocator)
    assert m["dominant"] is True and m["top_name"] == "release_memory" and m["top_chain"] == "release_memory"
    assert m["top_kind"] == "allocator" and m["top_ns"] == 40 * US and m["top_share"] == 0.4
    assert m["top_parts"]["allocator"] == {"idle_ns": 24 * US, "calls": 3}
    assert m["top_parts"]["outside"] == {"idle_ns": 16 * US, "calls": 0}
    assert m["allocator_idle_ns"] == 24 * US and m["allocator_calls_per_step"] == 3.0
    assert m["allocator_chain"] == "release_memory"
    # no pause: nothing is open for at most 10 us at a time, and release_memory's own 16 us is under 1 ms a call
    assert m["unrecorded_ns"] == 0 and m["unrecorded_chain"] is None
    assert m["frames"] is False and m["top_source"] is None


def test_a_range_opened_inside_python_frames_still_nests() -> None:
    # GIVEN with_stack frames: train.py's step (0-100 us) calls helpers.open_range (5-8 us), inside which the
    # range "fwd" starts (6 us); fwd ends at 50 us inside helpers.close_range (49-52 us); inside fwd, torch's
    # Module._call_impl frame (9-21 us) runs aten::mm (10-20 us), which launches K (12-14 us, runs 60-70 us)
    trace = make_trace([
        step(1, 0, 100 * US),
        E(Kind.PYTHON, "train.py(10): step", 0, 100 * US),
        E(Kind.PYTHON, "helpers.py(5): open_range", 5 * US, 3 * US),
        E(Kind.ANNOTATION, "fwd", 6 * US, 44 * US),
        E(Kind.PYTHON, "torch/nn/modules/module.py(1783): _call_impl", 9 * US, 12 * US),
        op("aten::mm", 10 * US, 10 * US), launch(12 * US, 2 * US, corr=1), kernel(GEMM, 60 * US, 10 * US, corr=1),
        E(Kind.PYTHON, "helpers.py(9): close_range", 49 * US, 3 * US),
    ])
    # WHEN the forest is built THEN open_range (which fwd outlives) is left out, fwd hangs under train.py's frame
    # and close_range under fwd, cut at fwd's end; torch's own frame is left out (its op hangs under fwd)
    got = parent_names(trace)
    assert "helpers.py(5): open_range" not in got and "torch/nn/modules/module.py(1783): _call_impl" not in got
    assert got["fwd"] == "train.py(10): step" and got["aten::mm"] == "fwd"
    assert got["helpers.py(9): close_range"] == "fwd"
    f = HostForest.build(trace)
    close = [p for p, r in enumerate(f.rows.tolist()) if trace.events.name_of(r) == "helpers.py(9): close_range"][0]
    assert f.end_ns[close] == 50 * US
    a = analyze(trace)
    at = attribute(a.context, a.breakdown)
    assert at is not None and at.self_idle.sum() + at.outside_ns == at.idle_ns == 90 * US
    # AND chains name the user's frame: the source line is train.py:10
    m = a.metrics["attribution"]
    assert m["frames"] is True
    assert m["nodes"][0]["chain_text"] == "train.py(10): step" and m["nodes"][0]["source"] == "train.py:10"
    assert {n["chain_text"]: n["source"] for n in m["nodes"]}["train.py(10): step > fwd > aten::mm"] == "train.py:10"


def test_a_gap_goes_to_the_thread_that_launches_the_work_ending_it() -> None:
    # GIVEN the main thread (tid 1) in "forward" 0-40 us launching K1 (2-4 us, runs 10-20 us), and the backward
    # thread (tid 2) in "MmBackward0" 30-60 us launching K2 at 50-52 us (runs 60-80 us)
    trace = on_threads(make_trace([
        step(1, 0, 100 * US),
        E(Kind.ANNOTATION, "forward", 0, 40 * US), launch(2 * US, 2 * US, corr=1), kernel(GEMM, 10 * US, 10 * US, corr=1),
        op("MmBackward0", 30 * US, 30 * US), launch(50 * US, 2 * US, corr=2, name="cudaLaunchKernelExC"),
        kernel(GEMM, 60 * US, 20 * US, corr=2),
    ]), {"MmBackward0": 2, "cudaLaunchKernelExC": 2})
    a = analyze(trace)
    at = attribute(a.context, a.breakdown)
    assert at is not None
    names = trace.events.names
    idle = {names[int(at.forest.node_name[i])]: int(at.idle[i]) for i in range(at.forest.n_nodes)}
    # THEN gap 0-10 us (ended by K1) is the main thread's: forward holds it all; gap 20-60 us (ended by K2) is the
    # backward thread's: MmBackward0 holds 30-60 us, 20-30 us nothing; gap 80-100 us (no next work): main thread
    assert idle["forward"] == 10 * US and idle["MmBackward0"] == 30 * US
    assert at.outside_ns == 10 * US + 20 * US
    assert at.idle_ns == 10 * US + 40 * US + 20 * US


def test_equal_starts_put_the_longer_event_outside() -> None:
    trace = make_trace([step(1, 0, 10 * US), op("aten::linear", 0, 5 * US), op("aten::matmul", 0, 4 * US),
                        op("aten::mm", 1 * US, 2 * US), kernel(GEMM, 6 * US, 1 * US)])
    assert parent_names(trace) == {"aten::linear": None, "aten::matmul": "aten::linear", "aten::mm": "aten::matmul"}


def test_without_host_events_or_device_work_it_is_unavailable() -> None:
    only_gpu = make_trace([step(1, 0, 10 * US), kernel(GEMM, 1 * US, 5 * US)])  # a step marker is not a host event
    assert analyze(only_gpu).metrics["attribution"] == {
        "available": False, "reason": "no device activity or no host events in the trace"}
    no_gpu = make_trace([step(1, 0, 10 * US), op("aten::mm", 1 * US, 5 * US)])
    assert analyze(no_gpu).metrics["attribution"]["available"] is False


def test_the_profiler_cost_inside_an_unrecorded_activity_is_its_records() -> None:
    """A 4 ms pure-Python function (a user frame) holds the GPU's idle time with 500 built-in calls recorded inside
    it (the Python tracer's records: ``with_stack``): the profiler's modelled cost there is 500 x 800 ns (the measured
    cost per Python-tracer record, not scaled by the host's speed; less where the records start closer together); a
    4 ms sleep in a range with nothing inside costs nothing."""
    from tb_llmdiag.findings.engine import rule_of
    from tb_llmdiag.findings.structs import Finding, FindingFix, Saving
    from tb_llmdiag.findings.table import RULES
    from tb_llmdiag.findings.trust import unprofiled_saving_ns

    def one(inside: int, views: int = 0, apart_ns: int = 7 * US) -> dict:
        rows = [step(1, 0, 10_000 * US), launch(1 * US, 2 * US, corr=1), kernel(GEMM, 5 * US, 10 * US, corr=1),
                E(Kind.PYTHON, "train.py(12): build_masks", 100 * US, 4_000 * US),
                launch(4_200 * US, 2 * US, corr=2), kernel(GEMM, 4_210 * US, 5_700 * US, corr=2)]
        rows += [E(Kind.PYTHON, "<built-in method append of list object>", 110 * US + apart_ns * i,
                   min(1 * US, apart_ns // 2)) for i in range(inside)]
        # recorded aten::view ops of 5 us after the frame: the host's speed scale (5 / 2.5) ** 2 = 4
        rows += [op("aten::view", 4_300 * US + 10 * US * i, 5 * US) for i in range(views)]
        return analyze(make_trace(rows)).metrics

    m = one(500)["attribution"]
    assert m["unrecorded_chain"] == "train.py(12): build_masks" and m["unrecorded_source"] == "train.py:12"
    assert m["unrecorded_profiler_ns"] == 500 * 800
    # THEN the finding's saving restated unprofiled keeps the share of its time that is not recording
    f = Finding(id="unrecorded_host_time", severity=None, title="", summary="", evidence={}, source=None,
                saving=Saving(ns=3_000_000, step_ns=10_000_000, share=0.3), fix=FindingFix(text="", pytorch="", hf_trainer=""),
                docs=None, metric=None, value=None, threshold=None)
    rule = rule_of(f.id, {}, RULES)
    held = m["unrecorded_ns"]
    assert unprofiled_saving_ns(f, rule, {"attribution": m}, None) == round(3_000_000 * (1 - 500 * 800 / held))
    # AND on a host the views make slow (speed scale 4), the Python tracer's records cost the same: measured per record
    assert one(500, views=3)["attribution"]["unrecorded_profiler_ns"] == 500 * 800
    # AND where the trace's records start 500 ns apart, each one's whole cost is at most that: 500 x 500 ns
    assert one(500, apart_ns=500)["attribution"]["unrecorded_profiler_ns"] == 500 * 500
    # AND with nothing recorded inside, nothing is taken off
    m0 = one(0)["attribution"]
    assert m0["unrecorded_profiler_ns"] == 0
    assert unprofiled_saving_ns(f, rule, {"attribution": m0}, None) == 3_000_000
