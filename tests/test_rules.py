"""The rule table: required ids, thresholds, finding shape, and evidence paths that exist."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "metrics"))

from tb_llmdiag.findings.engine import Fix, Flavour, Rule, applicable, evaluate, finding, fires, lookup, run_platform
from tb_llmdiag.findings.gpu import GPU_RULES, INFERENCE_RULES
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.findings.xla import XLA_RULES
from tb_llmdiag.jsonsafe import jsonable

REQUIRED = {"host_bound", "tiny_kernels", "dataloader_stall", "host_sync", "pageable_memcpy", "variable_shapes",
            "step_variance", "warmup_in_window", "copy_heavy", "gpu_gaps", "memory_headroom", "no_device_activity"}
FINDING_KEYS = {"id", "severity", "title", "summary", "evidence", "saving", "fix", "docs"}


def base(**topics: dict) -> dict:
    m = {"steps": {"available": True, "mean_ns": 100_000_000}, "kernels": {"available": True, "device_events": 10}}
    for k, v in topics.items():
        m.setdefault(k, {}).update(v)
    return m


def ids(m: dict) -> list[str]:
    return [f["id"] for f in jsonable(evaluate(m, RULES))]


def test_required_ids_and_unique() -> None:
    assert REQUIRED <= {r.id for r in RULES}
    got = [r.id for r in GPU_RULES]  # XLA rules may reuse an id for the same cause on TPU
    assert len(got) == len(set(got))


def test_rules_are_the_gpu_then_the_comm_then_the_xla_table() -> None:
    from tb_llmdiag.findings.comm import COMM_RULES
    from tb_llmdiag.findings.parts import PART_RULES
    from tb_llmdiag.findings.structure import STRUCTURE_RULES
    # each rule as its table declares it (skip_on and inference wording in its own entry), then inference's own, then
    # the structure rules of #37 (the anatomy's MoE, logits and compiled-graph figures; a launch-bound decode loop);
    # the part rules of #37 (findings/parts.py) after the GPU table
    assert RULES == GPU_RULES + PART_RULES + COMM_RULES + XLA_RULES + INFERENCE_RULES + STRUCTURE_RULES
    assert len(XLA_RULES) == 6 and len(COMM_RULES) == 6
    assert [r.id for r in PART_RULES] == ["attention_backend", "fp32_part", "weight_casts", "lora_adapters"]
    assert [r.id for r in STRUCTURE_RULES] == ["moe_imbalance", "full_logits_loss", "graph_breaks", "decode_launch_bound"]
    assert [r.id for r in INFERENCE_RULES] == ["gemm_bound_forward"]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.platform}-{r.id}")
def test_every_rule_is_complete(rule: Rule) -> None:
    assert rule.title and rule.summary and rule.fix.text and rule.fix.pytorch and rule.fix.hf_trainer
    assert rule.metric is not None or rule.when is not None
    assert rule.severity in (None, "high", "medium", "low")
    assert rule.platform in (None, "cuda", "xla")
    assert set(rule.skip_on) <= {"training", "inference", "partial"}
    for key, flavour in rule.flavours:  # a platform's wording, or a run trait's (engine.run_traits)
        assert key in ("cuda", "xla", "training", "inference") and isinstance(flavour, Flavour)
        assert not flavour.fix or (flavour.fix.text and flavour.fix.pytorch and flavour.fix.hf_trainer)


# ---------------------------------------------------------------------------------------------
# Platforms: XPlane runs (an `xla` topic) get the XLA rules, never the CUDA-launch ones

CUDA_ONLY = {"host_bound", "tiny_kernels", "host_sync", "pageable_memcpy", "dataloader_stall", "slow_host_op",
             # Kineto-only cause topics (metrics/topics.py): kernel names, torch.optim / autograd / dynamo ranges
             "recompilation", "fp32_math", "unfused_optimizer", "activation_checkpointing",
             # the host attribution (metrics/attribution/topic.py): Kineto host events
             "allocator_churn", "unrecorded_host_time", "host_activity"}
SHARED_IDS = {"step_variance", "warmup_in_window", "copy_heavy", "gpu_gaps"}


def cuda_everything() -> dict:
    """Metrics on which every CUDA-launch rule and every shared GPU rule fires."""
    return base(
        dataloader={"stall_share": 0.3}, idle={"host_wait_share": 0.3, "host_wait_culprit_share": 0.2,
                                             "host_wait_culprit_mean_ns": 5_000_000, "long_gap_count": 2},
        host_sync={"saving_share": 0.1, "syncs_per_step": 3.0}, sync_storm={"saving_share": 0.1},
        memcpy={"htod_pageable_count": 5},
        compile={"share": 0.1, "count": 3, "steps_hit": [2, 3]},
        precision={"fp32_matmul_share": 0.5, "fp32_of_matmul_share": 0.9},
        optimizer={"saving_share": 0.1, "implementation": "for_loop", "launches_per_step": 500.0},
        checkpointing={"on": True, "recompute_share": 0.1},
        launch={"tiny_kernel_share": 0.9}, kernels={"copy_share": 0.5},
        attribution={"allocator_idle_share": 0.2, "allocator_calls_per_step": 100.0, "unrecorded_share": 0.1,
                     "top_share": 0.3, "top_kind": "cpu_work"},
        steps={"cv_excluding_first": 0.5, "first_over_rest": 3.0})


def test_the_cuda_launch_rules_are_marked_cuda() -> None:
    assert {r.id for r in GPU_RULES if r.platform == "cuda"} == CUDA_ONLY
    assert all(r.platform is None for r in GPU_RULES if r.id in SHARED_IDS)


def test_run_platform_is_xla_when_the_xla_topic_is_there() -> None:
    assert run_platform({}) == "cuda" and run_platform(base()) == "cuda"
    assert run_platform({"xla": {}}) == "xla"
    assert run_platform({"xla": {"available": False, "reason": "x"}}) == "xla"  # a failed topic is still XPlane


def test_run_platform_reads_the_run_topic_first() -> None:
    """``metrics["run"]["platform"]`` decides when present; the ``xla`` topic is only the fallback."""
    assert run_platform({"run": {"platform": "xla"}}) == "xla"
    assert run_platform({"run": {"platform": "cuda"}, "xla": {}}) == "cuda"
    assert run_platform({"run": {"platform": None}, "xla": {}}) == "xla"
    m = {**base(idle={"host_wait_share": 0.5, "busy_share": 0.5}), "run": {"platform": "xla"}}
    assert "host_bound" in ids(base(idle={"host_wait_share": 0.5, "busy_share": 0.5})) and "host_bound" not in ids(m)


def test_on_kineto_runs_the_gpu_rules_fire() -> None:
    assert CUDA_ONLY | SHARED_IDS <= set(ids(cuda_everything()))


def test_on_xla_runs_cuda_rules_never_fire_and_xla_rules_own_the_shared_ids() -> None:
    # GIVEN metrics on which every GPU rule fires, plus an xla topic on which no XLA rule fires
    m = cuda_everything()
    m["xla"] = {"source": "xplane", "steady_step_cv": 0.01, "steady_step_count": 5, "movement_share": 0.01,
                "steady_device_duty_cycle_share": 0.9, "recompile_in_loop_count": 0,
                "transfer_from_device_in_loop_count": 0, "warmup_compile_in_steps_time_ns": 0}
    # THEN nothing fires: no CUDA-launch rule, and no GPU version of a shared id
    assert ids(m) == []
    applied = applicable(m, RULES)
    assert not {r.id for r in applied if r.platform != "xla"} & CUDA_ONLY  # `recompilation` is an XLA id too
    assert {r.platform for r in applied if r.id in SHARED_IDS} == {"xla"}


def test_on_kineto_runs_xla_rules_never_apply() -> None:
    assert {r.platform for r in applicable(base(), RULES)} <= {None, "cuda"}


def test_a_platform_rule_owns_its_id_only_on_its_platform() -> None:
    fix = Fix("t", "p", "h")
    generic = Rule(id="x", title="generic", metric="a.v", above=0, fix=fix)
    xla = Rule(id="x", title="xla", metric="xla.v", above=1, fix=fix, platform="xla")
    assert [f["title"] for f in jsonable(evaluate({"a": {"v": 1}}, (generic, xla)))] == ["generic"]
    assert jsonable(evaluate({"a": {"v": 1}, "xla": {"v": 0}}, (generic, xla))) == []  # owned, though it does not fire
    assert [f["title"] for f in jsonable(evaluate({"a": {"v": 1}, "xla": {"v": 2}}, (generic, xla)))] == ["xla"]


def test_no_device_activity_is_worded_for_xla_runs() -> None:
    m = {"kernels": {"available": False, "reason": "no device activity in the trace"}, "steps": {"count": 3}}
    (cuda,) = jsonable(evaluate(m, RULES))
    assert "ProfilerActivity.CUDA" in cuda["fix"]["text"] and cuda["title"] == "No GPU activity in the trace"
    (xla,) = jsonable(evaluate({**m, "xla": {"device_type": "CPU"}}, RULES))
    assert xla["id"] == "no_device_activity" and xla["severity"] == "high"
    text = " ".join([xla["title"], xla["summary"], *xla["fix"].values()])
    assert "CUDA activity" not in text and "ProfilerActivity" not in text
    assert "PJRT_DEVICE" in xla["fix"]["text"] and "jax.devices()" in xla["fix"]["pytorch"]
    assert "CPU" in xla["title"] and xla["docs"] != cuda["docs"]


def test_saving_and_evidence_can_be_named_functions() -> None:
    def half(m: dict) -> float:
        return m["a"]["v"] / 2

    r = Rule(id="f", title="f", metric="a.v", above=0, fix=Fix("t", "p", "h"), saving=half,
             evidence=(("half_share", half),), summary="{half_share}")
    (f,) = jsonable(evaluate({"a": {"v": 0.5}, "steps": {"mean_ns": 100}}, (r,)))
    assert f["saving"] == {"share": 0.25, "ns": 25} and f["evidence"] == {"half_share": 0.25}
    assert f["summary"] == "25.0 %"


@pytest.mark.parametrize(("topic", "key", "value", "rule_id", "fires_"), [
    ("dataloader", "stall_share", 0.06, "dataloader_stall", True),
    ("dataloader", "stall_share", 0.04, "dataloader_stall", False),
    ("idle", "host_wait_share", 0.10, "host_bound", True),
    ("idle", "host_wait_share", 0.099, "host_bound", False),
    ("kernels", "copy_share", 0.11, "copy_heavy", True),
    ("kernels", "copy_share", 0.09, "copy_heavy", False),
    ("memcpy", "htod_pageable_count", 3, "pageable_memcpy", True),
    ("memcpy", "htod_pageable_count", 0, "pageable_memcpy", False),
    ("idle", "long_gap_count", 1, "gpu_gaps", True),
    ("idle", "long_gap_count", 0, "gpu_gaps", False),
    ("steps", "cv_excluding_first", 0.2, "step_variance", True),
    ("steps", "cv_excluding_first", 0.1, "step_variance", False),
    ("steps", "first_over_rest", 1.6, "warmup_in_window", True),
    ("steps", "first_over_rest", 1.2, "warmup_in_window", False),
])
def test_single_threshold_rules(topic: str, key: str, value: float, rule_id: str, fires_: bool) -> None:
    assert (rule_id in ids(base(**{topic: {key: value}}))) is fires_


def test_host_sync_needs_a_sync_every_step() -> None:
    # the saving is sync_storm's (step-edge syncs of a harness excluded, sync loops credited with their GPU idle)
    assert "host_sync" in ids(base(host_sync={"syncs_per_step": 2.0}, sync_storm={"saving_share": 0.05}))
    assert "host_sync" not in ids(base(host_sync={"syncs_per_step": 0.5}, sync_storm={"saving_share": 0.05}))
    assert "host_sync" not in ids(base(host_sync={"syncs_per_step": 2.0}, sync_storm={"saving_share": 0.01}))
    # a harness's step-edge synchronize alone: the old saving (blocked vs idle) is no longer read
    assert "host_sync" not in ids(base(host_sync={"saving_share": 0.3, "syncs_per_step": 1.0},
                                       sync_storm={"saving_share": 0.0, "edge_syncs": 10}))


def test_a_sync_loop_is_named_with_its_trigger() -> None:
    m = base(host_sync={"syncs_per_step": 400.0}, sync_storm={
        "saving_share": 0.3, "storm": True, "loop_syncs_per_step": 392.0, "trigger_op": "aten::item",
        "after_op": "aten::linalg_vector_norm", "loop_host_ns": 22_000_000, "loop_idle_share": 0.3})
    (f,) = [x for x in jsonable(evaluate(m, RULES)) if x["id"] == "host_sync"]
    assert f["title"] == "A loop of host syncs stalls every step"
    # aten::item in words (#36); a plain aten op keeps its name
    assert "reading a value back to the host (.item()) after aten::linalg_vector_norm" in f["summary"] and "22 ms" in f["summary"]


def test_slow_host_op_needs_long_calls() -> None:
    m = base(idle={"host_wait_culprit_share": 0.4, "host_wait_culprit_mean_ns": 300_000_000, "host_wait_culprit": "x"})
    assert "slow_host_op" in ids(m)
    m["idle"]["host_wait_culprit_mean_ns"] = 20_000  # many short calls: launch overhead, not one slow op
    assert "slow_host_op" not in ids(m)


def test_tiny_kernels_need_the_host_to_be_the_bottleneck() -> None:
    assert "tiny_kernels" in ids(base(launch={"tiny_kernel_share": 0.7}, idle={"host_wait_share": 0.06}))
    assert "tiny_kernels" not in ids(base(launch={"tiny_kernel_share": 0.7}, idle={"host_wait_share": 0.01}))


def test_variable_shapes_needs_varying_lengths() -> None:
    assert "variable_shapes" in ids(base(steps={"tokens_corr": 0.9, "tokens_cv": 0.3, "count": 5}))
    assert "variable_shapes" not in ids(base(steps={"tokens_corr": 0.9, "tokens_cv": 0.01, "count": 5}))
    # r = 0.9 over 4 steps (3 pairs after the first) says little: no claim that step time follows tokens
    assert "variable_shapes" not in ids(base(steps={"tokens_corr": 0.9, "tokens_cv": 0.3, "count": 4}))
    assert "variable_shapes" not in ids(base(steps={"tokens_corr": 0.5, "tokens_cv": 0.3}))


def test_memory_headroom_below_half() -> None:
    assert "memory_headroom" in ids(base(memory={"peak_used_share": 0.3, "total_bytes": 80 << 30}))
    assert "memory_headroom" not in ids(base(memory={"peak_used_share": 0.7, "total_bytes": 80 << 30}))


def test_no_device_activity() -> None:
    m = {"kernels": {"available": False, "reason": "no device activity in the trace"}, "steps": {"count": 3}}
    assert ids(m) == ["no_device_activity"]


def test_finding_shape_saving_and_summary() -> None:
    # GIVEN a 100 ms median step and a data-loader stall of 30 % of step time
    m = base(dataloader={"stall_share": 0.3, "stall_ns": 90_000_000, "host_share": 0.4, "iterator": "single_process"})
    (f,) = jsonable(evaluate(m, RULES))
    assert FINDING_KEYS <= set(f)
    assert f["id"] == "dataloader_stall" and f["severity"] is None  # the savings sequence decides it
    assert f["saving"] == {"share": 0.3, "ns": 30_000_000}
    assert f["evidence"] == {"stall_share": 0.3, "stall_ns": 90_000_000, "loader_host_share": 0.4,
                             "iterator": "in the training process"}  # a named value in words (#36)
    assert "30.0 %" in f["summary"] and "batches built in the training process" in f["summary"]
    assert set(f["fix"]) >= {"text", "pytorch", "hf_trainer"} and "num_workers" in f["fix"]["pytorch"]
    assert f["metric"] == "dataloader.stall_share" and f["value"] == 0.3 and f["threshold"] == {"above": 0.05}
    json.dumps(f, allow_nan=False)


def test_severity_bands() -> None:
    from tb_llmdiag.findings.diagnosis import diagnose

    sev = {s: jsonable(diagnose(base(dataloader={"stall_share": s})))[0][0]["severity"] for s in (0.06, 0.19, 0.2)}
    assert sev == {0.06: "medium", 0.19: "medium", 0.2: "high"}


def test_stack_aware_fix_wording() -> None:
    (f,) = jsonable(evaluate(base(dataloader={"stall_share": 0.3}, annotations={"stack": "lightning"}), RULES))
    assert f["fix"]["stack"] == "lightning" and "LightningDataModule" in f["fix"]["stack_text"]


def test_missing_or_null_metrics_never_fire() -> None:
    assert jsonable(evaluate({}, RULES)) == []
    assert jsonable(evaluate(base(dataloader={"stall_share": None}, idle={"host_wait_share": float("nan")}), RULES)) == []


def test_lookup() -> None:
    assert lookup({"a": {"b": 1}}, "a.b") == 1 and lookup({"a": {}}, "a.b") is None and lookup({}, None) is None


def test_every_path_names_a_metric_key() -> None:
    """Each rule's metric, saving and evidence path resolves in real compute_metrics output (no typos)."""
    from minitrace import full_metrics_keys

    from tb_llmdiag.findings.parts import PART_RULES
    from tb_llmdiag.metrics.registry import metric

    known = full_metrics_keys()
    for r in GPU_RULES + PART_RULES:
        for path in [r.metric, r.saving, *(p for _, p in r.evidence)]:
            if path is not None and not callable(path):  # named functions are tested on their own
                # a path into a per-part dict (anatomy.parts.<part>.<key>): its topic key exists and the registry
                # names its figure (the mini trace has no parts)
                deep = path.count(".") > 1 and ".".join(path.split(".")[:2]) in known and metric(path) is not None
                assert path in known or deep, (r.id, path)


def test_fires_requires_a_number() -> None:
    r = Rule(id="x", title="x", metric="a.b", above=1, fix=GPU_RULES[0].fix)
    assert fires(r, {"a": {"b": 2}}) and not fires(r, {"a": {"b": "2"}}) and not fires(r, {"a": {"b": True}})


def test_variable_shapes_fires_on_per_shape_host_work_or_on_correlation() -> None:
    rule = next(r for r in GPU_RULES if r.id == "variable_shapes")
    base = {"steps": {"available": True, "mean_ns": 100, "tokens_cv": 0.5, "tokens_corr": 0.2},
            "idle": {"host_wait_per_shape_share": 0.136, "host_wait_per_shape_op": "aten::_cudnn_attention_backward"}}
    assert fires(rule, base)
    f = jsonable(finding(rule, base))
    assert f["saving"] == {"share": 0.136, "ns": 14}
    assert "attention backward (cuDNN)" in f["summary"]  # aten::_cudnn_attention_backward in words (#36)
    # step time tracking tokens fires too, with no saving estimate
    assert f["title"] == "Every new batch shape costs host work while the GPU waits"
    corr_only = {"steps": {**base["steps"], "tokens_corr": 0.9, "count": 6}, "idle": {"host_wait_per_shape_share": 0.0}}
    assert fires(rule, corr_only) and jsonable(finding(rule, corr_only))["saving"] is None
    assert jsonable(finding(rule, corr_only))["title"] == "Step time follows the padded sequence length"
    # fixed shapes (packing) or shapes that cost nothing: no finding
    assert not fires(rule, {**base, "steps": {**base["steps"], "tokens_cv": 0.0}})
    assert not fires(rule, {"steps": base["steps"], "idle": {"host_wait_per_shape_share": 0.01}})
