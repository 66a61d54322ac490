"""Tokens/s on the median step, as the step time and the savings (issue #24/#25 follow-up).

The run's one tokens/s (``headline.tokens_per_s``, ``what_if.tokens_per_s``) is the median step's token slots over
the median step; the what-if puts the same tokens in the fixed median step. Before, the what-if scaled the mean
step's tokens/s (slots summed / step time summed) by median step / fixed step, so fp32_math's prediction counted
3,637 tokens a step where the run has 4,096 (docs/whatif.md: -12 % against the bf16 run, whose steps agree).

GIVEN two real captures: fp32_math (six steps of 4,096 slots, a 225 ms first step against a 128.7 ms median) and
gpu_seed (four padded batches: 1812, 828, 2048, 512 slots, so the median step's tokens are not the mean's).
The expectations are computed here from the raw trace JSON, sharing no code with the product: a step runs from its
``ProfilerStep#N`` marker (or the end of the previous step, when later) to the later of the marker's end and the end
of the last kernel / copy / memset launched from inside it (by correlation id); its token slots are B x L of the
``aten::embedding`` indices called inside its marker.
"""

from __future__ import annotations

import gzip
import io
import json
import statistics
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tb_llmdiag.cli import main
from tracepaths import TEST_DATA

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def _ns(us: Any) -> int:
    """Microseconds as the trace writes them (decimal text) -> integer ns."""
    return int(round(Decimal(us) * 1000))


def hand_steps(folder: Path) -> list[tuple[int, int]]:
    """(duration ns, token slots) of every step, from the raw JSON (module docstring)."""
    (path,) = folder.glob("*.json.gz")
    with gzip.open(path, "rt") as fh:
        events = [e for e in json.load(fh, parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    markers = sorted((e for e in events if e.get("cat") == "user_annotation"
                      and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    device_end: dict[int, int] = {}
    for e in events:
        if e.get("cat") in DEVICE_CATS and (c := (e.get("args") or {}).get("correlation")) is not None:
            device_end[c] = max(device_end.get(c, 0), _ns(e["ts"]) + _ns(e["dur"]))
    launches = [(_ns(e["ts"]), (e.get("args") or {}).get("correlation")) for e in events if e.get("cat") in LAUNCH_CATS]
    embeddings = [(_ns(e["ts"]), e["args"]["Input Dims"][1]) for e in events if e.get("name") == "aten::embedding"]
    out, previous_end = [], None
    for m in markers:
        start, host_end = _ns(m["ts"]), _ns(m["ts"]) + _ns(m["dur"])
        end = max([host_end] + [device_end[c] for t, c in launches if start <= t < host_end and c in device_end])
        tokens = sum(b * length for t, (b, length) in embeddings if start <= t < host_end)
        out.append((end - (start if previous_end is None else max(start, previous_end)), tokens))
        previous_end = end
    return out


def cli_json(argv: list[str]) -> dict[str, Any]:
    buf = io.StringIO()
    old, sys.stdout = sys.stdout, buf
    try:
        assert main(argv) in (0, 3)
    finally:
        sys.stdout = old
    return json.loads(buf.getvalue())


def cli_text(argv: list[str]) -> str:
    buf = io.StringIO()
    old, sys.stdout = sys.stdout, buf
    try:
        main(argv)
    finally:
        sys.stdout = old
    return buf.getvalue()


@pytest.fixture(scope="module")
def fp32() -> tuple[dict[str, Any], list[tuple[int, int]]]:
    return cli_json(["report", str(TEST_DATA / "fp32_math"), "--json"])["runs"][0], hand_steps(TEST_DATA / "fp32_math")


def test_the_hand_steps_are_the_reports(fp32) -> None:
    run, steps = fp32
    assert [(r["duration_ns"], r["tokens"]) for r in run["metrics"]["steps"]["per_step"]] == steps
    assert steps == [(225452891, 4096), (128110910, 4096), (128548170, 4096), (128399783, 4096), (128752495, 4096),
                     (129975043, 4096)]


def test_fp32_math_tokens_per_s_is_the_median_steps(fp32) -> None:
    """GIVEN fp32_math WHEN reported THEN the card's, the what-if's and the median-step tokens/s are 4,096 slots over
    the 128,650,332 ns median step; the mean step's, 6 x 4,096 over the summed steps, stays as `flops.tokens_per_s`."""
    run, steps = fp32
    median_ns = int(statistics.median(d for d, _ in steps))
    tokens = int(statistics.median(t for _, t in steps))
    assert (median_ns, tokens) == (128650332, 4096)
    expected = tokens * 1e9 / median_ns  # 31,838.2 tokens/s
    assert run["metrics"]["flops"]["median_step_tokens_per_s"] == pytest.approx(expected, rel=1e-12)
    assert run["headline"]["tokens_per_s"] == pytest.approx(expected, rel=1e-12)
    # the what-if is on the median step without the profiler's cost (#37: 128,650,332 - 3,095,182 modelled ns): the same
    # 4,096 tokens in that step; the profiled step beside it
    wi = run["what_if"]
    assert (wi["profiled"]["step_ns"], wi["step_ns"]) == (median_ns, median_ns - 3_095_182)
    assert wi["tokens_per_s"] == pytest.approx(tokens * 1e9 / wi["step_ns"], rel=1e-6)
    mean_based = sum(t for _, t in steps) * 1e9 / sum(d for d, _ in steps)  # 28,273.3 tokens/s
    assert run["metrics"]["flops"]["tokens_per_s"] == pytest.approx(mean_based, rel=1e-12)
    assert round(expected) == 31838 and round(mean_based) == 28273


def test_fp32_math_fixed_steps_hold_the_median_steps_tokens(fp32) -> None:
    """The what-if's fixed median steps (the top finding's, every finding's) hold 4,096 tokens, not the 3,637 the
    mean step's tokens/s put there."""
    run, steps = fp32
    wi = run["what_if"]
    assert wi["step_ns"] == 128650332 - 3_095_182 and wi["basis"] == "median_step"  # without the profiler's cost
    for fixed_ns, tps in ((wi["step_ns_if_fixed"], wi["tokens_per_s_if_fixed"]),
                          (wi["all"]["step_ns_if_fixed"], wi["all"]["tokens_per_s_if_fixed"])):
        assert tps == pytest.approx(4096 * 1e9 / fixed_ns, rel=1e-6)  # the fixed step is rounded to whole ns
    old = run["metrics"]["flops"]["tokens_per_s"] * wi["profiled"]["step_ns"] / 1e9  # the mean step's x the median step
    assert round(old) == 3637


def test_the_report_text_says_the_same_tokens_per_s(fp32) -> None:
    """The CLI's headline and what-if lines read the median step's tokens/s (31.8 k/s), the mean step's never."""
    text = cli_text(["report", str(TEST_DATA / "fp32_math")])
    assert "tokens/s 31.8 k/s" in text
    # the what-if's on the step without the profiler (125.6 ms): 4,096 tokens in 125.6 ms, then in 16.9 ms
    assert "throughput 32.6 k/s → at most 242 k/s tokens" in text
    assert "28.3 k/s" not in text


def test_gpu_seed_median_tokens_are_not_the_mean(tmp_path) -> None:
    """GIVEN gpu_seed's padded batches THEN tokens/s is the median of the slots (1,320: the mean of 828 and 1,812)
    over the median step (1,266,983,612 ns), 1,041.8/s; the mean step's is 5,200 slots over 6.30 s, 825.8/s."""
    steps = hand_steps(TEST_DATA / "gpu_seed")
    assert [t for _, t in steps] == [1812, 828, 2048, 512]
    median_ns = int(statistics.median(d for d, _ in steps))
    expected = 1320 * 1e9 / median_ns
    run = cli_json(["report", str(TEST_DATA / "gpu_seed"), "--json"])["runs"][0]
    assert (run["metrics"]["steps"]["tokens_per_step_median"], run["metrics"]["steps"]["median_ns"]) == (1320, median_ns)
    assert run["headline"]["tokens_per_s"] == pytest.approx(expected, rel=1e-12)
    wi = run["what_if"]  # on the median step without the profiler's modelled cost: the same 1,320 slots in it
    assert wi["tokens_per_s"] == pytest.approx(1320 * 1e9 / wi["step_ns"], rel=1e-6)
    assert wi["profiled"]["step_ns"] == median_ns
    assert wi["all"]["tokens_per_s_if_fixed"] == pytest.approx(1320 * 1e9 / wi["all"]["step_ns_if_fixed"], rel=1e-6)
    assert round(expected, 1) == 1041.8
    assert round(run["metrics"]["flops"]["tokens_per_s"], 1) == round(5200 * 1e9 / sum(d for d, _ in steps), 1) == 825.8


def test_compare_reads_tokens_per_s_on_the_median_step() -> None:
    """`compare` fp32_math -> noise_a (bf16): the tokens/s row, its noise statistic and the verdict are on the median
    step on both sides, as the step it quotes (31.8 k/s -> 94.7 k/s; 129 ms -> 43.3 ms: 2.97x, the steps' ratio)."""
    before, after = hand_steps(TEST_DATA / "fp32_math"), hand_steps(TEST_DATA / "noise_a")
    b = 4096 * 1e9 / int(statistics.median(d for d, _ in before))
    a = 4096 * 1e9 / int(statistics.median(d for d, _ in after))
    doc = cli_json(["compare", str(TEST_DATA / "fp32_math"), str(TEST_DATA / "noise_a"), "--json"])
    row = next(r for r in doc["metrics"] if r["key"] == "headline.tokens_per_s")
    assert (row["before"], row["after"]) == (pytest.approx(b, rel=1e-12), pytest.approx(a, rel=1e-12))
    assert row["noise"]["statistic"] == "median tokens per step / median step duration"
    # the statistic on every step is the row's value (the report's median step is whole ns: within 1e-8)
    assert row["noise"]["statistic_before"] == pytest.approx(b, rel=1e-8)
    assert row["noise"]["statistic_after"] == pytest.approx(a, rel=1e-8)
    per_token = next(r for r in doc["metrics"] if r["key"] == "work.ns_per_token")
    assert per_token["before"] == pytest.approx(1e9 / b, rel=1e-12)
    assert doc["verdict"].startswith("AFTER is 3.0x faster in tokens/s (31.8 k/s -> 94.7 k/s; step 129 ms -> 43.3 ms)")
