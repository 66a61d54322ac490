"""Shared fixtures for the scale tests: a generated 16-rank job (real DDP ranks, shifted, perturbed, renamed)
and an in-process Dask LocalCluster on loopback (threads: processes are not the point of most tests)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

from tracepaths import REPO

sys.path.insert(0, str(REPO / "bench"))
from job_files import write_job  # noqa: E402

distributed = pytest.importorskip("distributed")  # CI installs the [dask] extra (setup.py test extra)


@pytest.fixture(scope="session")
def job16(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("job16") / "ddp16"
    write_job(out, 16, keep_ms=40, seed=1)
    return out


@pytest.fixture(scope="session")
def threads_client() -> Iterator[object]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client
