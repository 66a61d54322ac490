"""The compiled scanner (tb_llmdiag/ingest/kineto/_scan.c) against the pure-Python one, ``Columns.scan_py``.

``Columns.scan`` must give the same ``Scan`` as ``scan_py`` for any decoded piece: every column
(values, NaNs and dtypes), the same row events, and the same names, shapes and string ids interned
in the same order. Checked on real traces fed piece by piece, on generated pieces with odd values
(hypothesis), and on the whole reader with and without the extension.

Without the extension built these tests skip, unless ``LLMDIAG_REQUIRE_SCAN_EXT=1`` (CI) makes
that a failure, so the fast path cannot go untested there.
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tb_llmdiag.ingest.kineto import reader as c
from tb_llmdiag.ingest.kineto import columns as kc
from tb_llmdiag.ingest.validate import LIMIT_US
from tb_llmdiag.ingest.kineto import structs as ks
from tb_llmdiag.ingest.kineto import scan_ext as ext_mod
from tb_llmdiag.model import EventTable, MemoryTable

from tracepaths import TEST_DATA, shared_trace

GPU_FIXTURES = sorted(TEST_DATA.glob("gpu_*/*.pt.trace.json.gz"))
SHARED = [
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # ROCm: string streams
    "hta/mtia_trace_single_rank/mtia_rank_0.json.gz",
    "hta/triton_example/triton_example.json.gz",  # cuLaunchKernel (cuda_driver)
    "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "kineto_resnet50/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",  # 2021 format
    "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
]
ROCM = SHARED[0]
PIECE = 5000  # events per piece, about what the reader decodes at once


def require_scan_ext() -> None:
    """Skip when the C scanner is not built; fail instead under LLMDIAG_REQUIRE_SCAN_EXT=1."""
    if ext_mod.ext is not None:
        return
    if os.environ.get("LLMDIAG_REQUIRE_SCAN_EXT") == "1":
        pytest.fail("LLMDIAG_REQUIRE_SCAN_EXT=1 but the C scanner tb_llmdiag.ingest.kineto._scan is not built "
                    "(build it: pip install -e . or python setup.py build_ext --inplace)")
    pytest.skip("the C scanner tb_llmdiag.ingest.kineto._scan is not built")


@pytest.fixture
def scan_ext() -> None:
    require_scan_ext()


# ---------------------------------------------------------------------------------------- comparing


def assert_same_array(fast: np.ndarray, slow: np.ndarray, what: str) -> None:
    assert fast.dtype == slow.dtype, f"{what}: dtype {fast.dtype} (scan) != {slow.dtype} (scan_py)"
    assert fast.shape == slow.shape, f"{what}: shape {fast.shape} (scan) != {slow.shape} (scan_py)"
    np.testing.assert_array_equal(fast, slow, err_msg=f"{what}: scan != scan_py")  # NaN == NaN here


def assert_same_scan(fast: kc.Scan, slow: kc.Scan) -> None:
    """Two Scan results field by field: the same row events (by identity), columns and memory samples."""
    assert len(fast.xs) == len(slow.xs), f"xs: {len(fast.xs)} rows (scan) != {len(slow.xs)} (scan_py)"
    assert all(a is b for a, b in zip(fast.xs, slow.xs)), "xs: not the same events"
    for name in kc.Scan._fields:
        if name not in ("xs", "memory", "flows"):
            assert_same_array(getattr(fast, name), getattr(slow, name), name)
    for part in ("memory", "flows"):  # the memory samples' columns, and the fwdbwd flows' ({} without one)
        assert getattr(fast, part).keys() == getattr(slow, part).keys(), part
        for name in getattr(fast, part):
            assert_same_array(getattr(fast, part)[name], getattr(slow, part)[name], f"{part}.{name}")


def assert_same_interning(fast: kc.Columns, slow: kc.Columns) -> None:
    """What the two Columns interned, in the same order: names (and their flags), shapes, string ids."""
    assert fast.names.texts == slow.names.texts
    assert fast.names.flags == slow.names.flags
    assert list(fast.names.items()) == list(slow.names.items())
    assert list(fast.shapes.items()) == list(slow.shapes.items())
    assert list(fast.str_ids.items()) == list(slow.str_ids.items())
    assert dict(fast.kind_of) == dict(slow.kind_of)


def outcome(fn: Callable[..., kc.Scan], events: list[Any]) -> kc.Scan | type[BaseException]:
    """fn(events), or the type of what it raised (both scanners must then raise the same)."""
    try:
        return fn(events)
    except Exception as exc:  # noqa: BLE001 - compared, not swallowed
        return type(exc)


def assert_same_pieces(pieces: list[list[Any]], may_raise: bool = False) -> tuple[kc.Columns, kc.Columns]:
    """Feed the same pieces, in order, to two fresh Columns (scan / scan_py) and compare each result.
    ``may_raise``: both raising the same exception type counts as agreeing (generated odd values)."""
    fast, slow = kc.Columns(), kc.Columns()
    for i, piece in enumerate(pieces):
        got, want = outcome(fast.scan, piece), outcome(slow.scan_py, piece)
        if isinstance(got, type) or isinstance(want, type):
            assert may_raise and got is want, f"piece {i}: scan gave {got!r}, scan_py {want!r}"
            break  # both raised alike: the interners may stop anywhere
        assert_same_scan(got, want)
    else:
        assert_same_interning(fast, slow)
    return fast, slow


def split(events: list[Any], size: int) -> list[list[Any]]:
    return [events[i: i + size] for i in range(0, len(events), size)] or [[]]


# -------------------------------------------------------------------------------------- real traces


def decoded_events(path: Path) -> list[Any]:
    """The file's traceEvents decoded as the reader decodes them (exact timestamps where it would)."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    exact = ks.needs_exact_ts(data, len(data))
    return ks.decode_envelope(data, [], exact).traceEvents


def real_trace(param: str) -> Path:
    return shared_trace(param[len("shared:"):]) if param.startswith("shared:") else Path(param)


REAL_PARAMS = [str(p) for p in GPU_FIXTURES] + [f"shared:{rel}" for rel in SHARED]


def test_fixtures_present() -> None:
    assert len(GPU_FIXTURES) >= 5, GPU_FIXTURES  # the glob found the fixtures


@pytest.mark.parametrize("param", REAL_PARAMS, ids=[Path(p).parent.name for p in REAL_PARAMS])
def test_real_trace_pieces(param: str, scan_ext: None) -> None:
    events = decoded_events(real_trace(param))
    assert events
    size = max(1, min(PIECE, -(-len(events) // 3)))  # a few pieces even for a small trace
    fast, _ = assert_same_pieces(split(events, size))
    assert fast.names.texts


def test_empty_and_rowless(scan_ext: None) -> None:
    events = ks.decode_events(msgspec.json.encode([
        {"ph": "i", "name": "mark", "ts": 3},
        {"ph": "I", "name": "[memory]", "ts": 4},  # no args: not a sample
        {"ph": "s", "id": 1, "ts": 5}, {"ph": "f", "id": 1, "ts": 6},
        {"ph": "M", "name": "process_name", "args": {"name": "python"}},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": 1, "dur": 9},  # a skipped category
    ]), [])
    for piece in ([], events):
        fast, _ = assert_same_pieces([piece])
        assert kc.Columns().scan(piece).kind.size == 0
        assert not fast.names.texts


# ------------------------------------------------------------------------------- generated pieces

CATS = st.sampled_from([
    "cpu_op", "kernel", "cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset", "python_function",
    "user_annotation", "gpu_user_annotation", "cuda_sync", "Operator", "Kernel", "Runtime",
    "Trace", "fwdbwd", "", "ac2g", None,
])
NAMES = st.one_of(
    st.sampled_from(["[memory]", "ProfilerStep#3", "ProfilerStep#", "aten::mm", "aten::linear",
                     "flash_attn::fwd", "cudaLaunchKernel", "1", "0", ""]),
    st.text(max_size=6), st.integers(-3, 3), st.floats(-3, 3, allow_nan=False), st.none(),
)
NUMBER_TEXT = st.one_of(st.integers(-10**6, 10**12).map(str), st.floats(-1e6, 1e12, allow_nan=False).map(repr))
TIMES = st.one_of(
    st.integers(-10**6, 2**70), st.floats(-1e6, 1e17, allow_nan=False), NUMBER_TEXT,
    st.sampled_from(["", "abc", "1e3", " 12 ", "nan", "inf", "0x10"]), st.none(),
)
HUGE = st.integers(2**63, 2**64 + 5)
IDS = st.one_of(
    st.integers(-3, 2**40), st.sampled_from(["stream 7", "PyTorch Profiler", "Spans", "0x1f", "7", " 12 ", "stream"]),
    st.integers(-3, 10**6).map(float), st.none(),  # a whole float decodes to an int
    st.floats(-10, 1e6, allow_nan=False),  # not whole: the event is dropped, and whole-list decoding goes lenient
)
DIMS = st.recursive(st.lists(st.integers(0, 4096), max_size=3), lambda inner: st.lists(inner, max_size=3), max_leaves=6)
ARGS = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "correlation": st.one_of(st.integers(-1, 2**40), NUMBER_TEXT, st.just("abc"), st.none()),
    "stream": st.one_of(st.integers(-1, 100), st.sampled_from(["stream 3", "3", "s", "0x7"]), st.none()),
    "device": st.one_of(st.integers(-1, 8), st.sampled_from(["0", "cuda:1", "gpu"]), st.none()),
    "bytes": st.one_of(st.integers(-1, 2**40), st.floats(-1, 1e12, allow_nan=False), NUMBER_TEXT, st.none()),
    "Input Dims": DIMS,
    "External id": st.integers(0, 9),
}))
MEM_VALUE = st.one_of(st.integers(-2**40, 2**40), st.floats(-1e12, 1e12, allow_nan=False), st.none())
MEM_ARGS = st.fixed_dictionaries({}, optional={
    "Bytes": MEM_VALUE, "Total Allocated": MEM_VALUE, "Total Reserved": MEM_VALUE,
    "Device Type": st.one_of(st.integers(0, 2), st.sampled_from(["0", "cuda"]), st.none()),
    "Device Id": st.one_of(st.integers(-1, 8), st.sampled_from(["1", "x"]), st.none()),
})


def event_dicts(ids: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Chrome events of the phases the reader meets, any field odd or absent."""
    complete = st.fixed_dictionaries({"ph": st.just("X")}, optional={
        "cat": CATS, "name": NAMES, "ts": TIMES, "dur": TIMES, "tid": ids, "pid": ids, "args": ARGS})
    memory = st.fixed_dictionaries({"ph": st.sampled_from(["i", "I"]), "name": st.just("[memory]"), "ts": TIMES},
                                   optional={"args": st.one_of(MEM_ARGS, st.none()), "s": st.just("t")})
    other = st.fixed_dictionaries({"ph": st.sampled_from(["i", "I", "s", "f", "M"])}, optional={
        "name": NAMES, "ts": TIMES, "cat": CATS, "id": st.one_of(st.integers(0, 9), ids), "tid": ids,
        "args": st.one_of(MEM_ARGS, ARGS)})
    flow = st.fixed_dictionaries({  # a forward-backward flow: its fields odd or absent
        "ph": st.sampled_from(["s", "f"]), "cat": st.sampled_from(["fwdbwd", "fwdbwd", "ac2g", "fwdbwdx", 7])},
        optional={"ts": TIMES, "tid": ids, "id": st.one_of(st.integers(0, 9), ids, st.just([1])), "bp": st.just("e")})
    operator = st.fixed_dictionaries({  # an operator whose Input Dims are kept (model.SHAPE_OPS)
        "ph": st.just("X"), "cat": st.sampled_from(["cpu_op", "Operator", "user_annotation"]),
        "name": st.sampled_from(["aten::mm", "aten::addmm", "flash_attn::fwd", "aten::add"]),
        "ts": TIMES, "dur": TIMES, "args": st.fixed_dictionaries({"Input Dims": DIMS})}, optional={"tid": ids})
    return st.one_of(complete, complete, operator, memory, other, flow)


@st.composite
def piece_lists(draw: st.DrawFn) -> list[list[Any]]:
    """A generated event list decoded as the reader does (lenient per event where types mismatch),
    whole or event by event (typed and leniently converted events then mix), cut in up to 3 pieces.
    Huge ints (beyond int64) in tid/pid come in a minority of the lists."""
    ids = st.one_of(IDS, HUGE) if draw(st.integers(0, 4)) == 0 else IDS
    size = draw(st.integers(1, 30))  # drawn first: st.lists alone stays near 3 events
    dicts = draw(st.lists(event_dicts(ids), min_size=size, max_size=size))
    warnings: list[str] = []
    if draw(st.booleans()):
        events = ks.decode_events(msgspec.json.encode(dicts), warnings, False)
    else:
        events = [e for d in dicts for e in ks.decode_events(msgspec.json.encode([d]), warnings, False)]
    cuts = sorted(draw(st.lists(st.integers(0, len(events)), max_size=2)))
    bounds = [0, *cuts, len(events)]
    return [events[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                           HealthCheck.function_scoped_fixture])
@given(piece_lists())
def test_generated_pieces(scan_ext: None, pieces: list[list[Any]]) -> None:
    assert_same_pieces(pieces, may_raise=True)


# -------------------------------------------------------------------------------- the whole reader


def assert_same_trace(fast: Any, slow: Any) -> None:
    for col in EventTable.COLUMNS:
        assert_same_array(getattr(fast.events, col), getattr(slow.events, col), f"events.{col}")
    assert fast.events.names == slow.events.names
    assert fast.events.shapes == slow.events.shapes
    for f in dataclasses.fields(MemoryTable):
        assert_same_array(getattr(fast.memory, f.name), getattr(slow.memory, f.name), f"memory.{f.name}")
    for attr in ("origin_ns", "warnings", "devices", "distributed", "base_time_ns", "metadata", "source_kind"):
        assert getattr(fast, attr) == getattr(slow, attr), attr
    assert fast.extra.keys() == slow.extra.keys()
    for name in fast.extra:  # the reader's side columns: NCCL args, CUDA graph ids, forward-backward links
        assert_same_array(fast.extra[name], slow.extra[name], f"extra.{name}")


NS_TRACE = "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"  # exact (epoch) timestamps


@pytest.mark.parametrize("param", [str(TEST_DATA / "gpu_seed"), f"shared:{ROCM}", f"shared:{NS_TRACE}"],
                         ids=["gpu_seed", "rocm", "exact_ts"])
def test_reader_same_without_extension(param: str, scan_ext: None, monkeypatch: pytest.MonkeyPatch) -> None:
    path = real_trace(param)
    if path.is_dir():
        (path,) = path.glob("*.pt.trace.json.gz")
    fast = c.read_kineto(str(path))
    monkeypatch.setattr(ext_mod, "ext", None)
    slow = c.read_kineto(str(path))
    assert len(fast.events.ts_ns) > 0
    assert_same_trace(fast, slow)


# ------------------------------------------------------------------- rows: _rows.c against numpy


def assert_same_rows(scans: list[kc.Scan], names: list[str]) -> None:
    """The same scans appended by the compiled ``_append_rows`` and by ``append_rows_py``: the same rows,
    origin, earliest time and rejection counts."""
    fast, slow = kc.Columns(), kc.Columns()
    for cols in (fast, slow):
        for name in names:
            cols.names[name]  # interned in order: ids 0.. as the scans use them
    for s in scans:
        fast._append_rows(s)
        slow.append_rows_py(s)
    for attr in ("origin_us", "ts_min", "rejected", "slab_used"):
        assert getattr(fast, attr) == getattr(slow, attr), attr
    if slow.slab_used:
        for k in kc.ROW_DTYPES:
            assert_same_array(fast.slab[k][: fast.slab_used], slow.slab[k][: slow.slab_used], f"rows.{k}")


def hand_scan(kind: list[int], ts: list[float], dur: list[float], name_id: list[int], tid: list[int],
              pid: list[int], stream: list[int], device: list[int]) -> kc.Scan:
    n = len(kind)
    return kc.Scan(
        xs=[None] * n, kind=np.array(kind, np.uint8), ts=np.array(ts, np.float64), dur=np.array(dur, np.float64),
        name_id=np.array(name_id, np.int32), tid=np.array(tid, np.int64), pid=np.array(pid, np.int64),
        correlation=np.arange(n, dtype=np.int64) - 1, stream=np.array(stream, np.int64),
        device=np.array(device, np.int64), bytes=np.arange(n, dtype=np.int64) * 7, shape_id=np.arange(n, dtype=np.int32),
        memory={},
    )


def test_rows_match_numpy_on_odd_values(scan_ext: None) -> None:
    """NaN/infinite times, negative/NaN/huge durations, ProfilerStep names on each kind, device and stream
    fallbacks, values that wrap in the narrower columns, a piece with no row kept and a later earlier one."""
    nan, inf, lim = float("nan"), float("inf"), LIMIT_US
    names = ["aten::mm", "ProfilerStep#3", "ampere_gemm", "ProfilerStep#4"]
    k = [int(x) for x in (kc.Kind.CPU_OP, kc.Kind.ANNOTATION, kc.Kind.KERNEL, kc.Kind.MEMCPY, kc.Kind.RUNTIME,
                          kc.Kind.GPU_ANNOTATION, kc.Kind.SYNC, kc.Kind.OTHER)]
    first = hand_scan(
        kind=[k[0], k[0], k[1], k[2], k[2], k[3], k[4], k[5], k[6], k[7], k[0], k[0], k[0], k[2], k[1]],
        ts=[5.25, 7.0005, 3.1, 9.9999, nan, 2**40 + 0.5, 12.0, -inf, 8.0, 4.4, 1.0, lim * 2, 6.0, 3.0, 2.5],
        dur=[1.0, nan, 2.5, 0.0015, 1.0, 3.0, -1.0, 1.0, inf, 0.0005, 0.0, 1.0, lim * 2, 1e9, 0.25],
        name_id=[0, 1, 3, 2, 2, 0, 1, 0, 0, 3, 1, 0, 0, 2, 1],
        tid=[11, 11, 12, 7, 7, 8, 11, 7, 9, 13, 11, 11, 11, 2**40, 12],
        pid=[1, 1, 1, 0, 0, 70000, 1, 0, 1, 1, 1, 1, 1, 3, 1],
        stream=[-1, -1, -1, 7, -1, -1, -1, 5, -1, -1, -1, -1, -1, 2**33, -1],
        device=[-1, -1, -1, 0, 1, -1, -1, 2, 40000, -1, -1, -1, -1, -1, -1],
    )
    rejected = hand_scan(kind=[k[0], k[2]], ts=[nan, 1.0], dur=[1.0, -2.0], name_id=[0, 2], tid=[1, 1], pid=[1, 1],
                         stream=[-1, -1], device=[-1, -1])
    earlier = hand_scan(kind=[k[2], k[0]], ts=[0.5, -3.75], dur=[0.1, 0.2], name_id=[2, 1], tid=[7, 11], pid=[0, 1],
                        stream=[7, -1], device=[0, -1])
    assert_same_rows([rejected, first, rejected, earlier], names)
    assert_same_rows([rejected], names)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                           HealthCheck.function_scoped_fixture])
@given(piece_lists())
def test_generated_rows(scan_ext: None, pieces: list[list[Any]]) -> None:
    cols = kc.Columns()
    scans = []
    for piece in pieces:
        try:
            scans.append(cols.scan(piece))
        except Exception:  # noqa: BLE001 - odd values the scanners reject alike (test_generated_pieces)
            return
    assert_same_rows([s for s in scans if s.xs], cols.names.texts)


# ------------------------------------------------------------------------------ the skip / fail rule


def test_missing_extension_skips_or_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ext_mod, "ext", None)
    monkeypatch.delenv("LLMDIAG_REQUIRE_SCAN_EXT", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_scan_ext()
    monkeypatch.setenv("LLMDIAG_REQUIRE_SCAN_EXT", "1")
    with pytest.raises(pytest.fail.Exception, match="not built"):
        require_scan_ext()
