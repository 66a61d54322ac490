"""The trace view inside the tab (issue #16), in a real TensorBoard driven through Debian Chromium.

On demo_logs/: the seed run's top finding's "Show in trace" zooms to a range where the op it blames is drawn
and outlined; the JAX run's recompile is one click away; wheel, drag, W/A/S/D, search, hover and select work;
the URL keeps the range; the tab opens on the run with the most to gain; nothing is requested outside
127.0.0.1. Screenshots: docs/traceview-seed.png, docs/traceview-jax.png (rewritten with LLMDIAG_UPDATE_SCREENSHOT=1)
and test-artifacts/.
"""

from __future__ import annotations

import os
import re
import shutil
from urllib.parse import urlencode

import pytest

from tbserver import CHROMIUM, CHROMIUM_ARGS, REPO, get_json, tensorboard, wait_all_analysed
from test_tab import DEMO, SEED, XPLANE, frame, new_page, no_foreign, open_tab, plugin_hash, report_of, wait_panel

pytestmark = pytest.mark.e2e
ARTIFACTS = REPO / "test-artifacts"
TV = ".trace .panel-section-body, .trace"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("playwright")
    tmp = tmp_path_factory.mktemp("e2e_tv")
    ARTIFACTS.mkdir(exist_ok=True)
    with tensorboard(DEMO, tmp / "cache", ARTIFACTS / "tensorboard_tv.log") as base:
        runs = wait_all_analysed(base)
        yield base, runs


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def requests_seen():
    return []


def trace_findings(base: str, run: dict) -> dict:
    (w,) = run["workers"]
    q = urlencode({"run": run["run"], "worker": w["worker"], "span": w["spans"][-1]["span"], "px": 100})
    body = get_json(f"{base}/data/plugin/llm_diag/trace_view?{q}", timeout=30)
    return {f["id"]: f for f in body["findings"]}  # type: ignore[index]


def painted(f):
    f.locator(".trace-body[data-painted]").wait_for(timeout=30_000)


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / name))  # the viewport: the finding and the trace it points at
    if os.environ.get("LLMDIAG_UPDATE_SCREENSHOT"):
        shutil.copy(ARTIFACTS / name, REPO / "docs" / name)


def tv_range(page) -> tuple[int, int]:
    a, b = plugin_hash(page)["t"].split("-")
    return int(a), int(b)


def test_seed_top_finding_shows_its_culprit(server, browser, requests_seen):
    base, runs = server
    run = next(r for r in runs if r["run"] == SEED)
    rep = report_of(base, run)
    top = rep["findings"][0]
    located = {**trace_findings(base, run), **{f["id"]: f for f in rep["findings"] if f.get("ranges")}}
    culprit = located[top["id"]]["culprit"]
    assert culprit, top["id"]
    ctx, page, errors = new_page(browser, requests_seen)
    page.set_viewport_size({"width": 1920, "height": 1200})  # wide: the trace sits beside the findings
    try:
        f = open_tab(page, base, f"#llm_diag&p.llm_diag.run={SEED}")
        wait_panel(f)
        painted(f)
        btn = f.locator(f".finding[data-id='{top['id']}'] .show-in-trace")
        btn.wait_for(state="visible")
        btn.click()
        f.locator(f".trace-body[data-highlight='{culprit}']").wait_for()
        page.wait_for_function("() => /p\\.llm_diag\\.t=/.test(location.hash)")
        f.locator(".tv-details:not([hidden])").wait_for()
        # the view is one of the evidence ranges (padded), the culprit is drawn outlined and selected
        page.wait_for_timeout(600)
        a, b = tv_range(page)
        longest = max(located[top["id"]]["ranges"], key=lambda r: r[1] - r[0])
        assert a <= longest[0] and longest[1] <= b and (b - a) <= 2 * (longest[1] - longest[0])
        f.locator(".trace-body:not([data-highlighted='0'])").wait_for()
        assert f.locator(".tv-details td").first.inner_text() == culprit
        shot(page, "traceview-seed.png")
        # the URL holds the range: a new page on that URL opens the same range
        url = page.url
        ctx2, page2, errors2 = new_page(browser, requests_seen)
        try:
            page2.goto(url)
            f2 = frame(page2)
            f2.locator(".trace-body[data-painted]").wait_for(timeout=30_000)
            page2.wait_for_timeout(400)
            assert tv_range(page2) == (a, b)
            assert not errors2, errors2
        finally:
            ctx2.close()
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()


def test_jax_recompile_is_one_click_away(server, browser, requests_seen):
    base, runs = server
    run = next(r for r in runs if r["run"] == XPLANE)
    rep = report_of(base, run)
    rec = next(x for x in rep["findings"] if x["id"] == "recompilation")
    assert rec["ranges"] and rec["culprit"]
    ctx, page, errors = new_page(browser, requests_seen)
    page.set_viewport_size({"width": 1920, "height": 1200})
    try:
        f = open_tab(page, base, f"#llm_diag&p.llm_diag.run={XPLANE}")
        wait_panel(f)
        painted(f)
        f.locator(".finding[data-id='recompilation'] .show-in-trace").click()
        f.locator(f".trace-body[data-highlight='{rec['culprit']}']").wait_for()
        f.locator(".trace-body:not([data-highlighted='0'])").wait_for()
        page.wait_for_timeout(600)
        a, b = tv_range(page)
        r = max(rec["ranges"], key=lambda x: x[1] - x[0])
        assert a <= r[0] and r[1] <= b
        shot(page, "traceview-jax.png")
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()


def test_zoom_pan_keys_search_hover_select(server, browser, requests_seen):
    base, runs = server
    ctx, page, errors = new_page(browser, requests_seen)
    page.set_viewport_size({"width": 1440, "height": 1400})
    try:
        f = open_tab(page, base, f"#llm_diag&p.llm_diag.run={SEED}")
        wait_panel(f)
        painted(f)
        canvas = f.locator(".tv-canvas")
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        assert box is not None
        x, y = box["x"] + box["width"] * 0.6, box["y"] + 60
        page.mouse.move(x, y)
        page.mouse.wheel(0, -600)  # zoom in at the cursor
        page.wait_for_function("() => /p\\.llm_diag\\.t=/.test(location.hash)")
        page.wait_for_timeout(500)
        a0, b0 = tv_range(page)
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x - 300, y, steps=5)  # drag left: later in time
        page.mouse.up()
        page.wait_for_timeout(500)
        a1, b1 = tv_range(page)
        assert a1 > a0 and abs((b1 - a1) - (b0 - a0)) <= 2
        canvas.focus()
        page.keyboard.press("w")
        page.keyboard.press("w")
        page.wait_for_timeout(500)
        a2, b2 = tv_range(page)
        assert (b2 - a2) < (b1 - a1)
        page.keyboard.press("a")
        page.wait_for_timeout(500)
        a3, _ = tv_range(page)
        assert a3 < a2
        page.keyboard.press("s")
        page.keyboard.press("d")
        page.wait_for_timeout(500)
        # search: the first match is selected and its name outlined
        f.locator(".tv-search").fill("aten::mm")
        f.locator(".tv-search").press("Enter")
        f.locator(".trace-body[data-highlight='aten::mm']").wait_for()
        f.locator(".tv-details:not([hidden])").wait_for()
        assert re.match(r"^\d[\d,]* events", f.locator(".tv-found").inner_text())
        assert f.locator(".tv-details td").first.inner_text() == "aten::mm"
        # hovering the selected op (the middle of the view, on some row) shows its name and duration
        page.wait_for_timeout(500)
        box = canvas.bounding_box()
        assert box is not None
        hx = box["x"] + 190 + (box["width"] - 190) * 0.5
        tips = []
        for dy in range(45, int(box["height"]) - 40, 8):
            page.mouse.move(hx, box["y"] + dy)
            t = f.locator(".tv-tip")
            if t.is_visible():
                tips.append(t.inner_text())
                if "aten::mm" in tips[-1]:
                    break
        assert tips and "aten::mm" in tips[-1] and re.search(r"\d (ns|µs|ms|s) · cpu_op", tips[-1]), tips[-3:]
        canvas.dblclick(position={"x": box["width"] * 0.5, "y": box["height"] - 8})  # the memory row: nothing to select
        page.wait_for_timeout(500)
        a4, b4 = tv_range(page)
        assert a4 == 0
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()


def test_tab_opens_on_the_run_with_most_to_gain(server, browser, requests_seen):
    base, runs = server
    listing = get_json(f"{base}/data/plugin/llm_diag/runs")["runs"]  # type: ignore[index]
    best = max((r for r in listing if r["saving_ns"] is not None), key=lambda r: r["saving_ns"])
    assert best["run"] != sorted(r["run"] for r in listing)[0], "the test means nothing if the best run is first anyway"
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base)
        wait_panel(f)
        assert plugin_hash(page)["run"] == best["run"]
        # the last viewed run wins next time
        other = next(r["run"] for r in listing if r["run"] != best["run"])
        f.locator("select.sel-run").select_option(other)
        wait_panel(f)
        page.wait_for_timeout(300)
        page2 = ctx.new_page()  # same browser profile (its localStorage), a fresh load of the plain tab URL
        f = open_tab(page2, base)
        wait_panel(f)
        assert plugin_hash(page2)["run"] == other
        assert not errors, errors
    finally:
        ctx.close()
