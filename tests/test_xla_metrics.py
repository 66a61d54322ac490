"""compute_xla on the shared XPlane captures and on inline mini traces.

Expected numbers are computed independently of the reader: ``raw_planes`` below walks the protobuf wire
format by hand (no descriptor, no numpy), and the mini-trace tests state exact values.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_llmdiag.ingest.xplane.reader import XLA_ROLES, read_xplane
from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics.steps.windows import Steps, find_steps
from tb_llmdiag.metrics.xla.topic import compute_xla, op_bucket
from tb_llmdiag.metrics.xla.split import SPLIT_KEYS, step_split_metrics, with_step_split
from tb_llmdiag.model import DeviceInfo, EventTable, Kind, Trace

TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "xplane"


def _one(folder: str) -> Path:
    if not TRACES.is_dir():
        pytest.skip("../shared/traces is not beside the repository")
    (path,) = sorted((TRACES / folder).glob("plugins/profile/*/*.xplane.pb"))
    return path


# ---------------------------------------------------------------- an independent wire-format walk


def _varint(b: bytes, i: int) -> tuple[int, int]:
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return v, i


def _fields(b: bytes) -> list[tuple[int, Any]]:
    out, i = [], 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        out.append((num, v))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _stat(b: bytes, stat_names: dict[int, str]) -> tuple[str, Any]:
    mid, val = 0, None
    for num, v in _fields(b):
        if num == 1:
            mid = v
        elif num == 2:
            val = struct.unpack("<d", v)[0]
        elif num in (3, 4):
            val = _signed(v) if num == 4 else v
        elif num == 5:
            val = v.decode()
        elif num == 7:
            val = stat_names[v]
    return stat_names.get(mid, ""), val


def raw_planes(path: Path) -> list[dict[str, Any]]:
    """Every plane as {name, events: [{line, name, start_ps, dur_ps, stats, md_stats}]} straight from the bytes."""
    planes = []
    for num, pb in _fields(path.read_bytes()):
        if num != 1:
            continue
        fields = _fields(pb)
        stat_names = {}
        for n, v in fields:
            if n == 5:
                entry = dict(_fields(v))
                stat_names[entry[1]] = dict(_fields(entry[2])).get(2, b"").decode()
        md = {}
        for n, v in fields:
            if n == 4:
                entry = dict(_fields(v))
                mf = _fields(entry[2])
                md[entry[1]] = (dict(mf).get(2, b"").decode(),
                                dict(_stat(s, stat_names) for k, s in mf if k == 5))
        name, events = "", []
        for n, v in fields:
            if n == 2:
                name = v.decode()
            if n == 3:
                lf = _fields(v)
                lname = dict(lf).get(2, b"").decode()
                ts_ns = _signed(dict(lf).get(3, 0))
                for k, ev in lf:
                    if k != 4:
                        continue
                    ef = _fields(ev)
                    d = {kk: vv for kk, vv in ef if kk != 4}
                    mname, mstats = md.get(d.get(1, 0), ("", {}))
                    events.append({"line": lname, "name": mname, "start_ps": ts_ns * 1000 + _signed(d.get(2, 0)),
                                   "dur_ps": _signed(d.get(3, 0)), "md_stats": mstats,
                                   "stats": dict(_stat(s, stat_names) for kk, s in ef if kk == 4)})
        planes.append({"name": name, "events": events})
    return planes


# ---------------------------------------------------------------- real captures


@pytest.fixture(scope="module")
def torch_xla() -> dict[str, Any]:
    tr = read_xplane(str(_one("torch_xla_cpu")))
    return compute_xla(tr, find_steps(tr))


def test_torch_xla_recompile_at_step_3_with_graph_hash_and_time(torch_xla: dict[str, Any]) -> None:
    raw = [e for p in raw_planes(_one("torch_xla_cpu")) for e in p["events"] if e["name"] == "XLAGraphExecutor::Compile"]
    raw.sort(key=lambda e: e["start_ps"])
    assert len(raw) == 2
    assert torch_xla["compile_count"] == 2
    assert torch_xla["warmup_compile_count"] == 1 and torch_xla["warmup_compile_in_steps"] is True
    assert torch_xla["recompile_count"] == 1
    assert torch_xla["recompile_steps"] == [3]
    assert torch_xla["recompile_graph_hashes"] == [raw[1]["stats"]["graph_hash"]] == ["552965b651067c2157a20921c5dae229"]
    assert torch_xla["recompile_time_ns"] == raw[1]["dur_ps"] // 1000
    assert torch_xla["compiles"][0]["graph_hash"] == raw[0]["stats"]["graph_hash"]
    assert torch_xla["compiles"][1]["position"] == "in_step"
    assert torch_xla["recompile_modules"] == ["SyncTensorsGraph.1074"]
    assert torch_xla["steady_step_count"] == 4  # steps 0 and 3 compile


def test_torch_xla_transfer_after_step_4(torch_xla: dict[str, Any]) -> None:
    assert torch_xla["transfer_from_device_count"] == 1
    assert torch_xla["transfer_from_device_in_loop_count"] == 1
    assert torch_xla["transfer_from_device_steps"] == [4]
    (t,) = torch_xla["transfers_from_device"]
    assert t["step"] == 4 and t["position"] == "between_steps"
    assert torch_xla["transfer_to_device_per_step"] == 3.0  # inputs, labels, lr each step


def test_trace_detached_capture_gives_the_same_findings() -> None:
    tr = read_xplane(str(_one("torch_xla_cpu_trace_detached")))
    m = compute_xla(tr, find_steps(tr))
    assert m["recompile_steps"] == [3] and m["transfer_from_device_steps"] == [4]
    assert m["recompile_graph_hashes"] == ["552965b651067c2157a20921c5dae229"]


def test_jax_cpu_compiles_after_the_loop_are_listed_not_in_loop() -> None:
    tr = read_xplane(str(_one("jax_cpu")))
    m = compute_xla(tr, find_steps(tr))
    assert m["step_count"] == 5 and [int(i) for i in find_steps(tr).index] == [0, 1, 2, 3, 4]
    assert m["compile_count"] == 3 and m["recompile_in_loop_count"] == 0
    assert {c["position"] for c in m["compiles"]} == {"after_steps"}
    assert m["recompile_modules"] == ["jit_convert_element_type", "jit_broadcast_in_dim", "jit__lambda"]
    assert m["recompile_program_ids"] == [30, 32, 34]


def test_synthetic_tpu_shares_match_an_independent_sum() -> None:
    path = _one("synthetic_tpu")
    (tpu,) = [p for p in raw_planes(path) if p["name"] == "/device:TPU:0"]
    ops = [e for e in tpu["events"] if e["line"] == "XLA Ops"]
    by_cat: dict[str, int] = {}
    for e in ops:
        by_cat[e["md_stats"]["hlo_category"]] = by_cat.get(e["md_stats"]["hlo_category"], 0) + e["dur_ps"]
    total = sum(by_cat.values())
    matmul = by_cat["convolution"] + by_cat["convolution fusion"] + by_cat.get("output fusion", 0)
    tr = read_xplane(str(path))
    m = compute_xla(tr, find_steps(tr))
    assert m["device_op_time_ns"] * 1000 == total
    assert m["matmul_share"] == pytest.approx(matmul / total, abs=1e-12)
    assert m["data_formatting_share"] == pytest.approx(by_cat["data formatting"] / total, abs=1e-12)
    assert m["copy_share"] == pytest.approx(by_cat["copy"] / total, abs=1e-12)
    assert m["movement_share"] == pytest.approx((by_cat["data formatting"] + by_cat["copy"]) / total, abs=1e-12)
    # and by hand, from the file's construction: per step 900+700 us matmul of 2430 us (step 4's copy is 225)
    assert m["matmul_share"] == pytest.approx(9600 / 14655)
    # FLOP utilization: steady steps only, independently: flops per step / (step time x 197 TFLOP/s)
    flops_per_step = sum(e["md_stats"]["flops"] for e in ops) / 6
    steady_time_s = (5 * 3.15e-3 + 0.075e-3)
    assert m["steady_flop_utilization_share"] == pytest.approx(5 * flops_per_step / (steady_time_s * 197e12), rel=1e-9)
    assert m["recompile_steps"] == [3] and m["recompile_graph_hashes"] == ["552965b651067c2157a20921c5dae229"]
    assert m["device_type"] == "TPU" and m["peak_tflops_per_s"] == 197.0


def test_synthetic_tpu_duty_cycle() -> None:
    tr = read_xplane(str(_one("synthetic_tpu")))
    m = compute_xla(tr, find_steps(tr))
    # steady steps: 2430 us of ops in 3150 us steps (step 4: 2505 in 3225)
    assert m["steady_device_duty_cycle_share"] == pytest.approx((4 * 2430 + 2505) / (4 * 3150 + 3225))


# ---------------------------------------------------------------- mini traces


def _trace(rows: list[tuple[int, int, Kind, str, int]], extra: dict[str, list[int]] | None = None,
           extra_names: dict[str, tuple[str, ...]] | None = None, peak: float | None = None) -> Trace:
    """rows: (ts_ns, dur_ns, kind, name, device)."""
    rows = sorted(rows, key=lambda r: r[0])
    names = tuple(dict.fromkeys(r[3] for r in rows))
    n = len(rows)
    ev = EventTable(
        ts_ns=np.array([r[0] for r in rows], np.int64), dur_ns=np.array([r[1] for r in rows], np.int64),
        kind=np.array([r[2] for r in rows], np.uint8), name_id=np.array([names.index(r[3]) for r in rows], np.int32),
        device=np.array([r[4] for r in rows], np.int16), stream=np.full(n, -1, np.int32), tid=np.zeros(n, np.int64),
        correlation=np.full(n, -1, np.int64), bytes=np.full(n, -1, np.int64),
        shape_id=np.full(n, -1, np.int32), names=names)
    cols = {k: np.array(v) for k, v in (extra or {}).items()}
    devices = (DeviceInfo(index=0, name="TPU", peak_tflops=peak),) if peak else ()
    return Trace(source_kind="xplane", events=ev, extra=cols, extra_names=extra_names or {}, devices=devices,
                 metadata={"planes": ["/host:CPU", "/device:TPU:0"]})


def test_mini_trace_duty_cycle_flops_recompile_and_transfer() -> None:
    # GIVEN two 100 ns steps; device ops busy 60 ns in step 0 and 20 ns in step 1 (overlapping ops merge);
    # a compile in step 1 and a TransferFromDevice between the steps
    rows = [
        (0, 100, Kind.STEP, "train_step#0", -1),
        (5, 10, Kind.CPU_OP, "XLAGraphExecutor::Compile", -1),
        (10, 40, Kind.KERNEL, "dot.1", 0),
        (30, 30, Kind.KERNEL, "transpose.2", 0),
        (105, 5, Kind.CPU_OP, "PjRtComputationClient::TransferFromDevice", -1),
        (110, 100, Kind.STEP, "train_step#1", -1),
        (120, 50, Kind.CPU_OP, "XLAGraphExecutor::Compile", -1),
        (180, 20, Kind.KERNEL, "copy.3", 0),
    ]
    role = {"XLAGraphExecutor::Compile": 1, "PjRtComputationClient::TransferFromDevice": 3}
    srt = sorted(rows, key=lambda r: r[0])
    extra = {"xla_role": [role.get(r[3], 0) for r in srt],
             "hlo_op_id": [{"dot.1": 0, "transpose.2": 1, "copy.3": 2}.get(r[3], -1) for r in srt],
             "flops": [{"dot.1": 1_000_000}.get(r[3], -1) for r in srt],
             "graph_hash_id": [{"XLAGraphExecutor::Compile": 0}.get(r[3], -1) for r in srt]}
    tr = _trace(rows, extra, {"hlo_op_id": ("dot.1", "transpose.2", "copy.3"), "xla_role": XLA_ROLES,
                              "graph_hash_id": ("abc",)}, peak=1.0)
    steps = find_steps(tr)
    m = compute_xla(tr, steps)
    # THEN
    assert steps.duration_ns.tolist() == [100, 100] and (m["step_median_ns"], m["step_max_ns"]) == (100, 100)
    assert m["device_busy_in_steps_ns"] == 50 + 20 and m["device_duty_cycle_share"] == pytest.approx(70 / 200)
    assert m["steady_device_duty_cycle_share"] is None  # both steps compile
    assert m["matmul_time_ns"] == 40 and m["data_formatting_time_ns"] == 30 and m["copy_time_ns"] == 20
    assert m["matmul_share"] == pytest.approx(40 / 90) and m["movement_share"] == pytest.approx(50 / 90)
    # 1e6 flops in 200 ns at 1 TFLOP/s peak: 1e6 / (200e-9 * 1e12) = 5, more than the peak allows: null (#27)
    assert m["flop_utilization_share"] is None
    assert m["warmup_compile_count"] == 1 and m["recompile_count"] == 1 and m["recompile_steps"] == [1]
    assert m["recompile_time_ns"] == 50 and m["recompile_graph_hashes"] == ["abc"]
    assert m["transfer_from_device_steps"] == [0]
    assert m["transfers_from_device"] == [{"start_ns": 105, "duration_ns": 5, "step": 0, "position": "between_steps"}]


def test_mini_trace_without_device_or_steps_gives_nulls() -> None:
    tr = _trace([(0, 10, Kind.CPU_OP, "x", -1)], {"xla_role": [0]}, {"xla_role": XLA_ROLES})
    m = compute_xla(tr, find_steps(tr))
    assert m["step_count"] == 0 and m["step_median_ns"] is None and m["matmul_share"] is None
    assert m["device_duty_cycle_share"] is None and m["flop_utilization_share"] is None
    assert m["recompile_count"] == 0 and m["transfer_from_device_per_step"] is None


def test_nested_compiles_count_once() -> None:
    rows = [(0, 100, Kind.CPU_OP, "XLAGraphExecutor::Compile", -1),
            (10, 80, Kind.CPU_OP, "PjRtComputationClient::Compile", -1),
            (20, 50, Kind.CPU_OP, "PjRtCpuClient::Compile", -1)]
    tr = _trace(rows, {"xla_role": [1, 1, 1]}, {"xla_role": XLA_ROLES})
    m = compute_xla(tr, find_steps(tr))
    assert m["compile_count"] == 1 and m["compile_time_ns"] == 100


@pytest.mark.parametrize(("category", "op", "kernel", "kind", "bucket"), [
    ("convolution fusion", None, "", Kind.KERNEL, "matmul"),
    ("output fusion", None, "", Kind.KERNEL, "matmul"),
    ("data formatting", None, "", Kind.KERNEL, "data_formatting"),
    ("loop fusion", None, "", Kind.KERNEL, "other"),
    (None, "dot.3", "", Kind.KERNEL, "matmul"),
    (None, "transpose_copy_fusion.3", "", Kind.KERNEL, "data_formatting"),
    (None, "copy.94", "", Kind.KERNEL, "copy"),
    (None, "custom-call.2", "sm90_xmma_gemm_bf16bf16_bf16f32", Kind.KERNEL, "matmul"),
    (None, "loop_multiply_fusion", "loop_multiply_fusion", Kind.KERNEL, "other"),
    (None, "all-reduce.1", "", Kind.KERNEL, "communication"),
    (None, None, "MemcpyD2H", Kind.MEMCPY, "copy"),
])
def test_op_bucket(category: str | None, op: str | None, kernel: str, kind: Kind, bucket: str) -> None:
    assert op_bucket(category, op, kernel, kind) == bucket


# ---------------------------------------------------------------- XLA_RULES on the captures


def _xla_findings(folder: str) -> dict[str, dict[str, Any]]:
    from tb_llmdiag.findings.diagnosis import diagnose
    from tb_llmdiag.findings.xla import XLA_RULES

    tr = read_xplane(str(_one(folder)))
    steps = find_steps(tr)
    metrics = {"xla": with_step_split(compute_xla(tr, steps), steps), "steps": {"median_ns": int(np.median(steps.duration_ns))}}
    # no mean step and no window: the savings stay each rule's own share; the sequence decides severity and rank
    return {f["id"]: f for f in jsonable(diagnose(metrics, XLA_RULES))[0]}


def test_xla_rules_name_only_keys_that_compute_xla_writes() -> None:
    from tb_llmdiag.findings.xla import XLA_RULES

    tr = read_xplane(str(_one("synthetic_tpu")))
    keys = set(with_step_split(compute_xla(tr, find_steps(tr)), find_steps(tr)))
    ids = [r.id for r in XLA_RULES]
    assert len(ids) == len(set(ids))
    assert {"recompilation", "host_transfer", "step_variance", "warmup_in_window", "copy_heavy", "gpu_gaps"} == set(ids)
    for r in XLA_RULES:
        assert r.platform == "xla"
        paths = [r.metric, r.saving, *(p for _, p in r.evidence)]
        for p in paths:
            if isinstance(p, str):
                assert p.startswith("xla.") and p[4:] in keys, (r.id, p)


class _Recording(dict):
    """A dict that records which keys were read."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.read: set[str] = set()

    def __getitem__(self, k: str) -> Any:
        self.read.add(k)
        return super().__getitem__(k)

    def get(self, k: str, default: Any = None) -> Any:
        self.read.add(k)
        return super().get(k, default)

    def __contains__(self, k: object) -> bool:
        self.read.add(str(k))
        return super().__contains__(k)


@pytest.mark.parametrize("folder", ["synthetic_tpu", "torch_xla_cpu", "jax_cpu"])
def test_xla_rule_functions_read_only_keys_that_compute_xla_writes(folder: str) -> None:
    from tb_llmdiag.findings.xla import XLA_RULES

    tr = read_xplane(str(_one(folder)))
    x = _Recording(with_step_split(compute_xla(tr, find_steps(tr)), find_steps(tr)))
    m = {"xla": x, "steps": {"median_ns": 1}}
    for r in XLA_RULES:
        for f in [r.when, r.saving, *(p for _, p in r.evidence)]:
            if callable(f):
                v = f(m)
                # numbers, or a name (recompiled_what: the recompiled module / graph / programs)
                assert v is None or isinstance(v, (bool, int, float, str)), (r.id, f.__name__, v)
    assert x.read and x.read <= set(x), x.read - set(x)


def test_torch_xla_findings_recompilation_and_host_transfer() -> None:
    f = _xla_findings("torch_xla_cpu")
    assert set(f) == {"recompilation", "host_transfer", "warmup_in_window"}
    rc = f["recompilation"]
    assert rc["evidence"]["steps"] == [3] and rc["evidence"]["graph_hashes"] == ["552965b651067c2157a20921c5dae229"]
    assert rc["severity"] == "high" and 0.3 < rc["saving"]["share"] < 0.5
    ht = f["host_transfer"]
    assert ht["evidence"]["after_steps"] == [4] and ht["evidence"]["transfers"] == 1
    assert "MpDeviceLoader" in ht["fix"]["text"] and ".item()" in ht["fix"]["text"]


def test_synthetic_tpu_findings() -> None:
    f = _xla_findings("synthetic_tpu")
    assert "recompilation" in f and f["recompilation"]["evidence"]["steps"] == [3]
    # 14.8 % movement and a 77 % steady duty cycle stay under the copy_heavy / gpu_gaps thresholds
    assert "copy_heavy" not in f and "gpu_gaps" not in f and "warmup_in_window" not in f


def test_jax_gpu_like_space_gives_the_planted_findings() -> None:
    """A JAX-on-GPU-shaped XSpace: 6 `train` steps, a jit compile inside step 3, a ToLiteral after step 4."""
    from tb_llmdiag.findings.engine import evaluate
    from tb_llmdiag.findings.xla import XLA_RULES
    from tb_llmdiag.ingest.xplane.reader import parse_xspace
    from tb_llmdiag.ingest.xplane.schema import message_classes

    space = message_classes()["XSpace"]()
    host = space.planes.add(id=0, name="/host:CPU")
    host.stat_metadata[1].name = "step_num"
    host.stat_metadata[2].name = "correlation_id"
    for mid, name in ((1, "train"), (2, "cuLaunchKernel"), (3, "backend_compile_and_load"),
                      (4, "PjRtStreamExecutorBuffer::ToLiteral")):
        host.event_metadata[mid].name = name
    py = host.lines.add(id=1, name="python", timestamp_ns=0)
    gpu = space.planes.add(id=1, name="/device:GPU:0")
    gpu.stat_metadata[1].name = "correlation_id"
    gpu.event_metadata[1].name = "sm90_xmma_gemm"
    stream = gpu.lines.add(id=7, name="Stream #7(Compute)", timestamp_ns=0)
    us = 1_000_000  # ps
    for step in range(6):
        t0 = step * 10_000 * us + (50_000 * us if step > 3 else 0)
        dur = 60_000 * us if step == 3 else 2_000 * us
        e = py.events.add(metadata_id=1, offset_ps=t0, duration_ps=dur)
        e.stats.add(metadata_id=1, int64_value=step)
        launch = py.events.add(metadata_id=2, offset_ps=t0 + dur - 1_000 * us, duration_ps=10 * us)
        launch.stats.add(metadata_id=2, uint64_value=100 + step)
        k = stream.events.add(metadata_id=1, offset_ps=t0 + dur - 900 * us, duration_ps=5_000 * us)
        k.stats.add(metadata_id=1, uint64_value=100 + step)
    py.events.add(metadata_id=3, offset_ps=30_000 * us + 500 * us, duration_ps=50_000 * us)
    py.events.add(metadata_id=4, offset_ps=90_000 * us + 7_500 * us, duration_ps=300 * us)
    tr = parse_xspace(space.SerializeToString())
    steps = find_steps(tr)
    # each host step is extended to the end of the kernel it launched (4.1 ms after its last launch)
    assert steps.duration_ns.tolist()[:3] == [6_100_000] * 3
    m = compute_xla(tr, steps)
    assert m["device_type"] == "GPU" and m["recompile_steps"] == [3] and m["warmup_compile_count"] == 0
    assert m["transfer_from_device_steps"] == [4] and m["transfers_from_device"][0]["position"] == "between_steps"
    found = {f["id"]: f for f in jsonable(evaluate({"xla": with_step_split(m, steps), "steps": {"median_ns": 6_100_000}}, XLA_RULES))}
    assert {"recompilation", "host_transfer"} <= set(found)
    assert found["recompilation"]["evidence"]["recompile_ns"] == 50_000_000


# ---------------------------------------------------------------- the whole pipeline on the captures (GPU + XLA rules)

CUDA_ONLY = {"host_bound", "tiny_kernels", "host_sync", "pageable_memcpy", "dataloader_stall", "slow_host_op"}


def _diagnosed(path: Path) -> dict[str, Any]:
    from tb_llmdiag.findings.diagnosis import diagnose
    from tb_llmdiag.ingest import load_trace
    from tb_llmdiag.metrics import compute_metrics
    from tb_llmdiag.metrics.headline import headline
    tr = load_trace(str(path))
    metrics = compute_metrics(tr, find_steps(tr))
    run = metrics["run"]
    assert (run["platform"], run["source_kind"]) == ("xla", "xplane")  # decided once, from the reader
    assert run["workload"] is None  # XPlane names no backward / optimizer ops: unknown, every rule applies
    findings, what_if = jsonable(diagnose(metrics))
    ids = [f["id"] for f in findings]
    assert not CUDA_ONLY & set(ids), ids
    for f in findings:  # a shared id is the XLA rule's finding, never the GPU rule's
        if f["id"] in {"step_variance", "warmup_in_window", "copy_heavy", "gpu_gaps"}:
            assert f["metric"].startswith("xla."), f["id"]
    return {"metrics": metrics, "findings": {f["id"]: f for f in findings}, "ids": ids, "what_if": what_if,
            "headline": headline(metrics)}


@pytest.mark.parametrize("folder", ["torch_xla_cpu", "torch_xla_cpu_trace_detached"])
def test_torch_xla_cpu_diagnosis_puts_the_recompile_first(folder: str) -> None:
    got = _diagnosed(_one(folder))
    # the step variance is the recompile (steps 0 and 3 compile): recompilation ranks first and gives the what-if
    assert got["ids"][0] == "recompilation" and "step_variance" not in got["ids"], got["ids"]
    # the recompiles are in some steps only: the median step keeps its time, the mean step loses them; the
    # what-if is the top finding's own, on the mean step (#25)
    wi = got["what_if"]
    rc = got["findings"]["recompilation"]
    assert rc["saving"]["basis"] == "mean_step" and rc["saving"]["step_ns"] == got["metrics"]["steps"]["mean_ns"]
    assert (wi["finding_id"], wi["basis"], wi["step_ns_if_fixed"]) == ("recompilation", "mean_step",
                                                                       rc["saving"]["step_ns_if_fixed"])
    # one basis per run (#36): every saving and the what-if's "all" are of the mean step too
    assert wi["all"]["step_ns_if_fixed"] <= wi["all"]["step_ns"] == got["metrics"]["steps"]["mean_ns"]
    assert all(f["saving"]["basis"] == "mean_step" for f in got["findings"].values() if f.get("saving"))
    assert got["findings"]["host_transfer"]["evidence"]["after_steps"] == [4]
    # no device plane: said in XLA words
    nd = got["findings"]["no_device_activity"]
    assert "PJRT_DEVICE" in nd["fix"]["text"] and "ProfilerActivity" not in nd["fix"]["text"]
    assert set(got["ids"]) == {"recompilation", "host_transfer", "no_device_activity", "warmup_in_window"}


def test_jax_cpu_diagnosis() -> None:
    got = _diagnosed(_one("jax_cpu"))
    assert "PJRT_DEVICE" in got["findings"]["no_device_activity"]["fix"]["text"]
    # no compile in the loop: the 5 steps all count, their variance is XLA's step_variance (1 - median / mean)
    sv = got["findings"]["step_variance"]
    d = [r["duration_ns"] for r in got["metrics"]["steps"]["per_step"]]
    assert sv["saving"]["basis"] == "mean_step"  # the time slower steps add over the median step: of the mean step
    assert sv["saving"]["share"] == pytest.approx(1 - float(np.median(d)) / float(np.mean(d)), abs=1e-6)
    assert set(got["ids"]) == {"step_variance", "no_device_activity"}


def test_synthetic_tpu_diagnosis_has_no_cuda_rules_and_xla_shares_in_the_headline() -> None:
    got = _diagnosed(_one("synthetic_tpu"))
    # an 800 ms compile in step 3 is a recompile, not host-bound time, a GPU gap or step variance
    assert got["ids"] == ["recompilation", "host_transfer"]
    assert got["what_if"]["mean_step_ns_if_all_fixed"] < 0.05 * got["what_if"]["mean_step_ns"]
    h = got["headline"]
    assert h["gemm_share"] == pytest.approx(9600 / 14655)  # matmul by HLO category, not by kernel name
    x = got["metrics"]["xla"]
    assert h["copy_share"] == x["movement_share"] and h["copy_vs_gemm_ratio"] == pytest.approx(x["movement_share"] / (9600 / 14655))
    assert h["gpu_busy_share"] == x["device_duty_cycle_share"] and h["mfu_share"] == x["flop_utilization_share"]


def _steps(durations: list[int]) -> Steps:
    """Back-to-back steps 0..n-1 of these durations."""
    d = np.asarray(durations, dtype=np.int64)
    start = np.concatenate(([0], np.cumsum(d)[:-1])).astype(np.int64)
    return Steps(index=np.arange(d.size, dtype=np.int64), names=tuple(f"step {i}" for i in range(d.size)),
                 start_ns=start, host_end_ns=start + d, end_ns=start + d, source="xplane_step")


def _split(x: dict[str, Any], durations: list[int]) -> dict[str, Any]:
    s = _steps(durations)
    return step_split_metrics(x, s.duration_ns, s.index)


def _xla(durations: list[int], **kw: Any) -> dict[str, Any]:
    x = {"recompile_steps": [],
         "warmup_compile_in_steps": False, "transfers_from_device": [], "steady_step_count": len(durations),
         "steady_device_duty_cycle_share": None, "host_transfer_share": 0.0, "movement_step_share": None}
    x.update(kw)
    return x


def test_each_step_is_charged_to_one_cause() -> None:
    # GIVEN steps of 10 ms, one compiling (step 1: 1000 ms) and one reading a value back inside it (step 3: 30 ms)
    ms = 1_000_000
    x = _xla([10 * ms, 1000 * ms, 10 * ms, 30 * ms, 10 * ms, 14 * ms], recompile_steps=[1],
             transfers_from_device=[{"step": 3, "position": "in_step"}], steady_device_duty_cycle_share=0.5,
             movement_step_share=0.1)
    total = 1074 * ms
    got = _split(x, [10 * ms, 1000 * ms, 10 * ms, 30 * ms, 10 * ms, 14 * ms])
    assert got == {
        # THEN the read-back's stall is step 3's excess over the median clean step (10 ms)
        "transfer_stall_ns": 20 * ms, "host_transfer_saving_share": pytest.approx(20 / 1074),
        # the device idle of steady steps (half of 74 ms) less that stall
        "steady_device_idle_saving_share": pytest.approx((0.5 * 74 * ms - 20 * ms) / total),
        # variance only over the clean steps 10, 10, 10, 14 ms: n x (mean - median) = 4 x (11 - 10) ms
        "clean_step_cv": pytest.approx(float(np.std([10, 10, 10, 14]) / 11)),
        "clean_step_excess_share": pytest.approx(4 / 1074),
        "movement_saving_share": pytest.approx(0.1 * 74 / 1074)}


def test_a_read_back_in_every_step_leaves_the_steady_steps_to_step_variance() -> None:
    from tb_llmdiag.findings.xla import clean_steps_vary

    ms = 1_000_000
    d = [10 * ms, 20 * ms, 10 * ms, 30 * ms]
    x = _xla(d, transfers_from_device=[{"step": i, "position": "in_step"} for i in range(4)],
             host_transfer_share=0.01)
    got = _split(x, d)
    # no clean step to compare with: no stall, and the variance is over every steady step
    assert got["transfer_stall_ns"] == 0 and got["host_transfer_saving_share"] == 0.01
    assert got["clean_step_cv"] == pytest.approx(float(np.std(d) / np.mean(d)))
    assert clean_steps_vary({"xla": with_step_split(x, _steps(d))})


def test_xla_split_without_steps_gives_none_and_the_rules_do_not_fire() -> None:
    from tb_llmdiag.findings.engine import evaluate
    from tb_llmdiag.findings.xla import XLA_RULES

    assert with_step_split({"available": False, "reason": "x"}, _steps([])) == {"available": False, "reason": "x"}
    assert _split({}, []) == dict.fromkeys(SPLIT_KEYS)
    for m in ({"xla": {"available": False, "reason": "x"}},
              {"xla": with_step_split({}, _steps([]))}):
        for r in XLA_RULES:
            if callable(r.when):
                assert r.when(m) is False
        assert jsonable(evaluate(m, XLA_RULES)) == []
