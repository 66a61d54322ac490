"""The trace view's index at scale, without timing anything: the work is linear (ties are the only events
sorted, each pyramid level is merged from the previous one), the arrays are streamed to the cache file one by
one (the same arrays as the in-memory build), and the worker's streamed file reaches the cache intact, also
when the disk fails halfway or the cache went to memory."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_llmdiag import api
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.tab import arrays as array_file
from tb_llmdiag.tab import analysis_queue
from tb_llmdiag.tab.cache import CACHE_LAYOUT, ResultCache, arrays_path
from tb_llmdiag.traceview import lod
from tb_llmdiag.traceview.build import build, build_into, start_order

from tracepaths import TEST_DATA

SEED = next((TEST_DATA / "gpu_seed").glob("*.pt.trace.json.gz"))
KEY = "ab" + "0" * 38


def tied_starts(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    ts = np.sort(rng.integers(0, n // 3, n)).astype(np.int64)  # about 3 events per start
    return ts, rng.integers(0, 5, n).astype(np.int64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_start_order_is_start_then_longest_first_then_id(seed: int):
    ts, dur = tied_starts(np.random.default_rng(seed), 3000)
    expect = sorted(range(ts.shape[0]), key=lambda i: (ts[i], -dur[i], i))
    assert start_order(ts, dur).tolist() == expect
    shuffled = np.random.default_rng(seed).permutation(ts.shape[0])  # unsorted input: sorted whole
    ts2, dur2 = ts[shuffled], dur[shuffled]
    expect2 = sorted(range(ts2.shape[0]), key=lambda i: (ts2[i], -dur2[i], i))
    assert start_order(ts2, dur2).tolist() == expect2


def test_start_order_sorts_only_the_events_that_share_a_start(monkeypatch: pytest.MonkeyPatch):
    sorted_sizes: list[int] = []
    real = np.lexsort

    def counting(keys: Any, *a: Any, **k: Any) -> np.ndarray:
        sorted_sizes.append(int(np.asarray(keys[0]).shape[0]))
        return real(keys, *a, **k)

    monkeypatch.setattr(np, "lexsort", counting)
    ts = np.arange(100_000, dtype=np.int64) * 10
    ts[500:503] = ts[500]  # one run of 3 equal starts, one of 2
    ts[900:902] = ts[900]
    assert start_order(ts, np.ones_like(ts)).shape == ts.shape
    assert sorted_sizes == [5]


def test_each_level_is_merged_from_the_previous_one_once(monkeypatch: pytest.MonkeyPatch):
    calls: list[tuple[int, int]] = []
    real = lod.merge_step

    def counting(row: np.ndarray, start: np.ndarray, *a: Any) -> Any:
        out = real(row, start, *a)
        calls.append((int(start.shape[0]), int(out[1].shape[0])))
        return out

    monkeypatch.setattr(lod, "merge_step", counting)
    rng = np.random.default_rng(3)
    n = 50_000
    gaps = (10 ** rng.uniform(0, 7, n)).astype(np.int64)  # gaps of 1 ns .. 10 ms: every level merges some
    start = np.cumsum(gaps + 5)
    end = start + 5
    row = np.zeros(n, np.int64)
    span = int(end[-1])
    levels = list(lod.iter_levels(row, start, end, np.arange(n, dtype=np.int64), 1, span))
    assert calls[0][0] == n  # level 0 is merged once ...
    assert all(b_in == a_out for (_, a_out), (b_in, _) in zip(calls, calls[1:]))  # ... then each result again
    assert len(calls) <= math.ceil(math.log(span * lod.LEVEL_FACTOR / lod.FIRST_TOL_NS, lod.LEVEL_FACTOR))
    assert levels[0].start.shape[0] == n and [lv.tol_ns for lv in levels] == sorted({lv.tol_ns for lv in levels})


@pytest.fixture(scope="module")
def seed_index() -> tuple[Any, dict[str, Any], dict[str, np.ndarray]]:
    trace = load_trace(str(SEED))
    meta, arrays = build(trace)
    return trace, meta, arrays


def same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return set(a) == set(b) and all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a)


def test_build_into_hands_over_each_array_once_and_they_equal_build(seed_index, tmp_path: Path):
    trace, meta, arrays = seed_index
    names: list[str] = []
    w = array_file.Writer(tmp_path / "x.bin", CACHE_LAYOUT, KEY, "traceview.bin")

    def put(name: str, a: np.ndarray) -> None:
        names.append(name)
        w.add(name, a)

    assert build_into([trace], put) == meta
    assert sorted(names) == sorted(arrays) and len(names) == len(set(names))
    (tmp_path / "x.bin").write_bytes(w.finish().read_bytes())
    back = array_file.read(tmp_path / "x.bin", CACHE_LAYOUT, KEY, "traceview.bin")
    assert back is not None and same_arrays({k: np.asarray(v) for k, v in back.items()}, arrays)


def test_a_header_longer_than_its_room_moves_the_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(array_file, "HEADER_ROOM", 64)
    arrays = {f"a{i:03d}": np.arange(i, dtype=np.int64) for i in range(20)}
    array_file.write(tmp_path / "y.bin", 1, KEY, "traceview.bin", arrays)
    back = array_file.read(tmp_path / "y.bin", 1, KEY, "traceview.bin")
    assert back is not None and same_arrays({k: np.asarray(v) for k, v in back.items()}, arrays)
    assert [p.name for p in tmp_path.iterdir()] == ["y.bin"]  # no temporary file left


def test_a_disk_error_halfway_keeps_the_arrays_in_memory(seed_index, tmp_path: Path, monkeypatch):
    trace, meta, arrays = seed_index
    spill = analysis_queue.Spill(str(tmp_path), KEY)
    real_add, count = array_file.Writer.add, [0]

    def failing(self: array_file.Writer, name: str, a: np.ndarray) -> None:
        count[0] += 1
        if count[0] == 7:
            raise OSError(28, "No space left on device")
        real_add(self, name, a)

    monkeypatch.setattr(array_file.Writer, "add", failing)
    build_into([trace], spill.add)
    tv: dict[str, Any] = {}
    spill.done(tv)
    assert "file" not in tv and same_arrays(tv["arrays"], arrays)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # the half-written file is gone


@pytest.mark.parametrize("memory", [False, True])
def test_the_cache_takes_the_workers_streamed_file(seed_index, tmp_path: Path, memory: bool):
    trace, meta, arrays = seed_index
    cache = ResultCache(tmp_path / "cache")
    assert cache.root is not None
    spill = analysis_queue.Spill(str(cache.root), KEY)
    build_into([trace], spill.add)
    tv: dict[str, Any] = {"meta": meta}
    spill.done(tv)
    assert tv["arrays"] is None and Path(tv["file"]).parent == arrays_path(cache.root, KEY).parent
    stale = Path(tv["file"]).parent / f".{KEY}.died.tmp"  # what a worker killed halfway through leaves
    stale.write_bytes(b"x")
    if memory:  # the cache turned to memory after the worker had started
        cache.root = None
    result = {"report": {"status": "ok"}, "timelines": [], "traceview": tv}
    cache.store(KEY, result)
    got = cache.get_arrays(KEY, "traceview.bin")
    assert got is not None and same_arrays({k: np.asarray(v) for k, v in got.items()}, arrays)
    left = sorted(p.name for p in (tmp_path / "cache").rglob("*.bin*"))
    assert left == ([] if memory else [f"{KEY}.traceview.bin"])  # no temporary file left either way
    assert stale.exists() == memory  # an earlier try's leftover goes when the entry is written


def test_the_worker_task_streams_into_the_cache_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tf = api.discover(str(SEED)).files[0]
    monkeypatch.setattr(analysis_queue, "_WORKER_CACHE", str(tmp_path))
    result = analysis_queue.analyse_task(tf, KEY, None)
    tv = result["traceview"]
    assert tv["arrays"] is None and Path(tv["file"]).exists()
    monkeypatch.setattr(analysis_queue, "_WORKER_CACHE", None)
    in_memory = analysis_queue.analyse_task(tf, KEY, None)["traceview"]
    back = array_file.read(Path(tv["file"]), CACHE_LAYOUT, KEY, "traceview.bin")
    assert back is not None and same_arrays({k: np.asarray(v) for k, v in back.items()}, in_memory["arrays"])
    assert tv["meta"] == in_memory["meta"]
