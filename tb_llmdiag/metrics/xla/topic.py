"""TPU/XLA metrics over an XPlane trace: op mix, steps, device idle, FLOP utilization, recompiles, transfers.

``compute_xla(trace, steps) -> dict`` is the ``xla`` topic of the report: JSON scalars and lists only, units in
key names, ``None`` where a number cannot be known. Inputs are the columns ``tb_llmdiag.ingest.xplane``
writes (``extra["xla_role"]``, ``hlo_category_id``, ``hlo_op_id``, ``flops``...). Definitions (docs/xplane.md):

- Device ops are KERNEL/MEMCPY/MEMSET rows on a device (``device >= 0``): TPU ``XLA Ops``, GPU stream kernels.
  Each op gets one bucket (``op_bucket``): ``matmul`` (hlo_category convolution / convolution fusion /
  output fusion, or a dot/convolution/GEMM op), ``data_formatting`` (transpose, reshape, broadcast, pad,
  slice, concatenate...), ``copy`` (copy ops, memcpy, memset), ``communication`` (collectives and send/recv; the GPU taxonomy's
  name, ``classify.CATEGORIES``), ``infeed_outfeed``, ``other``.
  ``<bucket>_share`` = summed op time of the bucket / summed time of all device ops (whole trace);
  ``movement_share`` = data_formatting + copy.
- Steps are the ``Steps`` windows (``find_steps``; listed once, in ``steps.per_step``); ``steady`` steps are
  those with no compile starting in them. ``step_*`` / ``steady_step_*``: ``step_stats.duration_stats`` of
  all / steady step durations (``step_cv`` = population std / mean).
- ``device_duty_cycle_share`` = union of device-op time inside step windows / summed step time (mean over
  devices); ``device_idle_ns`` = summed step time - that union.
- ``flop_utilization_share`` = summed ``flops`` of device ops in steps / (summed step time x peak FLOP/s x devices),
  only when the ops carry ``flops`` and the trace states the peak (``peak_teraflops_per_second``); null above 1
  (ops claiming more FLOPs than the peak allows in the time: the trace's counts are impossible, #27).
- Shares of step time a fix would save (``recompile_step_share``, ``recompile_in_loop_share``,
  ``host_transfer_share``, ``transfer_in_steps_share``) count at most the summed step time (``of_steps``): a compile
  or transfer between steps, or one longer than the steps, cannot save more than the steps take.
- ``steady_mean_excess_share`` = max(0, 1 - steady median / steady mean): how far slow steps lift the mean.
- Compiles and transfers: ``metrics.xla.events``. The first compiles, up to the end of the first step, are
  warm-up; every compile that starts later is a recompile.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import overlap_per_window
from tb_llmdiag.metrics.context import share
from tb_llmdiag.metrics.entry import (
    COUNT,
    FLAG,
    FLOP,
    HIGHER,
    ID,
    INDEX,
    LOWER,
    NEITHER,
    NS,
    PER_STEP,
    RATIO,
    SHARE,
    TEXT,
    TFLOP_PER_S,
    Entry,
    Intro,
)
from tb_llmdiag.metrics.steps.stats import duration_stats
from tb_llmdiag.metrics.steps.windows import Steps
from tb_llmdiag.metrics.xla.events import compiles, device_ops, in_loop, locate, transfers
from tb_llmdiag.model import Kind, Trace

BUCKETS = ("matmul", "data_formatting", "copy", "communication", "infeed_outfeed", "other")

#: xprof ``hlo_category`` -> bucket (categories not listed are ``other``).
HLO_CATEGORY_BUCKET: dict[str, str] = {
    "convolution": "matmul",
    "convolution fusion": "matmul",
    "output fusion": "matmul",
    "dot": "matmul",
    "dot fusion": "matmul",
    "gemm": "matmul",
    "data formatting": "data_formatting",
    "copy": "copy",
    "copy-start": "copy",
    "copy-done": "copy",
    "memcpy": "copy",
    "all-reduce": "communication",
    "all-gather": "communication",
    "reduce-scatter": "communication",
    "all-to-all": "communication",
    "collective-permute": "communication",
    "all-reduce fusion": "communication",
    "all-gather fusion": "communication",
    "reduce-scatter fusion": "communication",
    "send": "communication",
    "recv": "communication",
    "communication": "communication",
    "infeed": "infeed_outfeed",
    "outfeed": "infeed_outfeed",
}
#: HLO opcodes (the ``hlo_op`` name without its ``.N`` suffix, or a fusion name's words) -> bucket.
HLO_OP_BUCKET: dict[str, str] = {
    "dot": "matmul",
    "convolution": "matmul",
    "gemm": "matmul",
    "cublas": "matmul",
    "matmul": "matmul",
    "transpose": "data_formatting",
    "reshape": "data_formatting",
    "bitcast": "data_formatting",
    "broadcast": "data_formatting",
    "pad": "data_formatting",
    "slice": "data_formatting",
    "concatenate": "data_formatting",
    "reverse": "data_formatting",
    "dynamic-slice": "data_formatting",
    "dynamic-update-slice": "data_formatting",
    "iota": "data_formatting",
    "copy": "copy",
    "copy-start": "copy",
    "copy-done": "copy",
    "all-reduce": "communication",
    "all-gather": "communication",
    "reduce-scatter": "communication",
    "all-to-all": "communication",
    "collective-permute": "communication",
    "send": "communication",
    "recv": "communication",
    "infeed": "infeed_outfeed",
    "outfeed": "infeed_outfeed",
}
_FUSION_NOISE = frozenset({"fusion", "loop", "input", "output", "wrapped", "kloop", "kinput", "koutput", "triton"})
_GEMM_KERNEL = re.compile(r"gemm|xmma|cutlass|cublas|wgmma|matmul|nvjet", re.IGNORECASE)
_NCCL_KERNEL = re.compile(r"^nccl|ncclDevKernel", re.IGNORECASE)
_SUFFIX = re.compile(r"\.\d+$")

_MAX_LISTED = 50  # cap on per-event lists in the JSON


def op_bucket(hlo_category: str | None, hlo_op: str | None, kernel_name: str, kind: int) -> str:
    """The bucket of one device op: ``hlo_category`` first, then the HLO op name, then the kernel name."""
    if kind in (Kind.MEMCPY, Kind.MEMSET):
        return "copy"
    if hlo_category:
        return HLO_CATEGORY_BUCKET.get(hlo_category.lower(), "other")
    if hlo_op:
        base = _SUFFIX.sub("", hlo_op)
        if base in HLO_OP_BUCKET:
            return HLO_OP_BUCKET[base]
        if base.endswith("fusion") or base.startswith(("fusion", "custom-call")):
            words = [w for w in re.split(r"[_.\-]", base.lower()) if w and w not in _FUSION_NOISE]
            if _GEMM_KERNEL.search(kernel_name) or any(HLO_OP_BUCKET.get(w) == "matmul" for w in words):
                return "matmul"
            mapped = {HLO_OP_BUCKET.get(w) for w in words}
            if words and mapped <= {"data_formatting", "copy"}:
                return "copy" if mapped == {"copy"} else "data_formatting"
            if any(HLO_OP_BUCKET.get(w) == "communication" for w in words):
                return "communication"
    if _GEMM_KERNEL.search(kernel_name):
        return "matmul"
    if _NCCL_KERNEL.search(kernel_name):
        return "communication"
    return "other"


def _steady(steps: Steps, compile_steps: set[int]) -> NDArray[np.bool_]:
    """Per step: no compile started in it."""
    return np.array([int(i) not in compile_steps for i in steps.index], dtype=bool)


def step_stats(steps: Steps, compile_steps: set[int]) -> dict[str, Any]:
    """``duration_stats`` of all steps (``step_*``) and of the steady ones (``steady_step_*``: no compile
    started in them)."""
    d = steps.duration_ns.astype(np.int64)
    out = duration_stats(d, "step_")
    steady = duration_stats(d[_steady(steps, compile_steps)], "steady_step_")
    del steady["steady_step_max_over_median"]  # not part of the topic
    out.update(steady)
    return out


def op_mix(trace: Trace) -> dict[str, Any]:
    """Device op time per bucket and the shares (see the module docstring)."""
    ev = trace.events
    dev = device_ops(trace)
    out: dict[str, Any] = {"device_op_count": int(dev.sum())}
    idx = np.flatnonzero(dev)
    if idx.size == 0:
        out.update(
            {
                "device_op_time_ns": 0,
                "op_bucket_source": None,
                **{f"{b}_time_ns": 0 for b in BUCKETS},
                **{f"{b}_share": None for b in BUCKETS},
                "movement_share": None,
                "matmul_vs_movement_ratio": None,
                "top_hlo_categories": [],
            }
        )
        return out
    cat = _extra(trace, "hlo_category_id", idx)
    op = _extra(trace, "hlo_op_id", idx)
    cats, ops = trace.extra_names.get("hlo_category_id", ()), trace.extra_names.get("hlo_op_id", ())
    # classify once per unique (category, op, name, kind)
    key = np.stack(
        [cat.astype(np.int64), op.astype(np.int64), ev.name_id[idx].astype(np.int64), ev.kind[idx].astype(np.int64)],
        axis=1,
    )
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    bucket_of = np.array(
        [
            BUCKETS.index(op_bucket(cats[c] if c >= 0 else None, ops[o] if o >= 0 else None, ev.names[n], k))
            for c, o, n, k in uniq.tolist()
        ],
        dtype=np.int64,
    )
    bucket = bucket_of[inv.reshape(-1)]
    dur = ev.dur_ns[idx]
    total = int(dur.sum())
    per = np.bincount(bucket, weights=dur, minlength=len(BUCKETS)).astype(np.int64)
    out["device_op_time_ns"] = total
    out["op_bucket_source"] = "hlo_category" if (cat >= 0).any() else ("hlo_op" if (op >= 0).any() else "kernel_name")
    for b, t in zip(BUCKETS, per.tolist()):
        out[f"{b}_time_ns"] = int(t)
        out[f"{b}_share"] = share(t, total)
    mv = int(per[BUCKETS.index("data_formatting")] + per[BUCKETS.index("copy")])
    out["movement_time_ns"] = mv
    out["movement_share"] = share(mv, total)
    out["matmul_vs_movement_ratio"] = share(mv, int(per[0]))
    if (cat >= 0).any():
        ct = np.bincount(cat[cat >= 0], weights=dur[cat >= 0], minlength=len(cats))
        top = np.argsort(-ct, kind="stable")[:10]
        out["top_hlo_categories"] = [
            {"category": cats[i], "time_ns": int(ct[i]), "share": share(ct[i], total)} for i in top if ct[i] > 0
        ]
    else:
        out["top_hlo_categories"] = []
    return out


def _extra(trace: Trace, name: str, idx: NDArray[np.intp]) -> NDArray[np.int64]:
    col = trace.extra.get(name)
    if col is None:
        return np.full(idx.size, -1, dtype=np.int64)
    return np.asarray(col)[idx].astype(np.int64)


def device_time(trace: Trace, steps: Steps, steady: NDArray[np.bool_]) -> dict[str, Any]:
    """Duty cycle, idle time and FLOP utilization of the devices within the step windows."""
    ev = trace.events
    dev = device_ops(trace)
    devices = np.unique(ev.device[dev])
    out: dict[str, Any] = {"device_count": int(devices.size)}
    keys = (
        "device_busy_in_steps_ns",
        "device_idle_in_steps_ns",
        "device_duty_cycle_share",
        "steady_device_duty_cycle_share",
        "device_flops",
        "achieved_tflops_per_s",
        "peak_tflops_per_s",
        "flop_utilization_share",
        "steady_flop_utilization_share",
        "device_window_ns",
    )
    out.update({k: None for k in keys})
    if devices.size == 0:
        return out
    ends = ev.end_ns
    first, last = int(ev.ts_ns[dev].min()), int(ends[dev].max())
    out["device_window_ns"] = last - first
    if len(steps):
        ws, we = steps.start_ns, steps.end_ns
    else:  # no steps: the devices' active window is the one window
        ws, we = np.array([first], dtype=np.int64), np.array([last], dtype=np.int64)
        steady = np.ones(1, dtype=bool)
    win = (we - ws).astype(np.int64)
    busy = np.zeros((devices.size, ws.size), dtype=np.int64)
    for j, d in enumerate(devices.tolist()):
        m = dev & (ev.device == d)
        busy[j] = overlap_per_window(ev.ts_ns[m], ends[m], ws, we)
    total_win = int(win.sum())
    busy_total = int(busy.sum())
    out["device_busy_in_steps_ns"] = busy_total // devices.size
    out["device_idle_in_steps_ns"] = total_win - busy_total // devices.size
    out["device_duty_cycle_share"] = share(busy_total, total_win * devices.size)
    steady_win = int(win[steady].sum())
    out["steady_device_duty_cycle_share"] = share(int(busy[:, steady].sum()), steady_win * devices.size)
    flops = trace.extra.get("flops")
    peaks = [d.peak_tflops for d in trace.devices if d.peak_tflops]
    if flops is not None:
        f = np.asarray(flops, dtype=np.int64)
        has = dev & (f > 0)
        if has.any():
            w, inside = locate(ev.ts_ns, steps) if len(steps) else (np.zeros(len(ev), np.intp), np.ones(len(ev), bool))
            in_win = has & inside
            per_win = np.bincount(w[in_win], weights=f[in_win].astype(np.float64), minlength=ws.size)
            total_f = float(per_win.sum())
            out["device_flops"] = total_f
            out["achieved_tflops_per_s"] = total_f / total_win / 1e3 / devices.size if total_win > 0 else None
            if peaks:
                peak = float(np.mean(peaks))
                out["peak_tflops_per_s"] = peak
                denom = total_win * 1e-9 * peak * 1e12 * devices.size
                out["flop_utilization_share"] = _utilization(total_f, denom)
                sd = steady_win * 1e-9 * peak * 1e12 * devices.size
                out["steady_flop_utilization_share"] = _utilization(float(per_win[steady].sum()), sd)
    return out


def of_steps(part_ns: int, step_total_ns: int) -> float | None:
    """A share of the summed step time that a fix would save: at most all of it (module docstring)."""
    return share(min(part_ns, step_total_ns), step_total_ns)


def _utilization(flops: float, peak_flops: float) -> float | None:
    """FLOPs / the peak's FLOPs in the time, or None when unknown or above 1 (impossible counts)."""
    if peak_flops <= 0 or flops > peak_flops:
        return None
    return flops / peak_flops


def compute_xla(trace: Trace, steps: Steps) -> dict[str, Any]:
    """The ``xla`` metrics topic of an XPlane trace (definitions in the module docstring)."""
    comp = compiles(trace, steps)
    first_end = int(steps.end_ns[0]) if len(steps) else None
    # warm-up: compiles starting before the first step ends (or all of them when there are no steps)
    warm = [c for c in comp if first_end is None or c["start_ns"] < first_end]
    re_ = [c for c in comp if first_end is not None and c["start_ns"] >= first_end]
    compile_steps = {c["step"] for c in comp if c["position"] == "in_step" and c["step"] is not None}
    steady = _steady(steps, compile_steps)

    out: dict[str, Any] = {"source": "xplane", "device_type": _device_type(trace)}
    out.update(step_stats(steps, compile_steps))
    out.update(op_mix(trace))
    out.update(device_time(trace, steps, steady))

    step_total = int(steps.duration_ns.sum()) if len(steps) else 0
    re_loop = [c for c in re_ if in_loop(c)]
    out.update(
        {
            "compile_count": len(comp),
            "compile_time_ns": sum(c["duration_ns"] for c in comp),
            "warmup_compile_count": len(warm),
            "warmup_compile_time_ns": sum(c["duration_ns"] for c in warm),
            "warmup_compile_in_steps": any(c["position"] == "in_step" for c in warm),
            "recompile_count": len(re_),
            "recompile_time_ns": sum(c["duration_ns"] for c in re_),
            "recompile_in_loop_count": len(re_loop),
            "recompile_in_loop_time_ns": sum(c["duration_ns"] for c in re_loop),
            "recompile_step_share": of_steps(
                sum(c["duration_ns"] for c in re_ if c["position"] == "in_step"), step_total
            ),
            "recompile_steps": sorted({c["step"] for c in re_ if c["position"] == "in_step" and c["step"] is not None}),
            "recompile_graph_hashes": _unique(c["graph_hash"] for c in re_),
            "recompile_modules": _unique(c["module"] for c in re_),
            "recompile_program_ids": sorted({p for c in re_ for p in c["program_ids"]}),
            "compiles": comp[:_MAX_LISTED],
        }
    )
    for tag in ("to_device", "from_device"):
        recs = transfers(trace, steps, f"transfer_{tag}")
        loop = [r for r in recs if in_loop(r)]
        in_step = [r for r in recs if r["position"] == "in_step"]
        out.update(
            {
                f"transfer_{tag}_count": len(recs),
                f"transfer_{tag}_time_ns": sum(r["duration_ns"] for r in recs),
                f"transfer_{tag}_in_loop_count": len(loop),
                f"transfer_{tag}_in_loop_time_ns": sum(r["duration_ns"] for r in loop),
                f"transfer_{tag}_in_steps_time_ns": sum(r["duration_ns"] for r in in_step),
                f"transfer_{tag}_per_step": len(loop) / len(steps) if len(steps) else None,
                # the step each in-loop transfer belongs to, or follows when it lies between two steps
                f"transfer_{tag}_steps": sorted({r["step"] for r in loop if r["step"] is not None}),
                f"transfers_{tag}": loop[:_MAX_LISTED] if tag == "from_device" else [],
            }
        )
    # shares of step time a fix would save (the rules' saving paths; rules_xla.py)
    out["recompile_in_loop_share"] = of_steps(out["recompile_in_loop_time_ns"], step_total)
    out["warmup_compile_in_steps_time_ns"] = sum(c["duration_ns"] for c in warm if c["position"] == "in_step")
    out["host_transfer_share"] = of_steps(
        out["transfer_from_device_in_loop_time_ns"] + out["transfer_to_device_in_steps_time_ns"], step_total
    )
    duty = out["steady_device_duty_cycle_share"]
    out["steady_device_idle_share"] = 1 - duty if duty is not None else None
    out["movement_step_share"] = (
        out["movement_share"] * duty if out["movement_share"] is not None and duty is not None else None
    )
    mean, median = out["steady_step_mean_ns"], out["steady_step_median_ns"]
    out["steady_mean_excess_share"] = max(0.0, 1 - median / mean) if mean and median is not None and mean > 0 else None
    out["transfer_in_steps_share"] = of_steps(
        out["transfer_to_device_in_steps_time_ns"] + out["transfer_from_device_in_steps_time_ns"], step_total
    )
    return out


def _unique(values: Any) -> list[Any]:
    """The values other than None, first occurrences in order."""
    return list(dict.fromkeys(v for v in values if v is not None))


def _device_type(trace: Trace) -> str | None:
    planes = trace.metadata.get("planes", ()) or ()
    for kind in ("TPU", "GPU"):
        if any(isinstance(p, str) and p.startswith(f"/device:{kind}:") for p in planes):
            return kind
    return "CPU" if planes else None


# The registry's entries of the `xla` topic: one row per key (metrics/entry.py); metrics/registry.py collects them
# through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`xla` (metrics/xla/topic.py, XPlane traces only)",
    "XPlane traces only. Definitions in `metrics/xla/topic.py`'s docstring and `docs/xplane.md`; the step split and the savings the\nXLA findings read in `metrics/xla/split.py`.",
)

# a declared table, one entry per row: left as laid out
# fmt: off
#: the steps `xla.steady_step_*` describe
_STEADY = "the durations of steady steps (no compile started in them)"

#: the definition shared by the `position` of `xla.compiles[]` and `xla.transfers_from_device[]`
_POSITION = "`in_step`, `between_steps`, `before_steps` or `after_steps`"

ENTRIES: tuple[Entry, ...] = (
    ("xla.achieved_tflops_per_s", TFLOP_PER_S, HIGHER, 0.05, "achieved tflops per s",
     "device_flops / summed step time / devices"),
    ("xla.clean_step_cv", RATIO, LOWER, 0.1, "clean step cv",
     "std / mean of the clean steps (no compile, no read-back), or of all steady steps when fewer than 3 "
     "are clean"),
    ("xla.clean_step_excess_share", SHARE, LOWER, 0.1, "clean step excess share",
     "n x (mean - median) of those steps / summed step time: what `step_variance` saves"),
    ("xla.communication_share", SHARE, NEITHER, 0.1, "communication share", "communication_time_ns / device_op_time_ns"),
    ("xla.communication_time_ns", NS, NEITHER, 0.05, "communication time",
     "summed device-op time of the `communication` bucket (collectives, send/recv; the GPU taxonomy's name)"),
    ("xla.compile_count", COUNT, LOWER, 0.02, "compile count", "outermost compile events"),
    ("xla.compile_time_ns", NS, LOWER, 0.05, "compile time", "their summed duration"),
    ("xla.copy_share", SHARE, LOWER, 0.1, "copy share", "copy_time_ns / device_op_time_ns"),
    ("xla.copy_time_ns", NS, LOWER, 0.05, "copy time", "summed device-op time of the `copy` bucket"),
    ("xla.data_formatting_share", SHARE, LOWER, 0.1, "data formatting share",
     "data_formatting_time_ns / device_op_time_ns"),
    ("xla.data_formatting_time_ns", NS, LOWER, 0.05, "data formatting time",
     "summed device-op time of the `data_formatting` bucket"),
    ("xla.device_busy_in_steps_ns", NS, HIGHER, 0.05, "device busy in steps",
     "union of device-op time inside step windows (mean over devices)"),
    ("xla.device_count", COUNT, NEITHER, 0.02, "device count", "devices with ops"),
    ("xla.device_duty_cycle_share", SHARE, HIGHER, 0.1, "device duty cycle share",
     "device busy / summed step time (mean over devices)"),
    ("xla.device_flops", FLOP, NEITHER, 0.02, "device flops", "summed `flops` of device ops in steps"),
    ("xla.device_idle_in_steps_ns", NS, LOWER, 0.05, "device idle in steps",
     "summed step time - device_busy_in_steps_ns"),
    ("xla.device_op_count", COUNT, NEITHER, 0.02, "device op count",
     "device ops (KERNEL/MEMCPY/MEMSET rows on a device)"),
    ("xla.device_op_time_ns", NS, NEITHER, 0.05, "device op time", "their summed time (whole trace)"),
    ("xla.device_type", TEXT, NEITHER, 0, "device type", "`TPU`, `GPU` or `CPU` (the device planes in the capture)"),
    ("xla.device_window_ns", NS, NEITHER, 0.05, "device window", "first device op start to last device op end"),
    ("xla.flop_utilization_share", SHARE, HIGHER, 0.1, "flop utilization share",
     "device_flops / (summed step time x peak x devices)"),
    ("xla.host_transfer_saving_share", SHARE, LOWER, 0.1, "host transfer saving share",
     "max(host_transfer_share, transfer_stall_ns / summed step time): what `host_transfer` saves"),
    ("xla.host_transfer_share", SHARE, LOWER, 0.1, "host transfer share",
     "(in-loop device-to-host + in-step host-to-device transfer time) / summed step time"),
    ("xla.infeed_outfeed_share", SHARE, NEITHER, 0.1, "infeed outfeed share",
     "infeed_outfeed_time_ns / device_op_time_ns"),
    ("xla.infeed_outfeed_time_ns", NS, NEITHER, 0.05, "infeed outfeed time",
     "summed device-op time of the `infeed_outfeed` bucket"),
    ("xla.matmul_share", SHARE, NEITHER, 0.1, "matmul share", "matmul_time_ns / device_op_time_ns"),
    ("xla.matmul_time_ns", NS, NEITHER, 0.05, "matmul time", "summed device-op time of the `matmul` bucket"),
    ("xla.matmul_vs_movement_ratio", RATIO, LOWER, 0.1, "matmul vs movement ratio",
     "movement_time_ns / matmul_time_ns"),
    ("xla.movement_saving_share", SHARE, LOWER, 0.1, "movement saving share",
     "movement_step_share x steady step time / summed step time: what `copy_heavy` saves"),
    ("xla.movement_share", SHARE, LOWER, 0.1, "movement share", "movement_time_ns / device_op_time_ns"),
    ("xla.movement_step_share", SHARE, LOWER, 0.1, "movement step share",
     "movement_share x steady_device_duty_cycle_share"),
    ("xla.movement_time_ns", NS, LOWER, 0.05, "movement time", "summed device-op time of data_formatting + copy"),
    ("xla.op_bucket_source", TEXT, NEITHER, 0, "op bucket source",
     "what classified the ops: `hlo_category`, `hlo_op` or `kernel_name`"),
    ("xla.other_share", SHARE, NEITHER, 0.1, "other share", "other_time_ns / device_op_time_ns"),
    ("xla.other_time_ns", NS, NEITHER, 0.05, "other time", "summed device-op time of the `other` bucket"),
    ("xla.peak_tflops_per_s", TFLOP_PER_S, NEITHER, 0.05, "peak tflops per s",
     "the peak the trace states (mean over devices)"),
    ("xla.recompile_count", COUNT, LOWER, 0.02, "recompile count", "compiles starting after the first step ends"),
    ("xla.recompile_in_loop_count", COUNT, LOWER, 0.02, "recompile in loop count",
     "recompiles inside a step or between two steps"),
    ("xla.recompile_in_loop_share", SHARE, LOWER, 0.1, "recompile in loop share",
     "recompile_in_loop_time_ns / summed step time (what `recompilation` saves)"),
    ("xla.recompile_in_loop_time_ns", NS, LOWER, 0.05, "recompile in loop time", "their summed duration"),
    ("xla.recompile_step_share", SHARE, LOWER, 0.1, "recompile step share",
     "recompile time inside steps / summed step time"),
    ("xla.recompile_time_ns", NS, LOWER, 0.05, "recompile time", "their summed duration"),
    ("xla.source", TEXT, NEITHER, 0, "source", "always `xplane`"),
    ("xla.steady_device_duty_cycle_share", SHARE, HIGHER, 0.1, "steady device duty cycle share",
     "the same over steady steps"),
    ("xla.steady_device_idle_saving_share", SHARE, LOWER, 0.1, "steady device idle saving share",
     "((1 - steady duty cycle) x steady step time - transfer_stall_ns) / summed step time: what `gpu_gaps` "
     "saves (a bound)"),
    ("xla.steady_device_idle_share", SHARE, LOWER, 0.1, "steady device idle share",
     "1 - steady_device_duty_cycle_share"),
    ("xla.steady_flop_utilization_share", SHARE, HIGHER, 0.1, "steady flop utilization share",
     "the same over steady steps"),
    ("xla.steady_mean_excess_share", SHARE, LOWER, 0.1, "steady mean excess share", "1 - steady median / steady mean"),
    ("xla.steady_step_count", COUNT, NEITHER, 0.02, "steady step count", "steps with no compile starting in them"),
    ("xla.steady_step_cv", RATIO, LOWER, 0.1, "steady step cv",
     "std / mean of " + _STEADY),
    ("xla.steady_step_max_ns", NS, LOWER, 0.05, "steady step max",
     "maximum of " + _STEADY),
    ("xla.steady_step_mean_ns", NS, LOWER, 0.05, "steady step mean",
     "mean of " + _STEADY),
    ("xla.steady_step_median_ns", NS, LOWER, 0.05, "steady step median",
     "median of " + _STEADY),
    ("xla.steady_step_min_ns", NS, LOWER, 0.05, "steady step min",
     "minimum of " + _STEADY),
    ("xla.steady_step_std_ns", NS, LOWER, 0.05, "steady step std",
     "population standard deviation of " + _STEADY),
    ("xla.step_count", COUNT, NEITHER, 0.02, "step count", "steps found"),
    ("xla.step_cv", RATIO, LOWER, 0.1, "step cv", "std / mean of the durations of all steps"),
    ("xla.step_max_ns", NS, LOWER, 0.05, "step max", "maximum of the durations of all steps"),
    ("xla.step_max_over_median", RATIO, NEITHER, 0.1, "step max over median", "step_max_ns / step_median_ns"),
    ("xla.step_mean_ns", NS, LOWER, 0.05, "step mean", "mean of the durations of all steps"),
    ("xla.step_median_ns", NS, LOWER, 0.05, "step median", "median of the durations of all steps"),
    ("xla.step_min_ns", NS, LOWER, 0.05, "step min", "minimum of the durations of all steps"),
    ("xla.step_std_ns", NS, LOWER, 0.05, "step std", "population standard deviation of the durations of all steps"),
    ("xla.transfer_from_device_count", COUNT, LOWER, 0.02, "transfer from device count",
     "outermost device-to-host transfer events"),
    ("xla.transfer_from_device_in_loop_count", COUNT, LOWER, 0.02, "transfer from device in loop count",
     "device-to-host transfers inside a step or between two steps"),
    ("xla.transfer_from_device_in_loop_time_ns", NS, LOWER, 0.05, "transfer from device in loop time",
     "summed duration of the in-loop device-to-host transfers"),
    ("xla.transfer_from_device_in_steps_time_ns", NS, LOWER, 0.05, "transfer from device in steps time",
     "summed duration of device-to-host transfers inside steps"),
    ("xla.transfer_from_device_per_step", PER_STEP, LOWER, 0.05, "transfer from device per step",
     "in-loop device-to-host transfers / steps"),
    ("xla.transfer_from_device_time_ns", NS, LOWER, 0.05, "transfer from device time",
     "their summed duration (device-to-host)"),
    ("xla.transfer_in_steps_share", SHARE, LOWER, 0.1, "transfer in steps share",
     "transfer time inside steps (both directions) / summed step time"),
    ("xla.transfer_stall_ns", NS, LOWER, 0.05, "transfer stall",
     "sum over steady steps with a device-to-host transfer inside of max(0, d - median clean step) "
     "(metrics/xla/split.py)"),
    ("xla.transfer_to_device_count", COUNT, LOWER, 0.02, "transfer to device count",
     "outermost host-to-device transfer events"),
    ("xla.transfer_to_device_in_loop_count", COUNT, LOWER, 0.02, "transfer to device in loop count",
     "host-to-device transfers inside a step or between two steps"),
    ("xla.transfer_to_device_in_loop_time_ns", NS, LOWER, 0.05, "transfer to device in loop time",
     "summed duration of the in-loop host-to-device transfers"),
    ("xla.transfer_to_device_in_steps_time_ns", NS, LOWER, 0.05, "transfer to device in steps time",
     "summed duration of host-to-device transfers inside steps"),
    ("xla.transfer_to_device_per_step", PER_STEP, LOWER, 0.05, "transfer to device per step",
     "in-loop host-to-device transfers / steps"),
    ("xla.transfer_to_device_time_ns", NS, LOWER, 0.05, "transfer to device time",
     "their summed duration (host-to-device)"),
    ("xla.warmup_compile_count", COUNT, LOWER, 0.02, "warmup compile count",
     "compiles starting before the first step ends"),
    ("xla.warmup_compile_in_steps", FLAG, NEITHER, 0, "warmup compile in steps",
     "a warm-up compile lies inside a step"),
    ("xla.warmup_compile_in_steps_time_ns", NS, LOWER, 0.05, "warmup compile in steps time",
     "summed duration of warm-up compiles inside steps"),
    ("xla.warmup_compile_time_ns", NS, LOWER, 0.05, "warmup compile time", "their summed duration"),
    ("xla.compiles[].duration_ns", NS, LOWER, 0.05, "compile duration", "its duration"),
    ("xla.compiles[].graph_hash", TEXT, NEITHER, 0, "compile graph hash", "torch_xla graph hash"),
    ("xla.compiles[].module", TEXT, NEITHER, 0, "compile module", "the module compiled"),
    ("xla.compiles[].name", TEXT, NEITHER, 0, "compile name", "the compile event's name"),
    ("xla.compiles[].position", TEXT, NEITHER, 0, "compile position", _POSITION),
    ("xla.compiles[].start_ns", NS, NEITHER, 0.05, "compile start", "its start"),
    ("xla.compiles[].step", INDEX, NEITHER, 0, "compile step", "the step it starts in or follows"),
    ("xla.recompile_graph_hashes[]", TEXT, NEITHER, 0, "recompile graph hashes",
     "torch_xla graph hashes of the recompiled graphs"),
    ("xla.recompile_modules[]", TEXT, NEITHER, 0, "recompile modules", "the recompiled modules"),
    ("xla.recompile_program_ids[]", ID, NEITHER, 0, "recompile program ids", "program ids of the recompiled programs"),
    ("xla.recompile_steps[]", INDEX, NEITHER, 0, "recompile steps", "the steps a recompile starts in"),
    ("xla.top_hlo_categories[].category", TEXT, NEITHER, 0, "top hlo category category", "its name"),
    ("xla.top_hlo_categories[].share", SHARE, NEITHER, 0.1, "top hlo category share", "time_ns / device_op_time_ns"),
    ("xla.top_hlo_categories[].time_ns", NS, NEITHER, 0.05, "top hlo category time", "its summed device-op time"),
    ("xla.transfer_from_device_steps[]", INDEX, NEITHER, 0, "transfer from device steps",
     "the steps the in-loop device-to-host transfers lie in (or follow)"),
    ("xla.transfer_to_device_steps[]", INDEX, NEITHER, 0, "transfer to device steps",
     "the steps the in-loop host-to-device transfers lie in (or follow)"),
    ("xla.transfers_from_device[].duration_ns", NS, LOWER, 0.05, "transfers from device duration", "its duration"),
    ("xla.transfers_from_device[].position", TEXT, NEITHER, 0, "transfers from device position", _POSITION),
    ("xla.transfers_from_device[].start_ns", NS, NEITHER, 0.05, "transfers from device start", "its start"),
    ("xla.transfers_from_device[].step", INDEX, NEITHER, 0, "transfers from device step",
     "the step it lies in or follows"),
    ("xla.transfers_to_device[]", TEXT, NEITHER, 0, "transfers to device",
     "always empty: only device-to-host transfers are listed (`transfers_from_device`)"),
    ("xla.compiles[].program_ids[]", ID, NEITHER, 0, "compile program ids", "the programs it produced"),
)
# fmt: on
