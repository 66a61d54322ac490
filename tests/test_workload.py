"""Training or inference (``run.workload``) and what each gets: the external traces (../shared/traces/external)
labelled by hand from SOURCES.md, no training advice on any inference trace, the SGLang stall attributed to its
blocking copy (checked against the raw JSON), MFU and tokens/s only on an LLM's token batch."""

from __future__ import annotations

import gzip
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from test_external_traces import EXTERNAL_TRACES
from tracepaths import SHARED_TRACES, shared_trace

from tb_llmdiag import api
from tb_llmdiag.findings.engine import applicable, evaluate, flavour_of, run_traits
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.jsonsafe import jsonable

#: golden name -> workload, from each run's description in ../shared/traces/external/SOURCES.md
WORKLOAD: dict[str, str] = {
    "external_b200_vllm_eager": "inference",          # vLLM v1 eager
    "external_h100_qwen_generate": "inference",       # HF generate
    "external_mi300_qwen_generate": "inference",
    "external_mi300_sglang_prefill": "inference",     # SGLang prefill
    "external_mi300_torch_compile": "inference",      # a compiled transformer block's forward
    "external_mi300_vllm_piecewise": "inference",     # vLLM piecewise graphs
    "external_mi300_xdit_flux": "inference",          # diffusion transformer inference
    "external_gh200_transformer": "inference",        # nn.Transformer forward only
    "external_4080_nanovllm_decode": "inference",     # a nano-vllm decode step
    "external_a100_zoology_no_kernels": "inference",  # forward launches only (no backward op, no optimizer)
    "external_a100_lora": "training",                 # LoRA fine-tuning step
    "external_a100_rsvd_truncated": "training",       # fine-tuning (the cut part holds an Optimizer.step)
    "external_h800_deepseek_train": "training",       # DualPipe fwd+bwd
    "external_2080ti_linear": "training",             # MLP training, SGD
    **{f"external_v100_dlrm_worker{i}": "training" for i in range(8)},  # DLRM training
}
INFERENCE = sorted(k for k, v in WORKLOAD.items() if v == "inference")

#: advice that only means something while training (data loader, gradient accumulation and checkpointing, optimizer,
#: packing the training set, steady-state training steps): never on inference runs
TRAINING_ONLY = frozenset({"dataloader_stall", "warmup_in_window", "step_variance", "variable_shapes",
                           "memory_headroom", "unfused_optimizer", "activation_checkpointing",
                           "per_tensor_collectives", "accumulation_without_no_sync", "fsdp_without_prefetch",
                           "full_logits_loss"})
#: claims about the whole run, an absence or a maximum, which the read part of a cut file cannot support
WHOLE_FILE = frozenset({"no_device_activity", "memory_headroom", "moe_imbalance", "full_logits_loss", "graph_breaks",
                        "decode_launch_bound"})
#: rules with their own wording on inference runs (a flavour keyed "inference"; not the XLA rules, whose runs have no
#: workload)
WORDED_FOR_INFERENCE = frozenset({"no_device_activity", "host_bound", "host_sync", "recompilation", "fp32_math",
                                  "exposed_communication", "pageable_memcpy", "copy_heavy", "tiny_kernels", "gpu_gaps",
                                  "attention_backend", "fp32_part", "lora_adapters", "graph_breaks"})


def test_each_rule_declares_the_runs_it_skips_and_its_inference_wording() -> None:
    """What each rule's own entry declares (``skip_on``, a flavour keyed ``inference``), against the lists above."""
    assert {r.id for r in RULES if "inference" in r.skip_on} == TRAINING_ONLY
    assert all("inference" in r.skip_on for r in RULES if r.id in TRAINING_ONLY)  # the XLA rule of an id too
    assert {r.id for r in RULES if "partial" in r.skip_on} == WHOLE_FILE
    assert {r.id for r in RULES if "training" in r.skip_on} == {"gemm_bound_forward", "decode_launch_bound"}
    worded = {r.id for r in RULES if "inference" in dict(r.flavours)}
    assert worded == WORDED_FOR_INFERENCE
    assert all(r.platform != "xla" for r in RULES if "inference" in dict(r.flavours))

#: words of training advice (what an inference run must never be told)
TRAINING_WORDS = re.compile(r"(?i)gradient|TrainingArguments|TrainerCallback|DataLoader|num_workers|optimi[sz]er|"
                            r"AdamW|micro-batch|accumulation|checkpointing|training|SFTConfig|packing|warm-?up")


@lru_cache(maxsize=None)
def report(name: str) -> dict[str, Any]:
    path = shared_trace("external/" + EXTERNAL_TRACES[name])
    runs = api.report(str(path))["runs"]
    assert len(runs) == 1
    return runs[0]


def test_every_external_trace_is_labelled() -> None:
    assert set(WORKLOAD) == set(EXTERNAL_TRACES)


@pytest.mark.parametrize("name", sorted(WORKLOAD))
def test_workload_matches_the_hand_label(name: str) -> None:
    run = report(name)["metrics"]["run"]
    assert run["workload"] == WORKLOAD[name]
    evidence = run["backward_op_count"] + run["optimizer_step_count"] + run["optimizer_kernel_count"]
    assert (evidence > 0) == (WORKLOAD[name] == "training")


def _texts(f: dict[str, Any]) -> list[str]:
    return [f["title"], f["summary"], f["fix"]["text"], f["fix"]["pytorch"], f["fix"]["hf_trainer"],
            f["fix"].get("stack_text") or ""]


@pytest.mark.parametrize("name", INFERENCE)
def test_inference_traces_get_no_training_advice(name: str) -> None:
    rep = report(name)
    for f in rep["findings"]:
        assert f["id"] not in TRAINING_ONLY, (name, f["id"])
        for text in _texts(f):
            assert not TRAINING_WORDS.search(text), (name, f["id"], TRAINING_WORDS.search(text), text)


def test_every_rule_an_inference_run_gets_is_worded_for_inference() -> None:
    """Over the whole table (new rules included): a rule that applies to an inference run, in the wording it
    gets there, says nothing about training. Kineto runs only: XPlane runs have no workload (null), so the
    XLA rules keep their training-loop wording."""
    for platform in ("cuda",):
        m = {"run": {"platform": platform, "workload": "inference", "read_complete": True}}
        for rule in applicable(m, RULES):
            fl = flavour_of(rule, m)
            fix = fl.fix or rule.fix
            for text in (fl.title or rule.title, fl.summary or rule.summary, fix.text, fix.pytorch, fix.hf_trainer):
                assert not TRAINING_WORDS.search(text), (platform, rule.id, text)


def test_run_traits_select_rules() -> None:
    base = {"platform": "cuda", "source_kind": "kineto"}
    assert run_traits({"run": {**base, "workload": "training"}}) == {"training"}
    assert run_traits({"run": {**base, "workload": "inference", "read_complete": False}}) == {"inference", "partial"}
    assert run_traits({"run": {**base, "workload": None}}) == frozenset()  # XPlane: unknown, every rule applies
    ids = lambda m: {r.id for r in applicable(m, RULES)}  # noqa: E731
    training, inference = ids({"run": {**base, "workload": "training"}}), ids({"run": {**base, "workload": "inference"}})
    assert training - inference == TRAINING_ONLY & training
    assert ids({"run": {**base, "workload": "training", "read_complete": False}}) == training - WHOLE_FILE
    # memory_headroom fires on a training run and is skipped on the same metrics labelled inference
    m = {"memory": {"peak_used_share": 0.2, "total_bytes": 80 << 30, "peak_used_bytes": 16 << 30,
                    "headroom_bytes": 64 << 30}}
    assert [f["id"] for f in jsonable(evaluate({**m, "run": {**base, "workload": "training"}}, RULES))] == ["memory_headroom"]
    assert jsonable(evaluate({**m, "run": {**base, "workload": "inference"}}, RULES)) == []


def _raw_events(rel: str) -> list[dict[str, Any]]:
    with gzip.open(SHARED_TRACES / "external" / rel) as f:
        return json.load(f)["traceEvents"]


def test_the_sglang_stall_is_attributed_to_the_blocking_copy() -> None:
    rep = report("external_mi300_sglang_prefill")
    # independent: the longest hipMemcpyWithStream in the raw JSON (plain json, no tb_llmdiag)
    copies = [e for e in _raw_events(EXTERNAL_TRACES["external_mi300_sglang_prefill"])
              if e.get("ph") == "X" and e.get("name") == "hipMemcpyWithStream"]
    longest_ns = round(max(float(e["dur"]) for e in copies) * 1000)
    assert longest_ns > 490_000_000  # the 493 ms stall SOURCES.md describes
    assert rep["metrics"]["steps"]["count"] == 0  # no ProfilerStep: host_sync cannot count syncs per step
    sync = [f for f in rep["findings"] if f["id"] == "host_sync"]
    assert sync, [f["id"] for f in rep["findings"]]
    f = sync[0]
    assert f["evidence"]["longest_call"] == "hipMemcpyWithStream"
    assert f["evidence"]["longest_call_kind"] == "blocking copy"
    assert abs(f["evidence"]["longest_ns"] - longest_ns) <= 1
    assert "hipMemcpyWithStream (blocking copy)" in f["summary"] and "493 ms" in f["summary"]
    assert f["title"] == "The host blocks between forward calls"
    assert rep["findings"][0]["id"] == "host_sync" and f["severity"] == "high"


@pytest.mark.parametrize("name, shown", [
    ("external_h100_qwen_generate", True), ("external_mi300_sglang_prefill", True), ("external_a100_lora", True),
    ("external_mi300_xdit_flux", False),          # a T5/CLIP text encoder beside a diffusion transformer
    ("external_a100_zoology_no_kernels", False),  # no device activity
    ("external_a100_rsvd_truncated", False),      # no device activity in the part that was read
])
def test_mfu_and_tokens_only_on_an_llm_token_batch(name: str, shown: bool) -> None:
    rep = report(name)
    fl, head = rep["metrics"]["flops"], rep["headline"]
    if shown:
        assert fl["token_batch_share"] > 0.99 and fl["mfu_withheld"] is None and head["mfu_share"] > 0
    else:
        assert fl["mfu_withheld"] and head["mfu_share"] is None and head["tokens_per_s"] is None
    if name == "external_mi300_xdit_flux":
        assert fl["token_batch_share"] < 0.01 and fl["mfu_withheld"] == "the recorded shapes are not an LLM's token batch"
        assert rep["metrics"]["steps"]["per_step"][0]["tokens"] == 77  # CLIP's 77 tokens: not what the GEMMs run on


@pytest.mark.parametrize("rel, kind", [
    ("hta/mtia_trace_single_rank/mtia_rank_0.json.gz", "MTIA"),
    ("hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", "CPU"),
    ("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "GPU"),
    ("xplane/synthetic_tpu/plugins/profile/2026_01_01_00_00_00/t1v-n-synthetic-w-0.xplane.pb", "TPU"),
    ("xplane/jax_cpu/plugins/profile/2026_11_22_02_40_34/vm.xplane.pb", "CPU"),
])
def test_device_kind_names_the_device_the_trace_reports(rel: str, kind: str) -> None:
    from tb_llmdiag.ingest import load_trace
    from tb_llmdiag.metrics import analyze
    from tb_llmdiag.timeline import build

    trace = load_trace(str(shared_trace(rel)))
    analysis = analyze(trace)
    assert analysis.metrics["run"]["device_kind"] == kind
    timelines, _ = build(trace, analysis.breakdown)
    device_lanes = {lane["label"].split(" ")[0] for t in timelines for lane in t["lanes"] if lane["kind"] == "gpu"}
    assert device_lanes <= {kind}  # "MTIA 9 · stream 801", never "GPU 9" on the MTIA trace
    if kind == "MTIA":
        assert device_lanes == {"MTIA"} and analysis.metrics["kernels"]["available"]


def test_a_partial_read_gets_only_what_the_read_part_supports() -> None:
    """A cut file (``Trace.read_state`` complete False, as the reader sets it): no claim of absence
    (``no_device_activity``) or of a peak (``memory_headroom``), no MFU or tokens/s; the rest stays."""
    import dataclasses
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "metrics"))
    from minitrace import make_trace, op, step  # noqa: E402

    from tb_llmdiag.findings.diagnosis import diagnose
    from tb_llmdiag.metrics import analyze

    cpu_only = make_trace([step(1, 0, 1_000_000), op("aten::mm", 10, 5, "[[128, 256], [256, 512]]"),
                           op("Optimizer.step#AdamW.step", 20, 5)])
    whole = analyze(cpu_only).metrics
    assert [f["id"] for f in jsonable(diagnose(whole))[0]] == ["no_device_activity"]
    cut = dataclasses.replace(cpu_only, read_state={"complete": False, "read_share": 0.31, "reason": "the JSON ends early"})
    m = analyze(cut).metrics
    assert (m["run"]["read_complete"], m["run"]["read_share"], m["run"]["workload"]) == (False, 0.31, "training")
    assert whole["run"]["device_kind"] == "CPU" and m["run"]["device_kind"] is None  # absent in the read part: unknown
    assert run_traits(m) == {"training", "partial"}
    assert jsonable(diagnose(m))[0] == []  # the read part holds no device events: that says nothing about the file
    assert m["flops"]["mfu_withheld"] == "only part of the file was read" and m["flops"].get("mfu_share") is None


@pytest.mark.parametrize("which", ["rsvd", "demo_first_3mb"])
def test_truncated_traces_report_what_was_read_and_no_absence(which: str, tmp_path: Path, capsys) -> None:
    """The two cut files of issue #15: the public rSVD trace cut at 1 MiB and the first 3 MB of a demo trace (left
    alone, so not "being written"). Each reports that it was cut and what was read, and nothing that needs the whole
    file: no ``no_device_activity`` (their device events come after the cut), no peak-memory advice, no MFU."""
    import os

    from tb_llmdiag import cli
    from tb_llmdiag.ingest import load_trace

    if which == "rsvd":
        path = shared_trace("external/" + EXTERNAL_TRACES["external_a100_rsvd_truncated"])
    else:
        demo = next((Path(__file__).resolve().parents[1] / "demo_logs" / "seed_lora_qwen1.5b").glob("*.pt.trace.json.gz"))
        path = tmp_path / demo.name
        path.write_bytes(demo.read_bytes()[:3_000_000])
        old = os.stat(path).st_mtime - 3600
        os.utime(path, (old, old))
    if not load_trace(str(path)).read_state:
        pytest.skip("this reader does not report Trace.read_state yet (the readers branch adds it)")
    run = api.report(str(path))["runs"][0]
    assert run["status"] != "ok" and run["read_state"]["complete"] is False and run["read_state"]["read_bytes"] > 0
    assert run["metrics"]["run"]["read_complete"] is False
    ids = [f["id"] for f in run["findings"]]
    assert "no_device_activity" not in ids and "memory_headroom" not in ids, ids
    assert run["headline"]["mfu_share"] is None and run["headline"]["tokens_per_s"] is None
    assert run["metrics"]["run"]["device_kind"] is None  # no device event read: unknown, not "CPU"
    cli.main(["report", str(path)])
    assert "truncated" in capsys.readouterr().out.lower()


def test_gemm_bound_forward_is_inferences_own_view() -> None:
    """Inference's own rule over the kernel mix: it fires on the inference traces whose device is busy with
    GEMMs (vLLM piecewise graphs on MI300X: 93 % GEMM, busy 99.8 %), never on training traces with the same mix."""
    fired = {name for name in WORKLOAD if "gemm_bound_forward" in [f["id"] for f in report(name)["findings"]]}
    assert fired == {"external_mi300_vllm_piecewise", "external_mi300_torch_compile", "external_mi300_xdit_flux"}
    m = {"run": {"platform": "cuda", "workload": "training"}, "kernels": {"gemm_share": 0.9, "gemm_ns": 10},
         "idle": {"busy_share": 0.95}}
    assert jsonable(evaluate(m, RULES)) == []
    assert [f["id"] for f in jsonable(evaluate({**m, "run": {"platform": "cuda", "workload": "inference"}}, RULES))] == [
        "gemm_bound_forward"]
