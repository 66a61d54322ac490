"""Collectives on a slow link (#33 part 3): the job's transfer bus bandwidth per purpose against the GPU's link.

The oracle reads both ranks' raw JSON with the json module (no product code): the all-reduce kernels in time order
on each rank are one collective per position; its transfer is the shorter of the two durations (both leave
together), its bytes the args' In msg nelems x 2 (bf16); bus bandwidth for 2 ranks = algorithm bandwidth
(nccl-tests: 2 (n - 1) / n = 1). ddp_slow_transport runs NCCL over TCP sockets on loopback (P2P, SHM and IB off,
its truth.json) on H200s; ddp_fast_transport is the same job over NVLink."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tb_llmdiag import api
from tb_llmdiag.metrics.comm.purpose import link_of

DATA = Path(__file__).resolve().parents[1] / "data"


def oracle_busbw(job: str) -> float:
    ranks = []
    for p in sorted((DATA / job).glob("rank*.pt.trace.json.gz")):
        ev = json.load(gzip.open(p))["traceEvents"]
        ranks.append(sorted((e for e in ev if e.get("cat") == "kernel" and e["name"].startswith(
            "ncclDevKernel_AllReduce")), key=lambda e: e["ts"]))  # fmt: skip
    pairs = [(a, b) for a, b in zip(*ranks) if "In msg nelems" in a["args"] and "In msg nelems" in b["args"]]
    nbytes = sum(a["args"]["In msg nelems"] * 2 for a, _ in pairs)
    transfer_us = sum(min(a["dur"], b["dur"]) for a, b in pairs)
    return nbytes / (transfer_us * 1e-6)


@pytest.mark.parametrize(("job", "fires"), [("ddp_slow_transport", True), ("ddp_fast_transport", False)])
def test_slow_link_from_the_transfer_alone(job: str, fires: bool) -> None:
    rep = api.report(str(DATA / job))
    m = rep["jobs"][0]["metrics"]
    want = oracle_busbw(job)
    assert m["link"] == "NVLink 4" and m["link_bytes_per_s"] == 450e9  # the H200 row of LINKS
    assert m["link_purpose"] == "data_parallel" and m["link_median_bytes"] == 27_525_120
    assert m["link_busbw_bytes_per_s"] == pytest.approx(want, rel=1e-9)
    assert m["link_busbw_ratio"] == pytest.approx(want / 450e9, rel=1e-9)
    assert m["link_network_ratio"] == pytest.approx(want / 50e9, rel=1e-9)
    ids = [f["id"] for f in rep["jobs"][0]["findings"]]
    assert ("slow_link_collectives" in ids) is fires
    if fires:  # 4.07 GB/s: 0.9 % of NVLink, 8 % of a 400 Gb/s NIC; first, its value the purpose's exposed share
        assert want == pytest.approx(4.075e9, rel=1e-3)
        f = rep["jobs"][0]["findings"][0]
        assert f["id"] == "slow_link_collectives" and f["value"] == m["link_exposed_share"] > 0.6
        assert "do not say which link" in f["summary"] and "data-parallel" in f["summary"]
    else:  # NVLink: 190 GB/s, 42 % of the link
        assert want == pytest.approx(189.7e9, rel=1e-3)
    # no run-level claim: one rank cannot tell waiting from transfer
    assert all(f["id"] != "slow_link_collectives" for r in rep["runs"] for f in r["findings"])


def test_link_table() -> None:
    assert link_of("NVIDIA H100 80GB HBM3") == ("NVLink 4", 450e9)
    assert link_of("NVIDIA H100 PCIe") == ("PCIe 5.0 x16", 64e9)
    assert link_of("NVIDIA H800") == ("NVLink (export part, 8 links)", 200e9)
    assert link_of("NVIDIA A100-SXM4-80GB") == ("NVLink 3", 300e9)
    assert link_of("NVIDIA A100-PCIE-40GB") == ("PCIe 4.0 x16", 32e9)
    assert link_of("NVIDIA B200") == ("NVLink 5", 900e9)
    assert link_of("Tesla V100-SXM2-16GB") == ("NVLink 2", 150e9)
    assert link_of("NVIDIA GeForce RTX 4090") == ("PCIe 4.0 x16", 32e9)
    assert link_of("AMD Instinct MI300X") == ("Infinity Fabric", 448e9)
    assert link_of("Some Accelerator") == (None, None) and link_of(None) == (None, None)
