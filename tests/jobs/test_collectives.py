"""Collective kinds by name and by the annotation that launched them; bytes from args; comm vs compute."""

from __future__ import annotations

import numpy as np
import pytest

from minijob import AR, GEMM, SR, US, host, kern, make_rank, step
from tb_llmdiag.metrics.comm.collectives import KINDS, bus_bandwidth_bytes_per_s, collective_kind, find_collectives
from tb_llmdiag.metrics.comm.communication import communication_metrics, comm_breakdown
from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.model import Kind


@pytest.mark.parametrize("name,kind", [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "all_reduce"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reduce_scatter"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "send_recv"),
    ("ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "broadcast"),
    ("ncclDevKernel_Reduce_Sum_f32_RING_LL(x)", "reduce"),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)", "all_reduce"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(RankData*)", "all_reduce"),
    ("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*)", "all_to_all"),
    ("void deep_ep::intranode::combine<nv_bfloat16, 8, 768>(int4*)", "all_to_all"),
    ("void dpsk::ep::internode::notify_dispatch<false, 8>(int const*)", "all_to_all"),
    ("all-gather-start.2", "all_gather"), ("all-reduce.17", "all_reduce"), ("collective-permute-done", "send_recv"),
    ("void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*)", None),
    ("volta_sgemm_128x32_nt", None), ("fusion.12", None),
])
def test_kind_table(name: str, kind: str | None) -> None:
    assert collective_kind(name) == kind


def test_annotation_states_the_kind() -> None:
    # NCCL runs an all-to-all as SendRecv kernels; the host annotation around the launch says what it is
    t = make_rank([
        step(1, 0, 1000 * US),
        host(Kind.CPU_OP, "c10d::alltoall_base_", 10 * US, 100 * US),
        host(Kind.ANNOTATION, "nccl:all_to_all", 20 * US, 50 * US),
        host(Kind.RUNTIME, "cudaLaunchKernel", 30 * US, 5 * US, corr=7),
        kern(SR, 40 * US, 100 * US, corr=7),
        host(Kind.RUNTIME, "cudaLaunchKernel", 200 * US, 5 * US, corr=8),  # outside any annotation
        kern(SR, 210 * US, 100 * US, corr=8),
    ], rank=0, world=2)
    c = find_collectives(t)
    assert [KINDS[k] for k in c.kind] == ["all_to_all", "send_recv"]


def test_bytes_from_args_and_bus_bandwidth() -> None:
    t = make_rank([step(1, 0, 1000 * US), kern(AR, 0, 500 * US, comm_in_nelems=1000, comm_out_nelems=1000,
                                                comm_dtype_id=0, comm_group_size=8)],
                  rank=0, world=8, extra_names={"comm_dtype": ("BFloat16",)})
    c = find_collectives(t)
    assert c.bytes.tolist() == [2000] and c.group_size.tolist() == [8]
    # nccl-tests: all-reduce busbw = algbw x 2 (n - 1) / n
    assert bus_bandwidth_bytes_per_s("all_reduce", 10**9, 10**9, 8) == pytest.approx(1.75e9)
    assert bus_bandwidth_bytes_per_s("all_gather", 10**9, 10**9, 4) == pytest.approx(0.75e9)
    assert bus_bandwidth_bytes_per_s("all_reduce", -1, 10**9, 8) is None
    m = communication_metrics(t, c, find_steps(t))
    assert m["by_kind"][0]["bytes"] == 2000
    assert m["by_kind"][0]["busbw_lower_bound_bytes_per_s"] == pytest.approx(2000 / 500e-6 * 1.75)


def test_exposed_is_collective_time_no_compute_overlaps() -> None:
    # collective [100, 500) on stream 20; compute [0, 200) on 7 and [300, 350) on 8; memcpy [400, 450) hides nothing
    t = make_rank([
        step(1, 0, 1000 * US), kern(AR, 100 * US, 400 * US, stream=20), kern(GEMM, 0, 200 * US, stream=7),
        kern(GEMM, 300 * US, 50 * US, stream=8),
        host(Kind.MEMCPY, "Memcpy DtoD (Device -> Device)", 400 * US, 50 * US),
    ], rank=0, world=2)
    c = find_collectives(t)
    st = find_steps(t)
    b = comm_breakdown(t, c, st.start_ns, st.end_ns)
    assert (b.collective_ns[0], b.compute_ns[0], b.exposed_ns[0]) == (400 * US, 250 * US, 250 * US)
    assert b.idle_ns[0] == 1000 * US - 500 * US
    m = communication_metrics(t, c, st)
    assert m["overlap_share"] == pytest.approx(1 - 250 / 400)
    assert m["exposed_share"] == pytest.approx(0.25)


def test_no_collectives_is_stated() -> None:
    t = make_rank([step(1, 0, 100 * US), kern(GEMM, 0, 50 * US)], rank=None, world=None)
    c = find_collectives(t)
    assert len(c) == 0
    assert communication_metrics(t, c, find_steps(t))["available"] is False
    assert np.all(comm_breakdown(t, c, np.array([0]), np.array([100 * US])).exposed_ns == 0)


def test_sync_blocked_during_a_collective() -> None:
    # host blocked in cudaStreamSynchronize [300, 700); the all-reduce runs [100, 500): 200 us of the sync
    # are the device sitting in the collective
    t = make_rank([step(1, 0, 1000 * US), kern(AR, 100 * US, 400 * US, stream=20),
                   host(Kind.RUNTIME, "cudaStreamSynchronize", 300 * US, 400 * US)], rank=0, world=2)
    c = find_collectives(t)
    b = comm_breakdown(t, c, np.array([0]), np.array([1000 * US]))
    assert (b.sync_ns[0], b.sync_in_collective_ns[0]) == (400 * US, 200 * US)
