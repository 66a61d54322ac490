"""Benchmark: the tab's worker memory over consecutive analyses in ONE pool (issue #17, bounded memory).

    nice python bench/tab_worker_memory.py [TRACE ...] [--tasks 3] [--repeat 1] [--workers 2]

``bench/tab_analysis.py`` measures one analysis in a fresh process. The tab's workers live on: a
``ProcessPoolExecutor`` worker runs task after task, and what one analysis leaves behind (heap holes the
allocator keeps, caches, module state) is there when the next one starts. This bench builds the pool the
way TensorBoard does (``tab/plugin.py``: ``analysis_queue.process_pool(n, cache_root=...)``, its ``renew``, a
``analysis_queue.AnalysisQueue`` over it, so any policy the queue applies between tasks applies here) and runs the traces
one after another, ``--tasks`` analyses in all (the traces given, cycled), waiting for each before the next.

Each task runs ``analysis_queue.analyse_task`` inside the worker, wrapped by ``measured_task`` which reads
/proc/self/status: the worker's pid, its RSS when the task starts (what earlier tasks left), its peak during
the task (``VmHWM`` after writing ``5`` to /proc/self/clear_refs, which resets it on Linux), its RSS at the end
(the result still held). A probe task (no analysis) runs first and last: the RSS of a worker before any
analysis and the RSS the next task would start with. Lines:

  task  N  pid  start MB  peak MB  end MB  wall s  read MB     one per analysis
  RESULT tasks=N peaks=a,b,c start=a,b,c retained_after=X baseline=Y workers=K alive_at_end=A alive_rss=R

``retained`` is RSS at the start of a task minus the baseline of a fresh worker; ``workers`` how many
processes ran the tasks and probes, ``alive_at_end`` how many of them still live after the last probe and
``alive_rss`` their summed RSS (a retired pool's workers exit). The tab's policies apply as configured:
``LLMDIAG_WORKER_RETIRE_BYTES=-1`` turns the retirement of workers off (tab/analysis_queue.py). With ``--repeat`` the whole
sequence runs again in a new pool (the figures are printed per repeat: memory does not need a best-of).
Linux only (/proc). Run it with ``nice`` on a quiet machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tb_llmdiag import api  # noqa: E402
from tb_llmdiag.ingest.discover import TraceFile  # noqa: E402
from tb_llmdiag.tab import analysis_queue  # noqa: E402
from tb_llmdiag.tab.cache import ResultCache  # noqa: E402
from tb_llmdiag.tab.plugin import WORKERS  # noqa: E402

DEFAULT_TRACE = REPO / "bench" / "data" / "scaled.kineto.json"
PROBE = "probe"


def status_mb(*fields: str) -> dict[str, float]:
    out: dict[str, float] = {}
    with open("/proc/self/status") as f:
        for line in f:
            name = line.split(":", 1)[0]
            if name in fields:
                out[name] = int(line.split()[1]) / 1024
    return out


def measured_task(tf: Any, token: str, put: Any) -> dict[str, Any]:
    """In the worker: ``analysis_queue.analyse_task`` with the worker's memory around it (or a probe: no analysis)."""
    start = status_mb("VmRSS")["VmRSS"]
    with open("/proc/self/clear_refs", "w") as f:  # resets VmHWM to the current RSS (Linux >= 4.0)
        f.write("5")
    t = time.perf_counter()
    result: dict[str, Any] = {"report": None} if token.startswith(PROBE) else analysis_queue.analyse_task(tf, token, put)
    wall = time.perf_counter() - t
    now = status_mb("VmRSS", "VmHWM")
    result["_bench"] = {
        "pid": os.getpid(),
        "start_mb": start,
        "peak_mb": now["VmHWM"],
        "end_mb": now["VmRSS"],
        "wall_s": wall,
    }
    return result


def run_sequence(traces: list[TraceFile], tasks: int, workers: int) -> list[dict[str, Any]]:
    """``tasks`` analyses (traces cycled) through one AnalysisQueue over the tab's process pool, one at a time."""
    with tempfile.TemporaryDirectory() as d:
        cache = ResultCache(d)
        executor, progress = analysis_queue.process_pool(workers, cache_root=cache.root)
        done: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
        phases: dict[str, list[str]] = {}
        ready = threading.Condition()
        by_token: dict[str, TraceFile] = {}

        def finish(key: Any, token: str, result: dict[str, Any] | None, error: str | None) -> None:
            with ready:
                done[token] = (result, error)
                ready.notify_all()

        def phase(token: str, ph: str) -> None:
            phases.setdefault(token, []).append(ph)

        q = analysis_queue.AnalysisQueue(
            executor,
            claim=lambda key, token: by_token[token],
            finish=finish,
            phase=phase,
            workers=workers,
            progress_queue=progress,
            renew=lambda: analysis_queue.process_pool(workers, progress, cache.root)[0],
            task=measured_task,
        )
        rows: list[dict[str, Any]] = []
        try:
            probe = dataclasses.replace(traces[0], size_bytes=0)  # reads nothing: never retires a worker itself
            order = [(f"{PROBE}-first", probe)]
            order += [(f"task-{i}", traces[i % len(traces)]) for i in range(tasks)]
            order.append((f"{PROBE}-last", probe))
            for token, tf in order:
                by_token[token] = tf
                t = time.perf_counter()
                q.submit(tf.key, token)
                with ready:
                    while token not in done:
                        ready.wait()
                result, error = done[token]
                if error is not None or result is None:
                    raise SystemExit(f"{token} failed: {error}")
                row = dict(
                    result["_bench"],
                    token=token,
                    queue_wall_s=time.perf_counter() - t,
                    path=tf.path,
                    phases=len(phases.get(token, [])),
                )
                rep = result["report"]
                row["read_mb"] = (rep or {}).get("read_state", {}).get("read_bytes", 0) / 2**20
                if rep is not None:
                    row["status"] = rep.get("status")
                    tv = result.get("traceview") or {}
                    if tv.get("file"):  # the tab's cache would take it: drop it here (temporary directory anyway)
                        Path(tv["file"]).unlink(missing_ok=True)
                del result
                rows.append(row)
            time.sleep(0.5)  # let a retired pool's worker exit (for the figure below; no time is measured)
            rows[-1]["alive_mb"] = [rss_of(pid) for pid in dict.fromkeys(r["pid"] for r in rows)]
        finally:
            q.stop()
        return rows


def rss_of(pid: int) -> float | None:
    """The RSS of a process in MB; None when it is gone (or a zombie: exited, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", default=[str(DEFAULT_TRACE)])
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workers", type=int, default=WORKERS, help="pool size (the tab's default: %(default)s)")
    args = ap.parse_args()
    tfs = [api.discover(p).files[0] for p in args.traces]
    for tf in tfs:
        print(f"{tf.path}: {tf.size_bytes / 2**20:.0f} MiB on disk")
    for rep in range(max(1, args.repeat)):
        rows = run_sequence(tfs, max(1, args.tasks), max(1, args.workers))
        base = rows[0]["end_mb"]
        print(f"repeat {rep + 1}: pool of {args.workers}; fresh worker (probe) RSS {base:.0f} MB")
        print(
            f"{'task':<10}{'pid':>8}{'start MB':>10}{'retained':>10}{'peak MB':>9}{'end MB':>8}{'wall s':>8}"
            f"{'queue s':>9}{'read MB':>9}  status"
        )
        for r in rows:
            print(
                f"{r['token']:<10}{r['pid']:>8}{r['start_mb']:>10.0f}{r['start_mb'] - base:>10.0f}"
                f"{r['peak_mb']:>9.0f}{r['end_mb']:>8.0f}{r['wall_s']:>8.2f}{r['queue_wall_s']:>9.2f}"
                f"{r['read_mb']:>9.0f}  {r.get('status') or '-'}"
            )
        analyses = rows[1:-1]
        alive = [mb for mb in rows[-1]["alive_mb"] if mb is not None]
        print(
            "RESULT tasks={} peaks={} start={} retained_after={:.0f} baseline={:.0f} workers={} "
            "alive_at_end={} alive_rss={:.0f}".format(
                len(analyses),
                ",".join(f"{r['peak_mb']:.0f}" for r in analyses),
                ",".join(f"{r['start_mb']:.0f}" for r in analyses),
                rows[-1]["start_mb"] - base,
                base,
                len({r["pid"] for r in rows}),
                len(alive),
                sum(alive),
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
