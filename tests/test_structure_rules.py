"""The structure rules of #37 (``findings/structure.py``) on batch 6's captures and their fixed twins (docs/captures_6.md).

Each pair's truth.json holds the pristine step (timed before any profiler existed in its process) and the planted
cause's own figures (``detail``: per-expert token counts, graph breaks); the what-if is held against the twin's
measured saving, ``1 - twin / planted`` of the pristine step, and the figures against the truth's, which share no code
with the parser. The twins and the dense captures are the negative checks.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tb_llmdiag.findings.diagnosis import diagnose
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.jsonsafe import json_array, json_object
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.steps.windows import find_steps

DATA = Path(__file__).resolve().parent / "data"
WITHIN = 0.25
MINE = {"moe_imbalance", "full_logits_loss", "graph_breaks", "decode_launch_bound"}


@cache
def _report(name: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    (path,) = sorted((DATA / f"anatomy_{name}").glob("*.json.gz"))
    trace = load_trace(str(path))
    metrics = compute_metrics(trace, find_steps(trace))
    findings, what = diagnose(metrics)
    assert what is not None
    # the report's JSON of them (the typed findings become JSON at the surface)
    return metrics, json_array(findings), json_object(what)


def _truth(name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((DATA / f"anatomy_{name}" / "truth.json").read_text())
    return out


def _measured(name: str) -> float:
    return 1.0 - _truth(f"{name}_fixed")["pristine"]["median_step_ms"] / _truth(name)["pristine"]["median_step_ms"]


def _ids(findings: list[dict[str, Any]]) -> list[str]:
    return [f["id"] for f in findings]


@pytest.mark.parametrize(
    ("name", "rule", "words"),
    [
        ("moe_uneven", "moe_imbalance", ("MoE", "busiest", "padded", "router")),
        ("big_vocab_loss", "full_logits_loss", ("full logits", "152 k-token vocabulary", "fp32", "fused chunked")),
        ("compile_breaks", "graph_breaks", ("graph breaks", ".item()", "anatomy_run.py:598")),
        ("decode", "decode_launch_bound", ("decode step", "launches 1030 kernels", "CUDA graph")),
    ],
)
def test_the_top_two_name_the_part_and_the_cause_and_the_what_if_is_near_the_twin(
    name: str, rule: str, words: tuple[str, ...]
) -> None:
    _, findings, what = _report(name)
    assert rule in _ids(findings)[:2]
    f = next(x for x in findings if x["id"] == rule)
    for w in words:
        assert w in f["summary"] + f["title"] + f["fix"]["text"]
    # the what-if (the top finding's own saving on the step without the profiler) against the twin's measured saving
    assert what["step_basis"] == "without_profiler"
    assert what["finding_id"] == rule
    assert what["saving_share"] == pytest.approx(_measured(name), rel=WITHIN)


def test_the_moe_load_is_read_from_the_shapes() -> None:
    metrics, _, _ = _report("moe_uneven")
    moe = metrics["anatomy"]["moe"]
    d = _truth("moe_uneven")["detail"]
    assert (moe["experts"], moe["top_k"]) == (d["experts"], d["top_k"])
    assert moe["assignments"] == d["assignments_per_layer"] == 8192 * 2
    # the busiest expert's load per layer (the last step's capacities: 8171..8192) against the shapes' median capacity
    assert moe["max_tokens_per_expert"] == pytest.approx(sorted(d["capacity_per_layer"])[1], abs=15)
    # max / mean: 8182.5 / (16384 / 8)
    assert moe["imbalance_ratio"] == pytest.approx(8182.5 / 2048)
    # the padded share of the expert GEMMs is 1 - mean / C (the truth's padded_share_per_layer: 0.749-0.750)
    assert moe["padded_per_step_ns"] / moe["expert_per_step_ns"] == pytest.approx(
        sum(d["padded_share_per_layer"]) / 4, abs=0.005)
    # the router and the expert GEMMs are in the moe part now (they were `lora` and `other`)
    assert metrics["anatomy"]["parts"]["moe"]["share"] > 0.3


def test_the_balanced_twin_has_no_moe_finding() -> None:
    metrics, findings, _ = _report("moe_uneven_fixed")
    assert metrics["anatomy"]["moe"]["imbalance_ratio"] == pytest.approx(2890.5 / 2048)
    assert not MINE & set(_ids(findings))


def test_the_logits_figures() -> None:
    metrics, _, _ = _report("big_vocab_loss")
    lg = metrics["anatomy"]["logits"]
    # 4 x 1024 tokens, the 151,936-token vocabulary, upcast to fp32: 4 x 1024 x 151936 x 4 bytes
    assert (lg["vocab"], lg["logits_elements"], lg["logits_dtype"]) == (151936, 4 * 1024 * 151936, "fp32")
    assert lg["logits_bytes"] == 4 * 1024 * 151936 * 4
    metrics, findings, _ = _report("big_vocab_loss_fixed")
    # the fused chunked loss: 1024-token chunks in bf16, one pass, nothing to save
    assert metrics["anatomy"]["logits"]["logits_elements"] == 1024 * 151936
    assert metrics["anatomy"]["logits"]["saving_share"] == 0.0
    assert not MINE & set(_ids(findings))


def test_the_graph_figures() -> None:
    metrics, _, _ = _report("compile_breaks")
    g = metrics["anatomy"]["graphs"]
    # one .item() per decoder layer (12 layers): 12 device-value reads between graphs per step, at the hook's line
    assert (g["break_op"], g["break_ops_per_step"], g["break_source"]) == ("aten::item", 12.0, "anatomy_run.py:598")
    assert g["breaks_per_step"] >= 12 and g["autograd_graphs_per_step"] == 14.0
    metrics, findings, _ = _report("compile_breaks_fixed")
    g = metrics["anatomy"]["graphs"]
    assert (g["breaks_per_step"], g["autograd_graphs_per_step"], g["break_op"]) == (0.0, 1.0, None)
    assert not MINE & set(_ids(findings))


@pytest.mark.parametrize("name", ["attn_math", "fp32_part", "autocast_casts", "attn_math_fixed", "fp32_part_fixed",
                                  "decode_fixed", "big_vocab_loss_fixed"])
def test_none_of_them_where_they_do_not_apply(name: str) -> None:
    # dense models (no MoE), eager runs (no compiled graphs), CUDA-graph decode; the fp32 MLP's vocabulary is 151,936
    # but its loss over 4 x 512 positions is a small share
    metrics, findings, _ = _report(name)
    assert metrics["anatomy"]["moe"] is None
    assert not {"moe_imbalance", "graph_breaks", "decode_launch_bound"} & set(_ids(findings))
