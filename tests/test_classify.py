"""Kernel taxonomy: real kernel names (current H100 LLM kernels and ../shared/traces) -> category."""

from __future__ import annotations

import gzip
import re

import msgspec
from pathlib import Path

import numpy as np
import pytest

from tb_llmdiag.classify import CATEGORIES, KERNEL_PATTERNS, categorize, classify_names, kernel_category, own_name
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.context import NAME_PATTERNS
from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.model import EventTable, Kind

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "traces"

# Names as they appear in torch.profiler traces of LLM fine-tunes on Hopper/Ampere (PyTorch 2.x).
MODERN = [
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)", "gemm"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, false, false>(cublasLt::cublasSplitKParams<float>, float const*, __nv_bfloat16 const*, __nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, __nv_bfloat16 const*, float*, void*, long, float*, int*)", "gemm"),
    ("triton_tem_fused_mm_0", "gemm"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(Flash_fwd_params)", "attention"),
    ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, true, false, false, false, false, false>(pytorch_flash::Flash_bwd_params)", "attention"),
    ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)", "attention"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0", "attention"),
    ("triton_tem_fused_flex_attention_0", "attention"),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})", "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul>)", "copy"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 4, 128, 1>(at::native::(anonymous namespace)::OpaqueType<2u>*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)", "copy"),
    ("triton_poi_fused__to_copy_0", "copy"),
    ("triton_poi_fused_cat_clone_3", "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)", "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)", "elementwise"),
    ("triton_poi_fused__to_copy_add_mul_0", "elementwise"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)", "norm"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)", "softmax"),
    ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)", "softmax"),
    ("triton_per_fused__log_softmax_0", "softmax"),
    ("triton_red_fused_sum_1", "reduce"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, unsigned int, float, 4>)", "reduce"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, float*, float*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, float*, float*)", "optimizer"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "communication"),
    ("void kDequantizeBlockwise<__nv_bfloat16, 512, 64, 8, 2>(float*, unsigned char*, float*, __nv_bfloat16*, int, int)", "quant"),
    ("void kgemm_4bit_inference_naive<__nv_bfloat16, 128, 16>(int, int, int, __nv_bfloat16*, unsigned char*, float*, __nv_bfloat16 const*, __nv_bfloat16*, int, int, int, int)", "quant"),
    ("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<long, unsigned int>, int, int, unsigned int, unsigned int, long)", "index"),
    ("void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::BFloat16, float, long>(long const*, c10::BFloat16 const*, float*, int, long, int, int)", "index"),
    ("some_custom_kernel_we_do_not_know", "other"),
    # other stacks: ROCm (hipBLASLt/Tensile, CK, aiter), vLLM/SGLang, TRT-LLM MoE, DeepEP, fp8 casts
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1", "gemm"),
    ("_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPrefillPipelineQRKSVSAsyncI", "attention"),
    ("_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemIDF16b", "norm"),
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib", "norm"),
    ("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*, bool const*)", "communication"),
    ("void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*, int)", "communication"),
    ("void cuda::per_token_cast_to_fp8_with_channels<__nv_bfloat16, 128, false, 128, false>(__nv_bfloat16 const*, int)", "quant"),
    ("void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)2, __nv_bfloat16, 32, true>(int, flashinfer::QuantizationSFLayout)", "quant"),
    ("void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true> >(moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true>)", "moe"),
    ("void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16> >(int)", "moe"),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>(__nv_bfloat16 const*)", "index"),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*)", "elementwise"),
    ("sage_fwd", "attention"),
    ("sage_quant_kernel", "quant"),
    ("void marlin::Marlin<__nv_bfloat16, 4, 8, 8, 4, 8>(int4 const*, int4 const*, int4*)", "gemm"),  # not "quant"
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu", "gemm"),
    ("triton_tem_fused_addmm_1", "gemm"),
    # XLA GPU: fusions by kind and root op, library custom calls, the autotuner's own kernels
    ("loop_convert_fusion", "copy"),
    ("wrapped_transpose.3", "copy"),
    ("loop_convert_multiply_fusion", "elementwise"),
    ("loop_subtract_fusion_3", "elementwise"),
    ("input_reduce_fusion_2", "reduce"),
    ("loop_gather_fusion", "index"),
    ("gemm_fusion_dot_3", "gemm"),
    ("__cublas$gemm", "gemm"),
    ("cudnn$conv", "conv"),
    ("stream_executor::gpu::RedzoneAllocatorKernelImpl(unsigned char*, unsigned char, unsigned long, unsigned int*)", "autotune"),
    ("void stream_executor::gpu::xla_fp_comparison<Eigen::bfloat16>(Eigen::bfloat16*, Eigen::bfloat16*, float)", "autotune"),
]


@pytest.mark.parametrize(("name", "own"), [
    ("void foo<cutlass::bfloat16_t, flashinfer::X>(int, float)", "foo"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2>(float*)", "at::native::CatArrayBatchedCopy"),
    ("std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long)", "vllm::fused_add_rms_norm_kernel"),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80>::Params)", "fmha_cutlassF_f32_aligned_64x64_rf_sm80"),
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64EEEvPT0_", "aiter::add_rmsnorm_quant_kernel"),
    ("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT"),
    ("cuda::expand_to_fused_with_scales_impl(int4 const*, int4*)", "cuda::expand_to_fused_with_scales_impl"),
])
def test_own_name_is_the_identifier_before_template_args_and_parameters(name: str, own: str) -> None:
    assert own_name(name) == own


def test_template_arguments_do_not_decide() -> None:
    # a kernel whose own name says nothing is "other" whatever its template arguments mention
    assert kernel_category("void mystery_kernel<cutlass::gemm::GemmShape<128>, flashinfer::attention::X>(int)") == "other"
    # a launch wrapper is read through to what it launches
    assert kernel_category("void cutlass::device_kernel<flash::FlashAttnBwd<cutlass::bfloat16_t> >(int)") == "attention"
    assert kernel_category("void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>(int)") == "gemm"


@pytest.mark.parametrize(("name", "category"), MODERN, ids=[c + ":" + n[:40] for n, c in MODERN])
def test_modern_llm_kernel_names(name: str, category: str) -> None:
    assert kernel_category(name) == category


# (substring that picks a real name in ../shared/traces, expected category)
SHARED_CASES = [
    ("volta_sgemm_128x32_nt", "gemm"),
    ("cutlass_80_tensorop_s1688gemm", "gemm"),
    ("epilogue::impl::globalKernel", "gemm"),
    ("splitKreduce_kernel<float, float, float, float, true, false, false>", "gemm"),
    ("implicit_convolve_sgemm<float, float, 1024", "conv"),
    ("volta_scudnn_winograd", "conv"),
    ("ImplicitGemmConvolution", "conv"),
    ("direct_copy_kernel_cuda", "copy"),
    ("CatArrayBatchedCopy<float", "copy"),
    ("nchwToNhwcKernel", "copy"),
    ("CUDAFunctor_add<float>", "elementwise"),
    ("FillFunctor<float>", "elementwise"),
    ("vectorized_layer_norm_kernel<float, float>", "norm"),
    ("bn_fw_tr_1C11_singleread", "norm"),
    ("softmax_warp_forward", "softmax"),
    ("ClassNLLCriterion_updateOutput", "softmax"),
    ("reduce_kernel<512, 1", "reduce"),
    ("DeviceScanKernel", "reduce"),
    ("multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>", "optimizer"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float", "communication"),
    ("split_embedding_codegen_forward_unweighted_kernel", "index"),
]


def _kernel_names_in_shared() -> set[str]:
    names: set[str] = set()
    for path in sorted(SHARED.glob("**/*.json.gz")):
        if "mtia" in path.name:  # no CUDA kernels, and the largest file
            continue
        try:
            data = msgspec.json.decode(gzip.open(path).read())
        except msgspec.DecodeError:  # external/ holds a trace cut at 1 MiB on purpose
            continue
        events = data["traceEvents"] if isinstance(data, dict) else data
        names.update(e["name"] for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel"))
    return names


@pytest.fixture(scope="module")
def shared_kernel_names() -> set[str]:
    if not SHARED.is_dir():
        pytest.skip("../shared/traces not present")
    return _kernel_names_in_shared()


@pytest.mark.parametrize(("needle", "category"), SHARED_CASES)
def test_shared_trace_kernel_names(shared_kernel_names: set[str], needle: str, category: str) -> None:
    matches = sorted(n for n in shared_kernel_names if needle in n)
    assert matches, f"no kernel named like {needle!r} in ../shared/traces"
    assert {kernel_category(n) for n in matches} == {category}


def test_most_shared_kernel_time_is_classified(shared_kernel_names: set[str]) -> None:
    # GIVEN every distinct CUDA kernel name in the shared traces
    # THEN fewer than 15 % of them fall through to "other"
    other = [n for n in shared_kernel_names if kernel_category(n) == "other"]
    assert len(other) / len(shared_kernel_names) < 0.15, sorted(other)[:20]


def test_pattern_table_is_data_over_known_categories() -> None:
    assert {row[0] for row in KERNEL_PATTERNS} <= set(CATEGORIES)
    assert len(set(CATEGORIES)) == len(CATEGORIES)
    for required in ("gemm", "attention", "copy", "elementwise", "norm", "softmax", "reduce", "optimizer",
                     "communication", "memcpy", "memset", "other"):
        assert required in CATEGORIES


def test_categorize_uses_kind_for_memcpy_and_memset() -> None:
    # GIVEN a kernel, a memcpy, a memset and a runtime call
    names = ("volta_sgemm_128x32_nt", "Memcpy HtoD (Pageable -> Device)", "Memset (Device)", "cudaLaunchKernel")
    n = 4
    z = np.zeros(n, np.int64)
    ev = EventTable(ts_ns=np.arange(n, dtype=np.int64), dur_ns=z + 1,
                    kind=np.array([Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.RUNTIME], np.uint8),
                    name_id=np.arange(n, dtype=np.int32), device=np.zeros(n, np.int16),
                    stream=np.zeros(n, np.int32), tid=z - 1, correlation=z - 1,
                    bytes=z - 1, shape_id=np.full(n, -1, np.int32), names=names)
    # WHEN categorised THEN kinds decide memcpy/memset and non-device rows are "other"
    got = [CATEGORIES[c] for c in categorize(ev)]
    assert got == ["gemm", "memcpy", "memset", "other"]
    assert classify_names(names).dtype == np.uint8


# Host-side name families (metrics/context.py NAME_PATTERNS): the runtime calls that block the host, and those
# that submit device work, on CUDA, ROCm (HIP) and MTIA.
@pytest.mark.parametrize(("name", "family"), [
    ("cudaDeviceSynchronize", "sync_api"), ("cudaStreamSynchronize", "sync_api"), ("cudaMemcpy", "sync_api"),
    ("hipDeviceSynchronize", "sync_api"), ("hipStreamSynchronize", "sync_api"), ("hipEventSynchronize", "sync_api"),
    ("hipMemcpy", "sync_api"), ("hipMemcpyWithStream", "sync_api"), ("hipMemcpyDtoH", "sync_api"),
    ("cudaMemcpy2D", "sync_api"), ("cuMemcpyDtoH_v2", "sync_api"),
    ("cudaMemcpyAsync", None), ("hipMemcpyAsync", None), ("hipStreamWaitEvent", None), ("cudaEventQuery", None),
    ("hipLaunchKernel", "launch_api"), ("hipExtModuleLaunchKernel", "launch_api"), ("hipGraphLaunch", "launch_api"),
    ("cudaLaunchKernelExC", "launch_api"), ("cuLaunchKernelEx", "launch_api"),
    ("runFunction - job_prep_and_submit_for_execution", "launch_api"),
    ("hipGetDevicePropertiesR0600", None),
])
def test_runtime_name_families(name: str, family: str | None) -> None:
    got = [f for f in ("sync_api", "launch_api") if re.search(NAME_PATTERNS[f], name)]
    assert got == ([family] if family else [])


def test_jax_gpu_demo_other_is_small() -> None:
    # GIVEN the JAX GPU XPlane demo, where XLA fusions and the autotuner's own kernels made "other" 41 % of
    # device time
    files = sorted((Path(__file__).resolve().parents[1] / "demo_logs" / "jax_gpu_xplane").glob("plugins/profile/*/*.xplane.pb"))
    if not files:
        pytest.skip("demo_logs/jax_gpu_xplane has no capture")
    trace = load_trace(str(files[0]))
    by_cat = compute_metrics(trace, find_steps(trace))["kernels"]["by_category"]
    # THEN almost nothing is unclassified; the autotuner's redzone checks / comparisons / delays are named
    assert by_cat["other"]["share"] < 0.01
    assert by_cat["autotune"]["share"] == pytest.approx(0.40, abs=0.01)
    assert by_cat["gemm"]["share"] == pytest.approx(0.193, abs=0.005)
