"""Traces for the capture-trust tests, built by editing real traces (issue #24). Import as ``from trust_fixtures import
...`` (pytest.ini puts tests/ on the path); each writes one file and returns its path.

- ``with_top_level(src, dst, fields)``: a copy of a Kineto trace with top-level fields added (what
  ``prof.add_metadata_json`` writes: unprofiled step times, Kineto's logged ``WARNING`` list).
- ``slower_after(src, dst, before_ms, after_ms)``: a copy with the capture helper's object (schema 2): a 2 s step 0
  and ``before_ms`` before the window, ``after_ms`` after it (steps after the window slower than those before: #24
  batch 5).
- ``without_unprofiled(src, dst)``: a copy with every top-level field naming ``unprofiled`` removed.
- ``planted_dropped(src, dst, every)``: every ``every``-th ``cudaLaunchKernel`` call removed (its kernel is left
  without a launch, as when CUPTI drops host records) and a Kineto warning saying how many records were dropped.
- ``launches_missing_kernels(src, dst, every)``: every ``every``-th kernel removed (its launch is left without a kernel).
- ``jax_capped(dst)``: a JAX-style ``trace.json.gz`` (XProf's Chrome export: ``/device:GPU:0`` and host thread
  pids, XLA fusion names, no ``cat``) holding exactly 1,000,000 complete events, as the exporter's cap leaves it.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def _load(src: Path) -> dict[str, Any]:
    with gzip.open(src, "rt") as fh:
        return json.load(fh)


def _dump(doc: dict[str, Any], dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(dst, "wt", compresslevel=1) as fh:
        json.dump(doc, fh)
    return dst


def with_top_level(src: Path, dst: Path, fields: dict[str, Any]) -> Path:
    doc = _load(src)
    doc.update(fields)
    return _dump(doc, dst)


def slower_after(src: Path, dst: Path, before_ms: list[float], after_ms: list[float]) -> Path:
    n = len(before_ms)
    helper = {"schema": 2, "steps": list(range(n + 1)), "step_ns": [2_000_000_000, *(int(ms * 1e6) for ms in before_ms)],
              "after_steps": list(range(n + 6, n + 6 + len(after_ms))), "after_step_ns": [int(ms * 1e6) for ms in after_ms],
              "window_steps": [n + 2, n + 5], "synchronized": True,
              "schedule": {"skip_first": n + 1, "wait": 0, "warmup": 1, "active": 4, "repeat": 1},
              "steps_after_window": len(after_ms)}
    return with_top_level(src, dst, {"llmdiag_unprofiled_step_ns": helper})


def without_unprofiled(src: Path, dst: Path) -> Path:
    doc = _load(src)
    return _dump({k: v for k, v in doc.items() if "unprofiled" not in k.lower()}, dst)


def planted_dropped(src: Path, dst: Path, every: int = 10) -> tuple[Path, int]:
    doc = _load(src)
    kept, dropped, seen = [], 0, 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaLaunchKernel":
            seen += 1
            if seen % every == 0:
                dropped += 1
                continue
        kept.append(e)
    doc["traceEvents"] = kept
    doc["WARNING"] = [f"CUPTI activity buffer full: {dropped} records were dropped"]
    return _dump(doc, dst), dropped


def launches_missing_kernels(src: Path, dst: Path, every: int = 10) -> tuple[Path, int]:
    doc = _load(src)
    kept, dropped, seen = [], 0, 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            seen += 1
            if seen % every == 0:
                dropped += 1
                continue
        kept.append(e)
    doc["traceEvents"] = kept
    return _dump(doc, dst), dropped


JAX_CAP = 1_000_000


def jax_capped(dst: Path, n: int = JAX_CAP) -> Path:
    """XProf's export: per step a host ``TrainStep`` range, its launch on the host thread and device fusions."""
    meta = [
        '{"ph":"M","pid":1,"name":"process_name","args":{"name":"/device:GPU:0"}}',
        '{"ph":"M","pid":2,"name":"process_name","args":{"name":"/host:CPU"}}',
    ]
    parts = []
    names = ("fusion.12", "loop_add_fusion", "gemm_fusion_dot.3", "input_reduce_fusion.1")
    for i in range(n):
        ts = i * 2.0
        if i % 4 == 3:
            parts.append(f'{{"ph":"X","pid":2,"tid":7,"ts":{ts:.1f},"dur":1.5,"name":"jit_train_step"}}')
        else:
            parts.append(f'{{"ph":"X","pid":1,"tid":3,"ts":{ts:.1f},"dur":1.5,"name":"{names[i % 4]}"}}')
    text = '{"displayTimeUnit":"ns","traceEvents":[' + ",".join(meta + parts) + "]}"
    dst.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(dst, "wt", compresslevel=1) as fh:
        fh.write(text)
    return dst
