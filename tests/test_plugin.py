"""The TensorBoard plugin's routes, on werkzeug's test Client (issue #4).

The engine is real (``api.analyze(...).tab_result()`` on real Kineto traces, in threads) except where a test needs
control over timing ("a run still loading"): there the plugin is given an executor whose tasks wait on an
event (the executor is a constructor argument of the tab). Failure paths: tests/test_tab_errors.py.
"""

from __future__ import annotations

import gzip
import json
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from tracepaths import shared_trace
from werkzeug.test import Client

import tb_llmdiag
from tb_llmdiag import api
from tb_llmdiag.tab import plugin as plugin_mod
from tb_llmdiag.tab.cache import ResultCache

RESNET = "kineto_resnet50/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"


def make_logdir(root: Path) -> Path:
    logdir = root / "logs"
    (logdir / "run_a").mkdir(parents=True)
    (logdir / "run_b" / "sub").mkdir(parents=True)
    src = shared_trace(RESNET)
    shutil.copy(src, logdir / "run_a" / "worker0.1623143089861.pt.trace.json.gz")
    (logdir / "run_b" / "sub" / "worker0.1.pt.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [ {"ph": "X", '))
    (logdir / "secret.txt").write_text("not a trace")
    return logdir


def make_plugin(logdir: Path, cache: Path, **kw) -> plugin_mod.LlmDiagPlugin:
    ctx = base_plugin.TBContext(logdir=str(logdir), plugin_name_to_instance={})
    return plugin_mod.LlmDiagPlugin(ctx, cache_dir=str(cache), scan_interval_s=kw.pop("scan_interval_s", 0.2),
                                    processes=False, **kw)


def tb_client(p: plugin_mod.LlmDiagPlugin) -> Client:
    """The plugin inside TensorBoard's real WSGI app, so routes are reached under /data/plugin/llm_diag/."""
    app = application.TensorBoardWSGI([p])
    return Client(app)


PREFIX = "/data/plugin/llm_diag"


def wait_ready(c: Client, run: str, worker: str, span: str, timeout: float = 60) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = c.get(f"{PREFIX}/report", query_string={"run": run, "worker": worker, "span": span})
        if r.status_code == 200:
            return r.get_json()
        assert r.status_code == 202, r.get_data(as_text=True)
        time.sleep(0.1)
    raise AssertionError("analysis did not finish")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    """One logdir and plugin shared by the read-only tests (the analysis runs once)."""
    tmp = tmp_path_factory.mktemp("plugin")
    logdir = make_logdir(tmp)
    p = make_plugin(logdir, tmp / "cache")
    yield p, tb_client(p), logdir, tmp / "cache"
    p.close()


@pytest.fixture
def fresh_env(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    p = make_plugin(logdir, tmp_path / "cache")
    yield p, tb_client(p), logdir, tmp_path / "cache"
    p.close()


def test_is_active_listing_and_frontend_metadata(env):
    p, c, _, _ = env
    assert p.wait_scanned(10)
    assert p.is_active() is True
    meta = p.frontend_metadata()
    assert meta.es_module_path == "/index.js" and meta.tab_name == "LLM Diag"
    listing = c.get("/data/plugins_listing").get_json()
    assert listing["llm_diag"]["enabled"] is True
    assert listing["llm_diag"]["loading_mechanism"]["type"] == "IFRAME"


def test_metric_registry_route_serves_the_librarys_registry(env):
    _, c, _, _ = env
    r = c.get(f"{PREFIX}/metric_registry")
    assert r.status_code == 200 and r.headers["Cache-Control"] == "private, max-age=3600"
    assert r.get_json() == json.loads(json.dumps(api.catalogue.metrics()))


def test_inactive_without_traces(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    p = make_plugin(tmp_path / "empty", tmp_path / "cache")
    try:
        assert p.wait_scanned(10)
        assert p.is_active() is False
        body = tb_client(p).get(f"{PREFIX}/runs").get_json()
        assert body["runs"] == []
    finally:
        p.close()


def test_runs_lists_workers_spans_kind_and_status(env):
    _, c, _, _ = env
    wait_ready(c, "run_a", "worker0", "1")
    wait_ready(c, "run_b/sub", "worker0", "1")
    body = c.get(f"{PREFIX}/runs").get_json()
    runs = {r["run"]: r for r in body["runs"]}
    assert set(runs) == {"run_a", "run_b/sub"}
    a = runs["run_a"]
    assert a["status"] == "ready" and a["error"] is None
    (w,) = a["workers"]
    assert w["worker"] == "worker0"
    (s,) = w["spans"]
    assert (s["span"], s["source_kind"], s["status"]) == ("1", "kineto", "ready")
    b = runs["run_b/sub"]
    assert b["status"] == "error" and b["error"]
    assert body["trace_viewers"] == {"pytorch_profiler": False, "profile": False}


def test_runs_names_the_installed_trace_viewers(tmp_path):
    """The tab offers the PyTorch Profiler tab (Kineto runs) and the Profile/XProf tab (XPlane runs) when loaded."""
    logdir = make_logdir(tmp_path)
    ctx = base_plugin.TBContext(logdir=str(logdir), plugin_name_to_instance={"profile": object(), "scalars": object()})
    p = plugin_mod.LlmDiagPlugin(ctx, cache_dir=str(tmp_path / "cache"), scan_interval_s=0.2, processes=False)
    try:
        body = tb_client(p).get(f"{PREFIX}/runs").get_json()
        assert body["trace_viewers"] == {"pytorch_profiler": False, "profile": True}
    finally:
        p.close()


def test_report_is_the_cli_run_report(env):
    _, c, _, _ = env
    rep = wait_ready(c, "run_a", "worker0", "1")
    assert rep["status"] == "ok"
    assert (rep["run"], rep["worker"], rep["span"], rep["source_kind"]) == ("run_a", "worker0", "1", "kineto")
    for k in ("summary", "headline", "metrics", "findings", "what_if", "warnings"):
        assert k in rep
    assert len(rep["metrics"]["steps"]["per_step"]) >= 1


def test_bad_trace_reports_error_with_one_line(env):
    _, c, _, _ = env
    rep = wait_ready(c, "run_b/sub", "worker0", "1")
    assert rep["status"] == "error"
    assert rep["error"] and "\n" not in rep["error"]


def test_timeline_default_step_and_chosen_step(env):
    _, c, _, _ = env
    rep = wait_ready(c, "run_a", "worker0", "1")
    q = {"run": "run_a", "worker": "worker0", "span": "1"}
    r = c.get(f"{PREFIX}/timeline", query_string=q)
    assert r.status_code == 200
    tl = r.get_json()
    assert tl["intervals"] <= 20_000
    assert any(L["kind"] == "gpu" for L in tl["lanes"]) and any(L["id"] == "host.launch" for L in tl["lanes"])
    assert set(tl["gaps"]) == {"start_ns", "dur_ns", "cause"}
    durs = sorted(s["duration_ns"] for s in rep["metrics"]["steps"]["per_step"])
    assert tl["step"]["duration_ns"] == durs[(len(durs) - 1) // 2]
    last = rep["metrics"]["steps"]["per_step"][-1]["index"]
    tl2 = c.get(f"{PREFIX}/timeline", query_string={**q, "step": str(last)}).get_json()
    assert tl2["step"]["index"] == last
    assert c.get(f"{PREFIX}/timeline", query_string={**q, "step": "999999"}).status_code == 404
    assert c.get(f"{PREFIX}/timeline", query_string={**q, "step": "abc"}).status_code == 400


def test_steps_breakdown_sums_to_durations(env):
    _, c, _, _ = env
    rep = wait_ready(c, "run_a", "worker0", "1")
    body = c.get(f"{PREFIX}/steps", query_string={"run": "run_a", "worker": "worker0", "span": "1"}).get_json()
    assert body["steps"]
    for s in body["steps"]:
        parts = s["busy_ns"] + s["collective_ns"] + s["host_wait_ns"] + s["sync_ns"] + s["data_loader_ns"] + s["other_ns"]
        assert parts == s["duration_ns"]
    # the same numbers as the report's step rows: one breakdown, not two
    assert body["steps"] == [{k: r[k] for k in body["steps"][0]} for r in rep["metrics"]["steps"]["per_step"]]


def test_trace_download_is_the_file(env):
    _, c, logdir, _ = env
    r = c.get(f"{PREFIX}/trace", query_string={"run": "run_a", "worker": "worker0", "span": "1"})
    assert r.status_code == 200
    assert r.get_data() == (logdir / "run_a" / "worker0.1623143089861.pt.trace.json.gz").read_bytes()
    assert r.headers["Content-Disposition"] == 'attachment; filename="worker0.1623143089861.pt.trace.json.gz"'


@pytest.mark.parametrize("route", ["report", "timeline", "trace", "steps"])
@pytest.mark.parametrize("query,code", [
    ({}, 400),
    ({"run": "run_a", "worker": "worker0"}, 400),
    ({"run": "nope", "worker": "worker0", "span": "1"}, 404),
    ({"run": "../run_a", "worker": "worker0", "span": "1"}, 404),
    ({"run": "run_a/..", "worker": "worker0", "span": "1"}, 404),
    ({"run": "/etc", "worker": "passwd", "span": "1"}, 404),
    ({"run": ".", "worker": "secret.txt", "span": "1"}, 404),
    ({"run": "run_a", "worker": "../../secret.txt", "span": "1"}, 404),
    ({"run": "run_b%2Fsub", "worker": "worker0", "span": "1"}, 404),
    ({"run": "run_a", "worker": "worker0", "span": "1\x00"}, 400),
])
def test_names_are_looked_up_never_joined(env, route, query, code):
    _, c, _, _ = env
    r = c.get(f"{PREFIX}/{route}", query_string=query)
    assert r.status_code == code
    body = r.get_json()
    assert isinstance(body["error"], str) and body["error"]


@pytest.mark.parametrize("path", [
    "/../../secret.txt", "/..%2F..%2Fsecret.txt", "/%2E%2E/%2E%2E/secret.txt", "/vendor/../../setup.py",
    "/vendor%2F..%2F..%2Fsetup.py", "//etc/passwd", "/index.js/../../setup.py", "/views/", "/nonexistent.js",
])
def test_static_path_tricks_are_404(env, path):
    _, c, _, _ = env
    r = c.get(PREFIX + path)
    assert r.status_code in (404, 400), (path, r.status_code)
    assert b"import" not in r.get_data()


def test_static_assets_and_csp(env):
    _, c, _, _ = env
    r = c.get(f"{PREFIX}/index.js")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/javascript")
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    assert "export async function render" in r.get_data(as_text=True)
    r = c.get(f"{PREFIX}/vendor/uplot/uPlot.esm.js", headers={"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip"
    assert b"uPlot" in gzip.decompress(r.get_data())
    assert c.get(f"{PREFIX}/vendor/uplot/LICENSE").status_code == 200
    # the iframe page TensorBoard serves for us carries TensorBoard's own CSP, which allows our module
    page = c.get("/data/plugin_entry.html?name=llm_diag")
    assert page.status_code == 200 and "frame-src 'self' https://ui.perfetto.dev" in page.headers["Content-Security-Policy"]


def test_every_route_is_json_without_nan(env):
    _, c, _, _ = env
    wait_ready(c, "run_a", "worker0", "1")
    q = {"run": "run_a", "worker": "worker0", "span": "1"}
    for route in ("runs", "report", "timeline", "steps"):
        text = c.get(f"{PREFIX}/{route}", query_string=q).get_data(as_text=True)
        json.loads(text, parse_constant=lambda s: pytest.fail(f"{route} sent {s}"))


class GatedExecutor(ThreadPoolExecutor):
    """A thread pool whose tasks wait for ``gate`` (a run that is still being analysed) and are counted."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        super().__init__(max_workers=1)
        self.gate = gate
        self.calls: list[tuple] = []

    def submit(self, fn, /, *args, **kwargs):
        self.calls.append(args)

        def run():
            if self.gate is not None:
                assert self.gate.wait(30)
            return fn(*args, **kwargs)

        return super().submit(run)


def test_run_still_loading_answers_status_at_once(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    gate = threading.Event()
    p = make_plugin(logdir, tmp_path / "cache", workers=1, executor=GatedExecutor(gate))
    try:
        c = tb_client(p)
        q = {"run": "run_a", "worker": "worker0", "span": "1"}
        t0 = time.monotonic()
        r = c.get(f"{PREFIX}/report", query_string=q)
        assert time.monotonic() - t0 < 2.5
        assert r.status_code == 202
        st = r.get_json()
        assert st["status"] in ("pending", "analysing") and st["run"] == "run_a"
        assert c.get(f"{PREFIX}/timeline", query_string=q).status_code == 202
        runs = {x["run"]: x for x in c.get(f"{PREFIX}/runs").get_json()["runs"]}
        assert runs["run_a"]["status"] == "analysing"
        gate.set()
        assert wait_ready(c, "run_a", "worker0", "1")["status"] == "ok"
    finally:
        gate.set()
        p.close()


def test_cache_is_reused_and_outside_logdir(tmp_path: Path):
    logdir = make_logdir(tmp_path)
    cache = tmp_path / "cache"
    p1 = make_plugin(logdir, cache)
    try:
        wait_ready(tb_client(p1), "run_a", "worker0", "1")
    finally:
        p1.close()
    assert list(cache.rglob("*.report.json"))
    before = {q for q in logdir.rglob("*")}
    ex = GatedExecutor()
    p2 = make_plugin(logdir, cache, executor=ex)
    try:
        c = tb_client(p2)
        r = c.get(f"{PREFIX}/report", query_string={"run": "run_a", "worker": "worker0", "span": "1"})
        assert r.status_code == 200  # at once, from the cache
        assert not [a for a in ex.calls if a[0].run == "run_a"]
    finally:
        p2.close()
    assert {q for q in logdir.rglob("*")} == before  # nothing written into the logdir


def test_a_new_package_version_analyses_the_trace_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Issue #22: a release that adds a metric or a rule changes the report of an unchanged trace, so the package
    version is part of the cache key (ENGINE_VERSION alone would serve the old report)."""
    logdir = make_logdir(tmp_path)
    cache = tmp_path / "cache"
    q = {"run": "run_a", "worker": "worker0", "span": "1"}
    p1 = make_plugin(logdir, cache)
    try:
        wait_ready(tb_client(p1), "run_a", "worker0", "1")
    finally:
        p1.close()
    # GIVEN the cache of this version; WHEN only the package version changes, THEN the trace is analysed again
    monkeypatch.setattr(tb_llmdiag, "__version__", tb_llmdiag.__version__ + ".next")
    gate = threading.Event()
    ex = GatedExecutor(gate)
    p2 = make_plugin(logdir, cache, executor=ex)
    try:
        assert tb_client(p2).get(f"{PREFIX}/report", query_string=q).status_code == 202
        deadline = time.time() + 10  # the analysis is queued by the plugin's own thread
        while not [a for a in ex.calls if a[0].run == "run_a"] and time.time() < deadline:
            time.sleep(0.05)
        assert [a for a in ex.calls if a[0].run == "run_a"]
    finally:
        gate.set()
        p2.close()
    # and back on the version that filled it, the same cache answers at once: the version alone made the miss
    monkeypatch.undo()
    ex3 = GatedExecutor()
    p3 = make_plugin(logdir, cache, executor=ex3)
    try:
        assert tb_client(p3).get(f"{PREFIX}/report", query_string=q).status_code == 200
        assert not [a for a in ex3.calls if a[0].run == "run_a"]
    finally:
        p3.close()


def test_cache_dir_inside_logdir_is_refused(tmp_path: Path):
    c = ResultCache(tmp_path / "logs" / ".cache", logdir=str(tmp_path / "logs"))
    assert c.root is not None and not str(c.root).startswith(str(tmp_path / "logs"))


def test_new_trace_is_discovered_without_restart(fresh_env):
    p, c, logdir, _ = fresh_env
    wait_ready(c, "run_a", "worker0", "1")
    (logdir / "run_c").mkdir()
    shutil.copy(logdir / "run_a" / "worker0.1623143089861.pt.trace.json.gz", logdir / "run_c" / "rank0.1.pt.trace.json.gz")
    deadline = time.time() + 10
    while time.time() < deadline:
        names = [r["run"] for r in c.get(f"{PREFIX}/runs").get_json()["runs"]]
        if "run_c" in names:
            break
        time.sleep(0.1)
    assert "run_c" in names
    assert wait_ready(c, "run_c", "rank0", "1")["status"] == "ok"


def test_job_route_is_the_cli_job_section(tmp_path: Path):
    """A run folder with one trace per rank: /job answers 202 until every rank is analysed, then the same job
    entry as `llmdiag report --json` (straggler rank 1, the rank with 2x the tokens); a single-rank run is 404."""
    demo = Path(__file__).resolve().parents[1] / "demo_logs" / "ddp_straggler_2gpu"
    logdir = tmp_path / "logs"
    shutil.copytree(demo, logdir / "ddp")
    p = make_plugin(logdir, tmp_path / "cache")
    try:
        c = tb_client(p)
        assert p.wait_scanned(30)
        deadline = time.time() + 120
        while True:
            r = c.get(f"{PREFIX}/job", query_string={"run": "ddp", "span": "1"})
            if r.status_code == 200 or time.time() > deadline:
                break
            assert r.status_code == 202, r.get_data(as_text=True)
            assert r.get_json()["rank_count"] == 2
            time.sleep(0.2)
        assert r.status_code == 200, r.get_data(as_text=True)
        job = r.get_json()
        expected = api.report(str(logdir))["jobs"][0]
        assert job == json.loads(json.dumps(expected))
        assert job["metrics"]["straggler_rank"] == 1 and job["findings"][0]["id"] == "straggler"
        assert [f["rank"] for f in job["files"]] == [0, 1]
        # asked again with the same ranks' entries, the job is answered from memory: no rank's summary is read
        # again (1,000 ranks are read once, #33)
        reads = []
        cache = p._catalog.cache
        real_get = cache.get
        cache.get = lambda *a, **k: reads.append(a[1]) or real_get(*a, **k)  # type: ignore[method-assign]
        again = c.get(f"{PREFIX}/job", query_string={"run": "ddp", "span": "1"})
        cache.get = real_get  # type: ignore[method-assign]
        assert again.status_code == 200 and again.get_json() == job and "rank_summary" not in reads
        assert c.get(f"{PREFIX}/job", query_string={"run": "ddp", "span": "nope"}).status_code == 404
        assert c.get(f"{PREFIX}/job", query_string={"run": "ddp"}).status_code == 400
    finally:
        p.close()


def test_a_partial_report_is_served_and_cached_like_a_complete_one(tmp_path: Path):
    # GIVEN the first half of a real trace (plain JSON cut mid-event): the reader keeps what it read
    logdir = tmp_path / "logs" / "cut"
    logdir.mkdir(parents=True)
    text = gzip.decompress(shared_trace(RESNET).read_bytes())
    (logdir / "worker0.1.pt.trace.json").write_bytes(text[: len(text) // 2])
    p = make_plugin(tmp_path / "logs", tmp_path / "cache")
    try:
        c = tb_client(p)
        assert p.wait_scanned(10)
        # THEN /report answers 200 with the partial report, saying how far the read got
        rep = wait_ready(c, "cut", "worker0", "1")
        assert rep["status"] == "partial" and rep["read_state"]["complete"] is False
        # (the whole of a cut file is read: read_share 1.0, the reason says it ends early, and where)
        assert rep["read_state"]["reason"] == f"the JSON ends early at byte {len(text) // 2:,} (file truncated?)"
        assert rep["error"] == rep["read_state"]["reason"]
        # and only findings the read part supports: no claim of absence or of a peak (issue #15)
        assert not {"no_device_activity", "memory_headroom"} & {f["id"] for f in rep["findings"]}
        # and its step rows and timelines are served too (they cover what was read)
        q = {"run": "cut", "worker": "worker0", "span": "1"}
        assert c.get(f"{PREFIX}/steps", query_string=q).status_code == 200
        # AND the cached partial report is valid: asked again after a rescan it is served, not recomputed
        time.sleep(0.5)
        again = c.get(f"{PREFIX}/report", query_string=q)
        assert again.status_code == 200 and again.get_json() == rep
    finally:
        p.close()
