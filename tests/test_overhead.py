"""The profiler's own cost and the capture's problems on real captures (issue #24).

- ``capture.profiler_overhead_share`` against the measured share, (profiled - unprofiled) / profiled, of the captures
  in tests/data with a truth.json (profiled: ``active_median_host_ms``; unprofiled: the same run's steps after the
  profiler stopped, ``reference.median_wall_ms``): from the trace alone (the model) within 0.15 on the host-bound and
  GPU-bound trust_* captures (each with all, the default and none of the recording options), rms <= 0.11 over all;
  within 0.05 when the unprofiled step times are in the trace's metadata and agree with the reference; where the
  capture helper's pre-window steps disagree with the model (trust_host_*: the early steps ran 11.8-16.4 ms against a
  17.7-21.7 ms reference, docs/captures_3.md) the capture says so; with steps timed after the window too (the
  helper's schema 2, here the truth's reference steps) the steps before stay the basis and the two are compared.
- Batch 4 (tests/data/trust4_*, docs/captures_4.md): the helper's 4 steps before the window are what the report
  measures against (the job before any profiler ran: batch 5, docs/captures_5.md, found the steps after a profiled
  window 10-45 % slower on host-bound jobs), its 10 steps after the window are compared with them
  (``after_window_slowdown_share``, the ``slower_after_profiling`` warning); GPU-bound within 0.05; host-bound the
  share is (profiled - before-window median) / profiled, and its error is the gap between the truth's reference
  (timed after the window) and the steps before it.
- Planted problems (tests/trust_fixtures.py: real traces edited) show in the report and in the CLI's text.
- CUDA/HIP graph replays of a real vLLM trace: grouped, no launch-gap or tiny-kernel finding from them.
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from tb_llmdiag import api
from tb_llmdiag.cli import main as cli_main
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.metrics import analyze
from tb_llmdiag.units import fmt, fmt_interval
from tracepaths import TEST_DATA, shared_trace
from trust_fixtures import (
    jax_capped,
    launches_missing_kernels,
    planted_dropped,
    slower_after,
    with_top_level,
    without_unprofiled,
)

MODEL_TOLERANCE = 0.15
MEASURED_TOLERANCE = 0.05


def _captures() -> list[tuple[str, Path, float, list[float]]]:
    out = []
    for truth_path in sorted(TEST_DATA.glob("*/truth.json")):
        truth = json.loads(truth_path.read_text())
        for r in truth["ranks"]:
            ref, prof = r.get("reference") or {}, r.get("profiled") or {}
            if not ref.get("median_wall_ms") or not prof.get("active_median_host_ms"):
                continue
            if truth_path.parent.name == "trust_reduce_overhead":
                continue  # the host runs ahead of the GPU: its host step time is not the step (measured share -1.06)
            if truth_path.parent.name.startswith("anatomy_"):
                continue  # batch 6 (docs/captures_6.md): not in the model's fit; tests/test_anatomy_whatif.py reads them
            p, u = prof["active_median_host_ms"], ref["median_wall_ms"]
            for fn in r["trace_files"]:
                out.append((f"{truth_path.parent.name}/rank{r['rank']}", truth_path.parent / fn, (p - u) / p, ref["wall_ms"]))
    return out


CAPTURES = _captures()


def test_there_are_host_and_gpu_bound_captures_to_check() -> None:
    measured = {name: share for name, _, share, _ in CAPTURES}
    assert len(measured) >= 20
    assert measured["unfused_adamw/rank0"] > 0.4 and measured["fp32_math/rank0"] < 0.05  # host-bound, GPU-bound


def _modelled(path: Path, tmp_path: Path) -> dict:
    trace = load_trace(str(path))
    if "unprofiled_step_ns" in trace.metadata:  # the capture helper's: stripped, the model alone is checked
        trace = load_trace(str(without_unprofiled(path, tmp_path / "plain.pt.trace.json.gz")))
    assert "unprofiled_step_ns" not in trace.metadata
    cap = analyze(trace).metrics["capture"]
    assert cap["overhead_basis"] == "model"
    return cap


TRUST = [c for c in CAPTURES if c[0].startswith(("trust_host", "trust_gpu"))]
#: batch 5 (docs/captures_5.md): the unprofiled step is the job timed before any profiler ran in the process
PRISTINE = [c for c in CAPTURES if c[0].startswith("trust5_")]


@pytest.mark.parametrize(("name", "path", "measured", "unprofiled_ms"), PRISTINE, ids=[c[0] for c in PRISTINE])
def test_modelled_overhead_is_within_tolerance_on_the_pristine_captures(name, path, measured, unprofiled_ms, tmp_path) -> None:
    # GIVEN a host-bound or GPU-bound batch-5 capture without unprofiled step times in its trace
    cap = _modelled(path, tmp_path)
    # THEN the model estimates the profiler's share of the window's step within #24's 0.15 of (window - pristine) /
    # window (errors +0.005 GPU-bound; -0.006 to +0.091 host-bound, the 0.091 on trust5_host_min, whose job itself
    # slowed 28.5 -> 33.9 ms while its pristine blocks ran)
    assert abs(cap["profiler_overhead_share"] - measured) <= MODEL_TOLERANCE, (name, cap["profiler_overhead_share"], measured)


def test_modelled_overhead_over_every_capture(tmp_path) -> None:
    errors = {name: _modelled(path, tmp_path)["profiler_overhead_share"] - measured
              for name, path, measured, _ in CAPTURES}
    assert len(TRUST) == 6 and len(PRISTINE) == 5 and len(errors) >= 45
    # batches 1-4 timed their unprofiled reference after the profiler had run in the process: on host-bound jobs that
    # runs 10-45 % slower than the job ever runs unprofiled (docs/captures_5.md), so their measured shares are low and
    # the model, fitted on batch 5, sits above most of them
    rms = (sum(e * e for e in errors.values()) / len(errors)) ** 0.5
    assert rms <= 0.12, (rms, errors)
    within = sum(abs(e) <= MODEL_TOLERANCE for e in errors.values())
    assert within >= len(errors) - 6, (within, errors)


@pytest.mark.parametrize("name", [c[0] for c in TRUST])
def test_the_capture_helpers_own_unprofiled_steps(name) -> None:
    (_, path, measured, _), = [c for c in CAPTURES if c[0] == name]
    cap = api.report(str(path))["runs"][0]["metrics"]["capture"]
    assert cap["overhead_basis"] == "unprofiled_steps" and cap["unprofiled_steps"] == 4  # steps 1-4; step 0 left out
    if name.startswith("trust_gpu"):  # the pre-window steps agree with the reference: within 0.05
        assert abs(cap["profiler_overhead_share"] - measured) <= MEASURED_TOLERANCE, cap["profiler_overhead_share"]
    else:  # they ran faster than the reference timed after the profiler (docs/captures_3.md, _5.md): a larger share
        assert cap["profiler_overhead_share"] > measured + 0.1, (cap["profiler_overhead_share"], measured)
        # and the capture says so where they and the model are more than 0.15 apart (default and full, not min:
        # 0.392 vs 0.231, 0.475 vs 0.256, 0.467 vs 0.453)
        apart = abs(cap["profiler_overhead_share"] - cap["overhead_model_share"]) > 0.15
        assert apart == (name != "trust_host_min/rank0")
        assert ("unprofiled_disagrees" in [p["kind"] for p in cap["problems"]]) == apart


@pytest.mark.parametrize("name", ["unfused_adamw/rank0", "fp32_math/rank0", "small_batch/rank0", "grad_ckpt/rank0"])
def test_measured_overhead_with_the_helpers_metadata(name, tmp_path) -> None:
    (_, path, measured, unprofiled_ms), = [c for c in CAPTURES if c[0] == name]
    # as tb_llmdiag.capture writes them (llmdiag_unprofiled_step_ns); here the truth's unprofiled reference steps
    helper = {"schema": 1, "steps": list(range(100, 100 + len(unprofiled_ms))),
              "step_ns": [int(ms * 1e6) for ms in unprofiled_ms], "synchronized": True}
    marked = with_top_level(path, tmp_path / "m.pt.trace.json.gz", {"llmdiag_unprofiled_step_ns": helper})
    rep = api.report(str(marked))["runs"][0]
    cap = rep["metrics"]["capture"]
    assert cap["overhead_basis"] == "unprofiled_steps" and cap["unprofiled_steps"] == len(unprofiled_ms)
    assert abs(cap["profiler_overhead_share"] - measured) <= MEASURED_TOLERANCE, (name, cap["profiler_overhead_share"])
    # the what-if leads with the unprofiled step
    wi = rep["what_if"]
    assert wi["unprofiled"]["step_ns"] == cap["unprofiled_step_ns"]
    assert wi["statement"].startswith("median step without the profiler ") and wi["step_basis"] == "without_profiler"
    assert wi["all"]["step_ns"] == cap["unprofiled_step_ns"]  # the what-if is on it (#37), the profiled step beside it
    assert wi["unprofiled"]["step_ns_if_fixed"] <= wi["unprofiled"]["step_ns"]


def _slowdown_by_hand(before_ms: list[float], after_ms: list[float]) -> tuple[float, bool | None]:
    """(A - B) / B of the medians, and whether the slower_after_profiling warning must fire (True), must not (False),
    or may either way (None): every resample's slowdown lies within [min A / max B - 1, max A / min B - 1], so the
    warning (interval above 0 and slowdown above 0.05) fires when the low bound is above 0.05 and cannot when the
    slowdown or the high bound is not above 0.05."""
    share = statistics.median(after_ms) / statistics.median(before_ms) - 1
    if min(after_ms) / max(before_ms) - 1 > 0.05:
        return share, True
    if share <= 0.05 or max(after_ms) / min(before_ms) - 1 <= 0.05:
        return share, False
    return share, None


def _flag_follows(cap: dict, must: bool | None) -> None:
    flagged = "slower_after_profiling" in [p["kind"] for p in cap["problems"]]
    lo = cap["after_window_slowdown_share_95"][0]
    assert flagged == (lo > 0 and cap["after_window_slowdown_share"] > 0.05)
    if must is not None:
        assert flagged is must, cap["problems"]


@pytest.mark.parametrize("name", [c[0] for c in TRUST])
def test_steps_after_the_window_are_compared_with_those_before_it(name, tmp_path) -> None:
    (_, path, measured, unprofiled_ms), = [c for c in CAPTURES if c[0] == name]
    # GIVEN the helper's object of schema 2 (tb_llmdiag.capture with time_steps_after): its own steps before the
    # window kept (1-4 once step 0 is left out), the steps after the window being the truth's reference steps
    # (timed the same way: after the window, synchronized at both edges)
    with gzip.open(path, "rt") as fh:
        helper = json.load(fh)["llmdiag_unprofiled_step_ns"]
    first = max(helper["steps"]) + 2 + helper["schedule"]["active"]
    helper = {**helper, "schema": 2, "after_steps": list(range(first, first + len(unprofiled_ms))),
              "after_step_ns": [int(ms * 1e6) for ms in unprofiled_ms]}
    marked = with_top_level(path, tmp_path / "a.pt.trace.json.gz", {"llmdiag_unprofiled_step_ns": helper})
    cap = api.report(str(marked))["runs"][0]["metrics"]["capture"]
    # THEN the four steps before the window stay the basis (the job before any profiler ran), and the method says so
    before_ms = [t / 1e6 for s, t in zip(helper["steps"], helper["step_ns"]) if s != 0]
    assert cap["unprofiled_steps"] == 4 and cap["overhead_basis"] == "unprofiled_steps"
    assert cap["unprofiled_step_ns"] == int(statistics.median(t * 1e6 for t in before_ms))
    assert "timed before the profiled window" in cap["overhead_method"]
    # and the steps after it are compared with them: on the host-bound three the reference after the window ran
    # 32-54 % slower than the helper's steps before it (docs/captures_3.md: 11.8-16.4 ms vs 17.7-21.7 ms)
    share, must = _slowdown_by_hand(before_ms, unprofiled_ms)
    assert cap["after_window_slowdown_share"] == pytest.approx(share, abs=1e-9)
    _flag_follows(cap, must)
    if name.startswith("trust_host"):
        assert share > 0.3
        assert must is (None if name == "trust_host_min/rank0" else True)
    else:
        assert must is False


UNFUSED = TEST_DATA / "unfused_adamw" / "rank0.1795411313724530492.pt.trace.json.gz"


def _cli(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    cli_main(["report", str(path)])
    return capsys.readouterr().out


def test_planted_dropped_records_show_in_the_report_and_the_cli(tmp_path, capsys) -> None:
    path, dropped = planted_dropped(UNFUSED, tmp_path / "d" / "rank0.1.pt.trace.json.gz", every=10)
    cap = api.report(str(path))["runs"][0]["metrics"]["capture"]
    assert cap["dropped_records"] == dropped and cap["kernels_without_launches"] == dropped
    assert [p["kind"] for p in cap["problems"]] == ["dropped_records", "kernels_without_launches"]
    out = _cli(path, capsys)
    assert f"capture warning: The profiler reports {dropped:,} dropped records" in out
    assert f"capture warning: {dropped:,} kernels have no launch call in the trace" in out
    cli_main(["report", str(path), "--format", "md"])  # the Markdown report says the same
    md = capsys.readouterr().out
    assert "### Capture" in md and f"- capture warning: {dropped:,} kernels have no launch call in the trace" in md


def test_the_interval_and_slower_steps_after_the_window_show_in_the_report_and_the_cli(tmp_path, capsys) -> None:
    # GIVEN the real unfused-AdamW capture with the helper's object: steps 1-6 before the window (the truth's
    # unprofiled reference steps, 82.6-124.8 ms) and 3 steps after it of 150-152 ms
    before = [82.617, 95.843, 94.54, 124.83, 95.924, 91.272]
    path = slower_after(UNFUSED, tmp_path / "s" / "rank0.1.pt.trace.json.gz", before, [150.0, 152.0, 151.0])
    cap = api.report(str(path))["runs"][0]["metrics"]["capture"]
    # THEN the basis is the steps before (median 95.19 ms), the slowdown (151 - 95.19) / 95.19 by hand, and every
    # resample's slowdown is at least 150 / 124.83 - 1 = 0.20: the warning
    assert cap["unprofiled_step_ns"] == int(statistics.median(before) * 1e6) and cap["unprofiled_steps"] == 6
    assert cap["after_window_slowdown_share"] == pytest.approx(151 / statistics.median(before) - 1)
    assert cap["after_window_slowdown_share_95"][0] >= 150 / 124.83 - 1 - 1e-9
    assert [p["kind"] for p in cap["problems"]] == ["slower_after_profiling"]
    lo, hi = cap["profiler_overhead_share_95"]
    assert lo <= cap["profiler_overhead_share"] <= hi
    out = _cli(path, capsys)
    assert f"(overhead share 95 % interval {fmt_interval('share', [lo, hi])})" in out
    assert f"slowdown after the window {fmt('share', cap['after_window_slowdown_share'])}" in out
    assert "capture warning: The steps after the profiled window ran 59 % slower than those before it (151 ms vs " in out
    cli_main(["report", str(path), "--format", "md"])  # the Markdown report says the same
    assert "- capture warning: The steps after the profiled window ran 59 % slower" in capsys.readouterr().out


def test_launches_missing_their_kernels_show_in_the_report_and_the_cli(tmp_path, capsys) -> None:
    path, removed = launches_missing_kernels(UNFUSED, tmp_path / "k" / "rank0.1.pt.trace.json.gz", every=10)
    cap = api.report(str(path))["runs"][0]["metrics"]["capture"]
    # every removed kernel leaves its launch unanswered but those of the last launches (after the last kernel)
    assert cap["launches_without_kernels"] + cap["edge_launches_without_kernels"] == removed
    assert cap["launches_without_kernels"] >= removed - 1
    assert [p["kind"] for p in cap["problems"]] == ["launches_without_kernels"]
    assert f"capture warning: {cap['launches_without_kernels']:,} kernel launches have no kernel in the trace" in _cli(path, capsys)


def test_a_jax_trace_cut_at_the_exporters_cap_says_so(tmp_path, capsys) -> None:
    path = jax_capped(tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00" / "host.trace.json.gz")
    cap = api.report(str(path))["runs"][0]["metrics"]["capture"]
    assert cap["event_cap"] == 1_000_000 and [p["kind"] for p in cap["problems"]] == ["event_cap"]
    assert "capture warning: The capture holds exactly 1,000,000 events" in _cli(path, capsys)


def test_a_complete_capture_has_no_problem() -> None:
    cap = api.report(str(UNFUSED))["runs"][0]["metrics"]["capture"]
    assert cap["problems"] == [] and cap["problem_count"] == 0
    assert (cap["record_shapes"], cap["profile_memory"], cap["with_stack"], cap["steps"]) == (True, True, None, 4)


def test_graph_replays_of_a_real_vllm_trace() -> None:
    path = shared_trace("external/AMD-AGI_TraceLens/vllm_prefilldecode_piecewise_graph_execution.json.gz")
    rep = api.report(str(path))["runs"][0]
    cap = rep["metrics"]["capture"]
    # 25 hipGraphLaunch calls replay 361 of the 413 kernels, as 3 graphs (23 replays of the decode graph)
    assert (cap["graph_launches"], cap["graph_kernels"], cap["graphs"]) == (25, 361, 3)
    assert [g["replays"] for g in cap["graph_list"]] == [23, 1, 1]
    assert "graph_replays" in [p["kind"] for p in cap["problems"]]
    ids = [f["id"] for f in rep["findings"]]
    assert not {"host_bound", "tiny_kernels"} & set(ids), ids


def test_a_reduce_overhead_capture_states_its_replays_and_blames_none_of_them() -> None:
    """torch.compile(mode="reduce-overhead"): the step runs as CUDA graph replays (the captures helper's
    tests/data/trust_reduce_overhead)."""
    folder = TEST_DATA / "trust_reduce_overhead"
    if not folder.is_dir():
        pytest.skip("tests/data/trust_reduce_overhead is not captured yet")
    for path in sorted(folder.glob("*.json.gz")):
        rep = api.report(str(path))["runs"][0]
        cap = rep["metrics"]["capture"]
        assert cap["graph_launches"] > 0 and cap["graph_kernels"] > 0, cap
        assert "graph_replays" in [p["kind"] for p in cap["problems"]]
        assert cap["graph_op_attribution"] == "unavailable"
        ids = [f["id"] for f in rep["findings"]]
        assert not {"host_bound", "tiny_kernels"} & set(ids), ids


def test_an_unprofiled_step_longer_than_the_profiled_one_takes_the_cut_as_is() -> None:
    """trust_reduce_overhead: the host runs ahead of the GPU, so the helper's synchronized unprofiled steps (3.55 ms)
    are longer than the profiled host step (2.46 ms); the what-if's cut (a 26 us pageable copy) must not grow into the
    1.1 ms difference (it said -32 % before)."""
    path = next((TEST_DATA / "trust_reduce_overhead").glob("*.json.gz"))
    wi = api.report(str(path))["runs"][0]["what_if"]
    up = wi["unprofiled"]
    assert up["step_ns"] > wi["step_ns"]
    cut = wi["step_ns"] - wi["step_ns_if_fixed"]
    assert 0 < cut < 100_000
    assert abs((up["step_ns"] - up["step_ns_if_fixed"]) - cut) <= 1
    assert up["saving_share"] < 0.01


# Batch 4 (docs/captures_4.md): the helper itself timed 10 steps after the window (schema 2), the truth 20 reference
# steps after those, in the same process, on one H100. Expectations from truth.json and the trace read with gzip + json.
AFTER_WINDOW = sorted(p.name for p in TEST_DATA.glob("trust4_*") if (p / "truth.json").is_file())


def _batch4(name: str) -> tuple[dict, Path, list[float], list[float], list[float], float, float]:
    """truth.json, the trace, and by hand: the profiled steps (ms) as the trace's ProfilerStep spans hold them (the
    product's P on a host-bound step), the helper's steps before the window (steps 1-4: step 0 left out) and after
    it (ms), the truth's reference median (ms) and its profiled median on the host clock (ms)."""
    folder = TEST_DATA / name
    truth = json.loads((folder / "truth.json").read_text())
    (rank,) = truth["ranks"]
    (trace_file,) = rank["trace_files"]
    path = folder / trace_file
    with gzip.open(path, "rt") as fh:
        spans = {e["name"]: e["dur"] for e in json.load(fh)["traceEvents"]
                 if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")}
    span_ms = [spans[f"ProfilerStep#{s}"] / 1e3 for s in truth["profiled_steps"]]
    helper = rank["helper_unprofiled"]
    before_ms = [t / 1e6 for s, t in zip(helper["steps"], helper["step_ns"]) if s != 0]
    after_ms = [t / 1e6 for t in helper["after_step_ns"]]
    ref_ms = statistics.median(rank["reference"]["wall_ms"])
    host_ms = statistics.median(rank["profiled"]["host_ms"][s] for s in truth["profiled_steps"])
    return truth, path, span_ms, before_ms, after_ms, ref_ms, host_ms


def test_batch4_has_the_six_trust_captures() -> None:
    assert AFTER_WINDOW == [f"trust4_{b}_{o}" for b in ("gpu", "host") for o in ("default", "full", "min")]


@pytest.mark.parametrize("name", AFTER_WINDOW)
def test_the_helpers_steps_before_the_window_are_what_the_report_measures_against(name, capsys) -> None:
    truth, path, span_ms, before_ms, after_ms, ref_ms, host_ms = _batch4(name)
    measured = truth["measured_profiler_overhead_share"]
    assert measured == pytest.approx((host_ms - ref_ms) / host_ms, abs=1e-4)
    cli_main(["report", str(path), "--format", "json"])
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    cap = run["metrics"]["capture"]
    assert cap == api.report(str(path))["runs"][0]["metrics"]["capture"]
    # THEN the report measures against the 4 steps timed before the window (steps 1-4: the job before any profiler
    # ran), and says so
    assert len(before_ms) == 4 and len(after_ms) == 10
    assert cap["overhead_basis"] == "unprofiled_steps" and cap["unprofiled_steps"] == 4
    assert cap["unprofiled_step_ns"] == pytest.approx(statistics.median(before_ms) * 1e6, abs=1)
    assert "timed before the profiled window" in cap["overhead_method"]
    # the 10 steps after it are compared with them
    share, must = _slowdown_by_hand(before_ms, after_ms)
    assert cap["after_window_slowdown_share"] == pytest.approx(share, abs=1e-9)
    _flag_follows(cap, must)
    # the share's interval lies within what any resample can give: 1 - max U / min P .. 1 - min U / max P (>= 0),
    # P the report's steps (their windows reach the device's last work: longer than the spans on a GPU-bound step)
    prof_ms = [st["duration_ns"] / 1e6 for st in run["metrics"]["steps"]["per_step"]]
    assert len(prof_ms) == len(span_ms)
    lo, hi = cap["profiler_overhead_share_95"]
    assert max(0.0, 1 - max(before_ms) / min(prof_ms)) - 1e-9 <= lo <= hi <= max(0.0, 1 - min(before_ms) / max(prof_ms)) + 1e-9
    est = cap["profiler_overhead_share"]
    if name.startswith("trust4_gpu"):
        # GPU-bound: within #24's 0.05 of the measured share (errors -0.019, -0.015, +0.006 on these)
        assert abs(est - measured) <= MEASURED_TOLERANCE, (name, est, measured)
        assert "unprofiled_disagrees" not in [p["kind"] for p in cap["problems"]]
        return
    # host-bound: the report's share is (profiled - before-window median) / profiled, P the ProfilerStep spans' median
    span = statistics.median(span_ms)
    assert cap["profiled_step_ns"] == pytest.approx(span * 1e6, abs=1)
    assert est == pytest.approx((span - statistics.median(before_ms)) / span, abs=1e-6)
    # batch 4's truth is the reference timed after the helper's after-window steps, not the job before any profiler
    # (batch 5 times that): the error is the gap between the truth's reference and the steps before the window,
    # (ref - before) / profiled (-0.107, +0.063, +0.122 of the step), within the spans' vs the host clock's profiled
    # step (0.015 at most)
    gap_share = (ref_ms - statistics.median(before_ms)) / host_ms
    assert abs((est - measured) - gap_share) <= 0.015, (name, est - measured, gap_share)


# Batch 5 (tests/data/trust5_*, docs/captures_5.md): the truth's unprofiled step is the job timed in blocks before any
# profiler ran in the process ("pristine"); the helper (schema 3) timed 10 steps before the window and 3 after it on
# the host clock, synchronizing only at the edges of each run of them. Expectations from truth.json and gzip + json.
BATCH5 = sorted(p.name for p in TEST_DATA.glob("trust5_*") if (p / "truth.json").is_file())


@pytest.mark.parametrize("name", BATCH5)
def test_batch5_the_steps_before_the_window_measure_against_the_job_before_any_profiler(name) -> None:
    folder = TEST_DATA / name
    truth = json.loads((folder / "truth.json").read_text())
    (rank,) = truth["ranks"]
    (trace_file,) = rank["trace_files"]
    with gzip.open(folder / trace_file, "rt") as fh:
        helper = json.load(fh)["llmdiag_unprofiled_step_ns"]
    assert helper["schema"] == 3 and helper["steps"] == list(range(10))
    host_ms, ref_ms = rank["profiled"]["active_median_host_ms"], rank["reference"]["median_wall_ms"]
    measured = truth["measured_profiler_overhead_share"]
    assert measured == pytest.approx((host_ms - ref_ms) / host_ms, abs=1e-4)
    before_ms = [t / 1e6 for s, t in zip(helper["steps"], helper["step_ns"]) if s != 0]
    after_ms = [t / 1e6 for t in helper["after_step_ns"]]
    run = api.report(str(folder / trace_file))["runs"][0]
    cap = run["metrics"]["capture"]
    # THEN steps 1-9 are the basis, the method says so, and the steps after the window are compared with them
    assert cap["unprofiled_steps"] == 9 and "timed before the profiled window" in cap["overhead_method"]
    assert cap["unprofiled_step_ns"] == pytest.approx(statistics.median(before_ms) * 1e6, abs=1)
    prof_ms = [st["duration_ns"] / 1e6 for st in run["metrics"]["steps"]["per_step"]]
    p_ms = statistics.median(prof_ms)
    est = cap["profiler_overhead_share"]
    assert est == pytest.approx(max(0.0, (p_ms - statistics.median(before_ms)) / p_ms), abs=1e-6)
    share, must = _slowdown_by_hand(before_ms, after_ms)
    assert cap["after_window_slowdown_share"] == pytest.approx(share, abs=1e-9)
    _flag_follows(cap, must)
    # the error against the pristine truth is the gap between the helper's steps before the window and the truth's
    # pristine blocks, (ref - before) / profiled, within the trace's vs the host clock's profiled step; within #24's
    # 0.05 wherever that gap is small (4 of 5: errors -0.013, +0.000, +0.010, +0.035; trust5_host_min's helper steps
    # ran 33.9 ms against 28.5 ms pristine blocks: -0.121)
    gap = (ref_ms - statistics.median(before_ms)) / host_ms
    assert abs((est - measured) - gap) <= 0.015, (name, est - measured, gap)
    assert (abs(est - measured) <= MEASURED_TOLERANCE) == (name != "trust5_host_min"), (name, est - measured)
    if name == "trust5_host_full":  # 34.6-41.3 ms after the window vs 26.0-29.6 ms before it: 51 % slower
        assert must is True and share > 0.5


def test_batch5_has_the_five_captures() -> None:
    assert BATCH5 == ["trust5_gpu_default", "trust5_gpu_full", "trust5_host_default", "trust5_host_full", "trust5_host_min"]
