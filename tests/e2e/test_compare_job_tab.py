"""Compare mode on jobs in a real TensorBoard and Debian Chromium: the fast-transport 2-GPU job (tests/data
ddp_fast_transport) against the slow-transport one as its baseline job, deep-linked through the URL hash
(base_level=job). What the page shows is held to the /compare?level=job document the server serves and to
the jobs' own numbers (each rank's step median from /report). With LLMDIAG_UPDATE_SCREENSHOT=1 it rewrites
docs/screenshot-compare-job.png."""

from __future__ import annotations

import os
import shutil
from urllib.parse import urlencode

import pytest

from tb_llmdiag.units import fmt
from tbserver import REPO, get_json, tensorboard, wait_all_analysed
from test_tab import (ARTIFACTS, browser, new_page, no_foreign, open_tab, plugin_hash,  # noqa: F401
                      requests_seen, wait_panel)

pytestmark = pytest.mark.e2e
SLOW, FAST = "ddp_slow_transport", "ddp_fast_transport"
HASH = (f"#llm_diag&p.llm_diag.run={FAST}&p.llm_diag.worker=rank0&p.llm_diag.span=1"
        f"&p.llm_diag.base_run={SLOW}&p.llm_diag.base_span=1&p.llm_diag.base_level=job")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("playwright")
    tmp = tmp_path_factory.mktemp("e2e_compare_job")
    for run in (SLOW, FAST):
        shutil.copytree(REPO / "tests" / "data" / run, tmp / "logs" / run)
    shutil.copytree(REPO / "demo_logs" / "fixed_lora_qwen1.5b", tmp / "logs" / "single")
    ARTIFACTS.mkdir(exist_ok=True)
    with tensorboard(tmp / "logs", tmp / "cache", ARTIFACTS / "tensorboard_compare_job.log") as base:
        runs = wait_all_analysed(base)
        assert all(s["status"] == "ready" for r in runs for w in r["workers"] for s in w["spans"]), runs
        yield base


def served(base: str, route: str, **q: str) -> dict:
    body = get_json(f"{base}/data/plugin/llm_diag/{route}?{urlencode(q)}", timeout=60)
    assert isinstance(body, dict)
    return body


def test_compare_job_with_job_deep_link_ranks_and_overlay(server, browser, requests_seen):  # noqa: F811
    base = server
    doc = served(base, "compare", level="job", run=FAST, span="1", base_run=SLOW, base_span="1")
    assert doc["level"] == "job" and doc["verdict"].startswith("AFTER's job step is 2.8x faster")
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base, HASH)
        wait_panel(f)
        f.locator(".compare-verdict").wait_for(timeout=60_000)
        assert f.locator(".compare-verdict").inner_text() == doc["verdict"]
        assert f.locator("select.sel-base").input_value() == f'job:["{SLOW}","1"]'
        # the picker offers the other job first, then single traces
        labels = f.locator("select.sel-base option").evaluate_all("els => els.map(e => e.textContent)")
        assert labels[:2] == ["— none —", f"job {SLOW} (2 ranks)"] and "single" in labels
        rows = {r["key"]: r for r in doc["metrics"]}
        keys = f.locator(".compare-cards .card").evaluate_all("els => els.map(e => e.dataset.key)")
        assert keys == ["job.tokens_per_s", "job.job_step_ns", "job.exposed_transfer_share", "job.waiting_share"]
        step = f.locator(".compare-cards .card[data-key='job.job_step_ns']")
        assert step.locator(".card-value").inner_text() == fmt("ns", rows["job.job_step_ns"]["after"])
        assert f"{100 * abs(rows['job.job_step_ns']['change']):.1f} %" in step.locator(".card-sub").inner_text()
        assert "good" in (step.get_attribute("class") or "")
        assert f.locator(".fd.resolved .fd-item").evaluate_all("els => els.map(e => e.dataset.id)") == [
            "slow_link_collectives", "exposed_communication"]  # the slow link (#33) and the exposed time it left
        # per rank: each rank's own step median from its /report, baseline then this job
        texts = f.locator(".compare-ranks .rank-row .rank-value").all_inner_texts()
        assert f.locator(".compare-ranks .rank-row").evaluate_all("els => els.map(e => e.dataset.rank)") == ["0", "1"]
        for text, worker in zip(texts, ("rank0", "rank1")):
            b = served(base, "report", run=SLOW, worker=worker, span="1")["headline"]["step_median_ns"]
            a = served(base, "report", run=FAST, worker=worker, span="1")["headline"]["step_median_ns"]
            assert text.startswith(f"{fmt('ns', b)} → {fmt('ns', a)} · −{100 * (1 - a / b):.1f} %")
        f.locator(".compare-chart canvas").first.wait_for()
        assert "both jobs" in f.locator(".compare h3").all_inner_texts()[-1]
        assert f.locator(".compare-table tbody tr").count() == len(doc["metrics"])
        shot = ARTIFACTS / "screenshot-compare-job.png"
        f.locator(".compare").screenshot(path=str(shot))
        if os.environ.get("LLMDIAG_UPDATE_SCREENSHOT") == "1":
            shutil.copy(shot, REPO / "docs" / "screenshot-compare-job.png")
        # a single run as baseline compares this rank at rank level; the job again puts base_level back
        f.locator("select.sel-base").select_option('["single","rank0","1"]')
        f.locator(".compare-sides").filter(has_text="baseline single (rank0").wait_for()
        assert "base_level" not in plugin_hash(page) and plugin_hash(page)["base_worker"] == "rank0"
        f.locator("select.sel-base").select_option(f'job:["{SLOW}","1"]')
        f.locator(".compare-ranks").wait_for()
        assert plugin_hash(page)["base_level"] == "job" and plugin_hash(page)["base_run"] == SLOW
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()
