"""Over the run (#34) in a real TensorBoard through Debian Chromium: the tab's "Over the run" section and the
``llm_diag/*`` scalars in TensorBoard's own Scalars dashboard.

Logdir: ``over_run_h200``, eight windows of the H200 rerun and the event file the capture helper wrote beside them
while training (``llm_diag/step_ms``, ``tokens_per_s``, ``capture_cost_share``, ``trigger_step_ms``), and
``scalars/over_run_h200``, what ``llmdiag scalars`` writes for the same windows (adds the report's
``gpu_busy_share``, ``mfu_share``, ``profiled_step_ms`` and the findings' savings).
THEN the section lists the windows in step order with the numbers of ``llmdiag timeline --json``, marks the shift at
1101 with what changed, a window's button opens its report; and the Scalars dashboard shows the tags.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tb_llmdiag import api
from tb_llmdiag.cli import main as cli_main
from tbserver import REPO, get_json, tensorboard, wait_all_analysed
from test_tab import ARTIFACTS, browser, new_page, no_foreign, open_tab, plugin_hash, requests_seen, wait_panel  # noqa: F401

pytestmark = pytest.mark.e2e
SRC = REPO / "tests" / "data" / "over_run_h200"
RUN = "over_run_h200"


@pytest.fixture(scope="module")
def over_run_server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("playwright")
    tmp = tmp_path_factory.mktemp("e2e_over_run")
    logdir = tmp / "logs"
    (logdir / RUN).mkdir(parents=True)
    for p in [*SRC.glob("*.pt.trace.json.gz"), *(SRC / "helper").glob("events.out.tfevents.*")]:
        shutil.copy(p, logdir / RUN / p.name)  # the traces and the helper's event file beside them, as it wrote them
    assert cli_main(["scalars", str(SRC), "--out", str(logdir / "scalars")]) == 0
    ARTIFACTS.mkdir(exist_ok=True)
    with tensorboard(logdir, tmp / "cache", ARTIFACTS / "tensorboard_over_run.log") as base:
        runs = wait_all_analysed(base)
        assert [r["run"] for r in runs] == [RUN], runs
        yield base


def test_over_the_run_section_shows_the_windows_and_the_change(over_run_server, browser, requests_seen):
    base = over_run_server
    served = get_json(f"{base}/data/plugin/llm_diag/over_run?{urlencode({'run': RUN, 'worker': 'rank0'})}", 60)
    expected = api.timeline(str(SRC))
    assert isinstance(served, dict)
    (s,) = served["series"]
    assert [w["global_step"] for w in s["windows"]] == [601, 653, 701, 1001, 1101, 1201, 1237, 1301]
    assert [c["at_step"] for c in s["changes"]] == [c["at_step"] for c in expected["series"][0]["changes"]]
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base, f"#llm_diag&{urlencode({'p.llm_diag.run': RUN})}")
        wait_panel(f)
        section = f.locator("section.over-run")
        section.locator("table.over-run-windows tbody tr").first.wait_for(timeout=60_000)
        steps = section.locator("table.over-run-windows tbody tr").evaluate_all("els => els.map(e => e.dataset.step)")
        assert steps == ["601", "653", "701", "1001", "1101", "1201", "1237", "1301"]
        assert section.locator("svg.over-run-chart g.window").count() == 8
        assert section.locator("svg.over-run-chart g.window.triggered path.trigger").count() == 2
        heads = section.locator("li.change .change-head").evaluate_all("els => els.map(e => e.textContent)")
        assert [h.split(":")[0] for h in heads] == ["Change at step 653 (against step 601)",
                                                     "Change at step 1101 (against step 1001)",
                                                     "One-off at step 1237 (against step 1201)"]  # fmt: skip
        shift = section.locator("li.change.shift[data-at='1101']")
        assert "The host frees and re-allocates GPU memory every step" in shift.inner_text()
        assert "Capture cost:" in section.locator(".cost").inner_text()
        shift.get_by_role("button", name="open step 1101").click()
        page.wait_for_function("() => decodeURIComponent(window.location.hash).includes('p.llm_diag.span=5')")
        assert plugin_hash(page)["span"] == "5"
        section.locator("table.over-run-windows tbody tr.current[data-step='1101']").wait_for(timeout=30_000)
        assert not errors, errors
        assert not no_foreign(requests_seen)
    finally:
        ctx.close()


def test_the_llm_diag_scalars_appear_in_the_scalars_dashboard(over_run_server, browser, requests_seen):
    base = over_run_server
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        page.goto(f"{base}/#scalars")
        for tag in ("llm_diag/step_ms", "llm_diag/tokens_per_s", "llm_diag/capture_cost_share", "llm_diag/mfu_share",
                    "llm_diag/gpu_busy_share"):  # fmt: skip
            page.get_by_text(tag, exact=True).first.wait_for(timeout=60_000)
        tags = get_json(f"{base}/data/plugin/scalars/tags")
        assert isinstance(tags, dict)
        assert "llm_diag/trigger_step_ms" in tags[RUN] and "llm_diag/mfu_share" in tags[f"scalars/{RUN}"]
        assert not no_foreign(requests_seen)
    finally:
        ctx.close()
