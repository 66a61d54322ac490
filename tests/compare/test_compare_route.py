"""The tab's /compare route (docs/http_api.md) on the demo seed and fixed runs, through TensorBoard's WSGI app."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tb_llmdiag import api
from test_plugin import PREFIX, make_plugin, tb_client, wait_ready
from tracepaths import REPO

SEED = "seed_lora_qwen1.5b"
FIXED = "fixed_lora_qwen1.5b"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("compare_route")
    logdir = tmp / "logs"
    for run in (SEED, FIXED):
        shutil.copytree(REPO / "demo_logs" / run, logdir / run)
    (logdir / "broken").mkdir()
    (logdir / "broken" / "w.1.pt.trace.json").write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "na')
    p = make_plugin(logdir, tmp / "cache")
    c = tb_client(p)
    reports = {run: wait_ready(c, run, "rank0", "1") for run in (SEED, FIXED)}
    wait_ready(c, "broken", "w", "1")
    yield c, reports
    p.close()


def q(run: str, base: str, worker: str = "rank0", base_worker: str = "rank0") -> dict[str, str]:
    return {"run": run, "worker": worker, "span": "1", "base_run": base, "base_worker": base_worker, "base_span": "1"}


def test_compare_is_the_librarys_comparison_of_the_two_reports(env) -> None:
    c, reports = env
    r = c.get(f"{PREFIX}/compare", query_string=q(FIXED, SEED))
    assert r.status_code == 200
    body = json.loads(r.get_data(as_text=True), parse_constant=lambda x: (_ for _ in ()).throw(ValueError(x)))
    assert body == api.compare(reports[SEED], reports[FIXED])
    assert body["before"]["run"] == SEED and body["after"]["run"] == FIXED
    assert body["verdict"].startswith("AFTER is 4.9x faster in tokens/s")


def test_compare_errors(env) -> None:
    c, _ = env
    missing = {k: v for k, v in q(FIXED, SEED).items() if k != "base_span"}
    r = c.get(f"{PREFIX}/compare", query_string=missing)
    assert r.status_code == 400 and r.get_json() == {"error": "Invalid argument: missing query parameter 'base_span'"}
    r = c.get(f"{PREFIX}/compare", query_string=q(FIXED, "../etc"))
    assert r.status_code == 404
    r = c.get(f"{PREFIX}/compare", query_string=q(FIXED, "broken", base_worker="w"))
    assert r.status_code == 422
    body = r.get_json()
    assert body["status"] == "error" and body["error"].startswith("broken (w, span 1) could not be analysed: ")
