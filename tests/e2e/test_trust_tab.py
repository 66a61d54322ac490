"""The trust card in a real TensorBoard through Debian Chromium (issue #24).

Logdir: three runs built from the real unfused-AdamW capture (tests/trust_fixtures.py): ``dropped`` (every 10th
launch call removed, with Kineto's warning of the records it dropped), ``missing`` (every 10th kernel removed: launches
missing their kernels) and ``unprofiled`` (the unprofiled step times written into the trace's metadata, as the
capture helper does), ``slower`` (the helper's schema-2 object: those steps before the window, 150-152 ms steps
after it: the steps after a profiled window ran slower); and ``jax``, a JAX ``trace.json.gz`` cut at the exporter's 1,000,000-event cap. The card shows the server's capture topic: the
problems in its order and words, the overhead share, its 95 % interval, the slowdown after the window and profiled
vs unprofiled step in the registry's units, and
each label from the metric registry; host-time findings carry the overhead caveat.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest
from tbserver import REPO, get_json, tensorboard, wait_all_analysed
from test_tab import ARTIFACTS, browser, new_page, no_foreign, open_tab, requests_seen, wait_panel  # noqa: F401 (fixtures)
from trust_fixtures import jax_capped, launches_missing_kernels, planted_dropped, slower_after, with_top_level

from tb_llmdiag import api
from tb_llmdiag.units import fmt, fmt_interval

pytestmark = pytest.mark.e2e
SRC = REPO / "tests" / "data" / "unfused_adamw" / "rank0.1795411313724530492.pt.trace.json.gz"
JAX_RUN = "jax/plugins/profile/2026_01_01_00_00_00"  # the run is the folder the trace file is in
UNPROFILED_MS = [82.617, 95.843, 94.54, 124.83, 95.924, 91.272]  # truth.json reference.wall_ms


@pytest.fixture(scope="module")
def trust_server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("playwright")
    tmp = tmp_path_factory.mktemp("e2e_trust")
    logdir = tmp / "logs"
    planted_dropped(SRC, logdir / "dropped" / "rank0.1.pt.trace.json.gz")
    launches_missing_kernels(SRC, logdir / "missing" / "rank0.1.pt.trace.json.gz")
    jax_capped(logdir / JAX_RUN / "host.trace.json.gz")
    helper = {"schema": 1, "steps": list(range(8, 14)), "step_ns": [int(ms * 1e6) for ms in UNPROFILED_MS]}
    with_top_level(SRC, logdir / "unprofiled" / "rank0.1.pt.trace.json.gz", {"llmdiag_unprofiled_step_ns": helper})
    slower_after(SRC, logdir / "slower" / "rank0.1.pt.trace.json.gz", UNPROFILED_MS, [150.0, 152.0, 151.0])
    ARTIFACTS.mkdir(exist_ok=True)
    with tensorboard(logdir, tmp / "cache", ARTIFACTS / "tensorboard_trust.log") as base:
        runs = wait_all_analysed(base)
        assert sorted(r["run"] for r in runs) == ["dropped", JAX_RUN, "missing", "slower", "unprofiled"], runs
        yield base, runs


def _report(base: str, run: str, worker: str = "rank0", span: str = "1") -> dict:
    q = urlencode({"run": run, "worker": worker, "span": span})
    body = get_json(f"{base}/data/plugin/llm_diag/report?{q}", timeout=30)
    assert isinstance(body, dict) and body["status"] == "ok", body
    return body


def _label(key: str) -> str:
    return next(m["label"] for m in api.catalogue.metrics()["metrics"] if m["key"] == key)


def test_trust_card_shows_problems_overhead_and_caveats(trust_server, browser, requests_seen):
    base, runs = trust_server
    ctx, page, errors = new_page(browser, requests_seen)
    where = {r["run"]: (r["workers"][0]["worker"], str(r["workers"][0]["spans"][0]["span"])) for r in runs}
    try:
        for run in ("dropped", "missing", JAX_RUN, "unprofiled", "slower"):
            rep = _report(base, run, *where[run])
            cap = rep["metrics"]["capture"]
            f = open_tab(page, base, f"#llm_diag&{urlencode({'p.llm_diag.run': run})}")
            wait_panel(f)
            # the first screen carries the capture in one line; the card is one click away, folded under it
            f.locator(".verdict-trust").wait_for(timeout=30_000)
            f.locator(".verdict-trust-more").click()
            card = f.locator(".trust-card")
            card.wait_for(timeout=30_000)
            # the problems, in the report's order and words
            texts = card.locator(".trust-problem").evaluate_all("els => els.map(e => e.textContent)")
            assert texts == [p["text"] for p in cap["problems"]]
            kinds = {"dropped": ["dropped_records", "kernels_without_launches"], "missing": ["launches_without_kernels"],
                     JAX_RUN: ["event_cap"], "unprofiled": [], "slower": ["slower_after_profiling"]}
            assert [p["kind"] for p in cap["problems"]] == kinds[run]
            if run == JAX_RUN:  # not a Kineto capture: no overhead estimate, no host-time finding to carry a caveat
                assert cap["profiler_overhead_share"] is None and "warn" in card.get_attribute("class").split()
                continue
            row = card.locator("[data-key='capture.profiler_overhead_share']")
            assert row.locator(".trust-label").inner_text() == _label("capture.profiler_overhead_share")
            # the tab formats shares as the CLI does (#25: one format in text and cards)
            assert row.locator(".trust-value").inner_text() == fmt("share", cap["profiler_overhead_share"])
            if run in ("unprofiled", "slower"):  # measured: the share's 95 % interval beside it, in the CLI's format
                ci = card.locator("[data-key='capture.profiler_overhead_share_95']")
                assert ci.locator(".trust-label").inner_text() == _label("capture.profiler_overhead_share_95[]")
                assert ci.locator(".trust-value").inner_text() == fmt_interval("share", cap["profiler_overhead_share_95"])
            slow = card.locator("[data-key='capture.after_window_slowdown_share']")
            if run == "slower":  # the steps after the window against those before it, and the warning
                assert slow.locator(".trust-label").inner_text() == _label("capture.after_window_slowdown_share")
                assert slow.locator(".trust-value").inner_text() == fmt("share", cap["after_window_slowdown_share"])
                assert "warn" in card.get_attribute("class").split()
                card.screenshot(path=str(ARTIFACTS / "trust_card_slower.png"))
            else:
                assert slow.count() == 0
            if run in ("dropped", "missing"):
                assert "warn" in card.get_attribute("class").split()
            elif run == "unprofiled":
                assert cap["overhead_basis"] == "unprofiled_steps"
                up = card.locator("[data-key='capture.unprofiled_step_ns'] .trust-value").inner_text()
                assert up == fmt("ns", cap["unprofiled_step_ns"])
                prof = card.locator("[data-key='capture.profiled_step_ns'] .trust-value").inner_text()
                assert prof == fmt("ns", cap["profiled_step_ns"])
                card.screenshot(path=str(ARTIFACTS / "trust_card.png"))
                # the what-if card keeps the one saving and states the unprofiled step beside it
                wi, up = rep["what_if"], rep["what_if"]["unprofiled"]
                wcard = f.locator(".card", has_text="At most, if the top finding were fixed")
                assert wcard.locator(".card-value").inner_text() == fmt("ns", wi["step_ns_if_fixed"])
                sub = wcard.locator(".card-sub").inner_text()
                assert f"unprofiled {fmt('ns', up['step_ns'])} → at most {fmt('ns', up['step_ns_if_fixed'])}" in sub, sub
            # host-time findings say the profiler's cost could account for much of them
            with_caveat = [x["id"] for x in rep["findings"] if x.get("caveat")]
            assert with_caveat, rep["findings"]
            shown = f.locator(".finding").evaluate_all(
                "els => els.filter(e => e.querySelector('.finding-caveat')).map(e => e.dataset.id)")
            assert shown == with_caveat
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()
