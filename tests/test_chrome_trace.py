"""The Kineto reader and the engine summary, against an independent plain-``json`` computation.

The independent side parses the file with the standard library (timestamps as exact Decimals), finds
ProfilerStep#N ranges, extends each to the end of the device work launched inside it (by correlation
id), starts each no earlier than the previous steps' ends (steps never overlap), counts kernels, and merges device intervals by hand. The engine must agree to the nanosecond.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.ingest.kineto.reader import read_kineto
from tb_llmdiag.metrics import analyze
from tb_llmdiag.metrics.summary import summarize
from tb_llmdiag.model import Kind

from tracepaths import shared_trace

REAL = [
    "kineto_resnet50/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",  # 2021 format
    "hta/negative_queue_length_values_check/rank0.json.gz",  # cuda_runtime era, multi-stream
    "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",  # fractional-us timestamps
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # ROCm, string streams
    "hta/triton_example/triton_example.json.gz",  # cuLaunchKernel
    "hta/trace_filter/sampled_rank-0.json.gz",  # minified JSON (no Kineto line layout)
]

DEVICE_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
               "gpu_memset": "memset", "Memset": "memset"}
LAUNCH_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
HOST_CATS = {"user_annotation", "cpu_op", "Operator"}  # device-side gpu_user_annotation copies are not steps


def independent(path: Path) -> dict:
    doc = json.loads(gzip.open(path).read(), parse_float=Decimal)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") != "Trace"]
    origin = min(Decimal(e["ts"]) for e in xs).to_integral_value(rounding="ROUND_FLOOR")

    def ns(v) -> int:
        return int((Decimal(v) * 1000).to_integral_value())

    def rel(e) -> tuple[int, int]:
        start = ns(Decimal(e["ts"]) - origin)
        return start, start + ns(e.get("dur", 0))

    dev = [e for e in xs if e.get("cat") in DEVICE_CATS]
    end_by_corr: dict[int, int] = {}
    for e in dev:
        c = e.get("args", {}).get("correlation")
        if c is not None:
            end_by_corr[c] = max(end_by_corr.get(c, -1), rel(e)[1])
    steps = []
    for e in sorted((e for e in xs if str(e["name"]).startswith("ProfilerStep#") and e["cat"] in HOST_CATS),
                    key=lambda e: Decimal(e["ts"])):
        s, h = rel(e)
        end = h
        for r in xs:
            if r.get("cat") in LAUNCH_CATS:
                t = rel(r)[0]
                c = r.get("args", {}).get("correlation")
                if s <= t < h and c in end_by_corr:
                    end = max(end, end_by_corr[c])
        if steps:  # the device may still run earlier steps' work: this step starts when that ends
            s = max(s, max(x[3] for x in steps))
            end = max(end, s)
        steps.append((int(e["name"].split("#")[1]), s, h, end))
    # union of device intervals, by hand
    ivs = sorted(rel(e) for e in dev if rel(e)[1] > rel(e)[0])
    busy, cur_s, cur_e = 0, None, None
    for s, e in ivs:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    kinds = [DEVICE_CATS[e["cat"]] for e in dev]
    return {
        "steps": steps,
        "kernels": kinds.count("kernel"), "memcpys": kinds.count("memcpy"), "memsets": kinds.count("memset"),
        "kernel_ns": sum(rel(e)[1] - rel(e)[0] for e in dev if DEVICE_CATS[e["cat"]] == "kernel"),
        "busy_ns": busy,
        "runtime_calls": sum(1 for e in xs if e.get("cat") in {"cuda_runtime", "Runtime"}),
    }


@pytest.mark.parametrize("rel_path", REAL)
def test_summary_matches_independent_computation(rel_path: str) -> None:
    path = shared_trace(rel_path)
    expected = independent(path)
    trace = read_kineto(str(path))
    analysis = analyze(trace)
    summary = summarize(analysis.context)
    got_steps = [(s["index"], s["start_ns"], s["host_end_ns"], s["end_ns"])
                 for s in analysis.metrics["steps"].get("per_step", [])]
    assert got_steps == expected["steps"]
    assert summary["counts"]["kernels"] == expected["kernels"]
    assert summary["counts"]["memcpys"] == expected["memcpys"]
    assert summary["counts"]["memsets"] == expected["memsets"]
    assert summary["counts"]["runtime_calls"] == expected["runtime_calls"]
    assert summary["device_time_ns"]["kernel"] == expected["kernel_ns"]
    assert summary["device_busy_ns"] == expected["busy_ns"]


def test_every_shared_kineto_trace_loads_or_fails_clearly() -> None:
    root = shared_trace("")
    files = sorted(root.glob("**/*.json.gz"))
    assert len(files) >= 20
    for f in files:
        trace = load_trace(str(f))
        assert len(trace.events) > 0
        assert np.all(np.diff(trace.events.ts_ns) >= 0), f
        assert trace.events.ts_ns.min() == 0 or trace.events.ts_ns.min() < 1000  # origin is the earliest whole us


def test_2021_format_maps_categories_and_memory() -> None:
    trace = read_kineto(str(shared_trace(REAL[0])))
    counts = np.bincount(trace.events.kind, minlength=len(Kind))
    assert counts[Kind.KERNEL] == 8772 and counts[Kind.RUNTIME] == 11923 and counts[Kind.MEMCPY] == 12
    assert counts[Kind.STEP] == 6 and counts[Kind.MEMSET] == 312
    assert len(trace.memory) == 12838
    assert trace.devices[0].name == "Tesla V100-DGXS-32GB" and trace.devices[0].total_memory_bytes == 34084028416
    memcpy = trace.events.of_kind(Kind.MEMCPY)
    assert memcpy.names[memcpy.name_id[0]] == "Memcpy HtoD (Pageable -> Device)"
    assert memcpy.bytes[0] == 19267584 and memcpy.stream[0] == 7 and memcpy.device[0] == 0


def test_rocm_string_streams_and_triton_driver_launch() -> None:
    amd = read_kineto(str(shared_trace(REAL[3])))
    assert amd.devices[0].name.startswith("AMD") or "MI" in amd.devices[0].name
    runtime = amd.events.of_kind(Kind.RUNTIME)
    assert any(n.startswith("hip") for n in runtime.names[: len(runtime.names)])
    tri = read_kineto(str(shared_trace(REAL[4])))
    drv = tri.events.of_kind(Kind.DRIVER)
    assert [drv.name_of(i) for i in range(len(drv))] == ["cuLaunchKernel"]
    kern = tri.events.of_kind(Kind.KERNEL)
    assert kern.correlation.tolist() == drv.correlation.tolist() == [35]


def test_distributed_info_and_input_shapes() -> None:
    path = shared_trace(REAL[1])
    trace = read_kineto(str(path))
    assert (trace.distributed.rank, trace.distributed.world_size, trace.distributed.backend) == (0, 16, "nccl")
    # Input Dims are kept for the ops analyses read (model.SHAPE_OPS) and dropped for the others
    doc = json.loads(gzip.open(path).read())
    want = [e["args"]["Input Dims"] for e in doc["traceEvents"]
            if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::addmm") and "Input Dims" in e["args"]]
    cpu = trace.events.of_kind(Kind.CPU_OP)
    is_mm = cpu.name_mask(lambda n: n in ("aten::mm", "aten::addmm"))
    got = [json.loads(cpu.shapes[i]) for i in cpu.shape_id[is_mm]]
    assert len(want) > 0 and sorted(map(str, got)) == sorted(map(str, want))
    assert (cpu.shape_id[cpu.name_mask(lambda n: n == "aten::select")] == -1).all()


def test_cpu_only_trace_has_no_device_events() -> None:
    trace = read_kineto(str(shared_trace("hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")))
    summary = summarize(analyze(trace).context)
    assert summary["counts"]["kernels"] == 0 and summary["device_busy_ns"] == 0
    assert summary["distributed"]["rank"] == 34


# --- bad input -----------------------------------------------------------------------------------

def _write(tmp_path: Path, name: str, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


SMALL = (b'{"schemaVersion": 1, "traceEvents": [\n  {\n    "ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, '
         b'"tid": 1, "ts": 10.5, "dur": 2\n  },\n  {\n    "ph": "X", "cat": "kernel", "name": "k", "pid": 0, '
         b'"tid": 7, "ts": 11, "dur": 3.25, "args": {"stream": 7, "device": 0, "correlation": 5}\n  }\n]}')


def test_small_inline_trace_values() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        trace = read_kineto(_write(Path(d), "t.json", SMALL))
    ev = trace.events
    assert ev.ts_ns.tolist() == [500, 1000] and ev.dur_ns.tolist() == [2000, 3250]
    assert ev.kind.tolist() == [Kind.CPU_OP, Kind.KERNEL]
    assert ev.stream.tolist() == [-1, 7] and ev.device.tolist() == [-1, 0] and ev.tid.tolist() == [1, -1]
    assert trace.origin_ns == 10_000


@pytest.mark.parametrize("data, message", [
    (b"", "empty"),
    (b"hello world", "not a Chrome/Kineto trace"),
    (b'{"schema": "1.0", "nodes": []}', "not a Chrome/Kineto trace"),
    (b'{"traceEvents": []}', "no timed events"),
    (b'{"traceEvents": [{"ph": "X", "na', "truncated"),
    (gzip.compress(SMALL)[:25], "truncated"),
    (b"\x1f\x8b\x08\x00garbage", ""),
])
def test_bad_input_gives_one_line_error(tmp_path: Path, data: bytes, message: str) -> None:
    with pytest.raises(TraceFormatError) as exc:
        load_trace(_write(tmp_path, "bad.json.gz" if data[:2] == b"\x1f\x8b" else "bad.json", data))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_truncated_kineto_file_keeps_the_events_before_the_cut(tmp_path: Path) -> None:
    raw = gzip.open(shared_trace(REAL[1])).read()
    cut = raw[: len(raw) // 2]
    trace = read_kineto(_write(tmp_path, "half.json", cut))
    assert 0 < len(trace.events) < 67216
    assert any("truncated" in w for w in trace.warnings)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=len(SMALL)), st.binary(max_size=40))
def test_any_truncation_or_garbage_is_a_trace_or_a_format_error(cut: int, junk: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for data in (SMALL[:cut], SMALL[:cut] + junk, junk):
            path = _write(Path(d), "t.json", data)
            try:
                trace = load_trace(path)
            except TraceFormatError as exc:
                assert "\n" not in str(exc)
            else:
                assert len(trace.events) >= 1


def _trace_of(tmp_path: Path, events: list[dict]) -> object:
    return read_kineto(_write(tmp_path, "t.json", json.dumps({"traceEvents": events}).encode()))


def test_ids_beyond_int64_are_interned_not_a_crash(tmp_path: Path) -> None:
    huge = 2**63 + 5
    trace = _trace_of(tmp_path, [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": huge, "ts": 1, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": "99999999999999999999999", "ts": 2, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": huge, "ts": 3, "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": huge, "tid": 7, "ts": 4, "dur": 1, "args": {"stream": 7}},
        {"ph": "X", "cat": "cpu_op", "name": "d", "pid": 1, "tid": 7.0, "ts": 5, "dur": 1},
    ])
    tid = trace.events.tid.tolist()
    # the same huge id is one thread, the other huge one another, both outside the int range of real ids
    assert tid[0] == tid[2] and tid[0] != tid[1] and tid[0] < -(1 << 39) and tid[1] < -(1 << 39)
    assert tid[4] == 7 and trace.events.stream.tolist()[3] == 7


def test_numbers_too_big_for_a_float_are_unusable_timestamps(tmp_path: Path) -> None:
    data = (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 2}, '
            b'{"ph": "X", "cat": "cpu_op", "name": "b", "ts": 1' + b"0" * 400 + b', "dur": 1}]}')
    trace = read_kineto(_write(tmp_path, "t.json", data))
    assert trace.events.names[trace.events.name_id[0]] == "a" and len(trace.events) == 1
    assert any("without a usable timestamp" in w for w in trace.warnings)


def test_epoch_timestamps_with_a_missing_or_odd_ts(tmp_path: Path) -> None:
    base = 1_700_000_000_000_000  # epoch microseconds: read exactly, to the ns of the JSON text
    events = [
        ("a", f"{base}.5"), ("b", None), ("c", "null"), ("d", '"abc"'), ("e", f'"{base + 2}"'), ("f", f"{base + 3}.251"),
    ]
    text = ", ".join('{"ph": "X", "cat": "cpu_op", "name": "%s", %s"dur": 1}' % (n, "" if t is None else f'"ts": {t}, ')
                     for n, t in events)
    trace = read_kineto(_write(tmp_path, "t.json", ('{"traceEvents": [%s]}' % text).encode()))
    ev = trace.events
    assert [ev.names[i] for i in ev.name_id] == ["a", "e", "f"]
    assert ev.ts_ns.tolist() == [500, 2000, 3251] and trace.origin_ns == base * 1000
    assert any("3 events without a usable timestamp" in w for w in trace.warnings)


@pytest.mark.parametrize("odd", [False, True])  # all plain decimals (vectorised) / one odd value (one by one)
def test_negative_exact_timestamps_keep_the_sign_of_their_decimals(tmp_path: Path, odd: bool) -> None:
    base = 1_700_000_000_000_000  # |ts| this large is read exactly, negative or not
    stamps = [f"-{base}.5", f"-{base + 3}.25"] + (['"x"'] if odd else [])
    text = ", ".join('{"ph": "X", "cat": "cpu_op", "name": "e%d", "ts": %s, "dur": 1}' % (i, t)
                     for i, t in enumerate(stamps))
    trace = read_kineto(_write(tmp_path, "t.json", ('{"traceEvents": [%s]}' % text).encode()))
    ev = trace.events
    assert [ev.names[i] for i in ev.name_id] == ["e1", "e0"]
    assert trace.origin_ns == (-base - 4) * 1000  # the whole us at or before -(base + 3.25)
    assert ev.ts_ns.tolist() == [750, 3500]


def test_a_mistyped_event_does_not_drop_its_neighbours_input_dims(tmp_path: Path) -> None:
    # "tid": true fits no type, so the piece is converted event by event (the lenient path)
    trace = _trace_of(tmp_path, [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1, "args": {"Input Dims": [[1, 2], [2, 3]]}},
        {"ph": "X", "cat": "cpu_op", "name": "b", "ts": 2, "dur": 1, "tid": True},
    ])
    ev = trace.events
    assert [ev.names[i] for i in ev.name_id] == ["aten::mm"]
    assert [json.loads(ev.shapes[i]) for i in ev.shape_id] == [[[1, 2], [2, 3]]]
    assert any("1 events of an unexpected shape were skipped" in w for w in trace.warnings)
