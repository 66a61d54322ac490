"""The job generator and the job speed bench (a smoke run on few ranks: the figures are not asserted here)."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np

from tracepaths import REPO, shared_trace

sys.path.insert(0, str(REPO / "bench"))
from job_generator import DLRM, base_summaries, generate  # noqa: E402
from tb_llmdiag.jobs.cross_rank import analyze_job  # noqa: E402


def test_generated_job_keeps_the_physics_and_finds_the_planted_straggler() -> None:
    shared_trace("external/facebookresearch_param/dlrm_kineto")
    base = base_summaries(sorted(DLRM.glob("*.pt.trace.json.gz")))
    gen = generate(base, 40, steps=3, plant=13)
    assert [s.rank for s in gen] == list(range(40)) and gen[5].label.startswith("gen_rank5_from_worker5")
    assert all(s.n_steps == 3 and s.n_collectives == 24 for s in gen)
    job = analyze_job(gen)
    assert job.notes == () and job.matched.kind.size == 24 and list(job.steps) == [10, 11, 12]
    assert job.ranks[job.straggler_pos] == 13
    # every collective's transfer is the planted rank's duration: half the real job's minimum
    real = analyze_job(base)
    np.testing.assert_array_equal(np.sort(job.matched.transfer_ns)[::3], np.sort(real.matched.transfer_ns // 2))


def test_job_speed_bench_runs_and_prints_its_figures() -> None:
    shared_trace("external/facebookresearch_param/dlrm_kineto")
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "job_speed.py"), "--ranks", "50", "--steps", "2",
                           "--plant", "7"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^straggler found: rank 7 \(planted 7\)", proc.stdout, flags=re.M), proc.stdout
    m = re.search(r"^RESULT total=([\d.]+)s traced_peak=(\d+)MB peak_rss=(\d+)MB$", proc.stdout, flags=re.M)
    assert m and float(m.group(1)) > 0
