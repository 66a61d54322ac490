"""Real traces carrying crafted names (#27), for tests/test_crafted_names.py, tests/fuzz/fuzz_names.py and
bench/crafted_names.py.

``trace_with_names(names, out)`` writes tests/data/gpu_compiled's trace with, for each given name, one CPU op,
one user annotation, one runtime call and one kernel of that name added in the middle of its second step;
``report_seconds(name)`` times the CLI's whole report over it (in this process, best of ``runs``).
"""

from __future__ import annotations

import gzip
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

SRC = next((Path(__file__).resolve().parents[1] / "data" / "gpu_compiled").glob("*.pt.trace.json.gz"))


def trace_with_names(names: Sequence[str], out: Path, *, kinds: Sequence[str] = ("cpu_op", "user_annotation", "cuda_runtime", "kernel")) -> Path:
    doc = msgspec.json.decode(gzip.decompress(SRC.read_bytes()))
    events = doc["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    at = kernels[len(kernels) // 2]
    added = []
    for i, name in enumerate(names):
        for cat in kinds:
            e = {"ph": "X", "cat": cat, "name": name, "ts": at["ts"] + 0.001 * i, "dur": 0.001}
            if cat == "kernel":
                e.update(pid=at["pid"], tid=at["tid"], args={"device": 0, "stream": 7, "correlation": -1})
            else:
                e.update(pid=1, tid=1)
            added.append(e)
    doc["traceEvents"] = events + added
    out.write_bytes(msgspec.json.encode(doc))
    return out


def report_seconds(name: str | Sequence[str], *, runs: int = 1) -> float:
    """Best wall time of ``api.report`` over the trace with ``name`` (or each of several names) added."""
    from tb_llmdiag import api  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as d:
        path = trace_with_names([name] if isinstance(name, str) else name, Path(d) / "crafted.pt.trace.json")
        best = float("inf")
        for _ in range(runs):
            t = time.perf_counter()
            report = api.report(str(path))
            best = min(best, time.perf_counter() - t)
        assert report["runs"][0]["status"] in ("ok", "partial"), report["runs"][0]["error"]
    return best
