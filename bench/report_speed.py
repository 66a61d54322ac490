"""Benchmark: report generation on one trace vs the bare read floor, measured in the same run.

    python bench/report_speed.py [TRACE] [--repeat 3]

Each measurement runs in a fresh subprocess (peak RSS is that job's own: VmHWM, bench/peak_rss.py) and is repeated; the
median and the best wall and CPU times are reported. Measured:
  floor   gzip decompress (isal if installed, else zlib) + msgspec typed decode of the fields the
          reader needs, into the same Structs the reader uses. The floor is the faster of decoding
          the whole document at once and decoding it in event pieces, so it is the least work that
          reading the file takes, not our own pipeline.
  report  tb_llmdiag.api.analyze(tf).report: read into columns + metrics + diagnosis (everything the
          CLI and the tab show), without the on-disk cache. Like the floor's, its imports are done
          before the clock starts (api.preload()).
  imports importing the whole engine, once per process (a CLI run pays it; not in the ratio).
  hta / tb-profiler   the anchors on the same file, if they are installed.
Prints each figure (median and best of the runs), the ratios report/floor, and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = REPO / "bench" / "traces" / "lora_qwen1.5b_6steps.pt.trace.json.gz"

_JOBS = {
    "floor_whole": """
import gc, time, msgspec
from tb_llmdiag.ingest.kineto import structs as ks
from tb_llmdiag.ingest import source
gc.disable()
t, c0 = time.perf_counter(), time.process_time()
raw = open(PATH, "rb").read()
data = source._zlib.decompress(raw, 16 + source._zlib.MAX_WBITS) if raw[:2] == b"\\x1f\\x8b" else raw
del raw
env = ks._DECODERS[ks.needs_exact_ts(data, 1 << 20)].envelope.decode(data)
n = len(env.traceEvents)
RESULT = {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c0, "events": n, "json_bytes": len(data)}
""",
    "floor_pieces": """
import gc, time
from tb_llmdiag.ingest.kineto import structs as ks, scan_ext
from tb_llmdiag.ingest.kineto.split import SplitState, find_array_start, split_with
from tb_llmdiag.ingest.source import Source
gc.disable()
t, c0 = time.perf_counter(), time.process_time()
src = Source(PATH)
buf, n, total, start, exact, state, scanned, closed = bytearray(), 0, 0, -1, None, SplitState(), 1, -1
for block in src.blocks():  # the same blocks and the same layout-independent cutting as the reader
    total += len(block)
    buf += block
    if closed >= 0:
        continue
    if start < 0:
        start = find_array_start(buf)
        if start < 0:
            continue
        del buf[: start - 1]
    res = split_with(scan_ext.ext, buf, scanned, len(buf), state)
    state, scanned = res.state, len(buf)
    cut = res.close if res.close >= 0 else res.last_comma
    if cut <= 0:
        continue
    if exact is None:
        exact = ks.needs_exact_ts(buf, cut)
    buf[cut] = 0x5D
    with memoryview(buf) as view:
        events = ks._DECODERS[exact].events.decode(view[: cut + 1])
        n += len(events)
        del events
    del buf[:cut]
    buf[0] = 0x5B
    scanned -= cut
    if res.close >= 0:
        closed = 0
RESULT = {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c0, "events": n, "json_bytes": total}
""",
    "report": """
import time
from tb_llmdiag import api
from tb_llmdiag.ingest.discover import discover
tf = discover(PATH).files[0]
api.preload()  # imports are timed by the "imports" job, as the floor's are not timed at all
t, c0 = time.perf_counter(), time.process_time()
rep = api.analyze(tf).report
RESULT = {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c0, "status": rep["status"], "error": rep["error"],
          "events": rep["summary"]["counts"]["events"] if rep["summary"] else None,
          "findings": [f["id"] for f in rep["findings"]]}
""",
    "imports": """
import time
t, c0 = time.perf_counter(), time.process_time()
from tb_llmdiag import api
api.preload()
RESULT = {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c0}
""",
    "hta": """
import os, shutil, tempfile, time
from hta.trace_analysis import TraceAnalysis
d = tempfile.mkdtemp()
shutil.copy(PATH, os.path.join(d, "rank0.json.gz"))
t, c0 = time.perf_counter(), time.process_time()
TraceAnalysis(trace_dir=d)
RESULT = {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c0}
""",
    "tb_profiler": """
import os, tempfile, time
from torch_tb_profiler import io
from torch_tb_profiler.profiler.loader import RunLoader
cache = io.Cache(tempfile.mkdtemp())
t, c0 = time.perf_counter(), time.process_time()
run = RunLoader(os.path.basename(os.path.dirname(PATH)), os.path.dirname(PATH), cache).load()
seconds, cpu = time.perf_counter() - t, time.process_time() - c0
if not run.profiles:
    raise SystemExit("torch-tb-profiler loaded no profile from " + os.path.dirname(PATH))
RESULT = {"seconds": seconds, "cpu_seconds": cpu}  # it parses in a child process: peak RSS includes children below
""",
}

_RUNNER = """
import json, sys
sys.path.insert(0, {repo!r})
sys.path.insert(0, {bench!r})
from peak_rss import children_peak_rss_mb, peak_rss_mb
PATH = {path!r}
{body}
RESULT["peak_rss_mb"] = max(peak_rss_mb(), children_peak_rss_mb())  # the job's own peak (children: tb-profiler's parser)
print("@@" + json.dumps(RESULT))
"""


def run_job(name: str, path: str) -> dict | None:
    code = _RUNNER.format(repo=str(REPO), bench=str(REPO / "bench"), path=path, body=_JOBS[name])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    if name in ("hta", "tb_profiler"):  # an anchor that fails on this file is reported, not timed
        print(f"{name} failed on this trace: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    raise RuntimeError(f"{name} failed:\n{proc.stderr[-2000:]}")


def installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    path = os.path.abspath(args.trace)
    if not os.path.exists(path):
        print(f"no trace at {path}", file=sys.stderr)
        return 2
    jobs = ["floor_whole", "floor_pieces", "report", "imports"]
    jobs += [j for j, mod in (("hta", "hta"), ("tb_profiler", "torch_tb_profiler")) if installed(mod)]
    results: dict[str, list[dict]] = {j: [] for j in jobs}
    for _ in range(args.repeat):
        for j in jobs:  # interleaved, so background load affects all alike
            r = run_job(j, path)
            if r is not None:
                results[j].append(r)
    med = {j: statistics.median(r["seconds"] for r in rs) for j, rs in results.items() if rs}
    cpu = {j: statistics.median(r["cpu_seconds"] for r in rs) for j, rs in results.items() if rs}
    best = {j: min(r["seconds"] for r in rs) for j, rs in results.items() if rs}
    best_cpu = {j: min(r["cpu_seconds"] for r in rs) for j, rs in results.items() if rs}
    rss = {j: max(r["peak_rss_mb"] for r in rs) for j, rs in results.items() if rs}
    floor = min(med["floor_whole"], med["floor_pieces"])
    cpu_floor = min(cpu["floor_whole"], cpu["floor_pieces"])
    best_floor = min(best["floor_whole"], best["floor_pieces"])
    best_cpu_floor = min(best_cpu["floor_whole"], best_cpu["floor_pieces"])
    info = results["floor_pieces"][0]
    rep = results["report"][0]
    print(f"trace: {path}")
    print(f"  {os.path.getsize(path) / 2**20:.1f} MiB on disk, {info['json_bytes'] / 2**20:.0f} MiB JSON, "
          f"{info['events']} events; report status {rep['status']}, findings {rep['findings']}")
    print(f"  machine: {os.cpu_count()} cores; {args.repeat} runs of each job, interleaved, each in a fresh process: "
          "median and best (the least disturbed by other work on a shared machine); CPU seconds (user + system "
          "of the job's process) move less than wall seconds")
    print(f"  {'job':<14}{'median s':>9}{'x floor':>9}{'best s':>9}{'x floor':>9}{'cpu s':>9}{'x floor':>9}"
          f"{'best cpu':>9}{'x floor':>9}{'peak RSS MB':>13}")
    for j in med:
        print(f"  {j:<14}{med[j]:>9.2f}{med[j] / floor:>9.2f}{best[j]:>9.2f}{best[j] / best_floor:>9.2f}"
              f"{cpu[j]:>9.2f}{cpu[j] / cpu_floor:>9.2f}{best_cpu[j]:>9.2f}{best_cpu[j] / best_cpu_floor:>9.2f}"
              f"{rss[j]:>13.0f}")
    # each report run against the floor runs of the same round (run back to back): the ratio least moved by the
    # machine's own drift over minutes, which shifts whole rounds (this 2-core VM's second core drifts the most)
    rounds = min(len(results["report"]), len(results["floor_whole"]), len(results["floor_pieces"]))
    pairs = sorted(
        results["report"][i]["seconds"]
        / min(results["floor_whole"][i]["seconds"], results["floor_pieces"][i]["seconds"])
        for i in range(rounds)
    )
    print(f"  round by round (each report run / the floor of its own round): median {statistics.median(pairs):.2f}x, "
          f"range {pairs[0]:.2f}-{pairs[-1]:.2f}x over {rounds} rounds")
    print(f"RESULT report={med['report']:.2f}s floor={floor:.2f}s ratio={med['report'] / floor:.2f} "
          f"cpu_ratio={cpu['report'] / cpu_floor:.2f} best_ratio={best['report'] / best_floor:.2f} "
          f"best_cpu_ratio={best_cpu['report'] / best_cpu_floor:.2f} peak_rss={rss['report']:.0f}MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
