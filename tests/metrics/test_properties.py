"""Properties of compute_metrics on random traces: no crash, JSON without NaN, shares in 0..1, totals add up."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from minitrace import ADD, COPY, GEMM, LOADER, E, make_trace

from tb_llmdiag.findings.diagnosis import diagnose
from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.headline import headline
from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.model import Kind

NAMES = {
    Kind.KERNEL: [GEMM, COPY, ADD, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"],
    Kind.MEMCPY: ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)"],
    Kind.MEMSET: ["Memset (Device)"],
    Kind.RUNTIME: ["cudaLaunchKernel", "cudaStreamSynchronize", "cudaMemcpyAsync"],
    Kind.CPU_OP: ["aten::mm", LOADER, "aten::_local_scalar_dense", "aten::embedding"],
    Kind.STEP: ["ProfilerStep#1", "ProfilerStep#2"],
    Kind.ANNOTATION: ["Optimizer.step#AdamW.step"],
}
SHAPES = [None, "[[8, 16], [16, 4]]", "[[100, 8], [2, 7]]", "garbage", "[[], []]"]

event = st.builds(
    lambda kind, i, ts, dur, corr, nbytes, shape: E(kind, NAMES[kind][i % len(NAMES[kind])], ts, dur, corr, nbytes, shape),
    st.sampled_from(list(NAMES)), st.integers(0, 10), st.integers(0, 10_000), st.integers(0, 3_000),
    st.integers(-1, 6), st.integers(-1, 10_000), st.sampled_from(SHAPES),
)


def _walk(v: object, path: str = ""):  # noqa: ANN202
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _walk(x, f"{path}.{k}")
    elif isinstance(v, list):
        for x in v:
            yield from _walk(x, path)
    else:
        yield path, v


@settings(max_examples=150, deadline=None)
@given(st.lists(event, max_size=30))
def test_random_traces(rows: list[E]) -> None:
    trace = make_trace(rows)
    m = compute_metrics(trace, find_steps(trace))
    json.dumps(m, allow_nan=False)
    for path, v in _walk(m):
        if isinstance(v, float):
            assert math.isfinite(v), path
        if path.endswith("_share") and v is not None and "saving" not in path:
            assert -1e-9 <= v <= 1 + 1e-9, (path, v)
    idle = m["idle"]
    if idle.get("available"):
        assert idle["busy_ns"] + idle["collective_ns"] + idle["idle_ns"] == idle["window_ns"]  # collectives: neither
        assert sum(idle[f"{c}_ns"] for c in ("host_wait", "sync", "data_loader", "other")) == idle["idle_ns"]
    k = m["kernels"]
    if k.get("available") and k["device_time_ns"] > 0:
        assert abs(sum(c["share"] for c in k["by_category"].values()) - 1) < 1e-9
    findings, what_if = jsonable(diagnose(m))
    json.dumps([findings, what_if, headline(m)], allow_nan=False)
    for f in findings:
        assert f["severity"] in ("high", "medium", "low")
        if f["saving"] is not None:
            assert 0 <= f["saving"]["share"] <= 1


def test_overlapping_collectives_count_once_and_kernels_alone_have_an_anatomy() -> None:
    """Two identical all-reduces on two streams over the same 10 ns (a case the random traces found): their purpose is
    exposed 10 ns of a 10 ns window, not 20; a trace of kernels alone (no operator) still gets its anatomy."""
    rows = [E(Kind.KERNEL, NAMES[Kind.KERNEL][3], 0, 10, -1, -1, None)] * 2
    trace = make_trace(rows)
    m = compute_metrics(trace, find_steps(trace))
    (row,) = m["comm_purpose"]["by_purpose"]
    assert (row["count"], row["kernel_ns"], row["exposed_ns"], row["exposed_share"]) == (2, 20, 10, 1.0)
    assert m["anatomy"]["available"] is True and set(m["anatomy"]["parts"]) == {"communication"}


def test_each_collectives_exposed_time_counts_shared_time_once() -> None:
    """``exposed_per_collective`` (what the run topic and the job's purposes both sum): by hand, all-reduces on
    [0, 10) and [5, 15) and a GEMM on [12, 20): the first holds its 10 ns, the second only [10, 12), 2 ns."""
    from tb_llmdiag.metrics.comm.collectives import find_collectives
    from tb_llmdiag.metrics.comm.communication import exposed_per_collective

    ar = NAMES[Kind.KERNEL][3]
    trace = make_trace([E(Kind.KERNEL, ar, 0, 10, -1, -1, None), E(Kind.KERNEL, ar, 5, 10, -1, -1, None),
                        E(Kind.KERNEL, GEMM, 12, 8, -1, -1, None)])
    coll = find_collectives(trace)
    got = dict(zip(coll.start_ns.tolist(), exposed_per_collective(trace, coll).tolist()))
    assert got == {0: 10, 5: 2}
