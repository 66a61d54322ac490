"""Benchmark: what the attribution topic (metrics/attribution/topic.py) adds to a report's time and peak memory.

    python bench/attribution_speed.py [TRACE] [--repeat 5]

Two jobs, interleaved, each in a fresh process (peak RSS is that job's own: VmHWM, bench/peak_rss.py):
  report     tb_llmdiag.api.analyze(tf).report as the CLI runs it (attribution included); the attribution's own
             time inside it is timed too (the topic function, wrapped)
  without    the same with the attribution topic replaced by an unavailable one
Prints the medians, the ratio report / without, the attribution's share of the report's time (both from the
same runs) and the peak RSS of each (median and largest over the runs, MiB).
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

_BODY = """
import time
from tb_llmdiag import api
import tb_llmdiag.metrics.attribution.topic as M  # the TOPICS row calls M.attribution_metrics at run time
from tb_llmdiag.ingest.discover import discover
tf = discover(PATH).files[0]
api.preload()
spent = [0.0]
real = M.attribution_metrics
def timed(*a, **k):
    t = time.perf_counter()
    try:
        return real(*a, **k) if WITH else {"available": False, "reason": "bench: left out"}
    finally:
        spent[0] += time.perf_counter() - t
M.attribution_metrics = timed
t = time.perf_counter()
rep = api.analyze(tf).report
RESULT = {"seconds": time.perf_counter() - t, "attribution_seconds": spent[0], "status": rep["status"],
          "findings": [f["id"] for f in rep["findings"]]}
"""

_RUNNER = """
import json, sys
sys.path.insert(0, {repo!r})
sys.path.insert(0, {bench!r})
from peak_rss import peak_rss_mb
PATH = {path!r}
WITH = {with_!r}
{body}
RESULT["peak_rss_mb"] = peak_rss_mb()
print("@@" + json.dumps(RESULT))
"""


def run_job(path: str, with_attribution: bool) -> dict:
    code = _RUNNER.format(repo=str(REPO), bench=str(REPO / "bench"), path=path, with_=with_attribution, body=_BODY)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    raise RuntimeError(f"job failed:\n{proc.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    path = os.path.abspath(args.trace)
    runs: dict[str, list[dict]] = {"report": [], "without": []}
    for _ in range(args.repeat):
        runs["report"].append(run_job(path, True))  # interleaved: background load hits both alike
        runs["without"].append(run_job(path, False))
    med = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}
    own = statistics.median(r["attribution_seconds"] / r["seconds"] for r in runs["report"])
    rss = {k: statistics.median(r["peak_rss_mb"] for r in v) for k, v in runs.items()}
    top = {k: max(r["peak_rss_mb"] for r in v) for k, v in runs.items()}
    print(f"trace: {path} ({os.path.getsize(path) / 2**20:.1f} MiB on disk); {args.repeat} runs of each job, interleaved")
    print(f"  report (with attribution)  median {med['report']:.3f} s   peak RSS median {rss['report']:.1f} MB "
          f"(max {top['report']:.1f})")
    print(f"  report without attribution median {med['without']:.3f} s   peak RSS median {rss['without']:.1f} MB "
          f"(max {top['without']:.1f})")
    print(f"  ratio with / without: {med['report'] / med['without']:.3f}x; the attribution's own time: "
          f"{100 * own:.1f} % of the report's (median over the runs); peak RSS added: "
          f"{rss['report'] - rss['without']:+.1f} MB (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
