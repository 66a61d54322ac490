"""Benchmark: the tab's whole per-run analysis vs the report alone, on one trace, measured in the same run.

    nice python bench/tab_analysis.py [TRACE] [--repeat 3] [--profile PHASE]

The tab's worker runs ``tab.analysis_queue.analyse_task`` -> ``api.analyze(...).tab_result()`` in a spawned process (started by
``process_pool`` with the cache's directory: the trace view's arrays are streamed beside their cache entry),
returns its dict to the TensorBoard process (pickled through the pool) and that process keeps it in the cache
(``ResultCache.store``). Three fresh subprocesses per repeat:

  phases   the calls ``api.analyze`` and ``Analysed.tab_result`` make, one by one, timed (its breakdown):
             read+report  ``api.load`` + ``metrics.analyze`` + ``api.run_report`` (what ``llmdiag report`` computes)
             timelines    ``timeline.build`` (the step timelines and the ``/steps`` rows)
             summary      the RankSummary (ranks of a job only)
             traceview    evidence ranges + ``traceview.build_into`` (the trace view's index and level-of-detail
                          arrays) streamed into a file like the worker's ``analysis_queue.Spill``
  worker   exactly the worker's task (``analysis_queue.init_worker`` + ``analysis_queue.analyse_task``), then
             transfer     pickling its result (worker) and unpickling it (TensorBoard process)
             cache write  ``ResultCache.store`` into a temporary cache directory (TensorBoard process)
  report   the report alone (``api.analyze(tf).report``, what ``llmdiag report FILE`` computes), the reference.

For each: wall and CPU seconds (best of ``--repeat``) and the process's peak resident memory (``VmHWM`` of
/proc/self/status, the process's own peak, not ``ru_maxrss``). The worker's peak is read right after its task,
before the transfer. ``--profile PHASE`` prints a cProfile of that phase (one run per repeat).
Run it with ``nice`` on a quiet machine; the ratio tab/report is what to compare across machines.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = REPO / "bench" / "traces" / "lora_qwen1.5b_6steps.pt.trace.json.gz"
PHASES = ("read+report", "timelines", "summary", "traceview")
AFTER = ("transfer", "cache write")

_COMMON = """
import json, os, pickle, sys, tempfile, time
sys.path.insert(0, {repo!r})
from tb_llmdiag import api
from tb_llmdiag.ingest.discover import discover
api.preload()
tf = discover({path!r}).files[0]

def hwm_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")

OUT = {{"phases": {{}}}}
PROFILE = {profile!r}

class phase:
    def __init__(self, name):
        self.name = name
    def __enter__(self):
        if PROFILE == self.name:
            import cProfile
            self.prof = cProfile.Profile()
            self.prof.enable()
        self.t, self.c = time.perf_counter(), time.process_time()
    def __exit__(self, *exc):
        wall, cpu = time.perf_counter() - self.t, time.process_time() - self.c
        if PROFILE == self.name:
            import pstats
            self.prof.disable()
            pstats.Stats(self.prof, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        OUT["phases"][self.name] = {{"seconds": wall, "cpu_seconds": cpu, "peak_mb": hwm_mb()}}
"""

_TAB = """
from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics import analyze as analyze_trace
from tb_llmdiag.tab import analysis_queue
from tb_llmdiag.timeline import build as build_timelines
from tb_llmdiag.traceview import build as tv
from tb_llmdiag.traceview.evidence import locate as locate_evidence
# the calls of api.analyze and Analysed.tab_result, in their order
with phase("read+report"):
    trace = api.load(tf)
    analysis = analyze_trace(trace)
    rep = api.run_report(tf, trace, analysis)
with phase("timelines"):
    timelines, breakdown = build_timelines(trace, analysis.breakdown)
with phase("summary"):
    summary = api.rank_summary(tf, trace, rep, analysis).to_dict() if api.is_rank(trace, analysis) else None
del analysis
with tempfile.TemporaryDirectory() as d, phase("traceview"):
    findings = jsonable(locate_evidence(trace, rep.json()))
    if hasattr(tv, "build_into"):
        spill = analysis_queue.Spill(d, api.task_key(tf))
        handed, trace = [trace], None
        meta = tv.build_into(handed, spill.add)
        spill.done({{}})
    else:  # the code before the arrays were streamed
        meta, arrays = tv.build(trace)
        del arrays
OUT["events"] = meta["n_events"]
OUT["peak_mb"] = hwm_mb()
print("@@" + json.dumps(OUT))
"""

_WORKER = """
from tb_llmdiag.tab import analysis_queue
from tb_llmdiag.tab.cache import ResultCache
with tempfile.TemporaryDirectory() as d:
    cache = ResultCache(d)
    key = ResultCache.key(tf)
    try:
        analysis_queue.init_worker(None, str(cache.root))
    except TypeError:  # the code before the arrays were streamed: one argument
        analysis_queue.init_worker(None)
    with phase("worker task"):
        result = analysis_queue.analyse_task(tf, key, None)
    OUT["worker_peak_mb"] = hwm_mb()
    with phase("transfer"):
        blob = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        OUT["transfer_mb"] = len(blob) / 2**20
        del result
        result = pickle.loads(blob)
        del blob
    with phase("cache write"):
        cache.store(key, result)
    OUT["cache_mb"] = sum(p.stat().st_size for p in Path(d).rglob("*") if p.is_file()) / 2**20
    assert cache.get_arrays(key, "traceview.bin") is not None and cache.get(key, "report") is not None
OUT["peak_mb"] = hwm_mb()
print("@@" + json.dumps(OUT))
"""

_REPORT = """
with phase("report"):
    rep = api.analyze(tf).report
OUT["peak_mb"] = hwm_mb()
print("@@" + json.dumps(OUT))
"""


def run(body: str, path: str, profile: str | None) -> dict:
    code = _COMMON.format(repo=str(REPO), path=path, profile=profile) + body.format()
    code = "from pathlib import Path\n" + code
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    if profile:
        sys.stderr.write(proc.stderr)
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    raise SystemExit(f"the job failed:\n{proc.stderr[-3000:]}")


def best(runs: list[dict], name: str) -> dict:
    """The fastest repeat of a phase (wall), with its CPU and peak."""
    return min((r["phases"][name] for r in runs), key=lambda p: p["seconds"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", choices=(*PHASES, "worker task", *AFTER), default=None)
    args = ap.parse_args()
    tab_runs, worker_runs, rep_runs = [], [], []
    for _ in range(max(1, args.repeat)):  # interleaved: all see the same machine load
        tab_runs.append(run(_TAB, args.trace, args.profile))
        worker_runs.append(run(_WORKER, args.trace, args.profile))
        rep_runs.append(run(_REPORT, args.trace, None))
    size_mb = Path(args.trace).stat().st_size / 2**20
    print(f"{args.trace}: {size_mb:.0f} MiB on disk, {tab_runs[0]['events']} events; best of {len(tab_runs)}")
    print(f"{'phase':<16}{'wall s':>9}{'cpu s':>9}{'peak MB':>9}")
    for name in PHASES:
        p = best(tab_runs, name)
        print(f"{name:<16}{p['seconds']:>9.2f}{p['cpu_seconds']:>9.2f}{p['peak_mb']:>9.0f}")
    line = "{:<16}{:>9.2f}{:>9.2f}{:>9.0f}".format
    w = best(worker_runs, "worker task")
    print(line("worker task", w["seconds"], w["cpu_seconds"], min(r["worker_peak_mb"] for r in worker_runs)))
    for name in AFTER:
        p = best(worker_runs, name)
        print(line(name, p["seconds"], p["cpu_seconds"], p["peak_mb"]))
    tab_wall = min(sum(r["phases"][k]["seconds"] for k in ("worker task", *AFTER)) for r in worker_runs)
    tab_cpu = min(sum(r["phases"][k]["cpu_seconds"] for k in ("worker task", *AFTER)) for r in worker_runs)
    print(line("tab total", tab_wall, tab_cpu, min(r["peak_mb"] for r in worker_runs)))
    rep = best(rep_runs, "report")
    print(line("report alone", rep["seconds"], rep["cpu_seconds"], min(r["peak_mb"] for r in rep_runs)))
    print(
        f"ratio tab/report: {tab_wall / rep['seconds']:.2f}x wall, {tab_cpu / rep['cpu_seconds']:.2f}x CPU; "
        f"pickled result {worker_runs[0]['transfer_mb']:.1f} MB, cache entry {worker_runs[0]['cache_mb']:.0f} MB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
