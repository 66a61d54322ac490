"""The client's side of a 1,000-rank job: the reduce (1,000 rank reports + summaries -> report JSON) in a
fresh process stays far under 500 MB peak RSS, and still finds the straggler planted by the job generator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tracepaths import REPO


def test_thousand_rank_reduce_peak_rss_under_500_mb(job16: Path) -> None:
    out = subprocess.run([sys.executable, str(REPO / "bench" / "multirank_speed.py"), "--reduce-only",
                          "--reduce-ranks", "1000", "--dir", str(job16)], capture_output=True, text=True, timeout=300,
                         check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["reduce_ranks"] == 1000
    assert got["client_peak_rss_mb"] < 500, got
    assert got["job_findings"][0] == "straggler"
