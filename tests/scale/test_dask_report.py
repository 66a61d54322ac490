"""`llmdiag report --dask`: the same JSON as the plain report, wherever the ranks ran; failures stay per rank."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tb_llmdiag import api
from tb_llmdiag.render.canonical_json import dumps
from tb_llmdiag.scale.dask import DaskRunner
from tb_llmdiag.scale.runner import ExecutorRunner, InlineRunner
from tracepaths import REPO

PY = sys.executable


def _cli(*args: str, env: dict[str, str] | None = None, code: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [PY, "-c", code, *args] if code else [PY, "-m", "tb_llmdiag", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=240,
                          env={**os.environ, **(env or {})})


def test_dask_threads_report_equals_the_local_report(job16: Path, threads_client: object) -> None:
    local = api.report(str(job16))
    on_dask = api.report(str(job16), runner=DaskRunner(threads_client))
    assert dumps(on_dask) == dumps(local)
    assert [r["status"] for r in local["runs"]] == ["ok"] * 16
    (job,) = local["jobs"]
    assert (job["run"], job["status"], len(job["files"]), job["view"]["ranks"]) == ("ddp16", "ok", 16, list(range(16)))


def test_cli_dask_local2_json_equals_the_plain_json(job16: Path) -> None:
    """The CLI's `--dask local:2`: a LocalCluster of 2 worker processes on loopback, workers reading the files."""
    plain = _cli("report", str(job16), "--json")
    on_dask = _cli("report", str(job16), "--json", "--dask", "local:2")
    assert plain.returncode == 0, plain.stderr
    assert on_dask.returncode == 0, on_dask.stderr
    assert on_dask.stdout == plain.stdout
    assert len(json.loads(plain.stdout)["runs"]) == 16
    pool = _cli("report", str(job16), "--json", "--workers", "2")  # 2 local spawned processes, no Dask
    assert pool.returncode == 0, pool.stderr
    assert pool.stdout == plain.stdout


def test_plain_report_imports_no_dask_and_no_fsspec(job16: Path) -> None:
    code = ("import sys; from tb_llmdiag import cli; rc = cli.main(sys.argv[1:]); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed', 'fsspec')); "
            "print('IMPORTED', bad); sys.exit(rc)")
    out = _cli("report", str(job16), "--json", code=code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("IMPORTED []")


def test_dask_missing_is_one_line_and_exit_code_2(job16: Path) -> None:
    code = ("import sys; sys.modules['distributed'] = None; from tb_llmdiag import cli; sys.exit(cli.main(sys.argv[1:]))")
    out = _cli("report", str(job16), "--dask", "local:1", code=code)
    assert out.returncode == 2
    assert out.stderr == ("llmdiag: --dask needs the Python package 'distributed', which is not installed: "
                          "pip install '.[dask]' in a clone of the repository (the package's [dask] extra)\n")


@pytest.mark.parametrize("address, says", [("local:0", "at least 1 worker"), ("host:8786", "expected a scheduler address"),
                                           ("tcp://127.0.0.1:9", "cannot reach the Dask scheduler")])
def test_bad_scheduler_address_is_one_line_and_exit_code_2(job16: Path, address: str, says: str) -> None:
    out = _cli("report", str(job16), "--dask", address, env={"LLMDIAG_DASK_CONNECT_TIMEOUT_S": "2"})
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_unreadable_and_vanished_ranks_are_error_entries_of_the_job(job16: Path, tmp_path: Path,
                                                                    threads_client: object) -> None:
    job = tmp_path / "ddp16"
    shutil.copytree(job16, job)
    index = api.discover(str(job))
    (job / "rank3.1000000000.pt.trace.json.gz").write_bytes(b"garbage, not a trace")  # rewritten after discovery
    os.unlink(job / "rank5.1000000000.pt.trace.json.gz")  # gone between discovery and analysis
    local = api.report(index)
    assert dumps(api.report(index, runner=DaskRunner(threads_client))) == dumps(local)
    status = {r["rank"]: r["status"] for r in local["runs"]}
    assert [r for r, s in status.items() if s != "ok"] == [3, 5]
    (j,) = local["jobs"]
    assert [f["rank"] for f in j["files"] if f["status"] != "ok"] == [3, 5]
    assert j["status"] == "ok" and j["view"]["ranks"] == [r for r in range(16) if r not in (3, 5)]
    assert any("2 of 16 ranks missing: 3, 5" in n for n in j["notes"])


def _boom(x: int) -> int:
    if x == 2:
        raise RuntimeError("bug on item 2")
    return x * 10


@pytest.mark.parametrize("make", ["inline", "threads", "dask"])
def test_runners_hand_back_every_outcome(make: str, threads_client: object) -> None:
    from concurrent.futures import ThreadPoolExecutor

    runner = {"inline": InlineRunner, "threads": lambda: ExecutorRunner(ThreadPoolExecutor(2)),
              "dask": lambda: DaskRunner(threads_client)}[make]()
    out = sorted(runner.map_unordered(_boom, [0, 1, 2, 3], ["a", "b", "c", "d"]), key=lambda o: o[0])
    assert [(i, r) for i, r, _ in out] == [(0, 0), (1, 10), (2, None), (3, 30)]
    assert [str(e) if e else None for _, _, e in out] == [None, None, "bug on item 2", None]


def test_a_killed_worker_loses_no_rank(tmp_path: Path) -> None:
    """2 worker processes (with nannies) on loopback; one is SIGKILLed while it analyses a rank: the scheduler
    runs its tasks again elsewhere and every rank is reported, as the local report has them."""
    distributed = pytest.importorskip("distributed")
    sys.path.insert(0, str(REPO / "bench"))
    from job_files import write_job

    job = tmp_path / "ddp6"
    write_job(job, 6, seed=2)  # whole captures: ~0.3-1 s per rank, long enough to be caught mid-task
    index = api.discover(str(job))
    local = api.report(index)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        box: dict[str, object] = {}
        t = threading.Thread(target=lambda: box.update(rep=api.report(index, runner=DaskRunner(client))))
        t.start()
        victim, deadline = None, time.monotonic() + 60
        while victim is None and time.monotonic() < deadline:
            busy = {w: ks for w, ks in client.processing().items() if ks}
            victim = next(iter(busy), None)
            time.sleep(0.02)
        assert victim is not None, "no task was ever seen running"
        killed_keys = client.processing()[victim]
        os.kill(pids[victim], signal.SIGKILL)
        t.join(timeout=180)
        assert not t.is_alive()
    assert killed_keys
    assert dumps(box["rep"]) == dumps(local)
    assert [r["status"] for r in local["runs"]] == ["ok"] * 6
