"""TensorBoard survives its own cache being cut short, and its analysis workers die with it (#27 item 2).

A second audit found a real TensorBoard killed by SIGBUS (exit 135) when a ``*.traceview.bin`` entry it had
memory-mapped was truncated in place, and its analysis workers left running as orphans. Here a real
``tensorboard`` process (tests/e2e/tbserver.py, spawned analysis workers) serves a real trace's trace view; the
entry is cut to a quarter of its size in place, and the view is asked for again, at every range; then
TensorBoard is killed with SIGKILL and its workers must be gone within a few seconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tbserver import get_json, tensorboard, wait_all_analysed
from tracepaths import shared_trace

pytestmark = pytest.mark.e2e

RESNET = "kineto_resnet50/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
VIEW = "/data/plugin/llm_diag/trace_view?run=run_a&worker=worker0&span=1"


def _children(pid: int) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.add(int(d.name))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_truncated_traceview_cache_under_a_running_tensorboard(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    (logdir / "run_a").mkdir(parents=True)
    shutil.copy(shared_trace(RESNET), logdir / "run_a" / "worker0.1623143089861.pt.trace.json.gz")
    cache = tmp_path / "cache"
    with tensorboard(logdir, cache, tmp_path / "tb.log") as base:
        proc_pid = next(p for p in _children(os.getpid()) if b"tensorboard" in (Path("/proc") / str(p) / "cmdline").read_bytes())
        wait_all_analysed(base)
        first = get_json(base + VIEW)
        assert isinstance(first, dict) and first["traceview_version"] >= 1
        (entry,) = cache.rglob("*.traceview.bin")
        os.truncate(entry, entry.stat().st_size // 4)  # in place: the inode TensorBoard read stays the same
        for q in ("", f"&start_ns=0&end_ns={first['end_ns']}&px=2000", f"&start_ns={first['end_ns'] // 2}&px=300"):
            assert _status(base + VIEW + q) in (200, 202)
        assert _alive(proc_pid), "tensorboard died"
        workers = _children(proc_pid)
        assert workers, "no analysis worker process"
        os.kill(proc_pid, signal.SIGKILL)  # as a SIGBUS would: no clean shutdown
        deadline = time.time() + 15
        while time.time() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.2)
        assert not any(_alive(w) for w in workers), "analysis workers outlived tensorboard"
