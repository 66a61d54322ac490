"""The trace view's index (tb_llmdiag/traceview): nesting depth, merge pyramids and range queries against
brute-force Python written here (loops, no numpy tricks), the binary cache file, evidence ranges."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from tracepaths import TEST_DATA

from tb_llmdiag import api
from tb_llmdiag.findings.engine import evidence_ranges
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.tab import arrays as array_file
from tb_llmdiag.traceview.build import build
from tb_llmdiag.traceview.index import BadIndex, TraceIndex
from tb_llmdiag.traceview.lod import build_levels, depths, query

SEED = next((TEST_DATA / "gpu_seed").glob("*.pt.trace.json.gz"))


def stack_depths(iv: list[tuple[int, int]]) -> list[int]:
    """Depth by an explicit stack over intervals sorted by (start, -duration)."""
    out, stack = [], []
    for s, e in iv:
        while stack and stack[-1] <= s:
            stack.pop()
        out.append(len(stack))
        stack.append(max(e, s + 1))
    return out


def random_flame(rng: np.random.Generator, n_roots: int) -> list[tuple[int, int]]:
    """Properly nested intervals: each node's children split part of it."""
    out: list[tuple[int, int]] = []

    def grow(s: int, e: int, depth: int) -> None:
        out.append((s, e))
        if depth >= 5 or e - s < 8:
            return
        t = s
        while t < e - 4 and rng.random() < 0.8:
            a = t + int(rng.integers(0, max(1, (e - t) // 4)))
            b = min(e, a + int(rng.integers(1, max(2, (e - a) // 2))))
            grow(a, b, depth + 1)
            t = b
    t = 0
    for _ in range(n_roots):
        a = t + int(rng.integers(0, 50))
        b = a + int(rng.integers(10, 5000))
        grow(a, b, 0)
        t = b
    return sorted(out, key=lambda x: (x[0], x[0] - x[1]))


def test_depth_is_the_nesting_level():
    rng = np.random.default_rng(7)
    iv = random_flame(rng, 40)
    s = np.array([a for a, _ in iv], np.int64)
    e = np.array([b for _, b in iv], np.int64)
    got = depths(np.zeros(len(iv), np.int64), s, e)
    assert got.tolist() == stack_depths(iv)
    assert got.max() >= 3  # the data nests
    # two groups side by side: each counted on its own
    g = np.r_[np.zeros(len(iv), np.int64), np.ones(len(iv), np.int64)]
    both = depths(g, np.r_[s, s], np.r_[e, e])
    assert both.tolist() == stack_depths(iv) * 2


def brute_merge(iv: list[tuple[int, int, int]], tol: float) -> list[tuple[int, int, int, int]]:
    """(start, end, longest member's id, count) of a row's intervals merged when the gap to the running end <= tol;
    an event longer than tol (wider than a pixel) stands alone (docs/http_api.md /trace_view)."""
    out: list[list[int]] = []
    best: list[int] = []
    wide_before = False
    for s, e, i in iv:
        wide = e - s > tol
        if out and s <= out[-1][1] + tol and not wide and not wide_before:
            g = out[-1]
            g[1] = max(g[1], e)
            g[3] += 1
            if e - s > best[-1]:
                best[-1], g[2] = e - s, i
        else:
            out.append([s, e, i, 1])
            best.append(e - s)
        wide_before = wide
    return [tuple(g) for g in out]  # type: ignore[misc]


def test_an_event_wider_than_a_pixel_stands_alone():
    """#36: four back-to-back steps of 0.6 s on a host thread drawn at ~1 ms per pixel came back as one interval
    "ProfilerStep#0 (+3)". Each is hundreds of pixels wide: each stands alone, at every level of the pyramid;
    the narrow events between two of them still merge with each other (and only with each other)."""
    ms = 1_000_000
    # 4 contiguous wide events (1 ns apart), then a cluster of 50 narrow ones 2 us apart, then 2 more wide ones
    wide = [(k * 600 * ms + k, (k + 1) * 600 * ms + k) for k in range(4)]
    t0 = wide[-1][1] + 1_000
    narrow = [(t0 + 3_000 * j, t0 + 3_000 * j + 1_000) for j in range(50)]
    t1 = narrow[-1][1] + 10
    wide2 = [(t1, t1 + 300 * ms), (t1 + 300 * ms, t1 + 700 * ms)]
    iv = wide + narrow + wide2
    s = np.array([a for a, _ in iv], np.int64)
    e = np.array([b for _, b in iv], np.int64)
    ev = np.arange(len(iv), dtype=np.int64)
    levels = build_levels(np.zeros(len(iv), np.int64), s, e, ev, 1, int(e[-1]))
    assert [lv.start.shape[0] for lv in levels] == [56, 7, 1]  # as recorded; the narrow ones merged; all merged
    span = int(e[-1])
    for px in (1440, 200):
        res = span / px  # ~2 ms and ~16 ms per pixel: every wide event is wider than a pixel
        got = query(levels, 0, 0, span, res, e - s)
        rows = list(zip(got.start.tolist(), got.end.tolist(), got.ev.tolist(), got.n.tolist()))
        assert rows == [(a, b, k, 1) for k, (a, b) in enumerate(wide)] + [
            (narrow[0][0], narrow[-1][1], 4, 50)
        ] + [(a, b, 54 + k, 1) for k, (a, b) in enumerate(wide2)], px
    # zoomed out past the events' widths, they merge as before
    got = query(levels, 0, 0, span, 1_000 * ms, e - s)
    assert (got.n.tolist(), got.ev.tolist()) == ([len(iv)], [0])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_query_equals_brute_force_merge(seed):
    """A row of disjoint intervals: every query returns what merging the overlapping intervals at the
    resolution gives, however the pyramid got there, with counts and the longest member's id."""
    rng = np.random.default_rng(seed)
    n = 20_000
    gaps = rng.exponential(2_000, n).astype(np.int64)
    durs = rng.integers(1, 5_000, n)
    s = np.cumsum(gaps + np.r_[0, durs[:-1]])
    e = s + durs
    ev = np.arange(n, dtype=np.int64)
    levels = build_levels(np.zeros(n, np.int64), s, e, ev, 1, int(e[-1]))
    assert len(levels) > 3
    rows = list(zip(s.tolist(), e.tolist(), ev.tolist()))
    for _ in range(30):
        a = int(rng.integers(0, int(e[-1])))
        b = a + int(rng.integers(1_000, int(e[-1]) // 2))
        res = float(rng.choice([0.5, 10, 900, 5_000, 70_000, 2e6]))
        got = query(levels, 0, a, b, res, e - s)
        inside = [r for r in rows if r[1] > a and r[0] < b]
        # groups reach past the range only through members overlapping it: merge those, compare the interior
        want = brute_merge(inside, int(res)) if int(res) > 0 else [(x[0], x[1], x[2], 1) for x in inside]
        g = list(zip(got.start.tolist(), got.end.tolist(), got.ev.tolist(), got.n.tolist()))
        # whole-row groups may extend past the range's edges; the ones strictly inside must be equal
        strict = [x for x in want if x[0] > a + res * 2 + 5_000 and x[1] < b - res * 2 - 5_000]
        assert all(x in g for x in strict), (a, b, res)
        # every event overlapping the range is inside exactly one interval returned
        starts = np.array([x[0] for x in g])
        for s0, e0, _ in inside[:: max(1, len(inside) // 200)]:
            k = int(np.searchsorted(starts, s0, "right")) - 1
            assert k >= 0 and g[k][0] <= s0 and e0 <= g[k][1]
        if res < 1:  # below a nanosecond per pixel: exactly the recorded intervals
            assert g == [(x[0], x[1], x[2], 1) for x in inside]


def test_answers_stay_small_at_any_zoom():
    trace = load_trace(str(SEED))
    meta, arr = build(trace)
    ix = TraceIndex.load(meta, arr)
    span = meta["span_ns"]
    for a, b in [(0, span), (0, span // 100), (span // 2, span // 2 + 10_000)]:
        v = ix.view(a, b, 1440)
        body = json.dumps(v)
        assert len(body) < 1_000_000
        for lane in v["lanes"]:
            if lane["kind"] == "steps":  # step boundaries are never merged
                continue
            for row in lane.get("rows", []):
                # merged at one pixel: two intervals never sit closer than a pixel, unless one of them is an
                # event wider than a pixel (it stands alone)
                st, du, n = np.array(row["start_ns"]), np.array(row["dur_ns"]), np.array(row["n"])
                res = v["resolution_ns"]
                alone = (du > res) & (n == 1)
                apart = st[1:] > (st + du)[:-1] + res - 1
                assert np.all(apart | alone[1:] | alone[:-1]) or res < 1_000


def test_lanes_and_flow_against_the_raw_json():
    """Lanes and the launch -> kernel flow checked against the trace file read with the json module."""
    raw = json.load(gzip.open(SEED))["traceEvents"]
    kernels = [e for e in raw if e.get("cat") == "kernel"]
    streams = {e["tid"] for e in kernels}
    trace = load_trace(str(SEED))
    meta, arr = build(trace)
    ix = TraceIndex.load(meta, arr)
    gpu_lanes = {ln["id"] for ln in meta["lanes"] if ln["kind"] == "gpu"}
    mem_streams = {e["tid"] for e in raw if e.get("cat") in ("gpu_memcpy", "gpu_memset")}
    assert gpu_lanes == {f"gpu0.s{t}" for t in streams | mem_streams}
    host_tids = {e["tid"] for e in raw if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime", "python_function")}
    assert {ln["tid"] for ln in meta["lanes"] if ln["kind"] == "host"} >= {int(t) for t in host_tids if isinstance(t, int)}
    k = kernels[len(kernels) // 2]
    launch = next(e for e in raw if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") == k["args"]["correlation"])
    found = ix.search(k["name"][:60], limit=100_000)
    ev = next(e for e in found["events"] if e["category"] != "runtime" and abs(e["dur_ns"] - round(k["dur"] * 1000)) <= 1
              and e["name"] == k["name"])
    detail = ix.event(ev["ev"])
    assert detail["correlation"] == k["args"]["correlation"]
    assert [f["name"] for f in detail["flow"]] == [launch["name"]]
    assert detail["flow"][0]["lane"] == f"host.{launch['tid']}"


def test_array_file_round_trip_and_damage(tmp_path: Path):
    trace = load_trace(str(SEED))
    meta, arr = build(trace)
    p = tmp_path / "k.traceview.bin"
    array_file.write(p, 2, "k", "traceview.bin", arr)
    back = array_file.read(p, 2, "k", "traceview.bin")
    assert back is not None and set(back) == set(arr)
    assert all(np.array_equal(back[k], arr[k]) for k in arr)
    ix = TraceIndex.load(meta, back)
    assert ix.view(0, meta["span_ns"], 800)["intervals"] > 0
    assert array_file.read(p, 2, "other", "traceview.bin") is None  # another entry's key
    data = p.read_bytes()
    p.write_bytes(data[:-100])  # cut short
    assert array_file.read(p, 2, "k", "traceview.bin") is None
    p.write_bytes(b"garbage\n" + data)
    assert array_file.read(p, 2, "k", "traceview.bin") is None


@pytest.mark.parametrize("damage", ["unsorted", "ev_range", "offsets", "missing"])
def test_damaged_index_is_refused(damage):
    trace = load_trace(str(SEED))
    meta, arr = build(trace)
    arr = {k: v.copy() for k, v in arr.items()}
    if damage == "unsorted":
        arr["lv0_start"][5], arr["lv0_start"][6] = arr["lv0_start"][6] + 10, arr["lv0_start"][5]
        arr["lv0_start"][5] = arr["lv0_start"][7] + 1
    elif damage == "ev_range":
        arr["lv1_ev"][0] = meta["n_events"] + 5
    elif damage == "offsets":
        arr["lv0_off"][3] = arr["lv0_off"][-1] + 1
    else:
        del arr["ev_corr"]
    with pytest.raises(BadIndex):
        TraceIndex.load(meta, arr)


def test_evidence_ranges_keep_the_longest_in_time_order():
    raw = [[50, 60], {"start_ns": 0, "duration_ns": 100}, {"start_ns": 200, "end_ns": 201}, [5, 1], "x", [None, 3]]
    assert evidence_ranges(raw) == [[0, 100], [50, 60], [200, 201]]
    many = [[i * 10, i * 10 + i] for i in range(100)]
    got = evidence_ranges(many)
    assert len(got) == 50 and got == sorted([[i * 10, i * 10 + i] for i in range(50, 100)])


def test_seed_findings_point_at_the_culprit_and_xla_recompile_at_its_compile():
    tf = api.discover(str(TEST_DATA / "gpu_seed")).files[0]
    res = api.analyze(tf, summary=True, strict=True).tab_result()
    rep, meta = res["report"], res["traceview"]["meta"]
    located = {f["id"]: f for f in meta["findings"]}
    # host_bound points at the activity the attribution finds holding the idle time (issue #23)
    assert located["host_bound"]["culprit"] == rep["metrics"]["attribution"]["top_chain"].split(" > ")[-1]
    assert located["variable_shapes"]["culprit"] == rep["metrics"]["idle"]["host_wait_per_shape_op"]
    # each range is one call of the culprit op, read back from the raw file
    raw = json.load(gzip.open(SEED))["traceEvents"]
    calls = [e for e in raw if e.get("name") == located["host_bound"]["culprit"] and e.get("ph") == "X"]
    assert len(located["host_bound"]["ranges"]) == len(calls)
    assert [b - a for a, b in located["host_bound"]["ranges"]] == [round(e["dur"] * 1000) for e in sorted(calls, key=lambda e: e["ts"])]
    # steps come from the engine (the metrics hold their windows)
    per = {p["index"]: p for p in rep["metrics"]["steps"]["per_step"]}
    w = next(f for f in rep["findings"] if f["id"] == "warmup_in_window")
    first = per[rep["metrics"]["steps"]["first_index"]]
    assert w["ranges"] == [[first["start_ns"], first["end_ns"]]]

    x = api.analyze(api.discover(str(TEST_DATA / "xplane_jax_gpu")).files[0]).report
    rec = next(f for f in x["findings"] if f["id"] == "recompilation")
    comp = [c for c in x["metrics"]["xla"]["compiles"] if c["step"] in x["metrics"]["xla"]["recompile_steps"]]
    assert rec["ranges"] == [[c["start_ns"], c["start_ns"] + c["duration_ns"]] for c in comp]
    assert rec["culprit"] == comp[0]["name"]


def test_every_rules_trace_view_search_is_one_the_trace_view_runs() -> None:
    """A rule's ``locate`` (findings/engine.py ``Locate``) names a search of traceview/evidence.py ``SEARCHES`` with
    an argument it can use: a registry key for a chain or an op, a name family for ``family``, none otherwise; a
    rule with ``ranges`` of its own needs none."""
    from tb_llmdiag.findings.table import RULES
    from tb_llmdiag.metrics.context import HOST_KINDS_FOR, NAME_PATTERNS
    from tb_llmdiag.metrics.registry import metric
    from tb_llmdiag.traceview.evidence import SEARCHES

    located = [r for r in RULES if r.locate is not None]
    assert len(located) == 12  # graph_breaks (#37) locates the op between its graphs
    for r in located:
        assert r.locate is not None and r.ranges is None, r.id
        assert r.locate.how in SEARCHES, r.id
        if r.locate.how in ("chain", "op"):
            assert metric(r.locate.at) is not None, r.id
        elif r.locate.how == "family":
            assert r.locate.at in NAME_PATTERNS and r.locate.at in HOST_KINDS_FOR, r.id
        else:
            assert r.locate.at == "", r.id
