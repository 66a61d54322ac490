"""A job of many ranks end to end: real trace files of 64 and 1,024 ranks analysed locally and on Dask.

    python bench/job_scale.py [--ranks 64 1024] [--dir /tmp/llmdiag_scale] [--modes local dask] [--floor-files 16]

- The jobs: ``bench/job_files.py --plant P`` (P = 5/8 of the ranks - 3: 37 of 64, 637 of 1,024): every rank a
  copy of rank 0 of the real 2-GPU DDP straggler capture (tests/data/ddp_straggler), rank P a copy of its rank 1
  (the real straggler, 2x the tokens), each shifted, time-scaled by 1 +- 2 % and renamed. Written once into
  ``--dir/job{N}`` (a temp folder outside any logdir; ~1.1 GB for 1,024 ranks) and reused.
- Per job, in this process, the floor: reading, inflating (isal when installed, as the reader) and decoding (msgspec, into the reader's typed
  Structs, no columns built: ``bench/report_speed.py``'s ``floor_whole``) ``--floor-files`` of its files spread
  over the ranks, the median per file; what reading one rank costs before any analysis.
- Per job and mode, in a fresh process (its peak RSS is the parent's own: it analyses every rank in ``local``
  and only gathers the ranks' results and reduces the job in ``dask``), ``api.report(dir)``: ``local`` in that
  process; ``dask``: on a LocalCluster of ``--dask-workers`` processes started by a third process (the parent is
  only the client). Printed: wall s, per rank ms, per rank / floor per file (the ratio the 64 and 1,024 rows
  compare), peak RSS of the parent, the parent's cyclic GC per rank (CPU in its collections, ``gc.callbacks``; in
  ``dask`` the client's alone) and its full collections, the straggler named against the planted rank, and the
  default CLI text's size.
- The floor is measured just before and just after each mode's run (their mean: the machine's load drifts over a
  run of minutes), in wall and CPU seconds; the CPU ratio (the analysing processes' CPU seconds per rank: this
  process in ``local``, the client's and the workers' in ``dask``, against the floor's CPU per file) is the one
  the rank counts compare, being the least moved by other work on a shared machine.
- ``--control``: whether holding a big job's results costs the analysis of a rank anything (``held_control``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import resource
import time
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

CLUSTER = """
import sys
from tb_llmdiag.scale.dask import local_cluster
c = local_cluster(int(sys.argv[1]))
print(c.scheduler_address, flush=True)
sys.stdin.read()
c.close()
"""


def planted(ranks: int) -> int:
    return ranks * 5 // 8 - 3


def ensure_job(root: Path, ranks: int) -> Path:
    d = root / f"job{ranks}"
    if len(list(d.glob("rank*.pt.trace.json.gz"))) != ranks:
        subprocess.run([sys.executable, str(REPO / "bench" / "job_files.py"), str(d), "--ranks", str(ranks),
                        "--plant", str(planted(ranks))], check=True)
    return d


def cpu_s() -> float:
    """This process's CPU seconds, all its threads (the reader's read-ahead threads too)."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def floor_per_file_s(d: Path, n: int) -> tuple[float, float]:
    """The median time to read, inflate and decode one of ``n`` of the job's files into the reader's own typed
    Structs, no columns built (``bench/report_speed.py``'s ``floor_whole``)."""
    from tb_llmdiag.ingest import source
    from tb_llmdiag.ingest.kineto import structs as ks

    files = sorted(d.glob("rank*.pt.trace.json.gz"))
    pick = [files[round(i * (len(files) - 1) / max(n - 1, 1))] for i in range(n)]
    times, cpus = [], []
    for p in pick:
        t0, c0 = time.perf_counter(), cpu_s()
        data = source._zlib.decompress(p.read_bytes(), 16 + source._zlib.MAX_WBITS)  # isal when installed, as read
        ks._DECODERS[ks.needs_exact_ts(data, 1 << 20)].envelope.decode(data)
        times.append(time.perf_counter() - t0)
        cpus.append(cpu_s() - c0)
        del data
    return sorted(times)[len(times) // 2], sorted(cpus)[len(cpus) // 2]


def gc_clock() -> list[float]:
    """From now on, in this process: [CPU seconds spent in the cyclic GC's collections, full collections, the
    current collection's start] (``gc.callbacks``)."""
    import gc

    spent = [0.0, 0.0, 0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            spent[2] = time.process_time()
        else:
            spent[0] += time.process_time() - spent[2]
            spent[1] += info["generation"] == 2

    gc.callbacks.append(on_gc)
    return spent


def one(mode: str, d: Path, workers: int) -> dict[str, Any]:
    """(In a fresh process.) The report of ``d`` in ``mode``; its figures (``gc_s``: this process's cyclic GC, the
    whole analysis in ``local``)."""
    from peak_rss import peak_rss_mb

    from tb_llmdiag import api
    from tb_llmdiag.render.text import render_report

    api.preload()
    index = api.discover(str(d))
    t0, c0 = time.perf_counter(), cpu_s()
    if mode == "local":
        gcs = gc_clock()
        rep = api.report(index)
        cpu = cpu_s() - c0
    else:
        gcs = gc_clock()  # the client's alone
        from distributed import Client

        from tb_llmdiag.scale.dask import DaskRunner

        proc = subprocess.Popen([sys.executable, "-c", CLUSTER, str(workers)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        try:
            address = proc.stdout.readline().strip()  # type: ignore[union-attr]
            with Client(address) as client:
                client.wait_for_workers(workers)
                client.run(api.preload)
                before = sum(client.run(cpu_s).values())
                t0, c0 = time.perf_counter(), cpu_s()  # the cluster's start-up is not the analysis
                rep = api.report(index, runner=DaskRunner(client))
                cpu = cpu_s() - c0 + sum(client.run(cpu_s).values()) - before  # the client's and the workers'

        finally:
            proc.stdin.close()  # type: ignore[union-attr]
            proc.wait(timeout=120)
    wall = time.perf_counter() - t0
    job = rep["jobs"][0]
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak_rss_mb(), "gc_s": gcs[0],
            "gc_full": gcs[1], "straggler": job["metrics"].get("straggler_rank"),
            "cause": job["metrics"].get("straggler_cause"), "ok": sum(r["status"] == "ok" for r in rep["runs"]),
            "text_bytes": len(render_report(rep).encode()), "findings": [f["id"] for f in job["findings"]]}


def held_control(d: Path, n: int = 48, held: int = 1000) -> None:
    """Does a big job cost more per rank? In this process: the CPU per rank of analysing ``n`` of the job's files
    fresh, then while holding ``held`` copies of their reports (what the parent holds at 1,000 ranks), then fresh
    again. Prints the three."""
    import copy
    import gc

    from tb_llmdiag import api

    api.preload()
    files = api.discover(str(d)).files[:n]

    def run() -> tuple[float, list[Any]]:
        c0 = cpu_s()
        out = [api.analyze(tf, summary=True) for tf in files]
        return (cpu_s() - c0) / len(files), out

    fresh, out = run()
    kept = [copy.deepcopy(out[i % len(out)].report) for i in range(held)]
    gc.collect()
    loaded, _ = run()
    kept.clear()
    gc.collect()
    again, _ = run()
    print(f"control: CPU per rank fresh {fresh * 1e3:.1f} ms; holding {held} reports {loaded * 1e3:.1f} ms; "
          f"fresh again {again * 1e3:.1f} ms")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 1024])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/llmdiag_scale"))
    ap.add_argument("--modes", nargs="+", default=["local", "dask"], choices=("local", "dask"))
    ap.add_argument("--dask-workers", type=int, default=2)
    ap.add_argument("--floor-files", type=int, default=16)
    ap.add_argument("--one", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--control", action="store_true", help="only the held-reports control (``held_control``) on "
                    "the smallest job")
    a = ap.parse_args(argv)
    if a.control:
        held_control(ensure_job(a.dir, min(a.ranks)))
        return 0
    if a.one:
        print(json.dumps(one(a.one[0], Path(a.one[1]), a.dask_workers)))
        return 0
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    per_rank: dict[tuple[str, int], float] = {}
    for n in a.ranks:
        d = ensure_job(a.dir, n)
        print(f"{n} ranks ({sum(p.stat().st_size for p in d.iterdir()) / 1e6:.0f} MB compressed), planted "
              f"straggler {planted(n)}", flush=True)
        for mode in a.modes:
            f0 = floor_per_file_s(d, a.floor_files)
            out = subprocess.run([sys.executable, __file__, "--one", mode, str(d), "--dask-workers",
                                  str(a.dask_workers)], check=True, capture_output=True, text=True)
            f1 = floor_per_file_s(d, a.floor_files)
            floor, floor_cpu = (f0[0] + f1[0]) / 2, (f0[1] + f1[1]) / 2  # before and after: the load drifts
            r = json.loads(out.stdout.strip().splitlines()[-1])
            ratio, cpu_ratio = r["wall_s"] / n / floor, r["cpu_s"] / n / floor_cpu
            per_rank[(mode, n)] = cpu_ratio
            where = "local (1 process)" if mode == "local" else f"dask ({a.dask_workers} workers)"
            print(f"  {where}: {r['wall_s']:.1f} s, {r['wall_s'] / n * 1e3:.0f} ms per rank = {ratio:.2f}x the "
                  f"floor ({floor * 1e3:.0f} ms per file); CPU {r['cpu_s'] / n * 1e3:.0f} ms per rank = "
                  f"{cpu_ratio:.2f}x the floor's CPU ({floor_cpu * 1e3:.0f} ms); parent peak RSS "
                  f"{r['peak_rss_mb']:.0f} MB; cyclic GC {r['gc_s'] / n * 1e3:.2f} ms per rank ({r['gc_full']:.0f} full "
                  f"collections); ok {r['ok']}/{n}; straggler named {r['straggler']} ({r['cause']}; "
                  f"planted {planted(n)}); job findings {r['findings']}; CLI text {r['text_bytes'] / 1e3:.1f} KB; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
    lo, hi = min(a.ranks), max(a.ranks)
    for mode in a.modes:
        if (mode, lo) in per_rank and (mode, hi) in per_rank and lo != hi:
            print(f"{mode}: CPU per rank at {hi} ranks / at {lo} ranks (each against its floor's CPU): "
                  f"{per_rank[(mode, hi)] / per_rank[(mode, lo)]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
