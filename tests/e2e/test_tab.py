"""The LLM Diag tab in a real TensorBoard, driven through Debian Chromium with Playwright (issue #4).

Logdir: ``demo_logs/`` (the project's own LoRA captures). While it holds no trace yet, the shared
real Kineto traces stand in, so the tab is still tested end to end. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tbserver import CHROMIUM, CHROMIUM_ARGS, IFRAME, REPO, tensorboard, wait_all_analysed

pytestmark = pytest.mark.e2e
ARTIFACTS = REPO / "test-artifacts"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
RESNET_E2E = "kineto_resnet50/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"


def _logdir(tmp: Path) -> Path:
    demo = REPO / "demo_logs"
    if any(demo.rglob("*.pt.trace.json*")) or any(demo.rglob("*.xplane.pb")):
        return demo
    from tracepaths import shared_trace

    logdir = tmp / "logs"
    for run in ("resnet50_num_workers_0", "resnet50_num_workers_4"):
        shutil.copytree(shared_trace(f"kineto_resnet50/{run}"), logdir / run)
    return logdir


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("playwright")
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is not installed (apt-get install -y chromium); scripts/test.sh installs it")
    tmp = tmp_path_factory.mktemp("e2e")
    logdir = _logdir(tmp)
    ARTIFACTS.mkdir(exist_ok=True)
    with tensorboard(logdir, tmp / "cache", ARTIFACTS / "tensorboard.log") as base:
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


def new_page(browser, requests_seen, dark: bool = False):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1600}, color_scheme="dark" if dark else "light")

    def guard(route):
        requests_seen.append(route.request.url)
        host = urlparse(route.request.url).hostname
        if route.request.url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
            route.continue_()
        else:
            route.abort()  # recorded above; the test asserts none happened

    ctx.route("**/*", guard)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    return ctx, page, errors


def frame(page):
    return page.frame_locator(IFRAME)


def open_tab(page, base: str, hash_: str = "#llm_diag"):
    page.goto(f"{base}/{hash_}")
    page.get_by_text("LLM Diag", exact=True).first.wait_for()
    f = frame(page)
    f.locator("body[data-first-paint]").wait_for(timeout=30_000)
    return f


def wait_panel(f):
    f.locator(".panel:not([hidden]) .cards .card").first.wait_for(timeout=30_000)
    f.locator(".finding, .nofindings").first.wait_for(timeout=30_000)


def plugin_hash(page) -> dict[str, str]:
    from urllib.parse import unquote

    h = page.evaluate("window.location.hash")
    return {unquote(k)[len("p.llm_diag."):]: unquote(v) for k, v in re.findall(r"(p\.llm_diag\.[^=&]+)=([^&]*)", h)}


def no_foreign(requests_seen: list[str]) -> list[str]:
    return [u for u in requests_seen if not u.startswith(("data:", "blob:")) and urlparse(u).hostname not in LOCAL_HOSTS]


def test_tab_appears_and_findings_render_for_each_run(server, browser, requests_seen):
    base, runs = server
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base)
        ready = [r for r in runs if r["status"] == "ready"]
        assert ready, runs
        for r in runs:
            f.locator("select.sel-run").select_option(r["run"])
            if r["status"] == "error":
                f.locator(".state.error .errmsg").wait_for()
                continue
            wait_panel(f)
            assert f.locator(".card-label").first.inner_text() == "Step time (median)"
            n_find = f.locator(".finding").count()
            assert n_find >= 1 or f.locator(".nofindings").count() == 1
            if n_find:
                assert f.locator(".finding .finding-title").first.inner_text().strip()
                assert f.locator(".finding .saving").first.inner_text().strip()
            f.locator(".tl-canvas").wait_for()
            f.locator(".hbar").first.wait_for()
            assert plugin_hash(page)["run"] == r["run"]
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", r["run"])
            page.screenshot(path=str(ARTIFACTS / f"tab_{safe}.png"), full_page=True)
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()


def test_selection_updates_panel_and_hash_and_deep_link_reopens_it(server, browser, requests_seen):
    base, runs = server
    ready = [r for r in runs if r["status"] == "ready"]
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base)
        wait_panel(f)
        target = ready[-1]["run"]
        f.locator("select.sel-run").select_option(target)
        wait_panel(f)
        page.wait_for_function(f"decodeURIComponent(location.hash).includes('p.llm_diag.run={target}')")
        # choose another step in the timeline: it goes into the hash too
        opts = f.locator("select.step-select option")
        step = opts.nth(opts.count() - 1).get_attribute("value")
        f.locator("select.step-select").select_option(step)
        page.wait_for_function(f"location.hash.includes('p.llm_diag.step={step}')")
        state = plugin_hash(page)
        assert state["run"] == target and state["step"] == step
        title = f.locator(".finding .finding-title").first.inner_text() if f.locator(".finding").count() else None
        url = page.url
    finally:
        ctx.close()
    # a fresh browser context opening the link shows the same run, span and step
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        page.goto(url)
        f = frame(page)
        wait_panel(f)
        assert f.locator("select.sel-run").input_value() == target
        assert f.locator("select.sel-span").input_value() == state["span"]
        f.locator(".tl-canvas").wait_for()
        assert f.locator("select.step-select").input_value() == step
        if title is not None:
            assert f.locator(".finding .finding-title").first.inner_text() == title
        page.screenshot(path=str(ARTIFACTS / "deep_link.png"), full_page=True)
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()


def test_dark_mode_follows_tensorboard(server, browser, requests_seen):
    base, _ = server
    ctx, page, errors = new_page(browser, requests_seen, dark=True)
    try:
        f = open_tab(page, base)
        wait_panel(f)
        assert page.evaluate("document.body.classList.contains('dark-mode')")
        assert f.locator("html.dark").count() == 1
        bg = f.locator("body").evaluate("e => getComputedStyle(e).backgroundColor")
        r, g, b = (int(x) for x in re.findall(r"\d+", bg)[:3])
        assert max(r, g, b) < 80, bg
        f.locator(".tl-canvas").wait_for()
        page.screenshot(path=str(ARTIFACTS / "tab_dark.png"), full_page=True)
        # switching TensorBoard back to light re-themes the open tab without a reload
        page.evaluate("document.body.classList.remove('dark-mode')")
        f.locator("html:not(.dark)").wait_for()
        assert not errors, errors
    finally:
        ctx.close()


def test_copy_fix_and_trace_download_stay_local(server, browser, requests_seen):
    base, _ = server
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base)
        wait_panel(f)
        href = f.locator("a.btn", has_text="Download trace").get_attribute("href")
        assert href and href.startswith("./trace?")
        with page.expect_download() as dl:
            f.locator("a.btn", has_text="Download trace").click()
        assert dl.value.suggested_filename.endswith((".json.gz", ".json", ".pb"))
        if f.locator(".finding .copy").count():
            f.locator(".finding .copy").first.click()
            f.locator(".finding .copy", has_text=re.compile("Copied|Select and copy")).first.wait_for()
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()


def test_zz_readme_screenshot(server, browser, requests_seen):
    """The README's picture: saved to test-artifacts/; copied to docs/screenshot.png with LLMDIAG_UPDATE_SCREENSHOT=1."""
    base, runs = server
    ready = [r for r in runs if r["status"] == "ready"]
    ctx, page, _ = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base, f"#llm_diag&p.llm_diag.run={ready[0]['run']}")
        wait_panel(f)
        f.locator(".tl-canvas").wait_for()
        page.wait_for_timeout(500)
        shot = ARTIFACTS / "screenshot.png"
        page.screenshot(path=str(shot), full_page=False)
        if os.environ.get("LLMDIAG_UPDATE_SCREENSHOT") == "1":
            shutil.copy(shot, REPO / "docs" / "screenshot.png")
    finally:
        ctx.close()


def test_empty_logdir_says_how_to_capture_then_a_new_trace_appears_live(tmp_path, browser, requests_seen):
    from tracepaths import shared_trace

    logdir = tmp_path / "logs"
    logdir.mkdir()
    with tensorboard(logdir, tmp_path / "cache", ARTIFACTS / "tensorboard_empty.log") as base:
        ctx, page, errors = new_page(browser, requests_seen)
        try:
            page.goto(f"{base}/#llm_diag")
            f = frame(page)
            f.locator(".state.empty").wait_for(timeout=30_000)
            assert "No profiler runs found" in f.locator(".state.empty h2").inner_text()
            assert "prof.step()" in f.locator(".state.empty pre").first.inner_text()
            page.screenshot(path=str(ARTIFACTS / "tab_empty.png"), full_page=True)
            # a trace written while TensorBoard runs shows up without a restart or a reload
            run = logdir / "late_run"
            run.mkdir()
            src = shared_trace(RESNET_E2E)
            shutil.copy(src, run / src.name)
            wait_panel_timeout = 90_000
            f.locator(".panel:not([hidden]) .cards .card").first.wait_for(timeout=wait_panel_timeout)
            assert f.locator("select.sel-run").input_value() == "late_run"
            assert not errors, errors
            assert not no_foreign(requests_seen), no_foreign(requests_seen)
        finally:
            ctx.close()
