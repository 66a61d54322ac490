"""The ``anatomy`` topic (metrics/anatomy/topic.py): the model's parts.

Expectations come from outside the product: the busy union is merged here in plain Python, the FLOPs, GEMM times and
efficiencies are worked out by hand from the trace's JSON (a second parser: ``json`` and the launch/kernel pairing
by correlation id, nothing of ``tb_llmdiag``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tracepaths import SHARED_TRACES, TEST_DATA, shared_trace

from tb_llmdiag.ingest import load_trace
from tb_llmdiag.metrics.anatomy.topic import anatomy_metrics, busy_shares
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.model import DEVICE_KINDS

H100_BF16_PEAK = 989.4  # dense BF16 tensor-core TFLOP/s of an H100 SXM (NVIDIA's datasheet)


def _kineto_files() -> list[Path]:
    roots = [TEST_DATA] + ([SHARED_TRACES] if SHARED_TRACES.is_dir() else [])
    out = []
    for root in roots:
        for p in sorted(root.rglob("*.json*")):
            if (
                p.name in ("truth.json", "unprofiled_refs.json")
                or "xplane" in p.parts
                or p.suffix not in (".json", ".gz")
            ):
                continue
            out.append(p)
    return out


def _anatomy(path: Path) -> tuple[dict[str, Any], Context]:
    trace = load_trace(str(path))
    ctx = Context.build(trace, find_steps(trace))
    return anatomy_metrics(ctx), ctx


def _union_in_windows(starts: list[int], ends: list[int], win: list[tuple[int, int]]) -> int:
    """The length of the union of [s, e) within the windows: a plain sort and sweep."""
    total = 0
    for ws, we in win:
        ivs = sorted((max(s, ws), min(e, we)) for s, e in zip(starts, ends) if min(e, we) > max(s, ws))
        cur_s = cur_e = None
        for s, e in ivs:
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    total += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None:
            total += cur_e - cur_s
    return total


@pytest.mark.parametrize("path", _kineto_files(), ids=lambda p: str(p.relative_to(p.parents[2])))
def test_parts_add_up_to_gpu_busy(path: Path) -> None:
    """On every Kineto trace: the parts' time is the busy union within the window (within 1 %, as #37 asks; the
    allocation makes it exact up to rounding), and no part is negative."""
    try:
        a, ctx = _anatomy(path)
    except Exception as exc:  # a file the reader refuses (the truncated, bad-input cases) has no anatomy
        pytest.skip(f"not readable: {exc}")
    if ctx.trace.source_kind != "kineto":
        pytest.skip("not a Kineto trace")
    ev = ctx.trace.events
    dev = np.flatnonzero(np.isin(ev.kind, [int(k) for k in DEVICE_KINDS]))
    busy = _union_in_windows(
        ev.ts_ns[dev].tolist(),
        (ev.ts_ns[dev] + ev.dur_ns[dev]).tolist(),
        list(zip(ctx.win_s.tolist(), ctx.win_e.tolist())),
    )
    if busy == 0:
        assert a["available"] is False and a["reason"]
        return
    parts = a["parts"]
    total = sum(p["time_ns"] for p in parts.values())
    assert abs(total - busy) <= 0.01 * busy
    assert abs(a["busy_ns"] - busy) <= len(parts)  # rounding only
    assert all(p["time_ns"] >= 0 and 0 <= p["share"] <= 1 for p in parts.values())
    assert abs(a["assigned_share"] + a["other_share"] - 1) < 1e-9


def test_busy_shares_split_overlap_equally() -> None:
    """Two streams overlapping for 4 ns inside a window cut at 12: each event gets its own time plus half the
    overlap, cut to the window."""
    s = np.array([0, 6], np.int64)
    e = np.array([10, 20], np.int64)
    got = busy_shares(s, e, np.array([2], np.int64), np.array([12], np.int64))
    # [2, 6): only the first (4); [6, 10): both (2 each); [10, 12): only the second (2)
    assert got.tolist() == [6.0, 4.0]


#: the LLM GPU traces of ../shared/traces/external (SOURCES.md) and the share of GPU time in named parts on each,
#: as measured when the topic was written (the test asserts >= 0.8, #37's bar; these are the figures reported)
LLM_TRACES = {
    "deepseek-ai_profile-data/train.json.gz": 0.985,
    "AMD-AGI_TraceLens/b200_eager_trace.json.gz": 0.999,
    "AMD-AGI_TraceLens/h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": 0.947,
    "AMD-AGI_TraceLens/mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": 0.976,
    "AMD-AGI_TraceLens/sglang_Qwen3-8B_prefilldecode.json.gz": 1.0,
    "AMD-AGI_TraceLens/vllm_prefilldecode_piecewise_graph_execution.json.gz": 0.885,
    "AMD-AGI_TraceLens/torch_compile_triton_trace.json.gz": 1.0,
    "zhang-yuhui_nano-vllm/decode_gpu_0.json.gz": 1.0,
}


@pytest.mark.parametrize("rel", sorted(LLM_TRACES))
def test_llm_traces_are_mostly_in_named_parts(rel: str) -> None:
    a, _ = _anatomy(shared_trace("external/" + rel))
    assert a["available"] is True
    named = sum(p["time_ns"] for k, p in a["parts"].items() if k != "other") / a["busy_ns"]
    assert named >= 0.8
    assert named == pytest.approx(LLM_TRACES[rel], abs=0.02)


def _load(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _hand_gemm_figures(
    events: list[dict[str, Any]], modules: tuple[str, ...], ops: dict[str, Any]
) -> tuple[float, float]:
    """FLOPs of the operators named in ``ops`` (name -> FLOPs from Input Dims) that run inside an ``nn.Module`` frame
    of a class in ``modules``, and the summed duration (ns) of the GEMM/attention kernels they launch."""
    frames = [
        (e["tid"], e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "python_function" and e["name"].startswith(tuple(f"nn.Module: {m}_" for m in modules))
    ]
    launches = [
        e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    ]
    kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
    flops = dur_us = 0.0
    for op in events:
        if op.get("cat") != "cpu_op" or op["name"] not in ops or "Input Dims" not in op.get("args", {}):
            continue
        if not any(t == op["tid"] and s <= op["ts"] < e for t, s, e in frames):
            continue
        mine = [
            k
            for la in launches
            if la["tid"] == op["tid"] and op["ts"] <= la["ts"] < op["ts"] + op["dur"]
            if (k := kernels.get(la["args"]["correlation"])) is not None
            and ("gemm" in k["name"] or "flash" in k["name"])
        ]
        if mine:
            flops += ops[op["name"]](op["args"]["Input Dims"])
            dur_us += sum(k["dur"] for k in mine)
    return flops, dur_us * 1000.0


def _mm(d: list[list[int]]) -> float:
    (m, k), (_, n) = d[0], d[1]
    return 2.0 * m * k * n


HAND_OPS = {
    "aten::mm": _mm,
    "aten::addmm": lambda d: _mm(d[1:]),
    "aten::bmm": lambda d: 2.0 * d[0][0] * d[0][1] * d[0][2] * d[1][2],  # [B, M, K] x [B, K, N]
    # q [B, H, L, D], k [B, H, S, D]: 4 B H L S D (the full score matrix)
    "aten::_scaled_dot_product_flash_attention": lambda d: 4.0 * d[0][0] * d[0][1] * d[0][2] * d[1][2] * d[0][3],
}


@pytest.mark.parametrize(
    "part,modules", [("mlp", ("Qwen2MLP",)), ("attention", ("Qwen2Attention", "Qwen2RotaryEmbedding"))]
)
def test_flops_and_efficiency_by_hand(part: str, modules: tuple[str, ...]) -> None:
    """Qwen1.5-0.5B generate on an H100 (bf16 cuBLAS kernels): the MLP's and the attention's GEMM FLOPs, their
    kernels' time, the achieved TFLOP/s and the share of the H100's dense bf16 peak, each worked out by hand from
    the JSON (the ops inside the modules' frames, their launches and kernels by correlation id; the rotary embedding,
    computed once at the model's level, is attention's)."""
    path = shared_trace("external/AMD-AGI_TraceLens/h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    flops, kernel_ns = _hand_gemm_figures(_load(path), modules, HAND_OPS)
    a, _ = _anatomy(path)
    got = a["parts"][part]
    assert flops > 1e12 and kernel_ns > 1e6
    assert got["flops"] == pytest.approx(flops, rel=1e-9)
    assert got["flop_kernel_ns"] == pytest.approx(kernel_ns, abs=len(str(kernel_ns)) + 50)  # per-kernel ns rounding
    achieved = flops / kernel_ns / 1e3
    assert got["dtype"] == "bf16" and got["peak_tflops"] == H100_BF16_PEAK
    assert got["achieved_tflops"] == pytest.approx(achieved, rel=1e-4)
    assert got["efficiency_share"] == pytest.approx(achieved / H100_BF16_PEAK, rel=1e-4)
    assert got["identified_by"] == "module"


def test_lora_parts_on_the_bench_trace_modules() -> None:
    """The bench's LoRA run records ``LoRALinear`` modules: its adapters' kernels are ``lora`` by module evidence,
    the frozen layer's GEMMs stay in attention and the MLP (shapes without a rank dimension)."""
    from tracepaths import REPO

    a, _ = _anatomy(REPO / "bench" / "traces" / "lora_qwen1.5b_6steps.pt.trace.json.gz")
    parts = a["parts"]
    assert parts["lora"]["identified_by"] in ("module", "backward_link") and parts["lora"]["share"] > 0.02
    assert parts["attention"]["share"] > 0.02 and parts["mlp"]["share"] > 0.05
    assert {"gemm"} <= set(parts["lora"]["categories"])


def test_other_names_its_top_ops_and_xla_says_why() -> None:
    a, _ = _anatomy(next((TEST_DATA / "gpu_fixed").glob("*.json.gz")))
    other = a["parts"]["other"]
    assert other["identified_by"] is None and 1 <= len(other["top_ops"]) <= 3
    assert sorted(other["top_ops"], key=lambda t: -t["time_ns"]) == other["top_ops"]
    trace = load_trace(str(next((TEST_DATA / "xplane_jax_gpu").rglob("*.xplane.pb"))))
    res = anatomy_metrics(Context.build(trace, find_steps(trace)))
    assert res["available"] is False and "Kineto" in res["reason"]


@pytest.mark.parametrize("path", _kineto_files(), ids=lambda p: str(p.relative_to(p.parents[2])))
def test_each_parts_steps_add_up_to_its_time(path: Path) -> None:
    """On every Kineto trace: ``step_index`` is the steps' indices and each part's ``step_time_ns`` has one entry per
    step adding up to its ``time_ns`` (up to each entry's rounding; none without steps); per step, the parts add up to the busy union of
    the device events starting in that step (a plain sweep here), within 1 %."""
    try:
        a, ctx = _anatomy(path)
    except Exception as exc:
        pytest.skip(f"not readable: {exc}")
    if ctx.trace.source_kind != "kineto" or not a.get("available"):
        pytest.skip("no anatomy")
    steps = ctx.steps
    assert a["step_index"] == steps.index.tolist()
    for p in a["parts"].values():
        assert len(p["step_time_ns"]) == len(steps)
        if len(steps):
            assert abs(sum(p["step_time_ns"]) - p["time_ns"]) <= len(steps)
    if len(steps) < 2:
        return
    ev = ctx.trace.events
    dev = np.flatnonzero(np.isin(ev.kind, [int(k) for k in DEVICE_KINDS]))
    win = list(zip(ctx.win_s.tolist(), ctx.win_e.tolist()))
    starts = steps.start_ns.tolist() + [2**62]
    for i in range(len(steps)):
        lo = -(2**62) if i == 0 else starts[i]
        mine = dev[(ev.ts_ns[dev] >= lo) & (ev.ts_ns[dev] < starts[i + 1])]
        want = _union_in_windows(ev.ts_ns[mine].tolist(), (ev.ts_ns[mine] + ev.dur_ns[mine]).tolist(), win)
        got = sum(p["step_time_ns"][i] for p in a["parts"].values())
        assert abs(got - want) <= 0.01 * want + len(a["parts"]), (i, got, want)
