"""The job view in a real TensorBoard through Debian Chromium (issue #11): a logdir holding the 2-rank DDP job
of demo_logs/ddp_straggler_2gpu. The view shows the server's job findings in its order (straggler rank 1, the
rank with 2x the tokens), a ranks x steps heatmap whose cells are the /job document's numbers (step time, then
waiting), one stacked bar per rank, and clicking a rank opens that rank's report. With
LLMDIAG_UPDATE_SCREENSHOT=1 it rewrites docs/screenshot-job.png.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tb_llmdiag.units import fmt
from tbserver import REPO, get_json, tensorboard, wait_all_analysed
from test_tab import ARTIFACTS, browser, new_page, no_foreign, open_tab, plugin_hash, requests_seen, wait_panel  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e
JOB = REPO / "demo_logs" / "ddp_straggler_2gpu"


@pytest.fixture(scope="module")
def job_server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("playwright")
    tmp = tmp_path_factory.mktemp("e2e_job")
    logdir = tmp / "logs"
    shutil.copytree(JOB, logdir / "ddp_straggler_2gpu")
    ARTIFACTS.mkdir(exist_ok=True)
    with tensorboard(logdir, tmp / "cache", ARTIFACTS / "tensorboard_job.log") as base:
        runs = wait_all_analysed(base)
        assert [w["worker"] for w in runs[0]["workers"]] == ["rank0", "rank1"], runs
        yield base


def test_job_view_shows_the_job_and_opens_a_rank(job_server, browser, requests_seen):
    base = job_server
    job = get_json(f"{base}/data/plugin/llm_diag/job?{urlencode({'run': 'ddp_straggler_2gpu', 'span': '1'})}", timeout=30)
    assert isinstance(job, dict) and job["status"] == "ok"
    assert [f["id"] for f in job["findings"]] == ["straggler"] and job["metrics"]["straggler_rank"] == 1
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base)
        wait_panel(f)
        sec = f.locator("section.job")
        sec.locator(".job-finding").first.wait_for(timeout=30_000)
        # the findings in the server's order; the straggler's evidence names rank 1 and its cause
        assert sec.locator(".job-finding").evaluate_all("els => els.map(e => e.dataset.id)") == ["straggler"]
        ev = sec.locator(".job-finding .evidence").first.inner_text()
        # registry labels and named values in words (#25: no key, no snake_case value)
        assert "straggler rank\t1" in ev and "cause\tmore tokens" in ev and "_" not in ev
        # heatmap: ranks x common steps, each cell the document's step time in the registry's unit
        view = job["view"]
        cells = sec.locator(".job-heatmap tbody tr").evaluate_all(
            "rows => rows.map(r => [...r.querySelectorAll('td')].map(td => td.textContent))")
        assert cells == [[fmt("ns", v) for v in row] for row in view["heatmap"]["step_ns"]]
        sec.locator("button.tab[data-key=waiting_ns]").click()
        cells = sec.locator(".job-heatmap tbody tr").evaluate_all(
            "rows => rows.map(r => [...r.querySelectorAll('td')].map(td => td.textContent))")
        assert cells == [[fmt("ns", v) for v in row] for row in view["heatmap"]["waiting_ns"]]
        # one stacked bar per rank; the waiting rank (0) has the longer waiting part
        assert sec.locator(".job-bar").count() == 2
        widths = sec.locator(".job-bar [data-part=waiting_ns]").evaluate_all("els => els.map(e => e.getBoundingClientRect().width)")
        by_rank = {b["rank"]: b["waiting_ns"] for b in view["bars"]}
        assert (widths[0] > widths[1]) == (by_rank[0] > by_rank[1])
        sec.scroll_into_view_if_needed()
        shots = [ARTIFACTS / "job_view.png"]
        if os.environ.get("LLMDIAG_UPDATE_SCREENSHOT") == "1":
            shots.append(REPO / "docs" / "screenshot-job.png")
        for shot in shots:
            sec.screenshot(path=str(shot))
        # clicking rank 1 opens its report (the hash and the selector follow)
        sec.locator(".job-bar[data-rank='1'] button.rank-link").click()
        page.wait_for_function("decodeURIComponent(location.hash).includes('p.llm_diag.worker=rank1')")
        wait_panel(f)
        assert f.locator("select.sel-worker").input_value() == "rank1"
        f.locator(".meta", has_text="rank 1 of 2").wait_for(timeout=30_000)
        assert plugin_hash(page)["worker"] == "rank1"
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()


def test_job_step_share_and_what_if_read_the_same_in_the_view_the_cli_and_json(job_server, browser, requests_seen):
    """#25 for the job view: the job step, each finding's share of it and its what-if read the same in the view,
    the CLI text and ``--json`` (one number per fact)."""
    import json
    import subprocess
    import sys

    base = job_server
    job = get_json(f"{base}/data/plugin/llm_diag/job?{urlencode({'run': 'ddp_straggler_2gpu', 'span': '1'})}", timeout=30)

    def cli(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "tb_llmdiag", "report", str(JOB), *args], capture_output=True,
                              text=True, cwd=REPO, timeout=120, check=True).stdout

    (cli_job,) = json.loads(cli("--json"))["jobs"]
    text = cli()
    assert cli_job["metrics"]["job_step_ns"] == job["metrics"]["job_step_ns"]
    assert [(f["id"], f["value"], f["what_if"]) for f in cli_job["findings"]] == [
        (f["id"], f["value"], f["what_if"]) for f in job["findings"]]
    step = fmt("ns", job["metrics"]["job_step_ns"])
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base)
        wait_panel(f)
        sec = f.locator("section.job")
        sec.locator(".job-finding").first.wait_for(timeout=30_000)
        assert f"step {step} (median rank)" in sec.locator(".job-meta").inner_text()
        assert f"   step {step} (median rank);" in text
        for fd in job["findings"]:
            card = sec.locator(f".job-finding[data-id='{fd['id']}']")
            share = fmt("share", fd["value"])
            assert card.locator(".saving").inner_text().strip() == f"· {share} of the step"
            assert f"({share} of the job step)  (rule {fd['id']})" in text
            wi = fd["what_if"]
            before, after = fmt("ns", wi["step_ns"]), fmt("ns", wi["step_after_ns"])
            assert card.locator(".whatif").inner_text() == f"What if fixed: step {before} → {after} at best"
            assert f"what if: step {before} -> {after} at best" in text
        assert not errors, errors
    finally:
        ctx.close()
