"""#25: one phase per run, set once. Every run's ``phase`` in the report is its workload (``metrics.run.workload``:
training / inference, from its events), or ``validation`` where the file name says so; it used to say ``train`` on
inference traces (external vLLM / SGLang traces, a ``generate()`` capture). Checked on every capture in tests/data,
demo_logs and every external trace, with the inference ones named by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_llmdiag import api
from tb_llmdiag.metrics.workload import run_phase
from test_external_traces import EXTERNAL_TRACES

REPO = Path(__file__).resolve().parents[1]
EXTERNAL = REPO.parent / "shared" / "traces" / "external"
#: the external traces of serving / generation / forward-only code (their SOURCES.md): forward passes only
INFERENCE = {"external_b200_vllm_eager", "external_h100_qwen_generate", "external_mi300_qwen_generate",
             "external_mi300_sglang_prefill", "external_mi300_vllm_piecewise", "external_mi300_xdit_flux",
             "external_4080_nanovllm_decode", "external_mi300_torch_compile", "external_gh200_transformer"}
#: SOURCES.md does not say (zoology's run recorded launches but no GPU activity): only agreement is checked
UNSAID = {"external_a100_zoology_no_kernels"}
CAPTURES = sorted(p.name for p in (REPO / "tests" / "data").iterdir() if p.is_dir())


def _runs(path: Path) -> list[dict]:
    return [r for r in api.report(str(path))["runs"] if r["status"] != "error"]


def _agrees(r: dict) -> None:
    workload = r["metrics"]["run"]["workload"]
    assert r["phase"] == workload, (r["path"], r["phase"], workload)


@pytest.mark.parametrize("name", CAPTURES)
def test_captures_say_their_workload_once(name: str) -> None:
    runs = _runs(REPO / "tests" / "data" / name)
    assert runs
    truth = REPO / "tests" / "data" / name / "truth.json"
    t = json.loads(truth.read_text()) if truth.exists() else {}
    # batch 6's decode captures (docs/captures_6.md) say so in their scenario: a step is one generated token
    what = t.get("what", "") or ("forward-only" if t.get("scenario") == "decode" else "")
    for r in runs:
        _agrees(r)
        # the captures are training loops (examples/) unless their truth says forward-only; an XPlane one has no
        # backward names: unknown
        want = ("inference" if "forward-only" in what else "training") if r["source_kind"] == "kineto" else None
        assert r["phase"] == want, (r["path"], what)


@pytest.mark.parametrize("name", sorted(EXTERNAL_TRACES))
def test_external_traces_say_their_workload_once(name: str) -> None:
    path = EXTERNAL / EXTERNAL_TRACES[name]
    if not path.exists():
        pytest.skip("../shared is not beside the repository")
    for r in _runs(path):
        _agrees(r)
        if r["status"] == "ok" and name not in UNSAID:
            assert r["phase"] == ("inference" if name in INFERENCE else "training"), (name, r["phase"])


def test_demo_runs_say_their_workload_once() -> None:
    runs = _runs(REPO / "demo_logs")
    assert len(runs) == 5
    for r in runs:
        _agrees(r)


def test_the_file_name_says_validation() -> None:
    assert run_phase("validation", {"run": {"workload": "inference"}}) == "validation"
    assert run_phase("train", {"run": {"workload": "inference"}}) == "inference"
    assert run_phase("train", {"run": {"workload": None}}) is None
