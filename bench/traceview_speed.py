"""The trace view on a 1 GB trace: first paint, zoom/pan answers, JS heap and panning frame rate.

Builds (once) a ~1 GB Kineto trace with ``bench/make_big_trace.py`` (the 6-step LoRA trace repeated in time),
starts a real ``tensorboard --logdir`` on it with a persistent cache directory, waits until it is analysed
(the report and the trace-view index are cached), then in Debian Chromium at a 1440 px wide window:

- first paint: from the first ``/trace_view`` request's start to the view marking ``llmdiag-traceview-paint``
  (the lanes drawn), the report already cached; and from the iframe's navigation start;
- zoom/pan answers: 40 ``/trace_view`` requests for views a wheel zoom or pan makes (1 ms to the whole
  window), timed in the browser (request start to response end, Resource Timing) and on the server (the
  route's work: the cached index queried in this process, memory-mapped like TensorBoard does);
- JS heap: Chromium's ``JSHeapUsedSize`` (DevTools Performance metrics) after all of the above;
- panning: a drag of the canvas driven once per animation frame for 3 s; frames drawn per second.
Every request the page makes is checked to go to 127.0.0.1.

Usage: python bench/traceview_speed.py [--gb 1.0] [--work bench/data]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode, urlparse

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from tbserver import CHROMIUM, CHROMIUM_ARGS, IFRAME, get_json, tensorboard, wait_all_analysed  # noqa: E402

TARGETS = {"first_paint_s": 1.0, "answer_ms": 100.0, "heap_mb": 300.0, "pan_fps": 50.0}

PAN_JS = """async () => {
  const doc = document;  // run in the tab's iframe
  const canvas = doc.querySelector('.tv-canvas');
  const el = doc.querySelector('.trace-body');
  const r = canvas.getBoundingClientRect();
  const y = r.top + 60;
  let x = r.left + r.width * 0.8;
  const win = doc.defaultView;
  canvas.dispatchEvent(new win.MouseEvent('mousedown', { clientX: x, clientY: y, bubbles: true }));
  const f0 = Number(el.dataset.frames || 0);
  const d0 = Number(el.dataset.drawMs || 0);
  const t0 = performance.now();
  const times = [];
  await new Promise((done) => {
    const step = (t) => {
      times.push(t);
      x -= 3;
      canvas.dispatchEvent(new win.MouseEvent('mousemove', { clientX: x, clientY: y, bubbles: true }));
      if (performance.now() - t0 < 3000) requestAnimationFrame(step); else done();
    };
    requestAnimationFrame(step);
  });
  win.dispatchEvent(new win.MouseEvent('mouseup', { clientX: x, clientY: y, bubbles: true }));
  const dt = (performance.now() - t0) / 1000;
  const gaps = times.slice(1).map((t, i) => t - times[i]).sort((a, b) => a - b);
  const frames = Number(el.dataset.frames || 0) - f0;
  return { frames, seconds: dt, p95_frame_ms: gaps[Math.floor(gaps.length * 0.95)],
           draw_ms: (Number(el.dataset.drawMs || 0) - d0) / Math.max(1, frames) };
}"""


def server_answers(cache: Path, meta_key: str | None, views: list[tuple[int, int]], px: int) -> list[float]:
    """The route's work for each view, in this process, on the cached index (memory-mapped)."""
    from tb_llmdiag import api
    from tb_llmdiag.tab.cache import CACHE_LAYOUT, ResultCache

    rc = ResultCache(cache)
    (binf,) = sorted(rc.root.rglob("*.traceview.bin"), key=lambda p: p.stat().st_mtime)[-1:]  # type: ignore[union-attr]
    key = binf.name.split(".")[0]
    assert CACHE_LAYOUT
    t = time.perf_counter()
    ix = api.TraceIndex.load(rc.get(key, "traceview"), rc.get_arrays(key, "traceview.bin"))
    print(f"  server: index loaded and checked in {1000 * (time.perf_counter() - t):.0f} ms "
          f"({ix.meta['n_events']:,} events, {len(ix.levels)} levels)")
    out = []
    for a, b in views:
        t = time.perf_counter()
        body = ix.view(a, b, px)
        json.dumps(body)
        out.append(1000 * (time.perf_counter() - t))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--work", default=str(REPO / "bench" / "data"))
    args = ap.parse_args()
    work = Path(args.work)
    logdir = work / "traceview_logdir"
    trace = logdir / "big_lora" / "rank0.1.pt.trace.json.gz"
    if not trace.exists():
        trace.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(REPO / "bench" / "make_big_trace.py"), str(trace), "--gb", str(args.gb)], check=True)
    print(f"trace: {trace} ({trace.stat().st_size / 1e6:.0f} MB gzipped)")
    cache = work / "traceview_cache"
    from playwright.sync_api import sync_playwright

    with tensorboard(logdir, cache, work / "traceview_tb.log") as base:
        t = time.time()
        runs = wait_all_analysed(base, timeout=3600)
        print(f"analysed (or read from the cache) in {time.time() - t:.0f} s: {[r['status'] for r in runs]}")
        span = runs[0]["workers"][0]["spans"][0]["span"]
        q = {"run": "big_lora", "worker": "rank0", "span": span}
        seen: list[str] = []
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            ctx = b.new_context(viewport={"width": 1440, "height": 900})
            ctx.route("**/*", lambda route: (seen.append(route.request.url), route.continue_()))
            page = ctx.new_page()
            page.goto(f"{base}/#llm_diag&p.llm_diag.run=big_lora")
            f = page.frame_locator(IFRAME)
            f.locator(".trace-body[data-painted]").wait_for(timeout=120_000)
            fr = next(x for x in page.frames if "plugin_entry" in x.url)
            first = fr.evaluate("""() => {
              const tv = performance.getEntriesByType('resource').filter((e) => e.name.includes('/trace_view'))[0];
              const mark = performance.getEntriesByName('llmdiag-traceview-paint')[0];
              return { from_request_s: (mark.startTime - tv.startTime) / 1000, from_iframe_s: mark.startTime / 1000,
                       answer_ms: tv.responseEnd - tv.requestStart, bytes: tv.encodedBodySize, raw_bytes: tv.decodedBodySize };
            }""")
            print(f"first trace-view paint: {first['from_request_s']:.3f} s from its first request "
                  f"({first['from_iframe_s']:.3f} s from the iframe's start); that answer {first['answer_ms']:.0f} ms, "
                  f"{first['raw_bytes'] / 1e6:.2f} MB ({first['bytes'] / 1e6:.2f} MB gzipped)")
            meta = get_json(f"{base}/data/plugin/llm_diag/trace_view?{urlencode({**q, 'px': 10})}")
            total = int(meta["span_ns"])  # type: ignore[index]
            rng = random.Random(16)
            views = []
            for i in range(40):
                w = [1_000_000, 10_000_000, 100_000_000, 1_000_000_000, total // 4, total][i % 6]
                a = rng.randrange(0, max(1, total - w))
                views.append((a, a + w))
            px = 1440 - 190
            browser_ms = []
            raw_sizes = []
            for a, bnd in views:
                res = fr.evaluate("""async (u) => { const t = performance.now(); const r = await fetch(u);
                    const txt = await r.text(); return [performance.now() - t, txt.length]; }""",
                                  f"./trace_view?{urlencode({**q, 'start_ns': a, 'end_ns': bnd, 'px': px * 3})}")
                browser_ms.append(res[0])
                raw_sizes.append(res[1])
            print(f"zoom/pan answers in the browser (40 views, 1 ms .. whole window, 3 widths each): median "
                  f"{statistics.median(browser_ms):.1f} ms, max {max(browser_ms):.1f} ms; JSON median "
                  f"{statistics.median(raw_sizes) / 1e6:.2f} MB, max {max(raw_sizes) / 1e6:.2f} MB")
            f.locator(".tv-canvas").focus()
            for _ in range(10):  # zoom to a tenth of the window (W), where panning moves the data
                page.keyboard.press("w")
            page.wait_for_timeout(1500)
            pan = fr.evaluate(PAN_JS)
            fps = pan["frames"] / pan["seconds"]
            print(f"panning: {pan['frames']} frames in {pan['seconds']:.2f} s = {fps:.1f} frames/s "
                  f"(p95 frame interval {pan['p95_frame_ms']:.1f} ms; drawing {pan['draw_ms']:.1f} ms per frame)")
            page.wait_for_timeout(1000)
            cdp = ctx.new_cdp_session(page)
            cdp.send("HeapProfiler.collectGarbage")
            cdp.send("Performance.enable")
            m = {x["name"]: x["value"] for x in cdp.send("Performance.getMetrics")["metrics"]}
            heap_mb = m["JSHeapUsedSize"] / 2**20
            print(f"JS heap used: {heap_mb:.1f} MiB (total allocated {m['JSHeapTotalSize'] / 2**20:.1f} MiB)")
            foreign = [u for u in seen if urlparse(u).hostname not in ("127.0.0.1", "localhost")
                       and not u.startswith(("data:", "blob:"))]
            print(f"requests: {len(seen)}, outside 127.0.0.1: {len(foreign)}")
            b.close()
    srv = server_answers(cache, None, views, px * 3)
    print(f"zoom/pan answers on the server (the route's work): median {statistics.median(srv):.1f} ms, "
          f"max {max(srv):.1f} ms")
    verdict = {"first_paint_s": first["from_request_s"] <= TARGETS["first_paint_s"],
               "answer_ms": max(srv) <= TARGETS["answer_ms"], "heap_mb": heap_mb <= TARGETS["heap_mb"],
               "pan_fps": fps >= TARGETS["pan_fps"], "offline": not foreign}
    print("targets:", ", ".join(f"{k} {'PASS' if v else 'FAIL'}" for k, v in verdict.items()))


if __name__ == "__main__":
    main()
