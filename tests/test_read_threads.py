"""The reader's threads against the single-threaded path: inflating a gzip stream ahead (tb_llmdiag/ingest/source.py),
reading ahead and cutting an uncompressed file into pieces on a native thread (kineto/read_ahead.py, _readahead.c)
and sorting half of the columns in finish() (kineto/in_order.py).

``LLMDIAG_READ_THREADS=0`` (``_Columns(threaded=False)``) does both on the caller's thread. Both paths must give
the same Trace, bit for bit, on real traces read in small blocks, on generated pieces with odd values, and on
partial reads (invalid JSON mid-file, a cut gzip: the same read_state and warnings, shares included); an
exception raised on a thread must surface as the same one-line error, and a read that stops early leaves no
thread behind. Each threaded check also asserts that the threads ran.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scan import ROCM, TEST_DATA, assert_same_array, assert_same_trace, piece_lists, real_trace

from tb_llmdiag import api
from tb_llmdiag.ingest.kineto import reader as c
from tb_llmdiag.ingest.kineto import columns as kc
from tb_llmdiag.ingest import source
from tb_llmdiag.ingest.kineto import in_order, read_ahead, scan_ext
from tb_llmdiag.ingest.kineto.split import MAX_DEPTH, SplitState, split_py
from tb_llmdiag.ingest.discover import discover
from tb_llmdiag.model import EventTable


SMALL_BLOCK = 8 << 10  # bytes per block: even a 66 KB fixture comes in several blocks and pieces


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that sorted columns (one per call of in_order._in_order), read blocks
    ahead (one per read: "llmdiag-read", or "native-read" for the native thread), or whose depth scan of a block
    the reader used ("cut-ahead", one per block)."""
    threads: list[str] = []
    cut = read_ahead.ReadAhead.cut

    def used(self: read_ahead.ReadAhead, *args: Any) -> Any:
        got = cut(self, *args)
        if got is not None:
            threads.append("cut-ahead")
        return got

    monkeypatch.setattr(read_ahead.ReadAhead, "cut", used)
    native_blocks = read_ahead.ReadAhead.blocks

    def native(self: read_ahead.ReadAhead) -> Any:
        threads.append("native-read")
        return native_blocks(self)

    monkeypatch.setattr(read_ahead.ReadAhead, "blocks", native)
    inflate = source.Source._inflate

    def reading(self: source.Source) -> Any:
        threads.append(threading.current_thread().name)  # where the stream is inflated: the first block asked for
        yield from inflate(self)

    monkeypatch.setattr(source.Source, "_inflate", reading)
    take = in_order._in_order

    def counting(columns: list[np.ndarray], order: np.ndarray | None) -> list[np.ndarray]:
        threads.append(threading.current_thread().name)
        return take(columns, order)

    monkeypatch.setattr(in_order, "_in_order", counting)
    return threads


def on_a_thread(threads: list[str], prefix: str = "llmdiag-sort") -> bool:
    return any(name.startswith(prefix) for name in threads)


def no_thread_left() -> bool:
    return not any(t.name.startswith(("llmdiag-read", "llmdiag-sort")) for t in threading.enumerate())


def read_both(path: Path | str, monkeypatch: pytest.MonkeyPatch, threads: list[str]) -> tuple[Any, Any]:
    """The trace read single-threaded and read with the threads, in small blocks; asserts the threads ran and
    are gone after."""
    monkeypatch.setattr(source, "BLOCK_BYTES", SMALL_BLOCK)
    monkeypatch.setenv("LLMDIAG_READ_THREADS", "0")
    inline = c.read_kineto(str(path))
    assert not on_a_thread(threads) and not [t for t in threads if t.startswith(("llmdiag-read", "native", "cut"))]
    monkeypatch.setenv("LLMDIAG_READ_THREADS", "1")
    threaded = c.read_kineto(str(path))
    if Path(path).read_bytes()[:2] == b"\x1f\x8b":
        assert on_a_thread(threads, "llmdiag-read") and not on_a_thread(threads, "native"), threads
    else:  # an uncompressed file is read and cut on the native thread
        assert on_a_thread(threads, "native-read") and not on_a_thread(threads, "llmdiag-read"), threads
        assert threads.count("cut-ahead") > 2, threads
    assert native_thread_gone()
    assert no_thread_left()
    return threaded, inline


def native_thread_gone() -> bool:
    """Whether no native read-ahead thread is left. close() joins it, but the kernel may list a joined thread in
    /proc/self/task for a moment longer (the joiner is woken before the thread is reaped): wait up to 2 s for that."""
    deadline = time.monotonic() + 2.0
    while os_threads() and time.monotonic() < deadline:
        time.sleep(0.001)
    return os_threads() == 0


def os_threads() -> int:
    """The process' native read-ahead threads (named by _readahead.c; 0 where /proc is not there to count them)."""
    count = 0
    for task in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else []:
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().strip() == "llmdiag-cut"
        except OSError:  # the thread ended meanwhile
            pass
    return count


def the_trace(param: str) -> Path:
    path = real_trace(param)
    if path.is_dir():
        (path,) = path.glob("*.pt.trace.json.gz")
    return path


@pytest.mark.parametrize("param", [str(TEST_DATA / "gpu_seed"), f"shared:{ROCM}"], ids=["gpu_seed", "rocm"])
def test_real_traces_same_with_the_thread(param: str, monkeypatch: pytest.MonkeyPatch, counted: list[str]) -> None:
    threaded, inline = read_both(the_trace(param), monkeypatch, counted)
    assert len(inline.events.ts_ns) > 100
    assert_same_trace(threaded, inline)
    assert threaded.read_state == inline.read_state
    assert on_a_thread(counted)


def test_threads_wanted_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, want in (("0", False), ("off", False), ("false", False), ("1", True), ("", True)):
        monkeypatch.setenv("LLMDIAG_READ_THREADS", value)
        assert source.threads_wanted() is want, value
    monkeypatch.delenv("LLMDIAG_READ_THREADS")
    assert source.threads_wanted()


def assert_same_finish(threaded: kc.Columns, inline: kc.Columns) -> None:
    got, want = threaded.finish(), inline.finish()
    for col in EventTable.COLUMNS:
        assert_same_array(getattr(got[0], col), getattr(want[0], col), f"events.{col}")
    assert got[0].names == want[0].names and got[0].shapes == want[0].shapes
    assert got[2:] == want[2:]  # origin and warnings
    for name in ("ts_ns", "device", "bytes"):
        assert_same_array(getattr(got[1], name), getattr(want[1], name), f"memory.{name}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                           HealthCheck.function_scoped_fixture])
@given(piece_lists())
def test_generated_pieces_same_with_the_thread(counted: list[str], pieces: list[list[Any]]) -> None:
    threaded, inline = kc.Columns(threaded=True), kc.Columns(threaded=False)
    try:
        for piece in pieces:
            inline.add(piece)
            threaded.add(piece)
    except Exception:  # noqa: BLE001 - odd values both scanners reject alike (test_scan); no sorting then
        return
    assert threaded.has_rows == inline.has_rows
    for attr in ("origin_us", "ts_min", "rejected", "slab_used"):
        assert getattr(threaded, attr) == getattr(inline, attr) or (
            attr == "ts_min" and np.isnan(threaded.ts_min) and np.isnan(inline.ts_min)
        ), attr
    if inline.has_rows:
        counted.clear()
        assert_same_finish(threaded, inline)
        assert on_a_thread(counted)  # one slab: always copied or sorted in finish()


def test_an_error_on_the_thread_is_the_same_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    take = in_order._in_order
    threads: list[str] = []

    def failing(columns: list[np.ndarray], order: np.ndarray | None) -> list[np.ndarray]:
        """Fails on the kind column (uint8): on the thread when there is one, else on the caller's."""
        threads.append(threading.current_thread().name)
        if any(column.dtype == np.uint8 for column in columns):
            raise ValueError("sorting failed: an odd column")
        return take(columns, order)

    monkeypatch.setattr(in_order, "_in_order", failing)
    tf = discover(str(the_trace(str(TEST_DATA / "gpu_seed")))).files[0]
    reports = {}
    for value in ("0", "1"):
        monkeypatch.setenv("LLMDIAG_READ_THREADS", value)
        with pytest.raises(ValueError, match="^sorting failed: an odd column$"):
            c.read_kineto(str(tf.path))
        assert on_a_thread(threads) is (value == "1"), threads
        reports[value] = api.analyze(tf).report
    assert reports["0"]["status"] == reports["1"]["status"] == "error"
    assert reports["0"]["error"] == reports["1"]["error"]
    assert reports["1"]["error"] == "could not read the trace (internal error: ValueError: sorting failed: an odd column)"


def test_an_error_on_the_read_thread_is_the_same_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    inflate = source.Source._inflate
    threads: list[str] = []

    def failing(self: source.Source) -> Any:
        """Inflates three blocks, then fails (on the read thread when there is one)."""
        threads.append(threading.current_thread().name)
        for k, block in enumerate(inflate(self)):
            if k == 3:
                raise ValueError("inflating failed: an odd block")
            yield block

    monkeypatch.setattr(source.Source, "_inflate", failing)
    monkeypatch.setattr(source, "BLOCK_BYTES", SMALL_BLOCK)
    tf = discover(str(the_trace(str(TEST_DATA / "gpu_seed")))).files[0]
    reports = {}
    for value in ("0", "1"):
        monkeypatch.setenv("LLMDIAG_READ_THREADS", value)
        threads.clear()
        with pytest.raises(ValueError, match="^inflating failed: an odd block$"):
            c.read_kineto(str(tf.path))
        assert on_a_thread(threads, "llmdiag-read") is (value == "1"), threads
        assert no_thread_left()
        reports[value] = api.analyze(tf).report
    assert reports["0"]["error"] == reports["1"]["error"]
    assert reports["1"]["error"] == "could not read the trace (internal error: ValueError: inflating failed: an odd block)"


def nan_mid_file(tmp_path: Path) -> Path:
    """gpu_seed's events re-serialised one per line, with a NaN in an event about 60 % into the file."""
    with gzip.open(the_trace(str(TEST_DATA / "gpu_seed")), "rb") as f:
        doc = json.loads(f.read())
    lines = [json.dumps(e) for e in doc["traceEvents"]]
    k = next(i for i in range(len(lines) * 3 // 5, len(lines)) if '"dur": ' in lines[i])
    lines[k] = lines[k].replace('"dur": ', '"dur": NaN, "x": ', 1)
    path = tmp_path / "nan.pt.trace.json"
    path.write_text('{"traceEvents": [\n' + ",\n".join(lines) + "\n]}")
    return path


def cut_gzip(tmp_path: Path) -> Path:
    data = the_trace(str(TEST_DATA / "gpu_seed")).read_bytes()
    path = tmp_path / "cut.pt.trace.json.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    return path


@pytest.mark.parametrize("make", [nan_mid_file, cut_gzip], ids=["nan_mid_file", "cut_gzip"])
def test_partial_reads_same_with_the_thread(
    make: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[str]
) -> None:
    threaded, inline = read_both(make(tmp_path), monkeypatch, counted)
    assert inline.read_state["complete"] is False and inline.warnings[0].startswith("partial result: ")
    assert 0.3 < inline.read_state["read_share"] <= 1.0, inline.read_state  # a cut gzip: all its bytes read
    assert threaded.read_state == inline.read_state
    assert_same_trace(threaded, inline)



def plain_copy(param: str, tmp_path: Path) -> Path:
    """A real trace, uncompressed (read by the native thread)."""
    path = tmp_path / "plain.pt.trace.json"
    with gzip.open(the_trace(param), "rb") as f:
        path.write_bytes(f.read())
    return path


@pytest.mark.parametrize("param", [str(TEST_DATA / "gpu_seed"), f"shared:{ROCM}"], ids=["gpu_seed", "rocm"])
def test_uncompressed_traces_same_when_cut_on_the_native_thread(
    param: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[str]
) -> None:
    require_native()
    threaded, inline = read_both(plain_copy(param, tmp_path), monkeypatch, counted)
    assert len(inline.events.ts_ns) > 100
    assert_same_trace(threaded, inline)
    assert threaded.read_state == inline.read_state


def require_native() -> None:
    """Skip without the native read-ahead (no compiled extension, or Windows); fail instead under
    LLMDIAG_REQUIRE_SCAN_EXT=1 where it is built with the extension (POSIX: CI)."""
    if hasattr(scan_ext.ext, "ReadAhead"):
        return
    if os.environ.get("LLMDIAG_REQUIRE_SCAN_EXT") == "1" and os.name == "posix":
        pytest.fail("LLMDIAG_REQUIRE_SCAN_EXT=1 but the compiled extension has no ReadAhead (rebuild: pip install -e .)")
    pytest.skip("the compiled extension (with ReadAhead) was not built")


def inline_notes(text: bytes, block: int, cut_after: int, state: SplitState) -> list[Any]:
    """What the native thread must note for each block of ``text`` (``block`` bytes each) when told after block
    ``cut_after`` to cut from ``state``: nothing for the blocks up to it, then the depth scan of each whole block in
    turn, the state carried, until the scan stops; written out with split_py, not the C machine."""
    notes: list[Any] = []
    stopped = False
    for k, at in enumerate(range(0, len(text), block)):
        if k <= cut_after or stopped:
            notes.append(None)
            continue
        piece = text[at : at + block]
        res = split_py(piece, 0, len(piece), state, MAX_DEPTH)
        notes.append((*state, res.last_comma, res.close, *res.state, res.deep))
        state, stopped = res.state, res.close >= 0 or res.deep >= 0
    return notes


TEXT_BYTES = st.sampled_from([b'"', b"\\", b"[", b"]", b"{", b"}", b",", b" ", b"\n", b"a", b"1", b":", b"\xc3\xa9"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.lists(TEXT_BYTES, max_size=120).map(b"".join),
    block=st.integers(1, 16),
    ring=st.integers(2, 5),
    cut_after=st.integers(0, 6),
    depth=st.integers(1, 3),
    in_string=st.booleans(),
    stop_after=st.one_of(st.none(), st.integers(0, 8)),
)
def test_native_thread_reads_every_byte_and_cuts_as_the_reader_would(
    tmp_path_factory: pytest.TempPathFactory, body: bytes, block: int, ring: int, cut_after: int, depth: int,
    in_string: bool, stop_after: int | None,
) -> None:
    """Any text, block size and ring: the blocks handed out are the file, in order, each with the scan of exactly that
    block from the state the scan of the block before left (the state given to start_cut for the first one), until
    the scan stops; a reader that stops early leaves no thread behind."""
    require_native()
    path = tmp_path_factory.mktemp("native") / "t.json"
    path.write_bytes(body)
    state = SplitState(depth, in_string, False)
    want = inline_notes(body, block, cut_after, state)
    reader = read_ahead.ReadAhead(source.Source(str(path)), block_bytes=block, ring=ring)
    got, notes = [], []
    for k, view in enumerate(reader.blocks()):
        assert os_threads() >= 1 or not os.path.isdir("/proc/self/task")  # (a joined one may linger)
        got.append(bytes(view))
        notes.append(reader.note)
        if k == cut_after:
            reader.start_cut(state, MAX_DEPTH)
        if k == stop_after:
            break
    assert b"".join(got) == body[: len(b"".join(got))]
    if stop_after is None or stop_after >= len(want) - 1:
        assert b"".join(got) == body
    assert notes == want[: len(notes)]
    assert native_thread_gone()  # the loop left (or ended): the generator closed, the thread stopped


def test_native_thread_read_error_is_raised_after_the_blocks_before_it(tmp_path: Path) -> None:
    """A read that fails (here: pread on a directory, EISDIR) is an OSError from next(), once, then the end."""
    require_native()
    assert scan_ext.ext is not None
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        native = scan_ext.ext.ReadAhead(fd, [bytearray(8), bytearray(8)])
        with pytest.raises(OSError) as err:
            native.next()
        assert err.value.errno == errno.EISDIR
        native.close()
        assert native.next() is None
    finally:
        os.close(fd)


def test_cut_of_uses_only_a_note_made_from_the_readers_state() -> None:
    note = (1, False, False, 5, -1, 2, True, False, -1)  # begun at depth 1; a boundary at 5; ends in a string
    assert read_ahead.cut_of(note, 100, SplitState(1, False, False)) == (105, -1, SplitState(2, True, False), -1)
    assert read_ahead.cut_of(note, 100, SplitState(2, False, False)) is None
    assert read_ahead.cut_of(None, 100, SplitState()) is None
