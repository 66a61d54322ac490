"""The tab's compare mode in a real TensorBoard and Debian Chromium: the fixed demo run against the seed run as
its baseline, deep-linked through the URL hash. What the page shows is held to ``api.compare`` of the
two reports the server serves. The screenshot goes to test-artifacts/ and, with LLMDIAG_UPDATE_SCREENSHOT=1,
to docs/screenshot-compare.png."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest

from ratetext import duration, per_s, share
from tb_llmdiag import api
from tbserver import CHROMIUM, REPO, get_json, tensorboard, wait_all_analysed
from test_tab import (ARTIFACTS, browser, new_page, no_foreign, open_tab, plugin_hash,  # noqa: F401
                      requests_seen, wait_panel)

pytestmark = pytest.mark.e2e
SEED = "seed_lora_qwen1.5b"
FIXED = "fixed_lora_qwen1.5b"
HASH = (f"#llm_diag&p.llm_diag.run={FIXED}&p.llm_diag.worker=rank0&p.llm_diag.span=1"
        f"&p.llm_diag.base_run={SEED}&p.llm_diag.base_worker=rank0&p.llm_diag.base_span=1")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """TensorBoard on a logdir of the two demo runs compared (copied: the test never writes into demo_logs)."""
    pytest.importorskip("playwright")
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is not installed (apt-get install -y chromium); scripts/test.sh installs it")
    tmp = tmp_path_factory.mktemp("e2e_compare")
    for run in (SEED, FIXED):
        shutil.copytree(REPO / "demo_logs" / run, tmp / "logs" / run)
    ARTIFACTS.mkdir(exist_ok=True)
    with tensorboard(tmp / "logs", tmp / "cache", ARTIFACTS / "tensorboard_compare.log") as base:
        runs = wait_all_analysed(base)
        assert sorted(r["run"] for r in runs) == sorted((SEED, FIXED)) and all(r["status"] == "ready" for r in runs)
        yield base, runs


def served_report(base: str, run: str) -> dict:
    body = get_json(f"{base}/data/plugin/llm_diag/report?{urlencode({'run': run, 'worker': 'rank0', 'span': '1'})}", timeout=30)
    assert isinstance(body, dict) and body["status"] == "ok"
    return body


def test_compare_mode_deep_link_cards_findings_and_overlay(server, browser, requests_seen):  # noqa: F811
    base, _ = server
    doc = api.compare(served_report(base, SEED), served_report(base, FIXED))
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base, HASH)
        wait_panel(f)
        f.locator(".compare-verdict").wait_for(timeout=30_000)
        assert f.locator(".compare-verdict").inner_text() == doc["verdict"]
        assert doc["verdict"].startswith("AFTER is 4.9x faster in tokens/s")
        assert f.locator("select.sel-base").input_value() == f'["{SEED}","rank0","1"]'
        # cards: this run's value, the baseline's and the change, for each card row both sides have
        rows = {r["key"]: r for r in doc["metrics"]}
        keys = f.locator(".compare-cards .card").evaluate_all("els => els.map(e => e.dataset.key)")
        assert keys == [k for k in ("headline.tokens_per_s", "work.ns_per_token", "headline.step_median_ns",
                                    "headline.gpu_busy_share", "headline.mfu_share") if k in rows]
        tps = f.locator(".compare-cards .card[data-key='headline.tokens_per_s']")
        assert tps.locator(".card-sub").inner_text().startswith("baseline ")
        assert f"{100 * rows['headline.tokens_per_s']['change']:.1f} %" in tps.locator(".card-sub").inner_text()
        assert "good" in (tps.get_attribute("class") or "")
        assert "not compared" in f.locator(".compare-cards .card[data-key='headline.step_median_ns'] .card-sub").inner_text()
        # the finding diff, in the document's order
        for kind in ("resolved", "new", "changed", "unchanged"):
            ids = f.locator(f".fd.{kind} .fd-item").evaluate_all("els => els.map(e => e.dataset.id)")
            assert ids == [x["id"] for x in doc["findings"][kind]], kind
        # every metric row, and the per-step times of both runs overlaid
        assert f.locator(".compare-table tbody tr").count() == len(doc["metrics"])
        f.locator(".compare-chart canvas").first.wait_for()
        assert f.locator(".compare .legend").inner_text().count("baseline") == 1
        shot = ARTIFACTS / "screenshot-compare.png"
        f.locator(".compare").screenshot(path=str(shot))
        if os.environ.get("LLMDIAG_UPDATE_SCREENSHOT") == "1":
            shutil.copy(shot, REPO / "docs" / "screenshot-compare.png")
        # leaving compare mode drops the baseline from the hash; choosing one puts it back
        f.locator("select.sel-base").select_option("")
        f.locator(".panel-section.compare[hidden]").wait_for(state="attached")
        assert "base_run" not in plugin_hash(page)
        f.locator("select.sel-base").select_option(f'["{SEED}","rank0","1"]')
        f.locator(".compare-verdict").wait_for()
        assert plugin_hash(page)["base_run"] == SEED and plugin_hash(page)["run"] == FIXED
        assert not errors, errors
        assert not no_foreign(requests_seen), no_foreign(requests_seen)
    finally:
        ctx.close()


def _compare_cli(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "tb_llmdiag", "compare", str(REPO / "demo_logs" / SEED),
                          str(REPO / "demo_logs" / FIXED), *args], capture_output=True, text=True, cwd=REPO,
                         timeout=180, check=True)
    return out.stdout


def _table_cells(text: str, label: str) -> list[str]:
    """The cells of the CLI compare table's row ``label`` (columns are two or more spaces apart)."""
    row = next(ln for ln in text.splitlines() if ln.startswith(f"  {label}  "))
    return re.split(r"\s{2,}", row.strip())


def test_compare_figures_read_the_same_in_cards_verdict_cli_and_json(server, browser, requests_seen):  # noqa: F811
    """#25, the compare view: tokens/s and the median step of both sides, and the bottleneck's share of the step
    before and after (the verdict's figures), read the same in the tab's cards, table, verdict and finding diff,
    in `llmdiag compare` text and Markdown; the expected text is the ``--json`` numbers formatted by
    tests/ratetext.py, which shares no code with the product."""
    base, _ = server
    doc = json.loads(_compare_cli("--json"))
    text, md = _compare_cli(), _compare_cli("--format", "md")
    rows = {r["key"]: r for r in doc["metrics"]}
    tps, step = rows["headline.tokens_per_s"], rows["headline.step_median_ns"]
    want = {"tokens/s": (per_s(tps["before"]), per_s(tps["after"])),
            "median step": (duration(step["before"]), duration(step["after"]))}
    # on the median step, as the step beside it: 1,320 / 575 ms and 4,096 / 365 ms (the mean steps' 1954/s, 11.6 k/s
    # were the figures of #25)
    assert want == {"tokens/s": ("2296/s", "11.2 k/s"), "median step": ("575 ms", "365 ms")}
    bn = doc["bottleneck"]
    assert bn["before"]["id"] == bn["after"]["id"]
    was, now = share(bn["before"]["share"]), share(bn["after"]["share"])
    verdict = doc["verdict"]
    assert (f"({want['tokens/s'][0]} -> {want['tokens/s'][1]}; step {want['median step'][0]} -> "
            f"{want['median step'][1]} at ") in verdict
    of_step = "of the step without the profiler" if bn["after"]["step_basis"] == "without_profiler" else "of the step"
    assert f"now {now} {of_step} (was {was})." in verdict
    # the CLI: the same verdict, and the table's rows in the same text (Markdown: bold verdict, pipe rows)
    assert verdict in text.splitlines() and f"**{verdict}**" in md.splitlines()
    for label, (b, a) in want.items():
        assert _table_cells(text, label)[1:3] == [b, a], label
        assert f"| {label} | {b} | {a} |" in md, label
    changed = next(f for f in doc["findings"]["changed"] if f["id"] == bn["after"]["id"])
    assert (share(changed["saving_share_before"]), share(changed["saving_share_after"])) == (was, now)
    assert f'changed: "{changed["title"]}" {was} -> {now}' in text
    # the tab: the same verdict, the cards and the table's cells, the changed finding's shares
    ctx, page, errors = new_page(browser, requests_seen)
    try:
        f = open_tab(page, base, HASH)
        wait_panel(f)
        f.locator(".compare-verdict").wait_for(timeout=30_000)
        assert f.locator(".compare-verdict").inner_text() == verdict
        for key, label in (("headline.tokens_per_s", "tokens/s"), ("headline.step_median_ns", "median step")):
            b, a = want[label]
            card = f.locator(f".compare-cards .card[data-key='{key}']")
            assert card.locator(".card-value").inner_text() == a, key
            assert card.locator(".card-sub").inner_text().startswith(f"baseline {b} · "), key
            cells = f.locator(f".compare-table tr[data-key='{key}'] td").all_inner_texts()
            assert cells[1:3] == [b, a], key
        item = f.locator(f".fd.changed .fd-item[data-id='{changed['id']}']").inner_text()
        assert item.startswith(f"{changed['title']} {was} → {now}")
        assert not errors, errors
    finally:
        ctx.close()
