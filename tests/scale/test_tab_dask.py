"""The tab on a Dask cluster (``LLMDIAG_DASK``) and over an fsspec logdir (``memory://``)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from test_plugin import PREFIX, make_plugin, tb_client, wait_ready

from tb_llmdiag import api
from tb_llmdiag.scale.dask import ClusterExecutor

fsspec = pytest.importorskip("fsspec")


def _two_ranks(job16: Path, dest: Path) -> Path:
    run = dest / "logs" / "ddp"
    run.mkdir(parents=True)
    for r in (0, 1):
        shutil.copy(job16 / f"rank{r}.1000000000.pt.trace.json.gz", run)
    return dest / "logs"


def test_tab_analyses_on_the_cluster_named_by_llmdiag_dask(job16: Path, tmp_path: Path, threads_client: object,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    logdir = _two_ranks(job16, tmp_path)
    monkeypatch.setenv("LLMDIAG_DASK", threads_client.scheduler.address)  # type: ignore[attr-defined]
    p = make_plugin(logdir, tmp_path / "cache")
    try:
        assert isinstance(p._catalog.queue._executor, ClusterExecutor)
        c = tb_client(p)
        got = wait_ready(c, "ddp", "rank1", "1")
        (tf,) = [f for f in api.discover(str(logdir)).files if f.worker == "rank1"]
        assert got == api.analyze(tf, summary=True, strict=True).tab_result()["report"]
        prefixes = threads_client.run_on_scheduler(  # type: ignore[attr-defined]
            lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
        assert "analyse_task" in prefixes  # the tab's task ran on the cluster's workers
    finally:
        p.close()


def test_a_bad_llmdiag_dask_falls_back_to_local_analysis(job16: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    logdir = _two_ranks(job16, tmp_path)
    monkeypatch.setenv("LLMDIAG_DASK", "not-an-address")
    with caplog.at_level(logging.WARNING):
        p = make_plugin(logdir, tmp_path / "cache")
    try:
        assert not isinstance(p._catalog.queue._executor, ClusterExecutor)
        assert "LLMDIAG_DASK=not-an-address: --dask 'not-an-address': expected a scheduler address" in caplog.text
        assert wait_ready(tb_client(p), "ddp", "rank0", "1")["status"] == "ok"
    finally:
        p.close()


def test_tab_over_a_memory_logdir(job16: Path, tmp_path: Path) -> None:
    fs = fsspec.filesystem("memory")
    for r in (0, 1):
        fs.pipe(f"/tablogs/ddp/rank{r}.1000000000.pt.trace.json.gz",
                (job16 / f"rank{r}.1000000000.pt.trace.json.gz").read_bytes())
    p = make_plugin("memory://tablogs", tmp_path / "cache")  # type: ignore[arg-type]
    try:
        c = tb_client(p)
        rep = wait_ready(c, "ddp", "rank0", "1")
        assert rep["path"] == "memory:///tablogs/ddp/rank0.1000000000.pt.trace.json.gz" and rep["status"] == "ok"
        raw = c.get(f"{PREFIX}/trace", query_string={"run": "ddp", "worker": "rank0", "span": "1"})
        assert raw.status_code == 200
        assert raw.get_data() == (job16 / "rank0.1000000000.pt.trace.json.gz").read_bytes()
    finally:
        p.close()
        fs.rm("/tablogs", recursive=True)
