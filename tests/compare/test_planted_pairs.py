"""`llmdiag check` on real GPU captures that differ by one planted change (docs/captures.md): it fails naming
the metric the change moves, with the numbers the two reports hold, and passes a capture against itself.

Expected values are read from the two reports here (plain dict lookups), not from the comparison."""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import pytest

from tb_llmdiag.cli import main
from tracepaths import TEST_DATA


def run_json(argv: list[str]) -> tuple[int, dict[str, Any]]:
    buf = io.StringIO()
    old, sys.stdout = sys.stdout, buf
    try:
        code = main(argv)
    finally:
        sys.stdout = old
    return code, json.loads(buf.getvalue())


def report(name: str) -> dict[str, Any]:
    code, doc = run_json(["report", str(TEST_DATA / name), "--json"])
    assert code == 0
    (run,) = doc["runs"]
    return run


#: (baseline, candidate, the planted change, metrics check must name: (registry key, where the report holds it))
PLANTED = [
    ("gpu_fixed", "gpu_item_sync", "per-step logging through .item() (--log-item)",
     [("host_sync.syncs_per_step", ("metrics", "host_sync", "syncs_per_step")),
      ("headline.tokens_per_s", ("headline", "tokens_per_s"))]),
    ("gpu_fixed", "gpu_dataloader_slow", "150 ms of collate work per batch in the main process, batch 4 instead of 8",
     [("headline.tokens_per_s", ("headline", "tokens_per_s")),
      ("headline.gpu_busy_share", ("headline", "gpu_busy_share"))]),
    ("gpu_compiled", "gpu_fixed", "torch.compile turned off",
     [("headline.step_median_ns", ("headline", "step_median_ns")),
      ("headline.gpu_busy_share", ("headline", "gpu_busy_share"))]),
]


def at(run: dict[str, Any], path: tuple[str, ...]) -> Any:
    for p in path:
        run = run[p]
    return run


@pytest.mark.parametrize("baseline,candidate,change,expected", PLANTED, ids=[p[1] for p in PLANTED])
def test_planted_regression_fails_naming_the_metric(baseline: str, candidate: str, change: str,
                                                    expected: list[tuple[str, tuple[str, ...]]]) -> None:
    code, doc = run_json(["check", str(TEST_DATA / candidate), "--baseline", str(TEST_DATA / baseline), "--json"])
    assert code == 1 and doc["passed"] is False, change
    regressions = {r["key"]: r for r in doc["regressions"]}
    b, c = report(baseline), report(candidate)
    for key, path in expected:
        assert key in regressions, (change, key, sorted(regressions))
        r = regressions[key]
        assert (r["before"], r["after"]) == (at(b, path), at(c, path))
        assert r["line"].startswith(f"{r['label']} ({key}) regressed: ")


@pytest.mark.parametrize("name", ["gpu_fixed", "gpu_item_sync"])
def test_a_capture_against_itself_passes(name: str) -> None:
    code, doc = run_json(["check", str(TEST_DATA / name), "--baseline", str(TEST_DATA / name), "--json"])
    assert code == 0 and doc["passed"] and doc["regressions"] == []
    assert doc["compare"]["verdict"].startswith("no change in tokens/s")
