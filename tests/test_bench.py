"""The speed bench runs (a smoke test on a small real trace: the figures themselves are not asserted)."""

from __future__ import annotations

import re
import subprocess
import sys

from tracepaths import REPO, TEST_DATA


def test_report_speed_bench_runs_and_prints_its_figures() -> None:
    trace = next((TEST_DATA / "gpu_seed").glob("*.pt.trace.json.gz"))
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "report_speed.py"), str(trace), "--repeat", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for job in ("floor_whole", "floor_pieces", "report", "imports"):
        # median s, x floor, best s, x floor, cpu s, x floor, best cpu, x floor, peak RSS MB
        assert re.search(rf"^  {job}(?: +\d+\.\d\d){{8}} +\d+$", proc.stdout, flags=re.M), proc.stdout
    m = re.search(r"^RESULT report=([\d.]+)s floor=([\d.]+)s ratio=([\d.]+) cpu_ratio=([\d.]+) best_ratio=([\d.]+) "
                  r"best_cpu_ratio=([\d.]+) peak_rss=(\d+)MB$", proc.stdout, flags=re.M)
    assert m and all(float(m.group(i)) > 0 for i in range(3, 7)) and int(m.group(7)) > 0
    assert "report status ok" in proc.stdout and "host_bound" in proc.stdout  # the seed capture's top finding
    rounds = re.search(r"^  round by round .*: median ([\d.]+)x, range ([\d.]+)-([\d.]+)x over 1 rounds$", proc.stdout,
                       flags=re.M)
    # one round: one ratio, the RESULT line's (report / the faster floor)
    assert rounds and rounds.group(1) == rounds.group(2) == rounds.group(3) == m.group(3), proc.stdout


def test_bomb_bench_runs_and_prints_its_figures() -> None:
    """bench/bomb_speed.py on small bombs (64 MiB inflated: past the reader's 32 MiB floor for ~0.1-0.3 MB of gzip)."""
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "bomb_speed.py"), "--repeat", "1", "--mib", "64"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for bomb in ("one-string", "events"):
        m = re.search(rf"^RESULT bomb={bomb} exit=(\d+) best=([\d.]+)s peak=(\d+)MB floor_best=([\d.]+)s$", proc.stdout,
                      flags=re.M)
        assert m and m.group(1) == "4" and float(m.group(2)) > 0 and int(m.group(3)) > 0, proc.stdout


def test_xplane_bench_runs_and_prints_its_figures() -> None:
    """bench/xplane_speed.py on the small XPlane capture of tests/data (the reader's speed: never a timed test)."""
    (pb,) = (TEST_DATA / "xplane_jax_gpu").rglob("*.xplane.pb")
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "xplane_speed.py"), str(pb), "--repeat", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r"^RESULT read=([\d.]+)s floor=([\d.]+)s best_ratio=([\d.]+) median_ratio=([\d.]+) repeat=1$",
                  proc.stdout, flags=re.M)
    assert m and float(m.group(3)) > 0 and m.group(3) == m.group(4), proc.stdout
    events = re.search(r"^vm\.xplane\.pb: [\d.]+ MB, (\d+) XEvents, (\d+) event rows$", proc.stdout, flags=re.M)
    assert events and int(events.group(1)) > 0 and int(events.group(2)) > 0, proc.stdout
