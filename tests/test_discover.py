"""Run discovery over the layouts fine-tuning stacks write (../shared/docs/USERS.md §1)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tb_llmdiag.errors import NoTracesFound, RunNotFound
from tb_llmdiag.ingest.discover import discover
from tracepaths import shared_trace


def kineto(rank: int | None = None) -> bytes:
    doc: dict = {"schemaVersion": 1, "deviceProperties": []}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    doc["traceEvents"] = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    return json.dumps(doc, indent=2).encode()


def put(root: Path, rel: str, data: bytes) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(gzip.compress(data) if rel.endswith(".gz") else data)


def keys(index) -> list[tuple[str, str, str, int | None]]:
    return [(f.run, f.worker, f.span, f.rank) for f in index.files]


def test_tensorboard_trace_handler_spans_in_timestamp_order(tmp_path: Path) -> None:
    put(tmp_path, "run_a/worker0.1700000000200.pt.trace.json.gz", kineto())
    put(tmp_path, "run_a/worker0.1700000000100.pt.trace.json.gz", kineto())
    put(tmp_path, "run_a/host_12.99.pt.trace.json", kineto())
    put(tmp_path, "run_b/worker0.pt.trace.json", kineto())
    index = discover(str(tmp_path))
    assert keys(index) == [
        ("run_a", "host_12", "1", None),
        ("run_a", "worker0", "1", None),
        ("run_a", "worker0", "2", None),
        ("run_b", "worker0", "default", None),
    ]
    first = index.find("run_a", "worker0", "1")
    assert first.path.endswith("worker0.1700000000100.pt.trace.json.gz")


def test_stack_layouts_are_found_by_content(tmp_path: Path) -> None:
    put(tmp_path, "accel/profile_0.json", kineto())
    put(tmp_path, "accel/profile_1.json", kineto())
    put(tmp_path, "titan/profile_traces/iteration_10/rank0_trace.json", kineto())
    put(tmp_path, "nemo/traces/device/rank-1.json", kineto(rank=1))
    put(tmp_path, "nemo/traces/host/rank-1.json", json.dumps({"schema": "1.0.2-chakra", "nodes": []}).encode())
    put(tmp_path, "axolotl/profiler_trace.json", kineto())
    put(tmp_path, "axolotl/snapshot.pickle", b"\x80\x04")
    put(tmp_path, "axolotl/config.json", b'{"lr": 0.1}')
    put(tmp_path, "lightning/version_0/fit-[Strategy]SingleDeviceStrategy.validation_step.17.pt.trace.json", kineto())
    index = discover(str(tmp_path))
    assert keys(index) == [
        ("accel", "profile_0", "default", 0),
        ("accel", "profile_1", "default", 1),
        ("axolotl", "profiler_trace", "default", None),
        ("lightning/version_0", "fit-[Strategy]SingleDeviceStrategy.validation_step", "1", None),
        ("nemo/traces/device", "rank-1", "default", 1),
        ("titan/profile_traces/iteration_10", "rank0_trace", "default", 0),
    ]
    assert index.files[3].phase == "validation"


def test_rank_comes_from_distributed_info_before_the_name(tmp_path: Path) -> None:
    # torchtune v0.4-v0.6.1 names every rank r0; distributedInfo says the truth
    put(tmp_path, "profiling_outputs/iteration_5/r0-2025-4-7-10-3.1001.pt.trace.json.gz", kineto(rank=0))
    put(tmp_path, "profiling_outputs/iteration_5/r0-2025-4-7-10-3.1002.pt.trace.json.gz", kineto(rank=1))
    index = discover(str(tmp_path))
    assert [f.rank for f in index.files] == [0, 1]
    assert index.warnings == ()


def test_duplicate_ranks_warn(tmp_path: Path) -> None:
    put(tmp_path, "it/r0-2025-4-7-10-3.1001.pt.trace.json.gz", kineto())
    put(tmp_path, "it/r0-2025-4-7-10-4.1002.pt.trace.json.gz", kineto())
    index = discover(str(tmp_path))
    assert len(index.warnings) == 1 and "both claim rank 0" in index.warnings[0]


def test_xplane_layout_skips_xprof_cache_and_chrome_export(tmp_path: Path) -> None:
    put(tmp_path, "tpu_run/plugins/profile/2026_01_01_00_00_00/host0.xplane.pb", b"\x0a\x00")
    put(tmp_path, "tpu_run/plugins/profile/2026_01_01_00_00_00/host0.trace.json.gz", kineto())
    put(tmp_path, "tpu_run/plugins/profile/2026_01_01_00_00_00/.cached_tools.json", b"{}")
    put(tmp_path, "tpu_run/plugins/profile/2026_01_01_00_00_00/ALL_HOSTS.op_stats_v2.pb", b"x")
    put(tmp_path, "plugins/profile/2026_01_02_00_00_00/localhost_9012.xplane.pb", b"\x0a\x00")
    index = discover(str(tmp_path))
    assert [(f.run, f.worker, f.span, f.source_kind) for f in index.files] == [
        (tmp_path.name, "localhost_9012", "2026_01_02_00_00_00", "xplane"),
        ("tpu_run", "host0", "2026_01_01_00_00_00", "xplane"),
    ]


def test_new_files_appear_on_rediscovery(tmp_path: Path) -> None:
    put(tmp_path, "r/w.1.pt.trace.json", kineto())
    assert len(discover(str(tmp_path)).files) == 1
    put(tmp_path, "r/w.2.pt.trace.json", kineto())
    assert [f.span for f in discover(str(tmp_path)).files] == ["1", "2"]


def test_single_file_and_missing_paths(tmp_path: Path) -> None:
    put(tmp_path, "r/w.5.pt.trace.json", kineto())
    one = discover(str(tmp_path / "r" / "w.5.pt.trace.json"))
    assert keys(one) == [("r", "w", "default", None)]
    with pytest.raises(NoTracesFound):
        discover(str(tmp_path / "nope"))
    with pytest.raises(RunNotFound):
        one.find("r", "w", "../../etc/passwd")


def test_shared_traces_discovered() -> None:
    root = shared_trace("")
    index = discover(str(root))
    kinds = [f.source_kind for f in index.files if "/external/" not in f.path]  # external/ grows over time
    assert kinds.count("kineto") == 21 and kinds.count("xplane") == 4
    resnet = [f for f in index.files if f.run == "kineto_resnet50/resnet50_num_workers_0"]
    assert [(f.worker, f.span) for f in resnet] == [("worker0", "1"), ("worker0", "2")]
