"""`llmdiag check` on the pairs captured for issue #12 (tests/data/<name>/truth.json says how each was made: a
2-layer Qwen2.5-1.5B-shaped LoRA on one H100, 6 profiled steady-state steps, one planted change per pair).

- noise_a / noise_b: one configuration captured twice: check passes, both ways, at the registry's tolerances;
- pageable vs pinned, compile_off vs compile_on, small_batch vs noise_a, item_loop vs noise_a: check fails and
  names the metric the planted change moves, with the numbers the two reports hold;
- the four captures of the baseline configuration (noise_a, noise_b, pageable, compile_off), made at different
  times, pass each other at --max-regression 15 % (docs/compare.md: run-to-run drift under the profiler).

Expected values come from the reports (dict lookups) and from truth.json (the capture script's own records:
batch size, pin_memory, tokens per step, .item() calls, CUDA-event step times), not from the comparison."""

from __future__ import annotations

import io
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from tb_llmdiag.cli import main
from tracepaths import TEST_DATA

CAPTURES = ("noise_a", "noise_b", "pageable", "pinned", "compile_off", "compile_on", "small_batch", "item_loop")
SAME_CONFIG = ("noise_a", "noise_b", "pageable", "compile_off")


def cli_json(argv: list[str]) -> tuple[int, dict[str, Any]]:
    buf = io.StringIO()
    old, sys.stdout = sys.stdout, buf
    try:
        code = main(argv)
    finally:
        sys.stdout = old
    return code, json.loads(buf.getvalue())


def truth(name: str) -> dict[str, Any]:
    return json.loads((TEST_DATA / name / "truth.json").read_text())


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each capture's `llmdiag report --json`, saved once (check then reads saved reports, as CI does)."""
    out = tmp_path_factory.mktemp("captured")
    paths = {}
    for name in CAPTURES:
        code, doc = cli_json(["report", str(TEST_DATA / name), "--json"])
        assert code == 0 and len(doc["runs"]) == 1
        paths[name] = out / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    return paths


def run_of(saved: dict[str, Path], name: str) -> dict[str, Any]:
    return json.loads(saved[name].read_text())["runs"][0]


def check(saved: dict[str, Path], candidate: str, baseline: str, *extra: str) -> tuple[int, dict[str, Any]]:
    return cli_json(["check", str(saved[candidate]), "--baseline", str(saved[baseline]), "--json", *extra])


def test_reports_agree_with_the_capture_records(saved: dict[str, Path]) -> None:
    """The step times the comparison judges are the ones the capture script timed with CUDA events (within 5 %)."""
    for name in CAPTURES:
        prof = truth(name)["ranks"][0]["profiled"]
        run = run_of(saved, name)
        assert run["metrics"]["steps"]["count"] == prof["phases"].count("active") == 6
        median_ns = run["headline"]["step_median_ns"]
        assert abs(median_ns / 1e6 / prof["active_median_gpu_event_ms"] - 1) < 0.05, name


@pytest.mark.parametrize("candidate,baseline", [("noise_b", "noise_a"), ("noise_a", "noise_b")])
def test_noise_only_pair_passes(saved: dict[str, Path], candidate: str, baseline: str) -> None:
    assert truth(candidate)["argv"][4:] == truth(baseline)["argv"][4:]   # same switches, only the name differs
    code, doc = check(saved, candidate, baseline)
    assert code == 0 and doc["passed"] and doc["regressions"] == []
    assert doc["compare"]["verdict"].startswith("no change in tokens/s beyond noise")


def regression(doc: dict[str, Any], key: str) -> dict[str, Any]:
    found = {r["key"]: r for r in doc["regressions"]}
    assert key in found, (key, sorted(found))
    return found[key]


def test_pageable_copies_are_named(saved: dict[str, Path]) -> None:
    assert (truth("pageable")["data"]["pin_memory"], truth("pinned")["data"]["pin_memory"]) == (False, True)
    code, doc = check(saved, "pageable", "pinned")
    assert code == 1
    r = regression(doc, "memcpy.htod_pageable_per_step")
    assert r["before"] == run_of(saved, "pinned")["metrics"]["memcpy"]["htod_pageable_per_step"] == 0
    assert r["after"] == run_of(saved, "pageable")["metrics"]["memcpy"]["htod_pageable_per_step"] > 0
    assert "(new; better lower;" in r["line"]
    assert '"Host-to-device copies use pageable memory" is new' in doc["compare"]["verdict"]


def test_compile_off_is_a_slower_step(saved: dict[str, Path]) -> None:
    assert (truth("compile_off")["model"]["compile"], truth("compile_on")["model"]["compile"]) == (None, "default")
    code, doc = check(saved, "compile_off", "compile_on")
    assert code == 1
    r = regression(doc, "headline.step_median_ns")
    on, off = run_of(saved, "compile_on"), run_of(saved, "compile_off")
    assert (r["before"], r["after"]) == (on["headline"]["step_median_ns"], off["headline"]["step_median_ns"])
    want = truth("compile_off")["ranks"][0]["profiled"]["active_median_gpu_event_ms"] / \
        truth("compile_on")["ranks"][0]["profiled"]["active_median_gpu_event_ms"]
    assert r["after"] / r["before"] == pytest.approx(want, rel=0.05)
    assert doc["compare"]["verdict"].startswith("CANDIDATE is 2.0x slower per step")


def test_smaller_batch_with_a_faster_step_fails_on_tokens_per_s(saved: dict[str, Path]) -> None:
    t_small, t_base = truth("small_batch"), truth("noise_a")
    assert (t_small["data"]["batch_size"], t_base["data"]["batch_size"]) == (4, 8)
    code, doc = check(saved, "small_batch", "noise_a")
    assert code == 1
    rows = {r["key"]: r for r in doc["compare"]["metrics"]}
    step = rows["headline.step_median_ns"]
    assert step["after"] < step["before"] and step["comparable"] is False and not step["regressed"]
    r = regression(doc, "headline.tokens_per_s")
    # tokens/s from the capture records, on the median step as the report's: tokens per step over the median
    # CUDA-event time of the profiled steps
    def tps(t: dict[str, Any]) -> float:
        rank = t["ranks"][0]
        prof = rank["profiled"]
        ms = [m for m, ph in zip(prof["gpu_event_ms"], prof["phases"]) if ph == "active"]
        return statistics.median(rank["tokens_per_step"]) / (statistics.median(ms) / 1e3)
    assert r["after"] / r["before"] == pytest.approx(tps(t_small) / tps(t_base), rel=0.05)
    assert r["after"] < 0.95 * r["before"]
    assert doc["compare"]["work"]["ratio"] == pytest.approx(0.5)


def test_item_loop_names_the_syncs(saved: dict[str, Path]) -> None:
    calls = truth("item_loop")["ranks"][0]["profiled"]["item_calls_per_step"]
    code, doc = check(saved, "item_loop", "noise_a")
    assert code == 1
    r = regression(doc, "host_sync.syncs_per_step")
    assert r["before"] == run_of(saved, "noise_a")["metrics"]["host_sync"]["syncs_per_step"]
    assert r["after"] == run_of(saved, "item_loop")["metrics"]["host_sync"]["syncs_per_step"] >= max(calls)
    regression(doc, "headline.tokens_per_s")


def test_captures_of_one_configuration_pass_each_other_at_15_percent(saved: dict[str, Path]) -> None:
    for a, b in itertools.permutations(SAME_CONFIG, 2):
        assert truth(a)["argv"][4:] == truth(b)["argv"][4:]
        code, doc = check(saved, a, b, "--max-regression", "15%")
        assert code == 0, (a, b, [r["line"] for r in doc["regressions"]])
    # and every planted regression still fails there
    for cand, base in (("pageable", "pinned"), ("compile_off", "compile_on"), ("small_batch", "noise_a"), ("item_loop", "noise_a")):
        assert check(saved, cand, base, "--max-regression", "15%")[0] == 1, cand
