"""Real GPU captures of slowdowns outside the rule catalogue of issue #14 (tests/data/blame_*, issue #23): the top-2
findings name the activity that holds the time, down to the API / operator / frame, and the named finding's saving
bounds the cause's unprofiled cost from the capture's truth.json.

``PLANTED`` is written by hand from each capture's ``what`` (docs/captures_3.md): the finding that must name the
cause and the names it must say (an annotation, an operator, a runtime call, a frame, a source line). The cost
check: the finding's one saving (``saving.ns``, on the median step: #25) is at least ``COVER`` of the cause's cost measured
unprofiled (``cause_cost_median_ns``: the median step with the cause less the median step without it) and at
most the profiled median step: a bound that covers the cause, never a whole-step guess.
LLMDIAG_GPU_FIXTURES points these tests at another copy of tests/data (as tests/test_real_traces.py's).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tb_llmdiag import api

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LLMDIAG_GPU_FIXTURES", REPO / "tests" / "data"))
COVER = 0.6

#: capture -> (finding id naming the cause, names its title/summary/evidence must say)
PLANTED: dict[str, tuple[str, tuple[str, ...]]] = {
    # gc.collect() + torch.cuda.empty_cache() inside record_function("release_memory") after every step
    "blame_release_memory": ("unrecorded_host_time", ("release_memory",)),
    # the same with with_stack=True: the frames name gc.collect and the user's line
    "blame_release_memory_stack": (
        "unrecorded_host_time", ("release_memory", "<built-in function collect>", "capture_run.py:522")),
    # PYTORCH_NO_CUDA_MEMORY_CACHING=1: cudaMalloc / cudaFree around every tensor
    "blame_no_cache_alloc": ("allocator_churn", ("cudaMalloc", "cudaFree")),
    # build_masks(): per-document masks in pure Python inside the step, with_stack=True
    "blame_host_python": ("unrecorded_host_time", ("capture_run.py(251): build_masks", "capture_run.py:251")),
    # log_metrics(): a JSON line + fsync + time.sleep(0.1) after every step, nothing recorded around it
    "blame_host_pause": ("unrecorded_host_time", ("no recorded event",)),
    # the loss on logits[labels != -100]: boolean-mask indexing, aten::nonzero syncs every step
    "blame_masked_select": ("host_sync", ("aten::nonzero", "data-dependent")),
    # a forward hook on every module computing mean / std / abs-max of its output: many more small operators
    "blame_module_hooks": ("host_bound", ("aten::std",)),
}


def _text(f: dict) -> str:
    return " ".join([f["title"], f["summary"], f["fix"]["text"], *(str(v) for v in f["evidence"].values())])


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_top_two_findings_name_the_planted_activity(name: str) -> None:
    folder = DATA / name
    if not folder.is_dir():
        pytest.fail(f"missing capture {folder} (the captures of issue #23)")
    truth = json.loads((folder / "truth.json").read_text())
    run = api.report(str(folder))["runs"][0]
    finding_id, names = PLANTED[name]
    top2 = run["findings"][:2]
    # THEN one of the top two findings is the one that names this cause, and it says every planted name
    hit = [f for f in top2 if f["id"] == finding_id]
    assert hit, (name, [f["id"] for f in top2])
    text = _text(hit[0])
    assert all(n in text for n in names), (name, names, text)
    # AND its saving bounds the cause's unprofiled cost: it covers it and stays within the profiled median step
    cost = truth["cause_cost_median_ns"]
    saving = hit[0]["saving"]["ns"]
    assert cost > 0 and COVER * cost <= saving <= run["metrics"]["steps"]["median_ns"], (name, saving, cost)


def test_the_with_stack_capture_names_the_user_line_in_text_and_evidence() -> None:
    # the CLI text shows the finding's summary: the user's file:line of gc.collect's caller is in it
    folder = DATA / "blame_release_memory_stack"
    if not folder.is_dir():
        pytest.fail(f"missing capture {folder}")
    run = api.report(str(folder))["runs"][0]
    att = run["metrics"]["attribution"]
    assert att["frames"] is True and att["unrecorded_source"] == "capture_run.py:522"
    summaries = " ".join(f["summary"] for f in run["findings"][:2])
    assert "(capture_run.py:522)" in summaries
