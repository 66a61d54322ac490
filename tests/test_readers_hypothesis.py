"""Property tests of the Kineto/Chrome reader: layouts, cuts, faults at known offsets, arbitrary bytes.

Expectations come from the generated events themselves (Python's json module writes the layouts), not
from the reader.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.kineto import reader, scan_ext
from tb_llmdiag.ingest.kineto.split import SplitState, split_py, split_with
from tb_llmdiag.ingest.kineto.reader import read_kineto

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

names = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
event = st.fixed_dictionaries({
    "ph": st.just("X"),
    "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "user_annotation"]),
    "name": names,
    "ts": st.integers(0, 10**9),
    "dur": st.integers(0, 10**6),
    "pid": st.integers(0, 3),
    "tid": st.integers(0, 3),
    "args": st.fixed_dictionaries({"correlation": st.integers(0, 100), "stream": st.integers(0, 9),
                                   "note": st.text(alphabet='"\\[]{},:ab \n', max_size=8)}),
})
events_st = st.lists(event, min_size=1, max_size=40)


def write(tmp: Path, data: bytes, name: str = "t.json") -> str:
    p = tmp / name
    p.write_bytes(data)
    return str(p)


def layouts(events: list[dict], rng: random.Random) -> list[bytes]:
    doc = {"schemaVersion": 1, "traceEvents": events, "traceName": "x"}
    return [
        json.dumps(doc).encode(),
        json.dumps(doc, indent=rng.randint(0, 6)).encode(),
        json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode(),
        (b'{"traceEvents": [\n' + b",\n".join(json.dumps(e).encode() for e in events) + b"\n]}"),
        json.dumps(events).encode(),  # the JSON Array format
    ]


def columns(trace) -> tuple:
    ev = trace.events
    return (ev.ts_ns.tolist(), ev.dur_ns.tolist(), ev.kind.tolist(), [ev.names[i] for i in ev.name_id],
            ev.correlation.tolist())


@SETTINGS
@given(events=events_st, seed=st.integers(0, 10**6))
def test_every_layout_gives_the_same_columns(tmp_path_factory, events: list[dict], seed: int) -> None:
    tmp = tmp_path_factory.mktemp("layout")
    results = []
    for i, data in enumerate(layouts(events, random.Random(seed))):
        trace = read_kineto(write(tmp, data, f"{i}.json"))
        assert trace.read_state["complete"] is True
        results.append(columns(trace))
    assert all(r == results[0] for r in results)
    # against the events themselves: every one is a row (none is the profiler's own span)
    ts = sorted(e["ts"] for e in events)
    assert len(results[0][0]) == len(events)
    assert results[0][0] == [(t - ts[0]) * 1000 for t in ts]


@SETTINGS
@given(events=events_st, cut_at=st.floats(0.0, 1.0, exclude_max=True))
def test_a_cut_document_is_never_complete(tmp_path_factory, events: list[dict], cut_at: float) -> None:
    data = json.dumps({"traceEvents": events, "traceName": "x"}, indent=2).encode()
    cut = int(len(data) * cut_at)
    if not data[cut:].strip():
        return
    path = write(tmp_path_factory.mktemp("cut"), data[:cut])
    try:
        trace = read_kineto(path)
    except TraceFormatError:
        return
    assert trace.read_state["complete"] is False
    assert trace.read_state["reason"]
    assert len(trace.events.ts_ns) <= len(events)


@SETTINGS
@given(events=st.lists(event, min_size=2, max_size=40), where=st.integers(0, 10**6),
       token=st.sampled_from([b"NaN", b"Infinity", b"\xff", b"]", b"@"]))
def test_a_fault_is_reported_at_its_offset(tmp_path_factory, events: list[dict], where: int, token: bytes) -> None:
    parts = [json.dumps(e).encode() for e in events]
    k = where % len(parts)
    head = b'{"traceEvents": [' + b", ".join(parts[:k]) + (b", " if k else b"")
    data = head + token + b", " + b", ".join(parts[k:]) + b"]}"
    path = write(tmp_path_factory.mktemp("fault"), data)
    # a stray "]" first closes the (empty) array: the metadata after it is invalid 3 bytes on (", {");
    # after an event, "]" follows a trailing comma: an error at the "]" itself
    at = len(head) + (3 if token == b"]" and k == 0 else 0)
    try:
        trace = read_kineto(path)
    except TraceFormatError as exc:
        assert k == 0 and f"at byte {at:,}" in str(exc), str(exc)
        return
    assert trace.read_state["complete"] is False
    assert f"at byte {at:,}" in trace.read_state["reason"]
    assert len(trace.events.ts_ns) == k  # exactly the events before the fault


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300))
def test_any_bytes_give_a_trace_or_a_one_line_error(tmp_path_factory, data: bytes) -> None:
    path = write(tmp_path_factory.mktemp("junk"), b'{"traceEvents": [' + data)
    try:
        trace = read_kineto(path)
    except TraceFormatError as exc:
        assert "\n" not in str(exc)
        return
    assert trace.read_state["complete"] in (True, False)
    assert np.all(trace.events.dur_ns >= 0)


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=200).map(lambda b: b.replace(b"x", b'"').replace(b"y", b"\\")),
       depth=st.integers(1, 4), in_string=st.booleans(), escape=st.booleans(), max_depth=st.integers(1, 6),
       cut=st.integers(0, 200))
def test_the_splitter_is_resumable_and_the_same_in_c(data, depth, in_string, escape, max_depth, cut) -> None:
    state = SplitState(depth, in_string, escape)
    whole = split_py(data, 0, len(data), state, max_depth)
    cut = min(cut, len(data))
    first = split_py(data, 0, cut, state, max_depth)
    if first.close < 0 and first.deep < 0:
        second = split_py(data, cut, len(data), first.state, max_depth)
        last = second.last_comma if second.last_comma >= 0 else first.last_comma
        assert (last, second.close, second.state, second.deep) == tuple(whole)
    if scan_ext.ext is not None:
        assert split_with(scan_ext.ext, data, 0, len(data), state, max_depth) == whole


def test_impossible_shapes_and_memory_samples_are_rejected(tmp_path: Path) -> None:
    doc = {"deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 1000}], "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 5, "pid": 1, "tid": 1,
         "args": {"Input Dims": [[4096, 2**41], [2**41, 16]]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 2, "dur": 5, "pid": 1, "tid": 1,
         "args": {"Input Dims": [[4, 8], [8, 16]]}},
        {"ph": "i", "name": "[memory]", "ts": 3, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 10,
                                                         "Total Allocated": 100, "Total Reserved": 200}},
        {"ph": "i", "name": "[memory]", "ts": 4, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 10,
                                                         "Total Allocated": 100, "Total Reserved": 5000}},
    ]}
    trace = read_kineto(write(tmp_path, json.dumps(doc).encode()))
    ev = trace.events
    assert [json.loads(ev.shapes[i]) if i >= 0 else None for i in ev.shape_id] == [None, [[4, 8], [8, 16]]]
    assert trace.memory.total_reserved_bytes.tolist() == [200]
    assert ("1 operators' recorded shapes hold a dimension beyond 2^40 (or one that is negative or not an "
            "integer) and were ignored") in trace.warnings
    assert "1 allocator samples above their device's memory were rejected" in trace.warnings


@pytest.mark.parametrize("ext", ["c", "python"])
def test_reader_paths_agree_on_a_faulty_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ext: str) -> None:
    parts = [json.dumps({"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": i, "dur": 1}).encode() for i in range(50)]
    data = b'{"traceEvents": [' + b",\n".join(parts[:20]) + b",\nNaN,\n" + b",\n".join(parts[20:]) + b"]}"
    if ext == "python":
        monkeypatch.setattr(scan_ext, "ext", None)
    elif scan_ext.ext is None:
        pytest.skip("the C scanner is not built")
    trace = reader.read_kineto(write(tmp_path, data))
    at = data.index(b"NaN")
    assert trace.read_state["reason"] == f"invalid JSON at byte {at:,} ({at / len(data):.0%}): NaN is not JSON"
    assert len(trace.events.ts_ns) == 20


def test_an_array_trace_with_an_event_named_traceevents_is_read_as_an_array(tmp_path: Path) -> None:
    """Found by the layout property above: in the JSON Array format an event named "traceEvents" (and a "[" in a
    later event's args) must not be taken for the object format's key."""
    events = [
        {"ph": "X", "cat": "kernel", "name": "traceEvents", "ts": 1, "dur": 2, "pid": 0, "tid": 0,
         "args": {"correlation": 1, "stream": 0, "note": ""}},
        {"ph": "X", "cat": "kernel", "name": "a", "ts": 3, "dur": 4, "pid": 0, "tid": 0,
         "args": {"correlation": 2, "stream": 0, "note": "["}},
    ]
    trace = read_kineto(write(tmp_path, json.dumps(events).encode()))
    ts = trace.events.ts_ns.tolist()
    assert [t - ts[0] for t in ts] == [0, 2000] and trace.events.dur_ns.tolist() == [2000, 4000]
    assert [trace.events.names[i] for i in trace.events.name_id] == ["traceEvents", "a"]
