"""The job view of 1,024 ranks in a real TensorBoard through Debian Chromium (#33 part 4).

The logdir holds 1,024 real trace files (bench/job_files.py: the 2-GPU DDP straggler capture cut to its first
millisecond, rank 637 planted as the straggler); their analyses are cached beforehand, as a tab that has run a
while holds them, so that the time measured is the view's own: each rank's cache entry is the real rank's report
renamed and a RankSummary from bench/job_generator.py (the real ranks' summaries, straggler planted at 637), stored
through the tab's own ``ResultCache``. The job is built once before the page opens (the tab keeps it in memory).
Then: from the page's /job request to the aggregate drawn is under 2 s; the view shows per-step percentiles (the
/job document's numbers in the registry's units), the notable ranks and the outlier ranks (the straggler first),
no heatmap row or bar per rank; clicking the straggler opens its own report.
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tb_llmdiag import api
from tb_llmdiag.tab.cache import ResultCache
from tb_llmdiag.units import fmt
from tbserver import REPO, get_json, tensorboard, wait_all_analysed
from test_tab import ARTIFACTS, browser, new_page, no_foreign, open_tab, plugin_hash, requests_seen  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e
RANKS, PLANT = 1024, 637
DDP = REPO / "tests" / "data" / "ddp_straggler"


def _fill_cache(logdir: Path, cache_dir: Path) -> None:
    """Every rank's analysis stored as the tab stores it (module docstring)."""
    sys.path.insert(0, str(REPO / "bench"))
    from job_files import write_job
    from job_generator import generate

    write_job(logdir / "big", RANKS, keep_ms=1, plant=PLANT)
    real = [api.analyze(tf, summary=True) for tf in api.discover(str(DDP)).files]
    summaries = generate([a.rank_summary for a in real], RANKS, steps=2, plant=PLANT)
    cache = ResultCache(cache_dir, logdir=str(logdir))
    files = api.discover(str(logdir)).files
    assert [tf.rank for tf in files] == list(range(RANKS))
    for tf, s in zip(files, summaries):
        rep = copy.deepcopy(real[tf.rank % 2].report)
        rep.update(run=tf.run, worker=tf.worker, span=tf.span, path=tf.path, size_bytes=tf.size_bytes, rank=tf.rank)
        summary = s.replace(label=Path(tf.path).name).to_dict()
        cache.store(cache.key(tf), {"report": rep, "rank_summary": {"summary": summary}, "timelines": [],
                                    "steps": {"steps": []}})  # fmt: skip


@pytest.fixture(scope="module")
def big_server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("playwright")
    tmp = tmp_path_factory.mktemp("e2e_job_scale")
    logdir, cache_dir = tmp / "logs", tmp / "cache"
    _fill_cache(logdir, cache_dir)
    ARTIFACTS.mkdir(exist_ok=True)
    with tensorboard(logdir, cache_dir, ARTIFACTS / "tensorboard_job_scale.log") as base:
        runs = wait_all_analysed(base, timeout=600)
        workers = [w["worker"] for w in runs[0]["workers"]]
        assert workers == [f"rank{i}" for i in range(RANKS)]  # numeric order, not rank0, rank1, rank10
        url = f"{base}/data/plugin/llm_diag/job?{urlencode({'run': 'big', 'span': '1'})}"
        deadline = time.time() + 300
        while (job := get_json(url, timeout=120)).get("status") != "ok":  # type: ignore[union-attr]
            assert time.time() < deadline, job
            time.sleep(1)
        yield base, job


def test_the_job_view_of_1024_ranks_aggregates_within_2_s(big_server, browser, requests_seen):
    base, job = big_server
    view = job["view"]
    assert job["metrics"]["straggler_rank"] == PLANT and view["notable"]["straggler_rank"] == PLANT
    ctx, page, errors = new_page(browser, requests_seen)
    sent: list[float] = []
    page.on("request", lambda r: sent.append(time.perf_counter()) if "/job?" in r.url and not sent else None)
    try:
        f = open_tab(page, base, "#llm_diag&p.llm_diag.run=big&p.llm_diag.worker=rank0&p.llm_diag.span=1")
        agg = f.locator("section.job .job-aggregate")
        agg.wait_for(timeout=60_000)
        drawn = time.perf_counter()
        assert sent, "the tab never asked for /job"
        took = drawn - sent[0]
        print(f"job view of {RANKS} ranks: {took:.2f} s from the /job request to the aggregate drawn")
        assert took < 2.0
        # no row or bar per rank: a percentile row per common step, in the registry's units
        assert f.locator("section.job .job-bar").count() == 0
        rows = agg.locator(".job-percentiles tbody tr").evaluate_all(
            "rows => rows.map(r => [...r.querySelectorAll('td')].map(td => td.textContent))")
        want = [[fmt("ns", view["percentiles"][k][p][j]) for k in ("step_ns", "waiting_ns", "exposed_ns")
                 for p in ("p50", "p90", "max")] for j in range(len(view["steps"]))]  # fmt: skip
        assert rows == want and len(rows) == len(view["steps"])
        # the outliers in the server's order, the straggler first
        shown = agg.locator(".job-outlier").evaluate_all("els => els.map(e => Number(e.dataset.rank))")
        assert shown == [o["rank"] for o in view["outliers"][:50]] and shown[0] == PLANT
        roles = agg.locator(".job-notable-rank").evaluate_all(
            "els => els.map(e => [e.dataset.role, e.querySelector('button').textContent])")
        assert ["straggler", f"rank {PLANT}"] in roles
        agg.screenshot(path=str(ARTIFACTS / "job_view_1024.png"))
        # the straggler opens its own report
        agg.locator(f".job-outlier[data-rank='{PLANT}'] button.rank-link").click()
        page.wait_for_function(f"decodeURIComponent(location.hash).includes('p.llm_diag.worker=rank{PLANT}')")
        assert plugin_hash(page)["worker"] == f"rank{PLANT}"
        assert f.locator("select.sel-worker").input_value() == f"rank{PLANT}"
        assert not errors, errors
        assert not no_foreign(requests_seen)
    finally:
        ctx.close()
