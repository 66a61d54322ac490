"""Real GPU captures of slowdowns outside the rule catalogue of issue #14 (tests/data/blame_*, issue #23): the top-2
findings name the activity that holds the time, down to the API / operator / frame, and the named finding's saving
bounds the cause's unprofiled cost from the capture's truth.json.

``PLANTED`` is written by hand from each capture's ``what`` (docs/captures_3.md): the finding that must name the
cause and the names it must say (an annotation, an operator, a runtime call, a frame, a source line). The cost
check: the finding's saving on the basis the report states for it (``saving.unprofiled_ns``, the saving restated on
an unprofiled run where the trace places the profiler's cost in it, else ``saving.ns`` on the profiled median step:
#25) lies within [LOW, HIGH] x the cause's cost measured unprofiled (``cause_cost_median_ns``: the median step with
the cause less the median step without it), and never above the profiled median step.

The cause's cost is a range where the truth times the planted work in every step (``host_work_ms``): its
unprofiled cost after the window (``cause_cost_median_ns``, the reference steps) and that cost moved by how much
longer (or shorter) the work took in the unprofiled steps before the window (the profiler's skip and warm-up steps)
than in those after it. The two unprofiled windows disagree on two captures: ``build_masks`` took 49.0 ms (median)
before the window and 28.0 ms after it, the release of ``release_memory_stack`` 208.9 ms before and 260.7 ms after.
The profiled run was in neither, so the stated saving is held to the range, not to one end of it.

The band, from the data (ratio stated / the nearest end of the range, 1.00 inside it; before this band the test took
[0.6, 1.75] x ``cause_cost_median_ns``, and >= 0.6 with no upper bound before that):

| capture | cost range (ms) | profiled saving | stated (basis) | why it is off |
|---|---|---|---|---|
| host_pause | 96.5-96.6 | 1.05 | 1.05 (profiled; a sleep holds no record) | |
| host_python | 25.7-46.6 | 1.24 | 1.09 (unprofiled: less the 8,201 Python-tracer records a call at 0.8 us and 2 operators, 6.6 ms) | above the pre-window end: the records' cost is measured on other captures (docs/whatif.md), the code's own time in the profiled steps is as they ran it |
| masked_select | 2.9 | 3.86 | 1.73 (unprofiled step, GPU's work as floor) | the fix adds GPU work (cross-entropy over all 4,096 rows); the cost, 2.9 ms, is inside its own noise (0.8-4.1 ms, quartiles) |
| module_hooks | 20.4 | 0.95 | 0.95 (profiled) | |
| no_cache_alloc | 54.9 | 0.76 | 0.76 (profiled) | the cudaMalloc / cudaFree inside operators that also launch are not all GPU idle time |
| release_memory | 213.0-215.0 | 0.86 | 0.86 (profiled) | |
| release_memory_stack | 207.4-259.3 | 0.81 | 0.81 (profiled) | names gc.collect; the range's cudaFree and the re-allocation after are allocator time |

So BAND = [0.75, 1.25] for every capture but masked_select (``BANDS``: up to 1.75, its reason above).
LLMDIAG_GPU_FIXTURES points these tests at another copy of tests/data (as tests/test_real_traces.py's).
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest

from tb_llmdiag import api

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LLMDIAG_GPU_FIXTURES", REPO / "tests" / "data"))
#: stated / the cause's cost range, every capture (module docstring's table)
BAND = (0.75, 1.25)
#: where the data supports no tighter band, with the reason in the table
BANDS = {"blame_masked_select": (0.75, 1.75)}

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
    "blame_masked_select": ("host_sync", ("nonzero (data-dependent shape)", "data-dependent")),  # aten::nonzero (#36)
    # a forward hook on every module computing mean / std / abs-max of its output: many more small operators
    "blame_module_hooks": ("host_bound", ("aten::std",)),
}


def cost_range_ns(truth: dict) -> tuple[float, float]:
    """The cause's unprofiled cost per step as a range (module docstring): ``cause_cost_median_ns``, and where the truth
    times the planted work in every step, that cost moved by the work's median before the window less after it."""
    cost = float(truth["cause_cost_median_ns"])
    r = truth["ranks"][0]
    work = [w for w in (r.get("host_work_ms") or {}).values() if isinstance(w, list)]
    prof, ref = r["profiled"], r["reference"]
    if len(work) != 1 or len(work[0]) != len(prof["steps"]) + len(ref["steps"]):
        return cost, cost
    by_step = dict(zip([*prof["steps"], *ref["steps"]], work[0]))
    before = [by_step[s] for s, phase in zip(prof["steps"], prof["phases"]) if phase in ("skip", "warmup")]
    after = [by_step[s] for s in ref["steps"]]
    moved = cost + (statistics.median(before) - statistics.median(after)) * 1e6
    return min(cost, moved), max(cost, moved)


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
    # AND its saving, on the basis the report states for it, is within the band around the cause's unprofiled cost
    low, high = cost_range_ns(truth)
    saving = hit[0]["saving"]
    # the activity's cost as the trace measures it: restated where the trace places the profiler's cost in it, else
    # the saving on the profiled step (on the step without the profiler, ``saving.ns``, the step's idle time left
    # bounds it: blame_module_hooks' 20 ms of hooks can take at most the 4.5 ms the GPU then waits)
    stated = saving["unprofiled_ns"] if saving["unprofiled_ns"] is not None else (saving["profiled"] or saving)["ns"]
    assert saving["ns"] <= run["what_if"]["median_idle_ns"] + 1, (name, saving)
    band_low, band_high = BANDS.get(name, BAND)
    assert low > 0 and band_low * low <= stated <= band_high * high, (name, stated, low, high)
    # restated from the profiled step's saving: never above it (#37: ``saving.ns`` is on the step without the
    # profiler's cost, spread over the idle time; ``unprofiled_ns`` takes out the records inside the activity)
    profiled = saving["profiled"] or saving
    assert stated <= profiled["ns"] <= run["metrics"]["steps"]["median_ns"], (name, saving)


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


@pytest.mark.parametrize(
    ("name", "source"), [("blame_host_python", "capture_run.py:251"), ("blame_release_memory_stack", "capture_run.py:522")]
)
def test_the_source_line_is_a_field_of_the_finding_in_json_cli_and_markdown(name: str, source: str) -> None:
    """#23 point 4: the user's file:line is the finding's own ``source`` field (not only inside its text), and the CLI
    text and the Markdown report show it on a line of its own under the registry's label."""
    import subprocess
    import sys

    from tb_llmdiag.registry import metric

    folder = DATA / name
    if not folder.is_dir():
        pytest.fail(f"missing capture {folder}")
    label = metric("findings[].source").label
    cli = [sys.executable, "-m", "tb_llmdiag.cli", "report", str(folder)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rep = json.loads(subprocess.run([*cli, "--json"], capture_output=True, text=True, env=env, check=False).stdout)
    top = rep["runs"][0]["findings"][0]
    # THEN the top finding (the unrecorded host time holding the planted cause) carries the line as a field
    assert (top["id"], top["source"]) == ("unrecorded_host_time", source)
    # AND findings with no source line say null (the copy kernels' finding names no host code)
    assert all(f["source"] in (None, source) for f in rep["runs"][0]["findings"])
    text = subprocess.run(cli, capture_output=True, text=True, env=env, check=False).stdout
    assert f"\n      {label}: {source}\n" in text
    md = subprocess.run([*cli, "--format", "md"], capture_output=True, text=True, env=env, check=False).stdout
    assert f"\n- {label}: `{source}`\n" in md


def test_without_frames_the_finding_has_no_source_line() -> None:
    run = api.report(str(DATA / "blame_release_memory"))["runs"][0]
    assert run["metrics"]["attribution"]["frames"] is False
    assert [f["source"] for f in run["findings"]] == [None] * len(run["findings"])
