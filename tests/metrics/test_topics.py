"""Each metric topic on tiny inline traces, with exact expected values."""

from __future__ import annotations

import json

import numpy as np
import pytest

from minitrace import E, GEMM, LOADER, US, idle_scenario, kernel, launch, make_trace, op, step
from tb_llmdiag.classify import CATEGORIES
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.headline import headline
from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.model import DeviceInfo, Kind, MemoryTable


def metrics_of(trace):  # noqa: ANN001, ANN201
    m = compute_metrics(trace, find_steps(trace))
    json.dumps(m, allow_nan=False)  # JSON-able, no NaN anywhere
    return m


def test_kernel_shares() -> None:
    # GIVEN gemm 10+5 us, copy 10 us, add 8 us in the step
    k = metrics_of(idle_scenario())["kernels"]
    assert k["device_time_ns"] == 33 * US
    assert k["by_category"]["gemm"] == {"time_ns": 15 * US, "count": 2, "share": 15 / 33}
    assert k["by_category"]["copy"] == {"time_ns": 10 * US, "count": 1, "share": 10 / 33}
    assert k["by_category"]["elementwise"]["time_ns"] == 8 * US
    assert set(k["by_category"]) == set(CATEGORIES)
    assert sum(v["share"] for v in k["by_category"].values()) == pytest.approx(1.0)
    assert k["copy_share"] == 10 / 33 and k["gemm_share"] == 15 / 33
    assert k["copy_vs_gemm_ratio"] == 10 / 15
    assert k["copy_step_share"] == 0.10
    assert k["top_kernels"][0] == {"name": GEMM, "category": "gemm", "count": 2, "total_ns": 15 * US,
                                   "mean_ns": 7500, "share": 15 / 33}


def test_launch_table() -> None:
    m = metrics_of(idle_scenario())
    la = m["launch"]
    assert (la["kernels"], la["launches"], la["kernels_per_step"], la["launches_per_step"]) == (4, 4, 4.0, 4.0)
    assert la["kernel_median_ns"] == 9 * US and la["kernel_mean_ns"] == 33 * US // 4
    assert la["tiny_kernels"] == 2 and la["tiny_kernel_share"] == 0.5
    assert la["tiny_kernel_time_share"] == 13 / 33
    assert la["launch_api_median_ns"] == 2 * US
    assert la["runtime_ns"] == 7 * US + 9_500 and la["runtime_share"] == 0.165
    assert la["api"][0] == {"name": "cudaStreamSynchronize", "count": 1, "total_ns": 9_500, "mean_ns": 9_500,
                            "max_ns": 9_500, "share": 9_500 / 16_500}
    assert la["api"][1] == {"name": "cudaLaunchKernel", "count": 4, "total_ns": 7 * US, "mean_ns": 1750,
                            "max_ns": 2 * US, "share": 7_000 / 16_500}
    # min(host_wait_share 0.25, 2 tiny kernels x 2 us per launch / 100 us step)
    assert la["tiny_kernel_saving_share"] == pytest.approx(0.04)


def test_host_sync() -> None:
    hs = metrics_of(idle_scenario())["host_sync"]
    assert hs["sync_calls"] == 1 and hs["sync_calls_per_step"] == 1.0
    assert hs["item_calls"] == 0 and hs["syncs_per_step"] == 1.0
    assert hs["blocked_ns"] == 9_500 and hs["longest_ns"] == 9_500
    assert hs["idle_after_sync_ns"] == 15 * US and hs["idle_after_sync_share"] == 0.15
    assert hs["saving_share"] == 0.095  # min(blocked 9.5 us, idle 67 us - data loader 25 us) / 100 us
    assert hs["by_api"] == [{"name": "cudaStreamSynchronize", "count": 1, "total_ns": 9_500, "max_ns": 9_500}]


def test_item_calls_count_as_syncs() -> None:
    trace = make_trace([step(1, 0, 100 * US), op("aten::item", 10 * US, 30 * US),
                        op("aten::_local_scalar_dense", 11 * US, 28 * US),
                        E(Kind.RUNTIME, "cudaStreamSynchronize", 12 * US, 20 * US),
                        launch(1 * US, 1 * US, 1), kernel(GEMM, 2 * US, 30 * US, 1)])
    hs = metrics_of(trace)["host_sync"]
    # one sync site: the stream sync inside .item() (nested ops are not counted again)
    assert (hs["sync_calls"], hs["item_calls"], hs["syncs_per_step"]) == (1, 1, 1.0)
    assert hs["blocked_ns"] == 30 * US and hs["longest_ns"] == 30 * US
    assert hs["blocked_share"] == 0.3
    # the kernel runs 2-32 us, so idle is 70 us: saving = min(blocked 0.3, idle 0.7)
    assert hs["saving_share"] == 0.3


def test_item_on_a_cpu_tensor_is_not_a_sync() -> None:
    trace = make_trace([step(1, 0, 100 * US), op("aten::item", 10 * US, 2 * US),
                        op("aten::_local_scalar_dense", 10_500, 1 * US), launch(1 * US, 1 * US, 1),
                        kernel(GEMM, 2 * US, 30 * US, 1)])
    hs = metrics_of(trace)["host_sync"]
    assert (hs["item_calls"], hs["syncs_per_step"], hs["blocked_ns"]) == (0, 0.0, 0)


def test_dataloader() -> None:
    dl = metrics_of(idle_scenario())["dataloader"]
    assert dl == {"available": True, "calls": 1, "calls_per_step": 1.0, "host_ns": 20 * US, "host_share": 0.2,
                  "stall_ns": 20 * US, "stall_share": 0.2, "iterator": "single_process"}


def test_dataloader_hidden_behind_gpu_work_is_not_a_stall() -> None:
    # GIVEN a multi-process loader call fully overlapped by a kernel
    trace = make_trace([step(1, 0, 50 * US), launch(0, 1 * US, 1), kernel(GEMM, 1 * US, 49 * US, 1),
                        op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 5 * US, 10 * US)])
    dl = metrics_of(trace)["dataloader"]
    assert (dl["host_ns"], dl["stall_ns"], dl["iterator"]) == (10 * US, 0, "multi_process")


def test_dataloader_absent() -> None:
    dl = metrics_of(make_trace([step(1, 0, 10 * US)]))["dataloader"]
    assert dl["available"] is False and dl["calls"] == 0


def test_memcpy_pageable_vs_pinned() -> None:
    trace = make_trace([
        step(1, 0, 100 * US),
        launch(1 * US, 8 * US, 11, "cudaMemcpyAsync"), E(Kind.MEMCPY, "Memcpy HtoD (Pageable -> Device)", 2 * US, 3 * US, corr=11, nbytes=4096),
        launch(10 * US, 1 * US, 12, "cudaMemcpyAsync"), E(Kind.MEMCPY, "Memcpy HtoD (Pinned -> Device)", 11 * US, 2 * US, corr=12, nbytes=8192),
        launch(20 * US, 5 * US, 13, "cudaMemcpyAsync"), E(Kind.MEMCPY, "Memcpy DtoH (Device -> Pageable)", 21 * US, 1 * US, corr=13, nbytes=4),
        E(Kind.MEMCPY, "Memcpy HtoD (Pageable -> Device)", 30 * US, 4 * US, nbytes=100),  # no launch joins: device time
    ])
    mc = metrics_of(trace)["memcpy"]
    assert mc["count"] == 4
    assert (mc["htod_pageable_count"], mc["htod_pageable_bytes"], mc["htod_pageable_time_ns"], mc["htod_pageable_host_ns"]) == (2, 4196, 7 * US, 12 * US)
    assert (mc["htod_pinned_count"], mc["htod_pinned_bytes"], mc["htod_pinned_host_ns"]) == (1, 8192, 1 * US)
    assert (mc["dtoh_pageable_count"], mc["dtoh_pageable_host_ns"]) == (1, 5 * US)
    assert mc["htod_pageable_per_step"] == 2.0 and mc["pageable_htod_share"] == 0.12
    assert {r["name"]: r["count"] for r in mc["by_name"]} == {
        "Memcpy HtoD (Pageable -> Device)": 2, "Memcpy HtoD (Pinned -> Device)": 1, "Memcpy DtoH (Device -> Pageable)": 1}


def _steps_trace(durs_us: list[int], lengths: list[int] | None = None) -> object:
    rows, t = [], 0
    for i, d in enumerate(durs_us):
        rows.append(step(i + 1, t, d * US))
        if lengths:
            rows.append(op("aten::embedding", t + 1 * US, 1 * US, f"[[1000, 64], [2, {lengths[i]}], [], [], []]"))
            rows.append(op("aten::embedding", t + 3 * US, 1 * US, f"[[512, 64], [1, {lengths[i]}], [], [], []]"))
        t += d * US
    return make_trace(rows)


def test_step_stats_warmup_and_outliers() -> None:
    s = metrics_of(_steps_trace([300, 100, 110, 100, 90]))["steps"]
    assert s["count"] == 5 and [r["duration_ns"] for r in s["per_step"]] == [300_000, 100_000, 110_000, 100_000, 90_000]
    assert (s["median_ns"], s["mean_ns"], s["min_ns"], s["max_ns"]) == (100_000, 140_000, 90_000, 300_000)
    assert s["max_over_median"] == 3.0
    assert s["first_over_rest"] == 3.0 and s["warmup_first_step"] is True
    assert s["warmup_excess_share"] == pytest.approx(200 / 700)
    assert s["cv_excluding_first"] == pytest.approx(np.sqrt(50) / 100)
    assert s["outliers"] == [1] and s["outlier_excess_share"] == pytest.approx(200 / 700)
    assert s["mean_excess_share"] == 0.0
    assert [r["tokens"] for r in s["per_step"]] == [None] * 5 and s["tokens_corr"] is None


def test_tokens_per_step_and_correlation() -> None:
    s = metrics_of(_steps_trace([100, 200, 300, 400], lengths=[50, 100, 150, 200]))["steps"]
    assert [r["tokens"] for r in s["per_step"]] == [100, 200, 300, 400]  # B=2 x L, the vocab-sized embedding only
    assert s["tokens_per_step_median"] == 250
    assert s["tokens_corr"] == pytest.approx(1.0)
    assert s["tokens_cv"] == pytest.approx(np.std([100, 200, 300, 400]) / 250)


def test_steps_unavailable_without_markers() -> None:
    s = metrics_of(make_trace([kernel(GEMM, 0, 10)]))["steps"]
    assert s["available"] is False and s["count"] == 0


def test_memory_peak_and_headroom() -> None:
    mem = MemoryTable(ts_ns=np.array([0, 1, 2, 3], np.int64), device=np.array([-1, 0, 0, 0], np.int16),
                      bytes=np.array([4, 10, 20, -5], np.int64),
                      total_allocated_bytes=np.array([4, 10 << 30, 30 << 30, 25 << 30], np.int64),
                      total_reserved_bytes=np.array([0, 12 << 30, 34 << 30, 34 << 30], np.int64))
    trace = make_trace([step(1, 0, 10), kernel(GEMM, 0, 5)], memory=mem,
                       devices=(DeviceInfo(0, "NVIDIA H100 80GB HBM3", total_memory_bytes=80 << 30),))
    m = metrics_of(trace)["memory"]
    assert m == {"available": True, "device": 0, "peak_allocated_bytes": 30 << 30, "peak_reserved_bytes": 34 << 30,
                 "fragmentation_bytes": 4 << 30, "samples": 3, "total_bytes": 80 << 30, "peak_used_bytes": 34 << 30,
                 "peak_allocated_share": 30 / 80, "peak_reserved_share": 34 / 80, "peak_used_share": 34 / 80,
                 "headroom_bytes": 46 << 30,
                 "fragmentation_share": 4 / 80}


def test_memory_unavailable_without_samples() -> None:
    assert metrics_of(make_trace([kernel(GEMM, 0, 5)]))["memory"]["available"] is False


def test_memory_samples_without_totals_are_unavailable() -> None:
    # GIVEN pre-1.10 samples: deltas only, totals -1
    mem = MemoryTable(ts_ns=np.array([0, 1], np.int64), device=np.array([0, 0], np.int16),
                      bytes=np.array([512, -512], np.int64), total_allocated_bytes=np.array([-1, -1], np.int64),
                      total_reserved_bytes=np.array([-1, -1], np.int64))
    m = metrics_of(make_trace([kernel(GEMM, 0, 5)], memory=mem))["memory"]
    assert m["available"] is False and "totals" in m["reason"]


def test_memory_without_reservation_uses_allocated() -> None:
    mem = MemoryTable(ts_ns=np.array([0], np.int64), device=np.array([0], np.int16), bytes=np.array([1], np.int64),
                      total_allocated_bytes=np.array([8 << 30], np.int64), total_reserved_bytes=np.array([-1], np.int64))
    m = metrics_of(make_trace([kernel(GEMM, 0, 5)], memory=mem,
                              devices=(DeviceInfo(0, "x", total_memory_bytes=32 << 30),)))["memory"]
    assert (m["peak_reserved_bytes"], m["peak_used_bytes"], m["headroom_bytes"], m["peak_used_share"]) == (None, 8 << 30, 24 << 30, 0.25)


def test_flops_and_mfu() -> None:
    trace = make_trace([
        step(1, 0, 1_000_000),
        op("aten::mm", 10, 5, "[[128, 256], [256, 512]]"),
        op("aten::addmm", 20, 5, "[[512], [128, 256], [256, 512], [], []]"),
        op("aten::bmm", 30, 5, "[[4, 128, 64], [4, 64, 128]]"),
        op("aten::_scaled_dot_product_flash_attention", 40, 5, "[[2, 8, 128, 64], [2, 8, 128, 64], [2, 8, 128, 64], [], [], [], []]"),
        op("aten::linear", 50, 5, "[[128, 256], [512, 256], [512]]"),  # composite: not counted
        op("aten::embedding", 60, 5, "[[1000, 64], [1, 128], [], [], []]"),  # 128 tokens: the mm's M
        launch(1, 1, 1), kernel(GEMM, 2, 900_000, 1),
    ], devices=(DeviceInfo(0, "NVIDIA H100 80GB HBM3"),))
    f = metrics_of(trace)["flops"]
    mm, bmm = 2 * 128 * 256 * 512, 2 * 4 * 128 * 64 * 128
    assert f["token_batch_share"] == pytest.approx(2 * mm / (2 * mm + bmm)) and f["mfu_withheld"] is None
    total = 2 * 128 * 256 * 512 * 2 + 2 * 4 * 128 * 64 * 128 + 4 * 2 * 8 * 128 * 128 * 64
    assert f["flops"] == total and f["flops_per_step"] == total
    assert f["matmul_flops"] == 2 * 128 * 256 * 512 * 2 + 2 * 4 * 128 * 64 * 128
    assert f["achieved_tflops"] == pytest.approx(total / 1e-3 / 1e12)
    assert f["peak_tflops"] == 989.4 and f["device"] == "NVIDIA H100 80GB HBM3"
    assert f["mfu_share"] == pytest.approx(total / 1e-3 / 1e12 / 989.4)
    assert f["tokens_per_s"] == pytest.approx(128 / 1e-3)


def test_mfu_withheld_when_the_gemms_do_not_run_on_the_token_batch() -> None:
    # a text encoder's 77 tokens beside GEMMs over 4096 image tokens (a diffusion transformer)
    trace = make_trace([
        step(1, 0, 1_000_000),
        op("aten::mm", 10, 5, "[[4096, 256], [256, 512]]"),
        op("aten::embedding", 60, 5, "[[49408, 64], [1, 77], [], [], []]"),
        launch(1, 1, 1), kernel(GEMM, 2, 900_000, 1),
    ], devices=(DeviceInfo(0, "NVIDIA H100 80GB HBM3"),))
    f = metrics_of(trace)["flops"]
    assert f["token_batch_share"] == 0.0 and f["mfu_withheld"] == "the recorded shapes are not an LLM's token batch"
    assert f["mfu_share"] is None and f["tokens_per_s"] is None and f["achieved_tflops"] > 0


def test_flops_unavailable_without_shapes() -> None:
    f = metrics_of(idle_scenario())["flops"]
    assert f["available"] is False and "input shapes recorded" in f["reason"]


def test_annotations_and_stack() -> None:
    trace = make_trace([step(1, 0, 100 * US), E(Kind.ANNOTATION, "Optimizer.step#AdamW.step", 60 * US, 20 * US),
                        E(Kind.ANNOTATION, "Optimizer.zero_grad#AdamW.zero_grad", 85 * US, 5 * US),
                        E(Kind.ANNOTATION, "[pl][profile]run_training_batch", 0, 90 * US)])
    a = metrics_of(trace)["annotations"]
    assert a["optimizer_step_share"] == 0.2 and a["zero_grad_share"] == 0.05
    assert a["top"][0] == {"name": "[pl][profile]run_training_batch", "count": 1, "total_ns": 90 * US, "share": 0.9}
    assert a["stack"] == "lightning"


def test_headline_keys_and_values() -> None:
    h = headline(metrics_of(idle_scenario()))
    assert list(h) == ["step_median_ns", "step_min_ns", "step_max_ns", "step_cv", "gpu_busy_share", "copy_share",
                       "gemm_share", "copy_vs_gemm_ratio", "launches_per_step", "mfu_share", "tokens_per_s",
                       "generated_tokens_per_s", "time_per_output_token_ns"]
    assert h["step_median_ns"] == 100 * US and h["gpu_busy_share"] == 0.33 and h["launches_per_step"] == 4.0
    assert h["copy_vs_gemm_ratio"] == 10 / 15 and h["mfu_share"] is None
    assert headline({}) == dict.fromkeys(h)


def test_headline_on_xplane_runs_reads_the_xla_topic() -> None:
    m = metrics_of(idle_scenario())
    m["run"] = {"platform": "xla", "source_kind": "xplane"}
    m["xla"] = {"matmul_share": 0.6, "movement_share": 0.2, "matmul_vs_movement_ratio": 1 / 3,
                "device_duty_cycle_share": 0.7, "flop_utilization_share": 0.4}
    h = headline(m)
    assert (h["gemm_share"], h["copy_share"], h["copy_vs_gemm_ratio"]) == (0.6, 0.2, 1 / 3)
    assert (h["gpu_busy_share"], h["mfu_share"]) == (0.7, 0.4)
    assert h["step_median_ns"] == 100 * US  # the rest as on GPU runs
    assert h["launches_per_step"] is None  # XLA launches whole programs: launch calls per step mean nothing
    m["xla"] = {"available": False, "reason": "could not be computed"}
    assert headline(m)["gemm_share"] is None  # never the kernel-name numbers on an XPlane run


def test_run_topic_says_the_platform_once() -> None:
    m = metrics_of(idle_scenario())  # a Kineto trace
    assert m["run"] == {"platform": "cuda", "source_kind": "kineto", "device_kind": "GPU", "workload": "inference",
                        "backward_op_count": 0, "optimizer_step_count": 0, "optimizer_kernel_count": 0,
                        "read_complete": True, "read_share": 1.0}
    assert "xla" not in m


def test_cpu_only_trace_topics_say_why() -> None:
    m = metrics_of(make_trace([op("aten::add", 0, 10)]))
    for topic in ("idle", "kernels", "memcpy", "memory", "steps"):
        assert m[topic]["available"] is False and m[topic]["reason"]


def test_outlier_step_cause() -> None:
    # GIVEN four steps; the last one waits 80 us in the data loader before its kernel
    rows = []
    for i in range(4):
        t = i * 200 * US
        if i < 3:
            rows += [step(i, t, 100 * US), launch(t + 1 * US, 1 * US, i + 1), kernel(GEMM, t + 2 * US, 90 * US, i + 1)]
        else:
            rows += [step(i, t, 180 * US), op(LOADER, t, 80 * US), launch(t + 81 * US, 1 * US, i + 1),
                     kernel(GEMM, t + 82 * US, 90 * US, i + 1)]
    m = metrics_of(make_trace(rows))
    assert [r["data_loader_ns"] for r in m["steps"]["per_step"]] == [0, 0, 0, 82 * US]
    assert [r["busy_ns"] for r in m["steps"]["per_step"]] == [90 * US] * 4
    assert m["steps"]["outliers"] == [3]
    assert m["steps"]["outlier_causes"] == [{"index": 3, "duration_ns": 180 * US, "excess_ns": 80 * US,
                                             "cause": "data_loader", "first": False}]
    assert m["steps"]["outlier_main_cause"] == "data_loader"


def test_host_wait_culprit_prefers_the_leaf() -> None:
    # GIVEN the GPU idle 10-90 us while the host is inside an op and its child (the child is shorter)
    trace = make_trace([step(1, 0, 100 * US), launch(0, 1 * US, 1), kernel(GEMM, 1 * US, 9 * US, 1),
                        op("aten::scaled_dot_product_attention", 10 * US, 80 * US),
                        op("aten::_cudnn_attention_forward", 11 * US, 78 * US),
                        launch(90 * US, 1 * US, 2), kernel(GEMM, 92 * US, 8 * US, 2)])
    idle = metrics_of(trace)["idle"]
    assert idle["host_wait_ns"] == 83 * US  # 0-1 us before the first kernel, then 10-92 us
    assert idle["host_wait_top_ops"][0] == {"name": "aten::scaled_dot_product_attention", "idle_ns": 80 * US, "share": 0.8}
    assert idle["host_wait_culprit"] == "aten::_cudnn_attention_forward"
    assert (idle["host_wait_culprit_ns"], idle["host_wait_culprit_mean_ns"]) == (78 * US, 78 * US)
    # AND one step, no recorded shapes: no event shows a new input shape, so no plan-build hint (test_culprit_hints.py)
    assert idle["host_wait_culprit_hint"] is None


def test_host_wait_culprit_counts_concurrent_calls_of_one_name_once() -> None:
    # GIVEN the GPU idle 10-90 us while two threads run the same op over it, one of them twice, nested
    ops = [op("Compile", 10 * US, 80 * US), op("Compile", 12 * US, 70 * US), op("Compile", 15 * US, 60 * US)]
    trace = make_trace([step(1, 0, 100 * US), launch(0, 1 * US, 1), kernel(GEMM, 1 * US, 9 * US, 1), *ops,
                        launch(90 * US, 1 * US, 2), kernel(GEMM, 92 * US, 8 * US, 2)])
    idle = metrics_of(trace)["idle"]
    # THEN its idle time is the union of its calls (80 us), not their sum (210 us), so the share stays <= 1
    assert idle["host_wait_culprit"] == "Compile"
    assert idle["host_wait_culprit_ns"] == 80 * US <= idle["host_wait_ns"]
    assert idle["host_wait_culprit_share"] == 0.8


def test_host_wait_per_shape_work_is_the_slow_plan_building_operator() -> None:
    # GIVEN the GPU idle 10-90 us while the host is inside a cuDNN attention call that takes 78 us (a plan
    # build would take ms; the threshold is lowered here) and its 80 us caller
    import tb_llmdiag.metrics.steps.idle as idle_mod

    # in each of two steps, whose recorded token slots differ (8, then 16: a new input shape in both)
    rows = []
    for i, t in enumerate((0, 100 * US)):
        rows += [step(i + 1, t, 100 * US), launch(t, 1 * US, 2 * i + 1), kernel(GEMM, t + 1 * US, 9 * US, 2 * i + 1),
                 op("aten::embedding", t + 2 * US, 1 * US, f"[[1000, 64], [1, {8 * (i + 1)}]]"),
                 op("aten::scaled_dot_product_attention", t + 10 * US, 80 * US),
                 op("aten::_cudnn_attention_forward", t + 11 * US, 78 * US),
                 launch(t + 90 * US, 1 * US, 2 * i + 2), kernel(GEMM, t + 92 * US, 8 * US, 2 * i + 2)]
    trace = make_trace(rows)
    saved = idle_mod.PER_SHAPE_MIN_MEAN_NS
    try:
        idle_mod.PER_SHAPE_MIN_MEAN_NS = 50 * US
        idle = metrics_of(trace)["idle"]
        # THEN the per-shape operator and its idle time are reported (the caller is not a per-shape op)
        assert (idle["host_wait_per_shape_op"], idle["host_wait_per_shape_ns"], idle["host_wait_per_shape_share"]) == (
            "aten::_cudnn_attention_forward", 2 * 78 * US, 0.78)
        # AND calls shorter than the threshold are ordinary launches, not per-shape work
        idle_mod.PER_SHAPE_MIN_MEAN_NS = 100 * US
        idle = metrics_of(trace)["idle"]
        assert (idle["host_wait_per_shape_op"], idle["host_wait_per_shape_ns"]) == (None, 0)
    finally:
        idle_mod.PER_SHAPE_MIN_MEAN_NS = saved
