"""TPU/XLA metrics over an XPlane trace: op mix, steps, device idle, FLOP utilization, recompiles, transfers.

``compute_xla(trace, steps) -> dict`` is the ``xla`` topic of the report: JSON scalars and lists only, units in
key names, ``None`` where a number cannot be known. Inputs are the columns ``tb_llmdiag.ingest.xplane``
writes (``extra["xla_role"]``, ``hlo_category_id``, ``hlo_op_id``, ``flops``...). Definitions (docs/xplane.md):

- Device ops are KERNEL/MEMCPY/MEMSET rows on a device (``device >= 0``): TPU ``XLA Ops``, GPU stream kernels.
  Each op gets one bucket (``op_bucket``): ``matmul`` (hlo_category convolution / convolution fusion /
  output fusion, or a dot/convolution/GEMM op), ``data_formatting`` (transpose, reshape, broadcast, pad,
  slice, concatenate...), ``copy`` (copy ops, memcpy, memset), ``collective``, ``infeed_outfeed``, ``other``.
  ``<bucket>_share`` = summed op time of the bucket / summed time of all device ops (whole trace);
  ``movement_share`` = data_formatting + copy.
- Steps are the ``Steps`` windows (``find_steps``); ``steady`` steps are those with no compile starting in them.
  ``step_cv`` = population std / mean of all step durations.
- ``device_duty_cycle_share`` = union of device-op time inside step windows / summed step time (mean over
  devices); ``device_idle_ns`` = summed step time - that union.
- ``flop_utilization_share`` = summed ``flops`` of device ops in steps / (summed step time x peak FLOP/s x devices),
  only when the ops carry ``flops`` and the trace states the peak (``peak_teraflops_per_second``).
- A compile is an outermost compile event (nested and cross-thread compiles inside it count once). The first
  compiles, up to the end of the first step, are warm-up; every compile that starts later is a recompile.
- A transfer is an outermost ``TransferToDevice`` / ``TransferFromDevice`` (or ``ToLiteral``) host event.
  "In the loop" means inside a step or between two steps (a ``.item()`` or print after a step lands there).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import overlap_per_window
from tb_llmdiag.metrics.context import share
from tb_llmdiag.metrics.steps import Steps
from tb_llmdiag.model import DEVICE_KINDS, Kind, Trace, kind_mask

BUCKETS = ("matmul", "data_formatting", "copy", "collective", "infeed_outfeed", "other")

#: xprof ``hlo_category`` -> bucket (categories not listed are ``other``).
HLO_CATEGORY_BUCKET: dict[str, str] = {
    "convolution": "matmul", "convolution fusion": "matmul", "output fusion": "matmul", "dot": "matmul",
    "dot fusion": "matmul", "gemm": "matmul",
    "data formatting": "data_formatting",
    "copy": "copy", "copy-start": "copy", "copy-done": "copy", "memcpy": "copy",
    "all-reduce": "collective", "all-gather": "collective", "reduce-scatter": "collective",
    "all-to-all": "collective", "collective-permute": "collective", "all-reduce fusion": "collective",
    "all-gather fusion": "collective", "reduce-scatter fusion": "collective", "send": "collective",
    "recv": "collective", "collective": "collective",
    "infeed": "infeed_outfeed", "outfeed": "infeed_outfeed",
}
#: HLO opcodes (the ``hlo_op`` name without its ``.N`` suffix, or a fusion name's words) -> bucket.
HLO_OP_BUCKET: dict[str, str] = {
    "dot": "matmul", "convolution": "matmul", "gemm": "matmul", "cublas": "matmul", "matmul": "matmul",
    "transpose": "data_formatting", "reshape": "data_formatting", "bitcast": "data_formatting",
    "broadcast": "data_formatting", "pad": "data_formatting", "slice": "data_formatting",
    "concatenate": "data_formatting", "reverse": "data_formatting", "dynamic-slice": "data_formatting",
    "dynamic-update-slice": "data_formatting", "iota": "data_formatting",
    "copy": "copy", "copy-start": "copy", "copy-done": "copy",
    "all-reduce": "collective", "all-gather": "collective", "reduce-scatter": "collective",
    "all-to-all": "collective", "collective-permute": "collective", "send": "collective", "recv": "collective",
    "infeed": "infeed_outfeed", "outfeed": "infeed_outfeed",
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
            if any(HLO_OP_BUCKET.get(w) == "collective" for w in words):
                return "collective"
    if _GEMM_KERNEL.search(kernel_name):
        return "matmul"
    if _NCCL_KERNEL.search(kernel_name):
        return "collective"
    return "other"


def _none_if_nan(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _locate(t: NDArray[np.int64], steps: Steps) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
    """For times t: the window index w of the last step starting at or before t (-1 if none) and whether t
    lies inside that step. Steps must be sorted (find_steps sorts them)."""
    w = np.searchsorted(steps.start_ns, t, side="right") - 1
    inside = (w >= 0) & (t < steps.end_ns[np.clip(w, 0, None)]) if len(steps) else np.zeros(t.size, dtype=bool)
    return w, inside


def _position(w: int, inside: bool, n: int) -> str:
    if inside:
        return "in_step"
    if w < 0:
        return "before_steps"
    return "between_steps" if w < n - 1 else "after_steps"


def _roots(start: NDArray[np.int64], end: NDArray[np.int64]) -> NDArray[np.intp]:
    """Indices of outermost intervals: sorted by start (longest first), an interval starting before the end
    of an earlier one is nested in it (also across threads) and dropped; one starting at that end is not."""
    order = np.lexsort((-(end - start), start))
    reach = np.maximum.accumulate(end[order])
    keep = np.ones(order.size, dtype=bool)
    keep[1:] = start[order][1:] >= reach[:-1]
    return order[keep]


def _device_ops(trace: Trace) -> NDArray[np.bool_]:
    """KERNEL / MEMCPY / MEMSET rows on a device."""
    ev = trace.events
    return kind_mask(ev.kind, DEVICE_KINDS) & (ev.device >= 0)


def _steady(steps: Steps, compile_steps: set[int]) -> NDArray[np.bool_]:
    """Per step: no compile started in it."""
    return np.array([int(i) not in compile_steps for i in steps.index], dtype=bool)


def step_stats(steps: Steps, compile_steps: set[int]) -> dict[str, Any]:
    """Durations of all steps and of the steady ones (no compile started in them)."""
    d = steps.duration_ns.astype(np.int64)
    steady = _steady(steps, compile_steps)
    out: dict[str, Any] = {"step_count": int(d.size), "step_indices": [int(i) for i in steps.index],
                           "step_durations_ns": [int(x) for x in d]}
    for prefix, x in (("step", d), ("steady_step", d[steady])):
        if x.size:
            mean = float(x.mean())
            out.update({f"{prefix}_median_ns": int(np.median(x)), f"{prefix}_mean_ns": round(mean),
                        f"{prefix}_min_ns": int(x.min()), f"{prefix}_max_ns": int(x.max()),
                        f"{prefix}_std_ns": round(float(x.std())),
                        f"{prefix}_cv": _none_if_nan(float(x.std()) / mean) if mean > 0 else None})
        else:
            out.update({f"{prefix}_{k}": None for k in ("median_ns", "mean_ns", "min_ns", "max_ns", "std_ns", "cv")})
    out["steady_step_count"] = int(steady.sum())
    out["step_max_over_median"] = (_none_if_nan(d.max() / np.median(d)) if d.size and np.median(d) > 0 else None)
    return out


def op_mix(trace: Trace) -> dict[str, Any]:
    """Device op time per bucket and the shares (see the module docstring)."""
    ev = trace.events
    dev = _device_ops(trace)
    out: dict[str, Any] = {"device_op_count": int(dev.sum())}
    idx = np.flatnonzero(dev)
    if idx.size == 0:
        out.update({"device_op_time_ns": 0, "op_bucket_source": None,
                    **{f"{b}_time_ns": 0 for b in BUCKETS}, **{f"{b}_share": None for b in BUCKETS},
                    "movement_share": None, "matmul_vs_movement_ratio": None, "top_hlo_categories": []})
        return out
    cat = _extra(trace, "hlo_category_id", idx)
    op = _extra(trace, "hlo_op_id", idx)
    cats, ops = trace.extra_names.get("hlo_category_id", ()), trace.extra_names.get("hlo_op_id", ())
    # classify once per unique (category, op, name, kind)
    key = np.stack([cat.astype(np.int64), op.astype(np.int64), ev.name_id[idx].astype(np.int64),
                    ev.kind[idx].astype(np.int64)], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    bucket_of = np.array([BUCKETS.index(op_bucket(cats[c] if c >= 0 else None, ops[o] if o >= 0 else None,
                                                  ev.names[n], k)) for c, o, n, k in uniq.tolist()], dtype=np.int64)
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
        out["top_hlo_categories"] = [{"category": cats[i], "time_ns": int(ct[i]),
                                      "share": share(ct[i], total)} for i in top if ct[i] > 0]
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
    dev = _device_ops(trace)
    devices = np.unique(ev.device[dev])
    out: dict[str, Any] = {"device_count": int(devices.size)}
    keys = ("device_busy_in_steps_ns", "device_idle_in_steps_ns", "device_duty_cycle_share",
            "steady_device_duty_cycle_share", "device_flops", "achieved_tflops_per_s", "peak_tflops_per_s",
            "flop_utilization_share", "steady_flop_utilization_share", "device_window_ns")
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
            w, inside = _locate(ev.ts_ns, steps) if len(steps) else (np.zeros(len(ev), np.intp), np.ones(len(ev), bool))
            in_win = has & inside
            per_win = np.bincount(w[in_win], weights=f[in_win].astype(np.float64), minlength=ws.size)
            total_f = float(per_win.sum())
            out["device_flops"] = total_f
            out["achieved_tflops_per_s"] = total_f / total_win / 1e3 / devices.size if total_win > 0 else None
            if peaks:
                peak = float(np.mean(peaks))
                out["peak_tflops_per_s"] = peak
                denom = total_win * 1e-9 * peak * 1e12 * devices.size
                out["flop_utilization_share"] = total_f / denom if denom > 0 else None
                sd = steady_win * 1e-9 * peak * 1e12 * devices.size
                out["steady_flop_utilization_share"] = float(per_win[steady].sum()) / sd if sd > 0 else None
    return out


def _role_roots(trace: Trace, role: str) -> NDArray[np.intp]:
    """Outermost events of an ``xla_role`` (``compile``, ``transfer_to_device``, ``transfer_from_device``)."""
    roles = trace.extra.get("xla_role")
    labels = trace.extra_names.get("xla_role", ())
    if roles is None or role not in labels:
        return np.zeros(0, dtype=np.intp)
    idx = np.flatnonzero(np.asarray(roles) == labels.index(role))
    if idx.size == 0:
        return idx
    ev = trace.events
    return idx[_roots(ev.ts_ns[idx], ev.end_ns[idx])]


def compiles(trace: Trace, steps: Steps) -> list[dict[str, Any]]:
    """One record per outermost compile: time, step, position, graph hash, module and program ids."""
    ev = trace.events
    roots = _role_roots(trace, "compile")
    if roots.size == 0:
        return []
    ends = ev.end_ns
    gh = trace.extra.get("graph_hash_id")
    mod = trace.extra.get("hlo_module_id")
    gh_names = trace.extra_names.get("graph_hash_id", ())
    mod_names = trace.extra_names.get("hlo_module_id", ())
    compiler_evt = ev.name_mask(lambda n: "Compil" in n or "RunBackend" in n) & (ev.device < 0)
    has_gh = np.flatnonzero((np.asarray(gh) >= 0) & (ev.device < 0)) if gh is not None else np.zeros(0, np.intp)
    has_mod = np.flatnonzero((np.asarray(mod) >= 0) & compiler_evt) if mod is not None else np.zeros(0, np.intp)
    programs: dict[str, list[int]] = {}
    module_of: dict[int, str] = {}
    for p in trace.metadata.get("xla_programs", ()) or ():
        if isinstance(p, dict) and p.get("program_id") is not None:
            programs.setdefault(str(p.get("name")), []).append(int(p["program_id"]))
            module_of[int(p["program_id"])] = str(p.get("name"))
    first_run = _program_first_runs(trace)
    w, inside = _locate(ev.ts_ns[roots], steps)
    out = []
    for k, i in enumerate(roots.tolist()):
        s, e = int(ev.ts_ns[i]), int(ends[i])

        def first_within(cands: NDArray[np.intp], s: int = s, e: int = e) -> int:
            c = cands[(ev.ts_ns[cands] >= s) & (ev.ts_ns[cands] < max(e, s + 1))]
            return int(c[0]) if c.size else -1

        if gh is not None and gh[i] >= 0:
            g = int(gh[i])
        else:
            j = first_within(has_gh)
            g = int(gh[j]) if j >= 0 and gh is not None else -1
        j = first_within(has_mod)
        module = mod_names[int(mod[j])] if j >= 0 and mod is not None else None
        # the programs this compile produced: those whose device ops first run after it starts (and before
        # the next compile), of its module when that is known; else every program of the module
        nxt = int(ev.ts_ns[roots[k + 1]]) if k + 1 < roots.size else None
        new = [p for p, t in first_run.items() if t >= s and (nxt is None or t < nxt)
               and (module is None or module_of.get(p, module) == module)]
        if module is None and new:
            names = {module_of[p] for p in new if p in module_of}
            module = names.pop() if len(names) == 1 else None
        out.append({
            "name": ev.name_of(i), "start_ns": s, "duration_ns": e - s,
            "step": int(steps.index[w[k]]) if w[k] >= 0 and len(steps) else None,
            "position": _position(int(w[k]), bool(inside[k]), len(steps)),
            "graph_hash": gh_names[g] if g >= 0 and g < len(gh_names) else None,
            "module": module,
            "program_ids": sorted(new) if new else sorted(programs.get(module, [])) if module else [],
        })
    return out


def _program_first_runs(trace: Trace) -> dict[int, int]:
    """program id -> start of its first device op (device ops that carry a ``program_id``: GPU kernels of XLA
    programs, TPU ops through their metadata)."""
    pid = trace.extra.get("program_id")
    if pid is None:
        return {}
    ev = trace.events
    pid = np.asarray(pid, dtype=np.int64)
    dev = np.flatnonzero(_device_ops(trace) & (pid >= 0))
    if dev.size == 0:
        return {}
    ids, first = np.unique(pid[dev], return_index=True)  # rows are sorted by start: the first row is the first run
    return {int(p): int(ev.ts_ns[dev[f]]) for p, f in zip(ids.tolist(), first.tolist())}


def transfers(trace: Trace, steps: Steps, role: str) -> list[dict[str, Any]]:
    """One record per outermost transfer of a direction, with its step and position."""
    ev = trace.events
    roots = _role_roots(trace, role)
    if roots.size == 0:
        return []
    w, inside = _locate(ev.ts_ns[roots], steps)
    return [{"start_ns": int(ev.ts_ns[i]), "duration_ns": int(ev.dur_ns[i]),
             "step": int(steps.index[w[k]]) if w[k] >= 0 and len(steps) else None,
             "position": _position(int(w[k]), bool(inside[k]), len(steps))}
            for k, i in enumerate(roots.tolist())]


def _in_loop(rec: dict[str, Any]) -> bool:
    return rec["position"] in ("in_step", "between_steps")


def compute_xla(trace: Trace, steps: Steps) -> dict[str, Any]:
    """The ``xla`` metrics topic of an XPlane trace (definitions in the module docstring)."""
    comp = compiles(trace, steps)
    first_end = int(steps.end_ns[0]) if len(steps) else None
    # warm-up: compiles starting before the first step ends (or all of them when there are no steps)
    warm = [c for c in comp if first_end is None or c["start_ns"] < first_end]
    re_ = [c for c in comp if first_end is not None and c["start_ns"] >= first_end]
    compile_steps = {c["step"] for c in comp if c["position"] == "in_step" and c["step"] is not None}
    steady = _steady(steps, compile_steps)

    out: dict[str, Any] = {"source": "xplane",
                           "device_type": _device_type(trace)}
    out.update(step_stats(steps, compile_steps))
    out.update(op_mix(trace))
    out.update(device_time(trace, steps, steady))

    step_total = int(steps.duration_ns.sum()) if len(steps) else 0
    re_loop = [c for c in re_ if _in_loop(c)]
    out.update({
        "compile_count": len(comp),
        "compile_time_ns": sum(c["duration_ns"] for c in comp),
        "warmup_compile_count": len(warm),
        "warmup_compile_time_ns": sum(c["duration_ns"] for c in warm),
        "warmup_compile_in_steps": any(c["position"] == "in_step" for c in warm),
        "recompile_count": len(re_),
        "recompile_time_ns": sum(c["duration_ns"] for c in re_),
        "recompile_in_loop_count": len(re_loop),
        "recompile_in_loop_time_ns": sum(c["duration_ns"] for c in re_loop),
        "recompile_step_share": share(sum(c["duration_ns"] for c in re_ if c["position"] == "in_step"), step_total),
        "recompile_steps": sorted({c["step"] for c in re_ if c["position"] == "in_step" and c["step"] is not None}),
        "recompile_graph_hashes": _unique(c["graph_hash"] for c in re_),
        "recompile_modules": _unique(c["module"] for c in re_),
        "recompile_program_ids": sorted({p for c in re_ for p in c["program_ids"]}),
        "compiles": comp[:_MAX_LISTED],
    })
    for tag in ("to_device", "from_device"):
        recs = transfers(trace, steps, f"transfer_{tag}")
        loop = [r for r in recs if _in_loop(r)]
        in_step = [r for r in recs if r["position"] == "in_step"]
        out.update({
            f"transfer_{tag}_count": len(recs),
            f"transfer_{tag}_time_ns": sum(r["duration_ns"] for r in recs),
            f"transfer_{tag}_in_loop_count": len(loop),
            f"transfer_{tag}_in_loop_time_ns": sum(r["duration_ns"] for r in loop),
            f"transfer_{tag}_in_steps_time_ns": sum(r["duration_ns"] for r in in_step),
            f"transfer_{tag}_per_step": len(loop) / len(steps) if len(steps) else None,
            # the step each in-loop transfer belongs to, or follows when it lies between two steps
            f"transfer_{tag}_steps": sorted({r["step"] for r in loop if r["step"] is not None}),
            f"transfers_{tag}": loop[:_MAX_LISTED] if tag == "from_device" else [],
        })
    # shares of step time a fix would save (the rules' saving paths; rules_xla.py)
    out["recompile_in_loop_share"] = share(out["recompile_in_loop_time_ns"], step_total)
    out["warmup_compile_in_steps_time_ns"] = sum(c["duration_ns"] for c in warm if c["position"] == "in_step")
    out["host_transfer_share"] = share(
        out["transfer_from_device_in_loop_time_ns"] + out["transfer_to_device_in_steps_time_ns"], step_total)
    duty = out["steady_device_duty_cycle_share"]
    out["steady_device_idle_share"] = 1 - duty if duty is not None else None
    out["movement_step_share"] = (out["movement_share"] * duty
                                  if out["movement_share"] is not None and duty is not None else None)
    mean, median = out["steady_step_mean_ns"], out["steady_step_median_ns"]
    out["steady_mean_excess_share"] = (1 - median / mean) if mean and median is not None and mean > 0 else None
    out["transfer_in_steps_share"] = share(
        out["transfer_to_device_in_steps_time_ns"] + out["transfer_from_device_in_steps_time_ns"], step_total)
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
