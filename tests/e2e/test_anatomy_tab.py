"""The tab's "Step anatomy" view (issue #37 item 6) in a real TensorBoard driven through Debian Chromium.

On a copy of the seed run (a real H100 LoRA capture) and the JAX run: the stacked bar holds one series per part of
the report's ``metrics.anatomy`` with its per-step times, a hovered bar reads each part's time in that step; the
table's rows are the parts in order of time with their time per step, share, TFLOP/s, efficiency and evidence as
the JSON has them (formatted here by a formatter written for this test, not the tab's); a part's "Show in trace"
zooms the trace view to the run of that part's kernels holding most of its time and selects its longest kernel
there, a kernel of the raw trace; the dark theme draws the table in the dark palette; an XLA run says it has no model parts and why.
Pictures: test-artifacts/views/anatomy-1440(-dark).png (docs/views/ with LLMDIAG_UPDATE_SCREENSHOT=1).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from urllib.parse import urlencode

import pytest

from tbserver import CHROMIUM, CHROMIUM_ARGS, REPO, get_json, tensorboard, wait_all_analysed
from test_tab import DEMO, SEED, XPLANE, new_page, no_foreign, open_tab, plugin_hash, report_of, wait_panel

pytestmark = pytest.mark.e2e
ARTIFACTS = REPO / "test-artifacts"
SECTION = ".panel-section.anatomy"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("playwright")
    tmp = tmp_path_factory.mktemp("e2e_anatomy")
    logdir = tmp / "logs"
    for run in (SEED, XPLANE):
        shutil.copytree(DEMO / run, logdir / run)
    ARTIFACTS.mkdir(exist_ok=True)
    with tensorboard(logdir, tmp / "cache", ARTIFACTS / "tensorboard_anatomy.log") as base:
        runs = wait_all_analysed(base)
        yield base, runs, logdir


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


# ---- an independent formatter: the tab's conventions (format.js) written out again


def _sig(x: float) -> str:
    a = abs(x)
    if a >= 100:
        return str(int(round(x)))
    v = round(x, 1 if a >= 10 else 2)
    return f"{v:g}" if v != int(v) else str(int(v))


def _ns(v: float) -> str:
    a = abs(v)
    if a < 1e3:
        return f"{int(round(v))} ns"
    for scale, unit in ((1e3, "µs"), (1e6, "ms"), (1e9, "s")):
        if a < scale * 1e3 or unit == "s":
            return f"{_sig(v / scale)} {unit}"
    raise AssertionError


def _share(x: float | None) -> str:
    if x is None:
        return "—"
    return "<0.1 %" if 0 < x * 100 < 0.1 else f"{x * 100:.1f} %"


def _tflops(x: float | None) -> str:
    if x is None:
        return "—"
    v, i = x * 1e12, 0
    while abs(v) >= 1000 and i < 6:
        v, i = v / 1000, i + 1
    return f"{_sig(v)} {['', 'k', 'M', 'G', 'T', 'P', 'E'][i]}FLOP/s"


def _words(name: str, words: dict[str, str]) -> str:
    """A part or evidence level in the registry's words (``value_labels``)."""
    kind, sep, rest = name.partition(":")
    return f"{words.get(kind, kind)} {rest}" if sep else words.get(kind, kind)


def _order(parts: dict) -> list[str]:
    named = sorted((p for p in parts if p != "other"), key=lambda p: -parts[p]["time_ns"])
    return named + (["other"] if "other" in parts else [])


def _kernels_of_raw_trace(logdir) -> dict[str, list[tuple[float, float]]]:
    """Kernel name -> [(ts_us, dur_us)] read from the seed's file with the json module (no product code)."""
    (path,) = (logdir / SEED).glob("*.pt.trace.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    out: dict[str, list[tuple[int, int]]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel":
            out.setdefault(e["name"], []).append((e["ts"], e["dur"]))
    return out


def _shot(page, section, name: str) -> None:
    """The view alone at 1440 px: test-artifacts/views/; docs/views/ with LLMDIAG_UPDATE_SCREENSHOT=1."""
    page.set_viewport_size({"width": 1440, "height": 1400})
    section.locator(".uplot").wait_for()
    page.wait_for_timeout(400)
    (ARTIFACTS / "views").mkdir(parents=True, exist_ok=True)
    section.screenshot(path=str(ARTIFACTS / "views" / name))
    if os.environ.get("LLMDIAG_UPDATE_SCREENSHOT") == "1":
        shutil.copy(ARTIFACTS / "views" / name, REPO / "docs" / "views" / name)


def _open(browser, requests_seen, base: str, run: str, dark: bool = False):
    ctx, page, errors = new_page(browser, requests_seen, dark=dark)
    page.set_viewport_size({"width": 1600, "height": 1400})
    f = open_tab(page, base, f"#llm_diag&p.llm_diag.run={run}")
    wait_panel(f)
    return ctx, page, errors, f


def test_bar_and_table_are_the_reports_anatomy(server, browser, requests_seen):
    base, runs, _ = server
    rep = report_of(base, next(r for r in runs if r["run"] == SEED))
    a = rep["metrics"]["anatomy"]
    order = _order(a["parts"])
    doc = get_json(f"{base}/data/plugin/llm_diag/metric_registry", timeout=30)
    registry, words = {m["key"]: m for m in doc["metrics"]}, doc["value_labels"]
    ctx, page, errors, f = _open(browser, requests_seen, base, SEED)
    try:
        sec = f.locator(SECTION)
        sec.locator(".uplot").wait_for(timeout=30_000)
        sec.scroll_into_view_if_needed()
        # the bar: one series per part, in the table's order, each with its per-step times
        legend = sec.locator(".anatomy-legend .lg")
        assert legend.evaluate_all("els => els.map(e => e.dataset.part)") == order
        assert legend.all_inner_texts() == [_words(p, words) for p in order]
        got = legend.evaluate_all("els => els.map(e => JSON.parse(e.dataset.stepTimes))")
        assert got == [a["parts"][p]["step_time_ns"] for p in order]
        assert [sum(v) for v in got] == pytest.approx([a["parts"][p]["time_ns"] for p in order], abs=a["steps"])
        # hovering the first step's bar reads each part's time in that step
        over = sec.locator(".u-over")
        box = over.bounding_box()
        assert box is not None
        n = len(a["step_index"])
        page.mouse.move(box["x"] + box["width"] * 0.5 / n, box["y"] + box["height"] - 4)
        total = sum(a["parts"][p]["step_time_ns"][0] for p in order)
        step_label = registry["anatomy.step_index[]"]["label"]
        want = f"{step_label} #{a['step_index'][0]} · {_ns(total)}: " + " · ".join(
            f"{_words(p, words)} {_ns(a['parts'][p]['step_time_ns'][0])}"
            for p in order
            if a["parts"][p]["step_time_ns"][0] > 0
        )
        sec.locator(".anatomy-readout", has_text=want).wait_for(timeout=5_000)
        # the table: the parts in the same order, every figure as the JSON has it
        rows = sec.locator(".anatomy-table tbody tr")
        assert rows.evaluate_all("els => els.map(e => e.dataset.part)") == order
        assert rows.evaluate_all("els => els.map(e => Number(e.dataset.timeNs))") == [a["parts"][p]["time_ns"] for p in order]
        heads = sec.locator(".anatomy-table thead th").all_inner_texts()
        keys = ("per_step_time_ns", "share", "achieved_tflops", "efficiency_share", "identified_by")
        assert heads[1:6] == [registry[f"anatomy.parts.*.{k}"]["label"] for k in keys]
        for p in order:
            fig = a["parts"][p]
            cells = sec.locator(f".anatomy-table tr[data-part='{p}'] td")
            texts = cells.all_inner_texts()
            by = fig["identified_by"]
            ident = "—" if by is None else f"{_words(by, words)} ({_share(fig['identified_share'])})"
            assert texts[0].splitlines()[0] == _words(p, words)
            assert texts[1:6] == [
                _ns(fig["per_step_time_ns"]),
                _share(fig["share"]),
                _tflops(fig["achieved_tflops"]),
                _share(fig["efficiency_share"]),
                ident,
            ], p
            if fig["efficiency_share"] is None:
                title = sec.locator(f"tr[data-part='{p}'] td[data-key='efficiency_share']").get_attribute("title")
                assert title == fig["efficiency_withheld"]
        other_ops = sec.locator("tr[data-part='other'] .part-ops").inner_text()
        assert other_ops == " · ".join(f"{o['name']} {_ns(o['time_ns'])}" for o in a["parts"]["other"]["top_ops"])
        _shot(page, sec, "anatomy-1440.png")
        # at 1024 px nothing overflows sideways (long operator names wrap)
        page.set_viewport_size({"width": 1024, "height": 768})
        page.wait_for_timeout(500)
        assert f.locator("body").evaluate("b => b.scrollWidth - b.clientWidth") <= 1
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()


def test_a_part_opens_the_trace_view_on_its_kernels(server, browser, requests_seen):
    base, runs, logdir = server
    run = next(r for r in runs if r["run"] == SEED)
    rep = report_of(base, run)
    (w,) = run["workers"]
    q = urlencode({"run": SEED, "worker": w["worker"], "span": w["spans"][-1]["span"], "px": 100})
    located = {p["part"]: p for p in get_json(f"{base}/data/plugin/llm_diag/trace_view?{q}", timeout=30)["parts"]}
    # every part with time is located, `other` included
    assert set(located) == {p for p, fig in rep["metrics"]["anatomy"]["parts"].items() if fig["time_ns"] > 0}
    part = "attention"
    loc = located[part]
    kernels = _kernels_of_raw_trace(logdir)
    assert loc["culprit"] in kernels  # a kernel of the raw trace
    ctx, page, errors, f = _open(browser, requests_seen, base, SEED)
    try:
        f.locator(".trace-body[data-painted]").wait_for(timeout=30_000)
        btn = f.locator(f"{SECTION} .show-part[data-part='{part}']")
        btn.wait_for(state="visible")
        btn.click()
        f.locator(f".trace-body[data-part='{part}']").wait_for()
        f.locator(f".trace-body[data-highlight='{loc['culprit']}']").wait_for()
        page.wait_for_function("() => /p\\.llm_diag\\.t=/.test(location.hash)")
        f.locator(".tv-details:not([hidden])").wait_for()
        page.wait_for_timeout(600)
        lo, hi = (int(x) for x in plugin_hash(page)["t"].split("-"))
        focus = loc["focus"]
        assert focus in loc["ranges"]
        assert lo <= focus[0] and focus[1] <= hi and (hi - lo) <= 2 * (focus[1] - focus[0]) + 10_000
        # the selected kernel is an attention kernel of the raw trace by that name (us there, ns here)
        duration = f.locator(".tv-details tr", has_text="Duration").locator("td").inner_text()
        assert duration in {_ns(dur * 1000) for _, dur in kernels[loc["culprit"]]}
        assert f.locator(".tv-details tr", has_text="Category").locator("td").inner_text() == "attention (kernel)"
        f.locator(".trace-body:not([data-highlighted='0'])").wait_for()
        assert f.locator(".tv-details td").first.inner_text() == loc["culprit"]
        page.screenshot(path=str(ARTIFACTS / "anatomy-show-part.png"))
        assert not errors, errors
    finally:
        ctx.close()


def test_dark_theme_and_an_xla_run(server, browser, requests_seen):
    base, runs, _ = server
    colours = {}
    for dark in (False, True):
        ctx, page, errors, f = _open(browser, requests_seen, base, SEED, dark=dark)
        try:
            cell = f.locator(f"{SECTION} .anatomy-table td.num").first
            cell.wait_for()
            colours[dark] = cell.evaluate("e => getComputedStyle(e).color")
            if dark:
                _shot(page, f.locator(SECTION), "anatomy-1440-dark.png")
            assert not errors, errors
        finally:
            ctx.close()
    lum = {d: sum(int(x) for x in c[c.index("(") + 1 : c.index(")")].split(",")[:3]) for d, c in colours.items()}
    assert lum[True] > 3 * 160 > lum[False], colours  # light text on the dark theme, dark text on the light one
    ctx, page, errors, f = _open(browser, requests_seen, base, XPLANE)
    try:
        note = f.locator(f"{SECTION} p.muted")
        note.wait_for()
        assert note.inner_text() == (
            "No model parts for this run: the model's parts are read from PyTorch (Kineto) traces' host call chains; "
            "this is an XLA trace."
        )
        assert f.locator(f"{SECTION} .anatomy-table").count() == 0
        assert not errors, errors
    finally:
        ctx.close()
