"""First paint of the LLM Diag tab on a logdir of 20 runs, analysis results already cached.

Builds bench/data/first_paint_logdir/ with 20 runs, each a copy of one of the demo runs (demo_logs/: the
seed and fixed LoRA Kineto traces, 7.1 and 5.0 MB gzipped, and the JAX XPlane run, in turn), starts a real ``tensorboard --logdir`` on it, waits
until every run is analysed (so the cache is warm), then opens TensorBoard at the tab in fresh
Chromium contexts (cold browser cache each time) and times:

- tab first paint: from the moment TensorBoard creates the tab's iframe (its navigation start) to the tab
  marking ``llmdiag-first-paint`` (headline cards and findings drawn for the selected run). This is
  the part the plugin controls, and what the < 1.5 s target is judged on;
- TensorBoard boot: from the top page's navigation start to the iframe's creation (TensorBoard's own
  6 MB bundle and its first requests; the same with or without this plugin);
- total: the sum, as a user who opens the URL sees it.

Usage: python bench/tab_first_paint.py [--runs 20] [--repeat 7]

Last measured (2026-11-22, this dev machine, 20 demo-run copies, 87.4 MB of traces, cache warm): tab first
paint median 0.333 s (min 0.241, max 0.394) over 7 loads; TensorBoard boot before the iframe 1.925 s;
total from opening the URL 2.258 s. Target < 1.5 s: PASS.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO / "tests"))

from tbserver import CHROMIUM, CHROMIUM_ARGS, IFRAME, tensorboard, wait_all_analysed  # noqa: E402

TARGET_S = 1.5


def source_runs() -> list[Path]:
    """The demo runs (folders of demo_logs/ holding a trace), in name order."""
    demo = REPO / "demo_logs"
    runs = sorted(d for d in demo.iterdir() if d.is_dir() and any(
        p.name.endswith((".pt.trace.json", ".pt.trace.json.gz", ".xplane.pb")) for p in d.rglob("*")))
    return runs


def build_logdir(root: Path, n_runs: int) -> Path:
    srcs = source_runs()
    if not srcs:
        raise SystemExit("no demo runs in demo_logs/ to build the logdir from")
    logdir = root / "first_paint_logdir"
    if logdir.exists():
        shutil.rmtree(logdir)
    logdir.mkdir(parents=True)
    for i in range(n_runs):
        src = srcs[i % len(srcs)]
        shutil.copytree(src, logdir / f"run_{i:02d}_{src.name}")
    return logdir


def measure(base: str, repeat: int) -> list[tuple[float, float]]:
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for _ in range(repeat + 1):  # the first visit warms TensorBoard's own Python side; not counted
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = ctx.new_page()
            page.goto(f"{base}/#llm_diag")
            frame_el = page.wait_for_selector(IFRAME, timeout=60_000)
            frame = frame_el.content_frame()
            assert frame is not None
            frame.wait_for_selector("body[data-first-paint]", timeout=60_000)
            top_origin = page.evaluate("performance.timeOrigin")
            mark, frame_origin = frame.evaluate(
                "[performance.getEntriesByName('llmdiag-first-paint')[0].startTime, performance.timeOrigin]")
            out.append(((frame_origin - top_origin) / 1000.0, mark / 1000.0))
            ctx.close()
        browser.close()
    return out[1:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    data = REPO / "bench" / "data"
    data.mkdir(parents=True, exist_ok=True)
    logdir = build_logdir(data, args.runs)
    size = sum(p.stat().st_size for p in logdir.rglob("*") if p.is_file())
    cache = data / "first_paint_cache"
    with tensorboard(logdir, cache, data / "first_paint_tensorboard.log") as base:
        t0 = time.perf_counter()
        runs = wait_all_analysed(base, timeout=1800)
        warm_s = time.perf_counter() - t0
        ready = sum(r["status"] == "ready" for r in runs)
        times = measure(base, args.repeat)
    boot = [b for b, _ in times]
    tab = [t for _, t in times]
    total = [b + t for b, t in times]
    med = statistics.median(tab)
    print(f"logdir: {args.runs} runs, {size / 1e6:.1f} MB of traces ({ready} ready); analysis to warm the cache took {warm_s:.1f} s")
    print(f"{len(tab)} loads, each in a fresh browser context (cold browser cache), results cached on disk:")
    print(f"  tab first paint (iframe created -> cards+findings drawn): median {med:.3f} s "
          f"(min {min(tab):.3f}, max {max(tab):.3f})")
    print(f"  TensorBoard boot before it creates the iframe:           median {statistics.median(boot):.3f} s")
    print(f"  total from opening the URL:                              median {statistics.median(total):.3f} s")
    print(f"target: tab first paint < {TARGET_S} s: {'PASS' if med < TARGET_S else 'FAIL'}")
    return 0 if med < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
