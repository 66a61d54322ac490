"""The inference topic (#25): generated tokens/s and time per output token beside prefill and decode time, by hand."""

from __future__ import annotations

from tb_llmdiag.metrics import analyze
from minitrace import GEMM, kernel, make_trace, op

US = 1_000


def _generate_trace() -> object:
    """HF generate() with a KV cache on 2 sequences: one prefill forward of 2 x 6 prompt tokens (100 µs), then
    three decode forwards of [2, 1] (20, 30, 40 µs), the last one ending with its kernel."""
    emb = lambda t, length: op("aten::embedding", t * US, US, f"[[1000, 64], [2, {length}], [], [], []]")  # noqa: E731
    return make_trace([emb(0, 6), kernel(GEMM, 10 * US, 50 * US), emb(100, 1), emb(120, 1), emb(150, 1),
                       kernel(GEMM, 160 * US, 30 * US)])


def test_generate_counts_generated_tokens_and_time_per_output_token() -> None:
    m = analyze(_generate_trace()).metrics
    assert m["run"]["workload"] == "inference"
    assert m["inference"] == {
        "available": True, "prefill_forward_count": 1, "decode_forward_count": 3, "prompt_tokens": 12,
        # 2 first tokens from the prefill + 2 per decode forward
        "generated_tokens": 8, "prefill_ns": 100 * US, "decode_ns": (20 + 30 + 40) * US,
        "generated_tokens_per_s": 8 / 190e-6, "time_per_output_token_ns": 30 * US,
    }


def test_training_runs_and_flattened_batches_have_no_inference_topic() -> None:
    train = make_trace([op("aten::embedding", 0, US, "[[1000, 64], [2, 6], [], [], []]"),
                        op("autograd::engine::evaluate_function: MmBackward0", 5 * US, US)])
    assert analyze(train).metrics["inference"]["available"] is False
    flat = make_trace([op("aten::embedding", 0, US, "[[1000, 64], [12], [], [], []]"), kernel(GEMM, US, US)])
    got = analyze(flat).metrics["inference"]
    assert got["available"] is False and "flattened" in got["reason"]
