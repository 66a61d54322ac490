"""Kineto fields the capture topic reads from a trace file (issue #24): graph ids, top-level fields, hardware counters."""

from __future__ import annotations

import json
from pathlib import Path

from tb_llmdiag.ingest import load_trace
from tb_llmdiag.metrics import analyze
from tb_llmdiag.model import Kind


def _write(tmp_path: Path) -> Path:
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100}]
    for rep, corr in ((0, 50), (1, 60)):
        base = rep * 40
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": base + 1,
                   "dur": 2, "args": {"correlation": corr}})
        for i in range(3):  # the file lists a replay's kernels out of time order: the reader sorts them
            j = 2 - i
            ev.append({"ph": "X", "cat": "kernel", "name": f"k{j}", "pid": 0, "tid": 7, "ts": base + 5 + 4 * j, "dur": 2,
                       "args": {"device": 0, "stream": 7, "correlation": corr, "graph id": 3, "graph node id": 100 + j}})
    doc = {"schemaVersion": 1, "traceEvents": ev, "llmdiag_unprofiled_step_ms": [0.05, 0.06, 0.07],
           "WARNING": ["CUPTI: 4 records were dropped"], "cupti_version": 130001}
    path = tmp_path / "g.pt.trace.json"
    path.write_text(json.dumps(doc))
    return path


def test_graph_ids_and_nodes_land_on_the_replayed_kernels(tmp_path: Path) -> None:
    t = load_trace(str(_write(tmp_path)))
    kern = t.events.kind == Kind.KERNEL
    assert t.extra["graph_id"][kern].tolist() == [3] * 6
    assert sorted(t.extra["graph_node_id"][kern].tolist()) == [100, 100, 101, 101, 102, 102]
    assert (t.extra["graph_id"][~kern] == -1).all()
    assert t.metadata["unprofiled_step_ns"] == [50_000, 60_000, 70_000]
    assert t.metadata["WARNING"] == ["CUPTI: 4 records were dropped"] and t.metadata["cupti_version"] == 130001
    cap = analyze(t).metrics["capture"]
    assert cap["graph_list"] == [{"graph_id": 3, "replays": 2, "kernels": 6, "nodes": 3, "device_ns": 12_000}]
    assert cap["dropped_records"] == 4 and cap["unprofiled_step_ns"] == 60_000


def test_hardware_counters_of_a_real_cupti_profiler_trace() -> None:
    import gzip

    from tracepaths import shared_trace

    path = shared_trace("hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz")
    # independently: every cuda_profiler_range event's numeric args, summed per counter with the json module
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("cat") == "cuda_profiler_range"]
    want: dict[str, list[float]] = {}
    for e in events:
        for k, v in e["args"].items():
            want.setdefault(f"range:{k}", [0, 0.0])
            want[f"range:{k}"][0] += 1
            want[f"range:{k}"][1] += v
    cap = analyze(load_trace(str(path))).metrics["capture"]
    got = {c["name"]: [c["samples"], c["sum"]] for c in cap["hardware_counters"]}
    assert got == want and len(got) == 9 and all(n == 77 for n, _ in got.values())


def test_counter_tracks_are_summed_per_series(tmp_path: Path) -> None:
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100}]
    ev += [{"ph": "C", "name": "GPU 0 Counters", "pid": 9, "ts": 10 * i, "args": {"sm_active": 0.25 * i, "tensor": 1}}
           for i in range(4)]
    path = tmp_path / "c.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    cap = analyze(load_trace(str(path))).metrics["capture"]
    assert cap["hardware_counters"] == [
        {"name": "GPU 0 Counters:sm_active", "samples": 4, "mean": 0.375, "sum": 1.5},
        {"name": "GPU 0 Counters:tensor", "samples": 4, "mean": 1.0, "sum": 4.0},
    ]
