"""The tab's /compare?level=job route on two real 2-GPU jobs (tests/data ddp_slow_transport, ddp_fast_transport),
through TensorBoard's WSGI app: the same document as the library's comparison of the two jobs as
`llmdiag report --json` saves them (each rank's report and the jobs[] entry), and its errors."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from tb_llmdiag import api
from tb_llmdiag.compare import compare
from test_plugin import PREFIX, make_plugin, tb_client, wait_ready
from tracepaths import REPO

SLOW, FAST = "ddp_slow_transport", "ddp_fast_transport"


def q(run: str, base: str) -> dict[str, str]:
    return {"level": "job", "run": run, "span": "1", "base_run": base, "base_span": "1"}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("job_compare_route")
    logdir = tmp / "logs"
    for run in (SLOW, FAST):
        shutil.copytree(REPO / "tests" / "data" / run, logdir / run)
    shutil.copytree(REPO / "demo_logs" / "fixed_lora_qwen1.5b", logdir / "single")
    p = make_plugin(logdir, tmp / "cache")
    c = tb_client(p)
    for run in (SLOW, FAST):
        for w in ("rank0", "rank1"):
            wait_ready(c, run, w, "1")
    wait_ready(c, "single", "rank0", "1")
    yield c, logdir
    p.close()


def test_job_compare_is_the_librarys_comparison_of_the_saved_jobs(env) -> None:
    c, logdir = env
    deadline = time.time() + 60
    while True:
        r = c.get(f"{PREFIX}/compare", query_string=q(FAST, SLOW))
        if r.status_code != 202 or time.time() > deadline:
            break
        time.sleep(0.1)
    assert r.status_code == 200, r.get_data(as_text=True)
    body = json.loads(r.get_data(as_text=True), parse_constant=lambda x: (_ for _ in ()).throw(ValueError(x)))
    saved = {run: api.report(str(logdir / run)) for run in (SLOW, FAST)}
    expected = compare((saved[SLOW]["jobs"][0], saved[SLOW]["runs"]), (saved[FAST]["jobs"][0], saved[FAST]["runs"]))
    assert body == expected
    assert body["level"] == "job" and body["verdict"].startswith("AFTER's job step is 2.8x faster (65.2 ms -> 23.2 ms")


def test_job_compare_errors(env) -> None:
    c, _ = env
    r = c.get(f"{PREFIX}/compare", query_string=q(FAST, "single"))
    assert r.status_code == 404
    assert r.get_json() == {"error": "Not found: run 'single' span '1' is not a job (fewer than two ranks)"}
    r = c.get(f"{PREFIX}/compare", query_string={k: v for k, v in q(FAST, SLOW).items() if k != "base_span"})
    assert r.status_code == 400 and r.get_json() == {"error": "Invalid argument: missing or bad query parameter 'base_span'"}
    r = c.get(f"{PREFIX}/compare", query_string={**q(FAST, SLOW), "level": "rack"})
    assert r.status_code == 400 and r.get_json() == {"error": "Invalid argument: 'level' must be run or job"}
    r = c.get(f"{PREFIX}/compare", query_string=q(FAST, "../etc"))
    assert r.status_code == 404
