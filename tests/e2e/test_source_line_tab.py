"""The user's source line as its own field (issue #23 point 4) in a real TensorBoard through Debian Chromium.

Logdir: copies of two real captures made with ``with_stack=True`` (tests/data/blame_host_python, whose trace names
``capture_run.py(251): build_masks``, and blame_release_memory_stack, whose ``gc.collect`` is called from
``capture_run.py:522``). Each run's top finding card shows the finding's ``source`` on a line of its own, labelled
with the metric registry's label of ``findings[].source``; "Show in trace" selects the op the finding blames and the
trace view's details show the same label and file:line.
"""

from __future__ import annotations

import shutil
from urllib.parse import urlencode

import pytest
from tbserver import REPO, get_json, tensorboard, wait_all_analysed
from test_tab import ARTIFACTS, browser, new_page, no_foreign, open_tab, requests_seen, wait_panel  # noqa: F401 (fixtures)

from tb_llmdiag import api

pytestmark = pytest.mark.e2e
#: run -> the file:line its top finding names (docs/captures_3.md)
RUNS = {"blame_host_python": "capture_run.py:251", "blame_release_memory_stack": "capture_run.py:522"}


@pytest.fixture(scope="module")
def source_server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("playwright")
    tmp = tmp_path_factory.mktemp("e2e_source")
    for run in RUNS:
        (src,) = [p for p in (REPO / "tests" / "data" / run).iterdir() if p.name.endswith(".pt.trace.json.gz")]
        (tmp / "logs" / run).mkdir(parents=True)
        shutil.copy(src, tmp / "logs" / run / "rank0.1.pt.trace.json.gz")
    ARTIFACTS.mkdir(exist_ok=True)
    with tensorboard(tmp / "logs", tmp / "cache", ARTIFACTS / "tensorboard_source.log") as base:
        runs = wait_all_analysed(base)
        assert sorted(r["run"] for r in runs) == sorted(RUNS), runs
        yield base


def _label(key: str) -> str:
    return next(m["label"] for m in api.catalogue.metrics()["metrics"] if m["key"] == key)


def test_the_card_and_the_trace_view_show_the_source_line(source_server, browser, requests_seen):
    base = source_server
    label = _label("findings[].source")
    assert label == "source line"
    ctx, page, errors = new_page(browser, requests_seen)
    page.set_viewport_size({"width": 1920, "height": 1200})
    try:
        for run, source in RUNS.items():
            q = urlencode({"run": run, "worker": "rank0", "span": "1"})
            rep = get_json(f"{base}/data/plugin/llm_diag/report?{q}", timeout=30)
            assert isinstance(rep, dict) and rep["status"] == "ok", rep
            top = rep["findings"][0]
            assert (top["id"], top["source"]) == ("unrecorded_host_time", source)
            f = open_tab(page, base, f"#llm_diag&{urlencode({'p.llm_diag.run': run})}")
            wait_panel(f)
            card = f.locator(f".finding[data-id='{top['id']}']")
            card.wait_for(timeout=30_000)
            # THEN the card has the field on a line of its own: the registry's label, then the file:line
            line = card.locator(".finding-source")
            assert line.inner_text() == f"{label}: {source}"
            assert line.locator("code").inner_text() == source
            # AND "Show in trace" selects the op the finding blames, and the details show the same file:line
            f.locator(".trace-body[data-painted]").wait_for(timeout=30_000)
            btn = card.locator(".show-in-trace")
            btn.wait_for(state="visible", timeout=30_000)
            btn.click()
            f.locator(".tv-details:not([hidden])").wait_for(timeout=30_000)
            rows = f.locator(".tv-details tr").evaluate_all(
                "rs => rs.map(r => [r.querySelector('th').textContent, r.querySelector('td').textContent])")
            assert [label, source] in rows, rows
            page.screenshot(path=str(ARTIFACTS / f"source-line-{run}.png"))
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()
