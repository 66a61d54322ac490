"""`llmdiag compare` on the demo seed and fixed runs: the verdict and the table, held to the two reports.

The expected figures are recomputed here from the two `llmdiag report --json` documents with plain Python
(sums, medians, set differences), not with the comparison's code."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from tb_llmdiag.cli import main
from ratetext import per_s
from tracepaths import REPO

SEED = REPO / "demo_logs" / "seed_lora_qwen1.5b"
FIXED = REPO / "demo_logs" / "fixed_lora_qwen1.5b"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("reports")
    docs = {}
    for name, path in (("seed", SEED), ("fixed", FIXED)):
        target = out / f"{name}.json"
        with pytest.MonkeyPatch.context() as mp:
            import io
            import sys
            buf = io.StringIO()
            mp.setattr(sys, "stdout", buf)
            assert main(["report", str(path), "--json"]) == 0
        target.write_text(buf.getvalue())
        docs[name] = json.loads(buf.getvalue())
        docs[f"{name}_path"] = target
    return docs


def steps_of(run: dict[str, Any]) -> dict[str, list[int]]:
    """Per-step durations and tokens as the report holds them: `steps.per_step` rows (schema 2) or the
    parallel lists `steps.durations_ns` / `steps.tokens` (schema 1)."""
    st = run["metrics"]["steps"]
    if "per_step" in st:
        return {"durations_ns": [r["duration_ns"] for r in st["per_step"]], "tokens": [r["tokens"] for r in st["per_step"]]}
    return {"durations_ns": st["durations_ns"], "tokens": st["tokens"]}


def expected_verdict(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The verdict written out from the reports' own numbers."""
    sb, sa = steps_of(before), steps_of(after)
    med_b, med_a = statistics.median(sb["durations_ns"]), statistics.median(sa["durations_ns"])
    # tokens/s on the median step, as the step it is quoted with: median tokens per step / median step (whole ns)
    tps_b = int(statistics.median(sb["tokens"])) / int(med_b) * 1e9
    tps_a = int(statistics.median(sa["tokens"])) / int(med_a) * 1e9
    work = statistics.median(sa["tokens"]) / statistics.median(sb["tokens"])
    after_ids = {f["id"] for f in after["findings"]}
    gone = [f'"{f["title"]}"' for f in before["findings"] if f["id"] not in after_ids]  # titles, never ids (#25)

    # the bottleneck: the report's top finding with a saving, and its one saving (#25: the number its card shows)
    def own(f: dict[str, Any]) -> float:
        return f["saving"]["share"] if f["saving"] else 0.0

    top_b = next(f for f in before["findings"] if own(f) > 0)
    top_a = next(f for f in after["findings"] if own(f) > 0)
    assert top_b["id"] == top_a["id"]
    step = "the step without the profiler" if top_a["saving"]["step_basis"] == "without_profiler" else "the step"
    return (f"AFTER is {tps_a / tps_b:.1f}x faster in tokens/s ({per_s(tps_b)} -> {per_s(tps_a)}; "
            f"step {med_b / 1e6:.0f} ms -> {med_a / 1e6:.0f} ms at {work:.1f}x the tokens per step); "
            f"{', '.join(gone[:-1])} and {gone[-1]} are gone; the bottleneck is still \"{top_a['title']}\", "
            f"now {100 * own(top_a):.1f} % of {step} (was {100 * own(top_b):.1f} %).")


def test_verdict_matches_the_two_reports(reports: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    before, after = reports["seed"]["runs"][0], reports["fixed"]["runs"][0]
    want = expected_verdict(before, after)
    # the figures the issue quotes, as a reader would check them
    assert want.startswith("AFTER is 4.9x faster in tokens/s (2296/s -> 11.2 k/s; step 575 ms -> 365 ms at 3.1x")
    assert ('"Every new batch shape costs host work while the GPU waits", "Host-to-device copies use pageable memory" '
            'and "The profiled window includes warm-up" are gone') in want
    # its share of the step without the profiler's own cost (#37), the basis of every saving
    assert want.endswith('the bottleneck is still "The GPU waits for the host to launch work", now 43.0 % of the step '
                         'without the profiler (was 71.0 %).')
    assert main(["compare", str(SEED), str(FIXED)]) == 0
    text = capsys.readouterr().out
    assert want in text.splitlines()
    # README quotes it (wrapped)
    section = (REPO / "README.md").read_text().split("$ llmdiag compare demo_logs/seed_lora_qwen1.5b", 1)[1]
    assert want in " ".join(section.split("```", 1)[0].split("\n")[1:]).replace("  ", " ")
    # saved reports give the same comparison as the trace folders
    assert main(["compare", str(reports["seed_path"]), str(reports["fixed_path"])]) == 0
    assert want in capsys.readouterr().out.splitlines()


def test_json_rows_hold_the_reports_numbers(reports: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    before, after = reports["seed"]["runs"][0], reports["fixed"]["runs"][0]
    assert main(["compare", str(reports["seed_path"]), str(reports["fixed_path"]), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert doc["schema"] == 2 and doc["kind"] == "compare" and doc["level"] == "run"
    rows = {r["key"]: r for r in doc["metrics"]}
    for key in ("tokens_per_s", "step_median_ns", "gpu_busy_share", "mfu_share", "launches_per_step", "copy_share"):
        r = rows[f"headline.{key}"]
        assert (r["before"], r["after"]) == (before["headline"][key], after["headline"][key])
        assert r["change"] == pytest.approx(after["headline"][key] / before["headline"][key] - 1)
    assert rows["memory.peak_used_bytes"]["after"] == after["metrics"]["memory"]["peak_used_bytes"]
    assert rows["host_sync.syncs_per_step"]["before"] == before["metrics"]["host_sync"]["syncs_per_step"]
    # time per token is the reciprocal of tokens/s
    assert rows["work.ns_per_token"]["after"] == pytest.approx(1e9 / after["headline"]["tokens_per_s"])
    # AFTER's median tokens / median step on any resample is at least its tokens over its longest step; BEFORE's at
    # most its largest batch over its shortest step; the first beats the second, so the band cannot hold 0
    sb, sa = steps_of(before), steps_of(after)
    assert min(sa["tokens"]) / max(sa["durations_ns"]) > max(sb["tokens"]) / min(sb["durations_ns"])
    tps = rows["headline.tokens_per_s"]
    assert tps["beyond_noise"] is True and tps["noise"]["band_lo"] > 0 and tps["direction"] == "better"
    # 4 vs 3 steps: the rank test's smallest two-sided p is 2 / C(7, 3)
    assert doc["noise_model"]["min_two_sided_rank_p"] == pytest.approx(2 / 35)
    assert tps["noise"]["rank_p"] == pytest.approx(1 / 35)       # complete separation, one-sided
    # different work per step: the step time is shown, not judged
    assert doc["work"]["differs"] is True
    assert doc["work"]["ratio"] == pytest.approx(statistics.median(sa["tokens"]) / statistics.median(sb["tokens"]))
    assert rows["headline.step_median_ns"]["comparable"] is False
    # findings: set differences of ids, savings as the reports hold them
    ids_b = [f["id"] for f in before["findings"]]
    ids_a = [f["id"] for f in after["findings"]]
    fd = doc["findings"]
    assert [f["id"] for f in fd["resolved"]] == [i for i in ids_b if i not in ids_a]
    assert [f["id"] for f in fd["new"]] == [i for i in ids_a if i not in ids_b]
    both = {f["id"]: f for f in fd["changed"] + fd["unchanged"]}
    assert set(both) == set(ids_a) & set(ids_b)
    hb = next(f for f in before["findings"] if f["id"] == "host_bound")
    ha = next(f for f in after["findings"] if f["id"] == "host_bound")
    assert (both["host_bound"]["saving_share_before"], both["host_bound"]["saving_share_after"]) == (
        hb["saving"]["share"], ha["saving"]["share"])
    assert (both["host_bound"]["saving_ns_before"], both["host_bound"]["saving_ns_after"]) == (
        hb["saving"]["ns"], ha["saving"]["ns"])
    assert doc["verdict"] == expected_verdict(before, after)


def test_check_against_a_committed_style_report(reports: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """The fixed run checked against itself as a saved report passes; the seed run against the fixed baseline
    fails on tokens/s (step times are not judged: the work per step differs)."""
    assert main(["check", str(FIXED), "--baseline", str(reports["fixed_path"])]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["check", str(reports["seed_path"]), "--baseline", str(reports["fixed_path"])]) == 1
    out = capsys.readouterr().out
    lines = [l for l in out.splitlines() if l.startswith("REGRESSION ")]
    assert lines[0].startswith("REGRESSION tokens/s (headline.tokens_per_s) regressed: 11.2 k/s -> 2296/s")
    assert not any("step_median_ns" in l for l in lines)
