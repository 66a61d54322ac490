"""The reader's two threads against the single-threaded path: reading ahead (tb_llmdiag/ingest/prefetch.py)
and sorting half of the columns in finish() (tb_llmdiag/ingest/row_worker.py).

``LLMDIAG_READ_THREADS=0`` (``_Columns(threaded=False)``) does both on the caller's thread. Both paths must give
the same Trace, bit for bit, on real traces read in small blocks, on generated pieces with odd values, and on
partial reads (invalid JSON mid-file, a cut gzip: the same read_state and warnings, shares included); an
exception raised on a thread must surface as the same one-line error, and a read that stops early leaves no
thread behind. Each threaded check also asserts that the threads ran.
"""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_scan import ROCM, TEST_DATA, assert_same_array, assert_same_trace, piece_lists, real_trace

from tb_llmdiag import api
from tb_llmdiag.ingest import chrome_trace as c
from tb_llmdiag.ingest import kineto_columns as kc
from tb_llmdiag.ingest import prefetch, row_worker, source
from tb_llmdiag.ingest.discover import discover
from tb_llmdiag.model import EventTable


SMALL_BLOCK = 8 << 10  # bytes per block: even a 66 KB fixture comes in several blocks and pieces


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that sorted columns (one per call of row_worker._in_order) or read blocks
    ahead (one per read)."""
    threads: list[str] = []
    read = prefetch.Prefetch._read

    def reading(self: prefetch.Prefetch, *args: Any) -> None:
        threads.append(threading.current_thread().name)
        read(self, *args)

    monkeypatch.setattr(prefetch.Prefetch, "_read", reading)
    in_order = row_worker._in_order

    def counting(columns: list[np.ndarray], order: np.ndarray | None) -> list[np.ndarray]:
        threads.append(threading.current_thread().name)
        return in_order(columns, order)

    monkeypatch.setattr(row_worker, "_in_order", counting)
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
    inline = c.read_chrome_trace(str(path))
    assert not on_a_thread(threads) and not on_a_thread(threads, "llmdiag-read")
    monkeypatch.setenv("LLMDIAG_READ_THREADS", "1")
    threaded = c.read_chrome_trace(str(path))
    assert on_a_thread(threads, "llmdiag-read"), threads
    assert no_thread_left()
    return threaded, inline


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
        assert row_worker.threads_wanted() is want, value
    monkeypatch.delenv("LLMDIAG_READ_THREADS")
    assert row_worker.threads_wanted()


def assert_same_finish(threaded: kc._Columns, inline: kc._Columns) -> None:
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
    threaded, inline = kc._Columns(threaded=True), kc._Columns(threaded=False)
    try:
        for piece in pieces:
            inline.add(piece)
            threaded.add(piece)
    except Exception:  # noqa: BLE001 - odd values both scanners reject alike (test_scan); no sorting then
        return
    assert threaded.has_rows == inline.has_rows
    for attr in ("origin_us", "ts_min", "skipped_no_ts", "negative_dur", "out_of_range", "slab_used"):
        assert getattr(threaded, attr) == getattr(inline, attr) or (
            attr == "ts_min" and np.isnan(threaded.ts_min) and np.isnan(inline.ts_min)
        ), attr
    if inline.has_rows:
        counted.clear()
        assert_same_finish(threaded, inline)
        assert on_a_thread(counted)  # one slab: always copied or sorted in finish()


def test_an_error_on_the_thread_is_the_same_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    in_order = row_worker._in_order
    threads: list[str] = []

    def failing(columns: list[np.ndarray], order: np.ndarray | None) -> list[np.ndarray]:
        """Fails on the kind column (uint8): on the thread when there is one, else on the caller's."""
        threads.append(threading.current_thread().name)
        if any(column.dtype == np.uint8 for column in columns):
            raise ValueError("sorting failed: an odd column")
        return in_order(columns, order)

    monkeypatch.setattr(row_worker, "_in_order", failing)
    tf = discover(str(the_trace(str(TEST_DATA / "gpu_seed")))).files[0]
    reports = {}
    for value in ("0", "1"):
        monkeypatch.setenv("LLMDIAG_READ_THREADS", value)
        with pytest.raises(ValueError, match="^sorting failed: an odd column$"):
            c.read_chrome_trace(str(tf.path))
        assert on_a_thread(threads) is (value == "1"), threads
        reports[value] = api.analyze_file(tf)
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
            c.read_chrome_trace(str(tf.path))
        assert on_a_thread(threads, "llmdiag-read") is (value == "1"), threads
        assert no_thread_left()
        reports[value] = api.analyze_file(tf)
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
