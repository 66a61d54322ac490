"""bench/tab_worker_memory.py runs on a small real trace and prints its figures (the MB are not asserted: the
number of worker processes is, with the tab's retirement of workers on and off)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tracepaths import REPO, TEST_DATA


def test_worker_memory_bench_runs_and_counts_its_workers() -> None:
    trace = next((TEST_DATA / "compile_on").glob("*.pt.trace.json.gz"))
    for retire, workers in (("1", 3), ("-1", 1)):  # every analysis retires its worker / none does
        env = {**os.environ, "LLMDIAG_WORKER_RETIRE_BYTES": retire}
        proc = subprocess.run([sys.executable, str(REPO / "bench" / "tab_worker_memory.py"), str(trace), "--tasks", "2"],
                              capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        m = re.search(r"^RESULT tasks=2 peaks=(\d+),(\d+) start=(\d+),(\d+) retained_after=-?\d+ baseline=(\d+) "
                      r"workers=(\d+) alive_at_end=\d alive_rss=\d+$", proc.stdout, flags=re.M)
        assert m, proc.stdout
        assert int(m.group(6)) == workers, proc.stdout
        assert all(int(m.group(i)) > 0 for i in range(1, 6))
        assert len(re.findall(r"^task-\d +\d+ .* ok$", proc.stdout, flags=re.M)) == 2, proc.stdout
