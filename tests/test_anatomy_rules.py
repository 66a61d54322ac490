"""The causes named at a model part (#37 item 2, ``findings/parts.py``) on the anatomy captures and their fixed twins.

Each planted capture of batch 6 (docs/captures_6.md, tests/data/anatomy_*) has a truth.json written by the capture
script before any profiler existed in its process: the twin's measured saving (``1 - twin / planted`` of the pristine
median step) shares nothing with the parser. On each pair the top two findings name the part and the cause, and the
top finding's saving on the step without the profiler is within 25 % of the measured one where a twin measures it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from metrics.minitrace import make_trace, op

from tb_llmdiag.findings.diagnosis import diagnose
from tb_llmdiag.findings.engine import finding, fires
from tb_llmdiag.findings.parts import PART_RULES
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.jsonsafe import json_array, json_object, jsonable
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.anatomy.causes import fallback
from tb_llmdiag.metrics.steps.windows import find_steps

DATA = Path(__file__).resolve().parent / "data"
WITHIN = 0.25


@cache
def _report(name: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    (path,) = sorted((DATA / f"anatomy_{name}").glob("*.json.gz"))
    trace = load_trace(str(path))
    metrics = compute_metrics(trace, find_steps(trace))
    findings, what = diagnose(metrics)
    assert what is not None
    # the report's JSON of them (the typed findings become JSON at the surface)
    return metrics, json_array(findings), json_object(what)


def _measured_share(name: str) -> float:
    def ms(n: str) -> float:
        return float(json.loads((DATA / f"anatomy_{n}" / "truth.json").read_text())["pristine"]["median_step_ms"])

    return 1.0 - ms(f"{name}_fixed") / ms(name)


def _ids(findings: list[dict[str, Any]]) -> list[str]:
    return [f["id"] for f in findings]


def test_attention_on_the_math_backend_leads_and_predicts_the_fused_twin() -> None:
    # attn_math: SDPA forced onto the math backend at 4,096 tokens in a bf16 model; the twin (cuDNN) runs 21.9 ms
    # against 66.5 ms pristine (67 %)
    metrics, findings, what = _report("attn_math")
    top = findings[0]
    assert top["id"] == "attention_backend" and what["finding_id"] == "attention_backend"
    assert "math backend" in top["summary"] and "attention" in top["summary"]
    assert "head dim 128, no explicit mask" in top["fix"]["text"] and "sdpa_kernel" in top["fix"]["text"]
    # the fp32 GEMMs are the math path's upcast: fp32_math does not blame the model's dtype (no "bf16 autocast")
    assert "fp32_math" not in _ids(findings)
    assert metrics["anatomy"]["fp32_gemm_part"] == "attention"
    assert top["saving"]["share"] == pytest.approx(_measured_share("attn_math"), rel=WITHIN)


def test_attention_core_flops_by_hand() -> None:
    # 4 layers x (2 forward + 4 backward score GEMMs) of 2 x (B*H=12) x 4096 x 128 x 4096 FLOPs, 3 profiled steps
    att = _report("attn_math")[0]["anatomy"]["parts"]["attention"]
    assert att["core_flops"] == 3 * 4 * 6 * 2 * 12 * 4096 * 128 * 4096
    assert att["backend"] == "math" and att["core_ns"] > 0.85 * att["time_ns"]
    # the twin runs cuDNN: no slow core, no finding
    twin_att = _report("attn_math_fixed")[0]["anatomy"]["parts"]["attention"]
    assert (twin_att["backend"], twin_att["core_ns"]) == ("cudnn", 0)
    assert "attention_backend" not in _ids(_report("attn_math_fixed")[1])


def test_an_fp32_mlp_in_a_bf16_model_is_named_with_its_fix() -> None:
    # fp32_part: every MLP kept in fp32 with casts around it; the bf16 twin runs 21.1 ms against 57.3 ms (63 %)
    metrics, findings, what = _report("fp32_part")
    top = findings[0]
    assert top["id"] == "fp32_part" and what["finding_id"] == "fp32_part"
    assert "in the MLP" in top["summary"] and top["fix"]["text"].startswith("Run the MLP in the model's dtype")
    assert "fp32_math" not in _ids(findings)
    # the efficiency what-if: the MLP's FLOPs at the speed lm_head's bf16 GEMMs reach in the same step
    a = metrics["anatomy"]
    mlp = a["parts"]["mlp"]
    assert a["reference_part"] == "lm_head" and mlp["dtype"] == "fp32"
    gap = mlp["flop_kernel_ns"] - mlp["flops"] / (a["reference_tflops"] * 1e3)
    assert mlp["efficiency_saving_ns"] == int(gap)
    assert top["saving"]["share"] == pytest.approx(_measured_share("fp32_part"), rel=WITHIN)
    assert "fp32_part" not in _ids(_report("fp32_part_fixed")[1])


def test_weight_casts_under_autocast_are_named_at_their_part_with_a_small_saving() -> None:
    # autocast_casts, the negative control: base weights stored in fp32 under bf16 autocast; storing them in bf16
    # saved nothing (-1.9 %), so no what-if can be within 25 % of it: the casts' finding must be named and small
    metrics, findings, _ = _report("autocast_casts")
    top2 = findings[:2]
    casts = next(f for f in top2 if f["id"] == "weight_casts")
    assert "most in the MLP" in casts["summary"] and "inside the linear layers' matmuls" in casts["summary"]
    assert casts["saving"]["share"] < 0.05
    # the copy finding yields to it (the weight casts are most of the copy time)
    assert "copy_heavy" not in _ids(findings)
    assert metrics["anatomy"]["casts_part"] == "mlp"
    # the twin keeps a tenth of them at most (the lm_head's), and no finding
    planted = metrics["anatomy"]["weight_casts_ns"]
    assert 0 <= _report("autocast_casts_fixed")[0]["anatomy"]["weight_casts_ns"] < 0.1 * planted
    assert "weight_casts" not in _ids(_report("autocast_casts_fixed")[1])


def _lora_rule() -> Any:
    return next(r for r in PART_RULES if r.id == "lora_adapters")


def test_lora_adapters_time_against_their_flop_share() -> None:
    # lora_small_batch's figures (its capture is not in tests/data: 4.8 MB): 37.1 % of GPU time for 2.5 % of the
    # FLOPs, 1,702 launches a step, 256 tokens a step
    m = {
        "anatomy": {
            "parts": {
                "lora": {
                    "share": 0.371,
                    "flop_share": 0.025,
                    "launches_per_step": 1702.0,
                    "achieved_tflops": 1.82,
                    "dtype": "fp32",
                }
            }
        },
        "steps": {"tokens_per_step_median": 256.0, "mean_ns": 192_000_000},
    }
    rule = _lora_rule()
    assert fires(rule, m)
    f = jsonable(finding(rule, m))
    assert f["summary"] == (
        "The LoRA adapters take 37.1 % of GPU time for 2.5 % of the FLOPs: 1702 launches per step of small "
        "rank-sized GEMMs at 1.82 TFLOP/s, over 256 tokens a step."
    )
    # time in line with the FLOPs (under 3x), or under a fifth of GPU time (LoRA fine-tunes of batch 4 hold 10-15 %
    # for about 1 % of the FLOPs): no finding
    assert not fires(rule, {**m, "anatomy": {"parts": {"lora": {**m["anatomy"]["parts"]["lora"], "flop_share": 0.2}}}})
    assert not fires(rule, {**m, "anatomy": {"parts": {"lora": {**m["anatomy"]["parts"]["lora"], "share": 0.15}}}})


def _fallback(*dims: str) -> str | None:
    """``fallback`` over one recorded math-SDPA call with these input dims (query, key, value, then the mask)."""
    shape = "[" + ", ".join(dims) + "]"
    return fallback(make_trace([op("aten::_scaled_dot_product_attention_math", 0, 1000, shape)]).events)


def test_why_the_math_backend_the_shapes_say() -> None:
    # the recorded call's dims: a head dim flash cannot take, an explicit mask, or nothing that excludes flash
    q320, q100, q128 = "[1, 8, 512, 320]", "[1, 8, 512, 100]", "[1, 8, 512, 128]"
    assert _fallback(q320, q320, q320) == "head dim 320: flash takes up to 256, a multiple of 8"
    assert _fallback(q100, q100, q100) == "head dim 100: flash takes up to 256, a multiple of 8"
    mask = _fallback(q128, q128, q128, "[1, 1, 512, 512]")
    assert mask == "an explicit attention mask is passed: flash takes none (the memory-efficient and cuDNN kernels do)"
    assert _fallback(q128, q128, q128, "[]") == (
        "nothing recorded excludes flash (head dim 128, no explicit mask): a forced backend "
        "(sdpa_kernel(SDPBackend.MATH), enable_flash_sdp(False)) or fp32 / fp64 inputs"
    )
    assert fallback(make_trace([op("aten::mm", 0, 1000, "[[8, 8], [8, 8]]")]).events) is None  # no math call
