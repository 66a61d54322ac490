"""Logdirs on fsspec filesystems: discovery, reading and cache keys through a real fsspec filesystem
(``memory://``, fsspec's own in-memory store; and S3 through moto's server on loopback when moto and s3fs are
installed), with the same report as from local files."""

from __future__ import annotations

import dataclasses

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from tb_llmdiag import api
from tb_llmdiag.errors import NoTracesFound
from tb_llmdiag.extras import MissingExtra
from tb_llmdiag.render.canonical_json import dumps
from tb_llmdiag.scale.dask import DaskRunner
from tb_llmdiag.tab.cache import ResultCache

fsspec = pytest.importorskip("fsspec")


def _upload(fs: object, local: Path, remote: str) -> None:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            fs.pipe(f"{remote}/{p.relative_to(local).as_posix()}", p.read_bytes())  # type: ignore[attr-defined]


@pytest.fixture()
def memjob(job16: Path) -> Iterator[str]:
    fs = fsspec.filesystem("memory")
    _upload(fs, job16, "/jobs/ddp16")
    fs.pipe("/jobs/ddp16/notes.json", b'{"not": "a trace"}')  # skipped by content, like on disk
    fs.pipe("/jobs/ddp16/.hidden/rank99.1.pt.trace.json.gz", b"x")  # hidden folders are not walked
    yield "memory://jobs/ddp16"
    fs.rm("/jobs", recursive=True)


def test_memory_logdir_report_equals_the_local_report(job16: Path, memjob: str, threads_client: object) -> None:
    local = dumps(api.report(str(job16)))
    remote = api.report(memjob)
    assert remote["root"] == "memory:///jobs/ddp16"
    assert [r["path"] for r in remote["runs"]][:2] == ["memory:///jobs/ddp16/rank0.1000000000.pt.trace.json.gz",
                                                       "memory:///jobs/ddp16/rank1.1000000000.pt.trace.json.gz"]
    assert dumps(remote) == local.replace(str(job16), "memory:///jobs/ddp16")
    # Dask workers (threads here) read the objects themselves
    assert dumps(api.report(memjob, runner=DaskRunner(threads_client))) == dumps(remote)


def test_object_versions_make_cache_keys(memjob: str) -> None:
    fs = fsspec.filesystem("memory")
    name = "/jobs/ddp16/rank2.1000000000.pt.trace.json.gz"
    tf = {t.path: t for t in api.discover(memjob).files}["memory://" + name]
    assert tf.version and tf.size_bytes == fs.size(name)
    time.sleep(0.01)
    fs.pipe(name, fs.cat(name))  # rewritten in place, same size
    after = {t.path: t for t in api.discover(memjob).files}[tf.path]
    assert after.size_bytes == tf.size_bytes and after.version != tf.version
    assert ResultCache.key(tf) != ResultCache.key(after)
    a, b = (dataclasses.replace(tf, size_bytes=1, mtime_ns=2, version=v) for v in ("etag-a", "etag-b"))
    assert ResultCache.key(a) == ResultCache.key(dataclasses.replace(a))
    assert ResultCache.key(a) != ResultCache.key(b)


def test_missing_objects_and_backends_are_one_line(memjob: str) -> None:
    with pytest.raises(NoTracesFound, match=r"memory://nothing/here: no such file, folder or bucket"):
        api.discover("memory://nothing/here")
    with pytest.raises(MissingExtra, match=r"reading nosuch://x/y: Protocol not known: nosuch"):
        api.discover("nosuch://x/y")
    index = api.discover(memjob)
    fsspec.filesystem("memory").rm("/jobs/ddp16/rank7.1000000000.pt.trace.json.gz")
    rep = api.report(index)
    bad = [r for r in rep["runs"] if r["status"] != "ok"]
    assert [(r["rank"], r["error"]) for r in bad] == [
        (7, "cannot read rank7.1000000000.pt.trace.json.gz: no such object "
            "(memory:///jobs/ddp16/rank7.1000000000.pt.trace.json.gz)")]
    assert [f["rank"] for f in rep["jobs"][0]["files"] if f["status"] != "ok"] == [7]


def test_single_object_and_file_url(job16: Path, memjob: str) -> None:
    one = api.report(memjob + "/rank4.1000000000.pt.trace.json.gz")
    assert [(r["rank"], r["status"], r["run"]) for r in one["runs"]] == [(4, "ok", "ddp16")]
    assert dumps(api.report("file://" + str(job16))) == dumps(api.report(str(job16)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_s3_logdir_on_a_local_moto_server(job16: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real S3 API (moto's server on 127.0.0.1) through s3fs: ETags are the objects' versions."""
    pytest.importorskip("moto")
    s3fs = pytest.importorskip("s3fs")
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        for k, v in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                     "AWS_ENDPOINT_URL_S3": endpoint, "AWS_ENDPOINT_URL": endpoint}.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setitem(fsspec.config.conf, "s3", {"client_kwargs": {"endpoint_url": endpoint}})
        s3fs.S3FileSystem.clear_instance_cache()
        fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint})
        fs.mkdir("runs")
        sub = tmp_path / "four"
        sub.mkdir()
        for r in range(4):
            shutil.copy(job16 / f"rank{r}.1000000000.pt.trace.json.gz", sub)
        _upload(fs, sub, "runs/four")
        fs.invalidate_cache()
        rep = api.report("s3://runs/four")
        assert dumps(rep) == dumps(api.report(str(sub))).replace(str(sub), "s3://runs/four")
        tf = api.discover("s3://runs/four").files[0]
        assert len(tf.version) == 32  # the object's ETag (an MD5 for a single-part upload)
    finally:
        server.terminate()
        server.wait(timeout=10)
        s3fs.S3FileSystem.clear_instance_cache()
