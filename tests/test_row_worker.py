"""The reader's row worker (tb_llmdiag/ingest/row_worker.py) against the inline path.

With threads (the default) a piece's rows are converted by _rows.c on a worker thread while the next piece is
decoded; ``LLMDIAG_READ_THREADS=0`` (``_Columns(threaded=False)``) converts each piece inline. Both must give the
same Trace, bit for bit, on real traces (read in small blocks, so that they come in many pieces), on generated
pieces with odd values, and on partial reads (invalid JSON mid-file, a cut gzip); an exception raised on the
worker must surface as the same one-line error as inline. Each threaded check also asserts that the worker ran.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tb_llmdiag import api
from tb_llmdiag.ingest import chrome_trace as c
from tb_llmdiag.ingest import kineto_columns as kc
from tb_llmdiag.ingest import row_worker, scan_ext, source
from tb_llmdiag.ingest.discover import discover
from tb_llmdiag.model import EventTable

from test_scan import ROCM, TEST_DATA, assert_same_array, assert_same_trace, piece_lists, real_trace, require_scan_ext

SMALL_BLOCK = 8 << 10  # bytes per block: even a 66 KB fixture comes in several pieces


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Requires the C extension; counts the pieces submitted to a worker thread."""
    require_scan_ext()
    submitted: list[int] = []
    submit = row_worker.RowWorker.submit

    def counting(self: row_worker.RowWorker, *args: Any) -> None:
        submitted.append(1)
        submit(self, *args)

    monkeypatch.setattr(row_worker.RowWorker, "submit", counting)
    return submitted


def read_both(path: Path | str, monkeypatch: pytest.MonkeyPatch, submitted: list[int]) -> tuple[Any, Any]:
    """The trace read inline and read with the worker, in small blocks; asserts the worker converted pieces."""
    monkeypatch.setattr(source, "BLOCK_BYTES", SMALL_BLOCK)
    monkeypatch.setenv("LLMDIAG_READ_THREADS", "0")
    inline = c.read_chrome_trace(str(path))
    assert not submitted
    monkeypatch.setenv("LLMDIAG_READ_THREADS", "1")
    threaded = c.read_chrome_trace(str(path))
    assert len(submitted) >= 3, f"only {len(submitted)} pieces went to the worker"
    return threaded, inline


def the_trace(param: str) -> Path:
    path = real_trace(param)
    if path.is_dir():
        (path,) = path.glob("*.pt.trace.json.gz")
    return path


@pytest.mark.parametrize("param", [str(TEST_DATA / "gpu_seed"), f"shared:{ROCM}"], ids=["gpu_seed", "rocm"])
def test_real_traces_same_with_the_worker(param: str, monkeypatch: pytest.MonkeyPatch, counted: list[int]) -> None:
    threaded, inline = read_both(the_trace(param), monkeypatch, counted)
    assert len(inline.events.ts_ns) > 100
    assert_same_trace(threaded, inline)
    assert threaded.read_state == inline.read_state


def test_threads_wanted_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, want in (("0", False), ("off", False), ("false", False), ("1", True), ("", True)):
        monkeypatch.setenv("LLMDIAG_READ_THREADS", value)
        assert row_worker.threads_wanted() is want, value
        assert (kc._Columns().worker is not None) is want, value
    monkeypatch.delenv("LLMDIAG_READ_THREADS")
    assert row_worker.threads_wanted()
    assert kc._Columns(threaded=False).worker is None


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
def test_generated_pieces_same_with_the_worker(counted: list[int], pieces: list[list[Any]]) -> None:
    threaded, inline = kc._Columns(threaded=True), kc._Columns(threaded=False)
    try:
        for piece in pieces * 3:  # the same pieces again: later pieces go to the worker
            inline.add(piece)
            threaded.add(piece)
    except Exception as exc:  # noqa: BLE001 - odd values both scanners reject (test_scan): the same, threaded too
        with pytest.raises(type(exc)):
            for piece in pieces * 3:
                kc._Columns(threaded=True).add(piece)
        threaded.close()
        return
    assert threaded.has_rows == inline.has_rows
    for attr in ("origin_us", "ts_min", "skipped_no_ts", "negative_dur", "out_of_range", "slab_used"):
        assert getattr(threaded, attr) == getattr(inline, attr) or (
            attr == "ts_min" and np.isnan(threaded.ts_min) and np.isnan(inline.ts_min)
        ), attr
    if inline.has_rows:
        assert_same_finish(threaded, inline)
    else:
        threaded.close()


def test_an_error_on_the_worker_is_the_same_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[int]
) -> None:
    ext = scan_ext.ext
    calls: list[int] = []

    class Failing:  # the extension, whose rows() fails on the fourth piece
        def __getattr__(self, name: str) -> Any:
            return getattr(ext, name)

        def rows(self, *args: Any) -> Any:
            calls.append(1)
            if len(calls) == 4:
                raise ValueError("rows: a name id beyond name_flags")
            return ext.rows(*args)

    monkeypatch.setattr(scan_ext, "ext", Failing())
    monkeypatch.setattr(source, "BLOCK_BYTES", SMALL_BLOCK)
    tf = discover(str(the_trace(str(TEST_DATA / "gpu_seed")))).files[0]
    reports = {}
    for threads in ("0", "1"):
        monkeypatch.setenv("LLMDIAG_READ_THREADS", threads)
        calls.clear()
        with pytest.raises(ValueError, match="^rows: a name id beyond name_flags$"):
            c.read_chrome_trace(str(tf.path))
        calls.clear()
        reports[threads] = api.analyze_file(tf)
    assert counted, "the worker never ran"
    assert reports["0"]["status"] == reports["1"]["status"] == "error"
    assert reports["0"]["error"] == reports["1"]["error"]
    assert "ValueError: rows: a name id beyond name_flags" in reports["1"]["error"]


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
def test_partial_reads_same_with_the_worker(
    make: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[int]
) -> None:
    threaded, inline = read_both(make(tmp_path), monkeypatch, counted)
    assert inline.read_state["complete"] is False and inline.warnings[0].startswith("partial result: ")
    assert threaded.read_state == inline.read_state
    assert_same_trace(threaded, inline)
