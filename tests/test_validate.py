"""One validation layer for both readers' numbers (#27 items 4 and 5; tb_llmdiag/ingest/validate.py).

A second audit found kernels whose ``dur`` was -5 or 1e300 (or ``ts`` 1e19) rejected and the report then stating,
status ok and exit 0, a [high] ``no_device_activity``; a kernel ``dur`` of ``"x"`` or ``null`` counted as 0 us and
fed ``tiny_kernels``; XPlane line timestamps near the int64 limits wrapping the window. Each case runs the CLI
(``llmdiag report --json``) on a small trace written here; the property tests mutate both readers' seeds and
hold every report to tests/fuzz/checks.py (shares in [0, 1], durations >= 0, no NaN).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_xplane import _gpu_space

from tb_llmdiag import api
from tb_llmdiag.cli import main
from tb_llmdiag.ingest.xplane.schema import message_classes
from tb_llmdiag.render.canonical_json import dumps

sys.path.insert(0, str(Path(__file__).resolve().parent / "fuzz"))
from checks import EXIT_OF_STATUS, impossible  # noqa: E402
from fuzz_readers import mutate, mutate_xspace, seeds, xplane_seeds  # noqa: E402


def kineto(kernel_dur: Any, kernel_ts: Any = None) -> dict[str, Any]:
    """3 steps of 6 launches and kernels (20 us each); the kernels' dur (and ts) as given."""
    ev: list[dict[str, Any]] = []
    for s in range(3):
        t0 = s * 1000
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "ts": t0, "dur": 900, "pid": 1, "tid": 1})
        for k in range(6):
            corr = s * 100 + k
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t0 + 10 + k * 100, "dur": 5,
                       "pid": 1, "tid": 1, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": f"k{k}", "ts": t0 + 20 + k * 100 if kernel_ts is None else kernel_ts,
                       "dur": kernel_dur, "pid": 0, "tid": 7, "args": {"device": 0, "stream": 7, "correlation": corr}})
    return {"traceEvents": ev}


def cli_report(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict[str, Any]]:
    code = main(["report", str(path), "--json"])
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    return code, run


@pytest.mark.parametrize("dur,ts,what", [
    ("x", None, "18 device events (kernels, copies) without a usable duration were rejected"),
    (None, None, "18 device events (kernels, copies) without a usable duration were rejected"),
    (-5, None, "18 events with a negative duration were rejected"),
    (1e300, None, "18 events with a time or duration beyond 73 years were rejected"),
    (20, 1e19, "18 events with a time or duration beyond 73 years were rejected"),
])
def test_every_kernel_rejected_is_partial_never_no_device_activity(tmp_path, capsys, dur, ts, what) -> None:
    path = tmp_path / "k.pt.trace.json"
    path.write_text(json.dumps(kineto(dur, ts)))
    code, run = cli_report(capsys, path)
    assert (code, run["status"]) == (6, "partial")
    assert run["error"] == f"all 18 device events were rejected ({what}); the report covers the host events only"
    assert what in run["warnings"]
    ids = [f["id"] for f in run["findings"]]
    assert "no_device_activity" not in ids and "tiny_kernels" not in ids
    assert run["summary"]["counts"]["kernels"] == 0


def test_one_bad_kernel_among_many_is_a_counted_warning(tmp_path, capsys) -> None:
    doc = kineto(20)
    bad = next(e for e in doc["traceEvents"] if e["cat"] == "kernel")
    bad["dur"] = "x"  # 1 of 57 events: under validate.PARTIAL_SHARE
    path = tmp_path / "k.pt.trace.json"
    path.write_text(json.dumps(doc))
    code, run = cli_report(capsys, path)
    assert (code, run["status"]) == (0, "ok")
    assert run["warnings"] == ["1 device events (kernels, copies) without a usable duration were rejected"]
    assert run["summary"]["counts"]["kernels"] == 17
    assert run["summary"]["device_time_ns"]["kernel"] == 17 * 20_000  # not 17 x 20 us + 0 us


def _space_with(line_ts: int) -> bytes:
    c = message_classes()
    space = c["XSpace"]()
    space.ParseFromString(_gpu_space())
    for plane in space.planes:
        if plane.name.startswith("/device"):
            for line in plane.lines:
                line.timestamp_ns = line_ts
    return space.SerializeToString()


@pytest.mark.parametrize("line_ts", [2**63 - 1, -(2**63), 2**63 - 10**6])
def test_xplane_times_near_int64_limits_do_not_wrap(tmp_path, capsys, line_ts) -> None:
    folder = tmp_path / "run" / "plugins" / "profile" / "2026_01_01_00_00_00"
    folder.mkdir(parents=True)
    (folder / "h.xplane.pb").write_bytes(_space_with(line_ts))
    code, run = cli_report(capsys, folder / "h.xplane.pb")
    # every device event beyond the range is rejected: partial, says so, and the window is the host events' (to 15 us)
    assert (code, run["status"]) == (6, "partial")
    assert run["error"].startswith("all 3 device events were rejected (3 events with a time or duration beyond 73 years")
    assert run["summary"]["window_ns"] == 15_000
    assert impossible(run, dumps(run)) is None
    tf = api.discover(str(folder / "h.xplane.pb")).files[0]
    built = api.analyze(tf, summary=True, strict=True).tab_result()  # the trace view builds
    assert built["report"]["status"] == "partial"


_KINETO, _XPLANE = seeds(), xplane_seeds()


def _check_case(tmp: Path, data: bytes, xplane: bool) -> None:
    path = tmp / ("p/plugins/profile/2026_01_01_00_00_00/h.xplane.pb" if xplane else "c.pt.trace.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    try:
        report = api.analyze(api.discover(str(path)).files[0], summary=True, strict=True).tab_result()["report"]
    except api.LlmDiagError:
        return
    bad = impossible(report, dumps(report))
    assert bad is None, f"{report['status']} (exit {EXIT_OF_STATUS[report['status']]}): {bad}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_kineto_fuzz_corpus_reports_hold_no_impossible_value(tmp_path, seed) -> None:
    rng = random.Random(seed)
    _check_case(tmp_path, mutate(rng, rng.choice(_KINETO)[1]), xplane=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_xplane_fuzz_corpus_reports_hold_no_impossible_value(tmp_path, seed) -> None:
    rng = random.Random(seed)
    _check_case(tmp_path, mutate_xspace(rng, rng.choice(_XPLANE)[1]), xplane=True)
