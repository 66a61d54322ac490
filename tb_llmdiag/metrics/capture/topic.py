"""The ``capture`` topic: what the capture holds and what it lost, before any verdict is drawn from it.

Definitions (counts over the whole trace unless a window is named):
- What it holds: ``record_shapes``, ``profile_memory``, ``with_stack``, ``with_flops`` (the profiler's options as the
  trace states them, else as its events show them: recorded input shapes, ``[memory]`` samples, ``python_function``
  frames; null when neither says), ``cpu_ops`` / ``runtime_calls`` / ``python_frames`` / ``memory_samples``,
  ``steps``, ``rank`` / ``world_size``, the CUDA/HIP graph replays (``metrics.gpu.graphs``: ``graph_launches``,
  ``graph_kernels``, ``graphs`` and ``graph_list``, the largest by device time), ``collectives_with_seq`` (collective
  kernels carrying Kineto's ``Seq``: ranks are then matched exactly, ``jobs/matching.py``) and ``overhead_records`` /
  ``overhead_records_ns`` (Kineto's own ``overhead`` rows: CUPTI buffer requests, lazy function loading),
  ``hardware_counters`` (CUPTI range-profiler records, ``range:<counter>``, and counter tracks such as ``GPU N
  Counters``, ``<track>:<series>``: per counter its samples, mean and sum; SM / tensor-pipe activity to read beside
  the FLOP-count MFU; the first 50 by name).
- ``launches_without_kernels``: kernel launch calls (``cudaLaunchKernel``... but graph launches) with a correlation id
  that no device event carries, launched before the last recorded device event starts and with a correlation id below
  the last recorded device event's (a later launch may simply have run after the profiler stopped: counted in
  ``edge_launches_without_kernels``); all of them when the trace has no device event at all.
- ``kernels_without_launches``: kernels with a correlation id that no host runtime/driver call carries, starting after
  the first recorded launch and with a correlation id above its (correlation ids grow with time: a kernel with a
  lower one was launched before the profiler recorded the host, e.g. in its warm-up, and ran late in a GPU-bound
  queue: ``edge_kernels_without_launches``).
- ``dropped_records``: what Kineto's logged warnings (``WARNING`` / ``ERROR`` metadata) say it dropped (the sum of the
  numbers they give), null when they say nothing of it.
- ``out_of_window_events`` / ``out_of_window_ns``: device events wholly outside the step windows (with steps only).
- ``truncated``: the reader stopped early (``read_state``), or read to the end but rejected enough events for impossible
  values to make the read partial (``read_state.rejected_events``: the problem is then ``rejected``, not the file's
  end); ``read_share``: the share of the file read. With no step window (every step of zero duration), every device
  event is out of the window.
- ``event_cap``: the number of events when it equals a known exporter cap (``EVENT_CAPS``: XProf/TensorBoard's
  ``trace.json.gz`` keeps at most 1,000,000 events): the capture was most likely cut there.
- ``rocm_queue_streams``: a roctracer-era ROCm capture whose kernels all sit on streams 0..3: such captures name the
  hardware queue, not the HIP stream, so several streams may be folded onto one (per-stream overlap is unreliable).
- ``problems``: one entry per problem found, ``{"kind", "count", "severity", "text"}`` (``severity`` ``warning`` when it
  can change the verdict, ``info`` otherwise); ``problem_count`` = number of ``warning`` entries.
The profiler's own cost (``profiler_overhead_share`` and the rest) is ``metrics.capture.overhead``'s part of this topic.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.entry import COUNT, FLAG, HIGHER, ID, LOWER, NEITHER, NS, RATIO, SHARE, TEXT, Entry, Intro
from tb_llmdiag.model import Kind, Trace

#: exporter caps on the number of events: count -> who caps there
EVENT_CAPS: dict[int, str] = {
    1_000_000: "XProf/TensorBoard's trace.json.gz export keeps at most 1,000,000 events",
}
#: Kineto's ``overhead`` rows (``cat: overhead``): read as Kind.OTHER, told apart by name
OVERHEAD_NAMES = re.compile(
    r"^(?:Activity Buffer (?:Request|Flush)|Lazy Function Loading|CUPTI (?:Overhead|Resource)|Instrumentation|"
    r"Runtime Triggered Module Loading|Command Buffer Full|Activity Buffer)$"
)
_DROPPED = re.compile(
    r"(\d[\d,]*)\s+(?:\w+\s+){0,3}(?:records?|activities|events)\s+(?:were\s+|was\s+)?dropped|"
    r"dropped\s+(\d[\d,]*)",
    re.IGNORECASE,
)
GRAPH_LIST_TOP = 10
COUNTERS_TOP = 50


def _flag(trace: Trace, key: str, evidence: bool | None) -> bool | None:
    v = trace.metadata.get(key)
    if isinstance(v, (bool, int)) and not isinstance(v, str):
        return bool(v)
    return evidence


def holds(ctx: Context) -> dict[str, Any]:
    """What the capture holds (module docstring)."""
    trace = ctx.trace
    ev = trace.events
    per_kind = np.bincount(ev.kind, minlength=len(Kind))
    g = ctx.graph
    dist = trace.distributed
    over = ctx.cache.rows_named(OVERHEAD_NAMES, Kind.OTHER)
    seq = trace.extra.get("comm_seq")
    coll_seq = int((seq[ctx.coll.row] >= 0).sum()) if seq is not None and len(ctx.coll) else 0
    has_shapes = bool((ev.shape_id >= 0).any()) or None
    return {
        "record_shapes": _flag(trace, "record_shapes", has_shapes),
        "profile_memory": _flag(trace, "profile_memory", True if len(trace.memory) else None),
        "with_stack": _flag(trace, "with_stack", True if per_kind[Kind.PYTHON] else None),
        "with_flops": _flag(trace, "with_flops", None),
        "cpu_ops": int(per_kind[Kind.CPU_OP]),
        "runtime_calls": int(per_kind[Kind.RUNTIME] + per_kind[Kind.DRIVER]),
        "python_frames": int(per_kind[Kind.PYTHON]),
        "memory_samples": len(trace.memory),
        "steps": ctx.n_steps,
        "rank": dist.rank if dist is not None else None,
        "world_size": dist.world_size if dist is not None else None,
        "graph_launches": g.launches,
        "graph_kernels": g.count,
        "graphs": len(g.graph_ids),
        "graph_list": _graph_list(ctx),
        "graph_op_attribution": "unavailable" if g.count else None,
        "collectives_with_seq": coll_seq,
        "overhead_records": int(over.size),
        "overhead_records_ns": int(ev.dur_ns[over].sum()),
        "hardware_counters": _counters(trace),
    }


def _counters(trace: Trace) -> list[dict[str, Any]]:
    """The hardware counters the capture holds (``ingest/kineto/counter_args.py``), by name: samples, mean and sum."""
    raw = trace.metadata.get("hardware_counters")
    if not isinstance(raw, dict):
        return []
    out = []
    for name in sorted(raw)[:COUNTERS_TOP]:
        n, total = raw[name]
        out.append({"name": name, "samples": int(n), "mean": float(total) / n if n else None, "sum": float(total)})
    return out


def _graph_list(ctx: Context) -> list[dict[str, Any]]:
    g = ctx.graph
    if not len(g.graph_ids):
        return []
    ev = ctx.trace.events
    rows = np.flatnonzero(g.graph >= 0)
    gi = g.graph[rows].astype(np.intp)
    n = len(g.graph_ids)
    dev_ns = np.bincount(gi, weights=ev.dur_ns[ctx.dev[rows]], minlength=n)
    kernels = np.bincount(gi, minlength=n)
    replays = np.zeros(n, np.int64)
    rp = g.replay[rows]
    ok = rp >= 0
    if ok.any():
        pairs = np.unique(np.stack((gi[ok].astype(np.int64), rp[ok].astype(np.int64))), axis=1)
        replays = np.bincount(pairs[0].astype(np.intp), minlength=n)
    order = np.argsort(-dev_ns, kind="stable")[:GRAPH_LIST_TOP]
    return [
        {
            "graph_id": g.graph_ids[i] if g.graph_ids[i] >= 0 else None,
            "replays": int(replays[i]),
            "kernels": int(kernels[i]),
            "nodes": int(g.nodes[i]) or None,
            "device_ns": int(dev_ns[i]),
        }
        for i in order
    ]


def problems(ctx: Context, held: dict[str, Any]) -> dict[str, Any]:
    """What the capture lost or may have distorted (module docstring)."""
    trace = ctx.trace
    ev = trace.events
    out: dict[str, Any] = {}
    out.update(_unmatched(ctx))
    out["dropped_records"] = _dropped(trace)
    out.update(_out_of_window(ctx))
    read = trace.read_state
    out["truncated"] = not bool(read.get("complete", True))
    share = read.get("read_share")
    out["read_share"] = float(share) if isinstance(share, (int, float)) else (None if out["truncated"] else 1.0)
    out["event_cap"] = len(ev) if len(ev) in EVENT_CAPS else None
    out["rocm_queue_streams"] = _rocm_queues(ctx)
    out["problems"] = _problem_list(out, held, read.get("rejected_events"))
    out["problem_count"] = sum(1 for p in out["problems"] if p["severity"] == "warning")
    return out


def _unmatched(ctx: Context) -> dict[str, Any]:
    ev = ctx.trace.events
    launch = ctx.cache.family("launch_api")
    if ctx.graph.launch_rows.size:
        launch = launch[~np.isin(launch, ctx.graph.launch_rows)]
    launch = launch[ev.correlation[launch] >= 0]
    dev = ctx.dev
    dev_corr = np.unique(ev.correlation[dev][ev.correlation[dev] >= 0])
    pos = np.minimum(np.searchsorted(dev_corr, ev.correlation[launch]), max(dev_corr.size - 1, 0))
    answered = (dev_corr[pos] == ev.correlation[launch]) if dev_corr.size else np.zeros(launch.size, dtype=bool)
    orphan = launch[~answered]
    kern = dev[ev.kind[dev] == Kind.KERNEL]
    kern = kern[ev.correlation[kern] >= 0]
    lost = kern[ctx.cache.launcher(kern) < 0] if kern.size else kern
    # correlation ids grow with time (CUPTI, roctracer): a launch after the last recorded device work, or a kernel
    # launched before the first recorded launch, is at the capture's edge, not lost inside it
    if dev.size:
        last_dev_start = int(ev.ts_ns[dev].max())
        last_corr = int(dev_corr.max()) if dev_corr.size else -1
        inner_l = orphan[(ev.ts_ns[orphan] < last_dev_start) & (ev.correlation[orphan] < last_corr)]
    else:
        inner_l = orphan
    if launch.size:
        first_launch, first_corr = int(ev.ts_ns[launch].min()), int(ev.correlation[launch].min())
        inner_k = lost[(ev.ts_ns[lost] > first_launch) & (ev.correlation[lost] > first_corr)]
    else:
        inner_k = lost[:0]
    joinable = bool(launch.size) and bool(kern.size)
    return {
        "launches_without_kernels": int(inner_l.size),
        "edge_launches_without_kernels": int(orphan.size - inner_l.size),
        "kernels_without_launches": int(inner_k.size) if joinable else None,
        "edge_kernels_without_launches": int(lost.size - inner_k.size) if joinable else None,
    }


def _dropped(trace: Trace) -> int | None:
    msgs = [m for key in ("WARNING", "ERROR") for m in (trace.metadata.get(key) or ())]
    found = None
    for m in msgs:
        for hit in _DROPPED.finditer(str(m)):
            n = int((hit.group(1) or hit.group(2)).replace(",", ""))
            found = (found or 0) + n
    return found


def _out_of_window(ctx: Context) -> dict[str, Any]:
    if ctx.window_source != "steps" or ctx.dev.size == 0:
        return {"out_of_window_events": None, "out_of_window_ns": None}
    ev = ctx.trace.events
    s, e = ev.ts_ns[ctx.dev], ev.ts_ns[ctx.dev] + ev.dur_ns[ctx.dev]
    # wholly outside: it starts outside every window and no window starts inside it
    starts_out = ~ctx.dev_in_win
    never = np.iinfo(np.int64).max
    if ctx.win_s.size == 0:  # steps of zero duration only: no window, every device event lies outside it
        nxt = np.full(s.shape, never, np.int64)
    else:
        k = np.searchsorted(ctx.win_s, s, side="right")  # first window starting after s
        nxt = np.where(k < ctx.win_s.size, ctx.win_s[np.minimum(k, ctx.win_s.size - 1)], never)
    out = starts_out & (nxt >= e)
    return {"out_of_window_events": int(out.sum()), "out_of_window_ns": int((e - s)[out].sum())}


def _rocm_queues(ctx: Context) -> bool | None:
    meta = ctx.trace.metadata
    if "roctracer_version" not in meta and "hip_runtime_version" not in meta:
        return None
    ev = ctx.trace.events
    k = ctx.dev[ev.kind[ctx.dev] == Kind.KERNEL]
    if k.size == 0:
        return None
    streams = np.unique(ev.stream[k])
    return bool("roctracer_version" in meta and streams.size and streams.min() >= 0 and streams.max() <= 3)


def _problem_list(p: dict[str, Any], held: dict[str, Any], rejected: int | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(kind: str, count: int | None, severity: str, text: str) -> None:
        out.append({"kind": kind, "count": count, "severity": severity, "text": text})

    if p["truncated"] and rejected:  # read to the end, but the events rejected make it partial (ingest/validate.py)
        add(
            "rejected",
            int(rejected),
            "warning",
            f"{int(rejected):,} events were rejected for impossible or unreadable values: the figures cover the rest, and "
            "nothing is said about what is missing.",
        )
    elif p["truncated"]:
        share = p["read_share"]
        add(
            "truncated",
            None,
            "warning",
            "The file ends early: only the events before the cut were read"
            + (f" ({100 * share:.0f} % of the file)." if share is not None else "."),
        )
    if p["event_cap"] is not None:
        add(
            "event_cap",
            p["event_cap"],
            "warning",
            f"The capture holds exactly {p['event_cap']:,} events: "
            f"{EVENT_CAPS[p['event_cap']]}, so later events were most likely dropped.",
        )
    if p["dropped_records"]:
        add(
            "dropped_records",
            p["dropped_records"],
            "warning",
            f"The profiler reports {p['dropped_records']:,} dropped records (a full CUPTI/roctracer buffer): "
            "device activity is missing from the trace.",
        )
    if p["launches_without_kernels"]:
        add(
            "launches_without_kernels",
            p["launches_without_kernels"],
            "warning",
            f"{p['launches_without_kernels']:,} kernel launches have no kernel in the trace (dropped device records): "
            "device time and idle time are under- and over-stated.",
        )
    if p["kernels_without_launches"]:
        add(
            "kernels_without_launches",
            p["kernels_without_launches"],
            "warning",
            f"{p['kernels_without_launches']:,} kernels have no launch call in the trace (dropped host records): "
            "launch gaps and host waits around them cannot be told apart.",
        )
    if p["out_of_window_events"]:
        add(
            "out_of_window",
            p["out_of_window_events"],
            "info",
            f"{p['out_of_window_events']:,} device events lie wholly outside the profiled steps and are not counted.",
        )
    if p["rocm_queue_streams"]:
        add(
            "rocm_queue_streams",
            None,
            "info",
            "A roctracer-era ROCm capture with every kernel on streams 0-3: these name hardware queues, so several "
            "HIP streams may be folded onto one and per-stream overlap is unreliable.",
        )
    if held["graph_kernels"]:
        add(
            "graph_replays",
            held["graph_kernels"],
            "info",
            f"{held['graph_kernels']:,} kernels come from {held['graph_launches']:,} CUDA/HIP graph replays "
            f"({held['graphs']} graphs): counted as busy, never as launch gaps; which operator launched each is "
            "unavailable inside a graph.",
        )
    return out


def capture_metrics(ctx: Context) -> dict[str, Any]:
    """The topic's holds and problems; ``metrics.capture.overhead.with_overhead`` adds the profiler's cost."""
    held = holds(ctx)
    return {"available": True, **held, **problems(ctx, held)}


# The registry's entries of the `capture` topic (`capture_topic` in metrics/capture/overhead.py adds the profiler's cost); the
# what-if on the unprofiled step and the findings' overhead caveat (findings/trust.py) sit here too: one row per key
# (metrics/entry.py); metrics/registry.py collects them through the topic table (metrics/topics.py), docs/metrics.md
# is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`capture` (metrics/capture/topic.py, metrics/capture/overhead.py, metrics/gpu/graphs.py)",
    "What the capture holds, what it lost, and the profiler's own cost in the profiled step, checked before any "
    "finding is trusted. The tab's trust card and the CLI's `capture` lines show it.",
)

# a declared table, one entry per row: left as laid out
# fmt: off
ENTRIES: tuple[Entry, ...] = (
    ("capture.record_shapes", FLAG, NEITHER, 0, "shapes recorded", "record_shapes as the trace states it (else whether input shapes were recorded); null when unknown"),
    ("capture.profile_memory", FLAG, NEITHER, 0, "memory recorded", "profile_memory as the trace states it (else whether `[memory]` samples were recorded); null when unknown"),
    ("capture.with_stack", FLAG, NEITHER, 0, "stacks recorded", "with_stack as the trace states it (else whether Python frames were recorded); null when unknown"),
    ("capture.with_flops", FLAG, NEITHER, 0, "FLOPs recorded", "with_flops as the trace states it; null when unknown"),
    ("capture.cpu_ops", COUNT, NEITHER, 0.02, "CPU ops", "CPU operator rows in the trace"),
    ("capture.runtime_calls", COUNT, NEITHER, 0.02, "runtime calls", "CUDA/HIP runtime and driver calls in the trace"),
    ("capture.python_frames", COUNT, NEITHER, 0.02, "Python frames", "`python_function` rows (with_stack)"),
    ("capture.memory_samples", COUNT, NEITHER, 0.02, "memory samples", "`[memory]` allocator samples (profile_memory)"),
    ("capture.steps", COUNT, NEITHER, 0, "steps", "profiled steps"),
    ("capture.rank", ID, NEITHER, 0, "rank", "the rank distributedInfo states; null when none"),
    ("capture.world_size", COUNT, NEITHER, 0, "ranks", "the world size distributedInfo states; null when none"),
    ("capture.graph_launches", COUNT, NEITHER, 0.02, "graph launches", "cudaGraphLaunch / hipGraphLaunch calls: CUDA/HIP graph replays"),
    ("capture.graph_kernels", COUNT, NEITHER, 0.02, "replayed kernels", "device events a graph replay ran (the launch's correlation id, or a recorded `graph id`)"),
    ("capture.graphs", COUNT, NEITHER, 0, "graphs", "distinct graphs replayed: by recorded `graph id`, else by the replay's kernel sequence"),
    ("capture.graph_list[].graph_id", ID, NEITHER, 0, "graph id", "the recorded `graph id`; null when grouped by kernel sequence"),
    ("capture.graph_list[].replays", COUNT, NEITHER, 0, "replays", "graph launches that replayed this graph"),
    ("capture.graph_list[].kernels", COUNT, NEITHER, 0.02, "kernels", "device events of this graph's replays"),
    ("capture.graph_list[].nodes", COUNT, NEITHER, 0, "nodes", "distinct recorded `graph node id`s; null when none were recorded"),
    ("capture.graph_list[].device_ns", NS, NEITHER, 0.05, "device time", "summed device time of this graph's replays"),
    ("capture.graph_op_attribution", TEXT, NEITHER, 0, "op attribution in graphs", "`unavailable` when graphs were replayed: no operator launched their kernels one by one; else null"),
    ("capture.collectives_with_seq", COUNT, NEITHER, 0, "collectives with Seq", "collective kernels carrying Kineto's `Seq`: ranks are matched by it exactly"),
    ("capture.overhead_records", COUNT, NEITHER, 0, "profiler overhead records", "Kineto `overhead` rows (CUPTI buffer requests, lazy function loading)"),
    ("capture.overhead_records_ns", NS, LOWER, 0.05, "profiler overhead records time", "summed duration of the `overhead` rows"),
    ("capture.hardware_counters[].name", TEXT, NEITHER, 0, "hardware counter", "`range:<counter>` (CUPTI range-profiler records) or `<track>:<series>` (counter tracks such as `GPU 0 Counters`)"),
    ("capture.hardware_counters[].samples", COUNT, NEITHER, 0, "samples", "records holding the counter"),
    ("capture.hardware_counters[].mean", RATIO, NEITHER, 0.05, "mean", "mean of the counter's values, in the counter's own unit"),
    ("capture.hardware_counters[].sum", RATIO, NEITHER, 0.05, "sum", "sum of the counter's values, in the counter's own unit"),
    ("capture.launches_without_kernels", COUNT, LOWER, 0, "launches without kernels", "kernel launches no device event answers, before the last recorded device event"),
    ("capture.edge_launches_without_kernels", COUNT, NEITHER, 0, "launches without kernels at the end", "the same after the last recorded device event started (it may have run after the profiler stopped)"),
    ("capture.kernels_without_launches", COUNT, LOWER, 0, "kernels without launches", "kernels no host call launched, after the first recorded launch; null without launches or kernels"),
    ("capture.edge_kernels_without_launches", COUNT, NEITHER, 0, "kernels without launches at the start", "the same before the first recorded launch (launched before the profiler started)"),
    ("capture.dropped_records", COUNT, LOWER, 0, "dropped records", "records the profiler's logged warnings say it dropped; null when they say nothing"),
    ("capture.out_of_window_events", COUNT, NEITHER, 0, "events outside the steps", "device events wholly outside the step windows (with steps only)"),
    ("capture.out_of_window_ns", NS, NEITHER, 0.05, "time outside the steps", "their summed duration"),
    ("capture.truncated", FLAG, NEITHER, 0, "truncated", "true when the reader stopped before the end of the file"),
    ("capture.read_share", SHARE, HIGHER, 0, "share read", "share of the file read"),
    ("capture.event_cap", COUNT, NEITHER, 0, "event cap", "the number of events when it equals a known exporter cap (1,000,000: XProf's trace.json.gz); else null"),
    ("capture.rocm_queue_streams", FLAG, NEITHER, 0, "ROCm queues as streams", "a roctracer-era ROCm capture with every kernel on streams 0..3 (hardware queues); null when not ROCm"),
    ("capture.problems[].kind", TEXT, NEITHER, 0, "problem", "truncated, rejected, event_cap, dropped_records, launches_without_kernels, kernels_without_launches, out_of_window, rocm_queue_streams, graph_replays, unprofiled_disagrees, slower_after_profiling"),
    ("capture.problems[].count", COUNT, NEITHER, 0, "count", "how many records the problem concerns; null when it is not a count"),
    ("capture.problems[].severity", TEXT, NEITHER, 0, "severity", "`warning`: it can change the verdict; `info`: worth knowing"),
    ("capture.problems[].text", TEXT, NEITHER, 0, "what", "the problem in words"),
    ("capture.problem_count", COUNT, LOWER, 0, "problems", "number of `warning` problems"),
    ("capture.profiled_step_ns", NS, LOWER, 0.05, "profiled step", "the profiled median step (`steps.median_ns`)"),
    ("capture.unprofiled_step_ns", NS, LOWER, 0.05, "unprofiled step", "median of the unprofiled step times the capture helper wrote into the trace: its steps before the profiled window when at least 3 remain with step 0 left out (the job before any profiler ran), else those after it; null when none"),
    ("capture.unprofiled_steps", COUNT, NEITHER, 0, "unprofiled steps", "how many unprofiled step times the trace holds"),
    ("capture.overhead_model_ns", NS, NEITHER, 0.1, "modelled recording cost", "per step: records per step x fitted cost per record, plus Kineto overhead rows; null when not modelled"),
    ("capture.overhead_room_ns", NS, NEITHER, 0.1, "host-wait room", "per step: 0.4 x the median step's host-wait and sync idle time, the most the host cost can lengthen the step; null when not modelled"),
    ("capture.overhead_model_share", SHARE, NEITHER, 0.1, "modelled overhead share", "the model's estimate, min(model, room) / the profiled median step, also when the share is measured; null when not modelled"),
    ("capture.profiler_overhead_ns", NS, LOWER, 0.1, "profiler overhead", "the profiler's own cost in the profiled median step: measured (profiled - unprofiled) or modelled min(model, room)"),
    ("capture.profiler_overhead_share", SHARE, LOWER, 0.1, "profiler overhead share", "profiler_overhead_ns / the profiled median step"),
    ("capture.profiler_overhead_share_95[]", SHARE, NEITHER, 0.1, "overhead share 95 % interval", "[lo, hi]: the 2.5th and 97.5th percentiles of max(0, P - U) / P over 1000 resamples (fixed seed), P the trace's profiled median step and U the median of the unprofiled steps drawn with replacement; null when modelled or with fewer than 3 unprofiled steps"),
    ("capture.after_window_slowdown_share", SHARE, NEITHER, 0.1, "slowdown after the window", "(A - B) / B, A and B the medians of the capture helper's unprofiled steps after and before the profiled window (step 0 left out), each at least 3; negative when those after ran faster; null otherwise. Above 0.05 with its interval above 0: a `slower_after_profiling` problem"),
    ("capture.after_window_slowdown_share_95[]", SHARE, NEITHER, 0.1, "slowdown 95 % interval", "[lo, hi] of after_window_slowdown_share, resampled as profiler_overhead_share_95; null with it"),
    ("capture.overhead_basis", TEXT, NEITHER, 0, "overhead basis", "`unprofiled_steps` (measured), `model` (estimated from the trace) or `none`"),
    ("capture.overhead_method", TEXT, NEITHER, 0, "how estimated", "how the overhead was estimated, in words"),
    ("what_if.unprofiled.step_ns", NS, LOWER, 0.05, "unprofiled step", "the unprofiled median step (`capture.unprofiled_step_ns`)"),
    ("what_if.unprofiled.step_ns_if_fixed", NS, LOWER, 0.05, "unprofiled step if fixed", "the unprofiled step with the top finding's cause removed: the profiled cut less the profiler's share of the idle time it takes"),
    ("what_if.unprofiled.saving_share", SHARE, HIGHER, 0.1, "unprofiled saving share", "1 - step_ns_if_fixed / step_ns"),
    ("what_if.unprofiled.all_step_ns_if_fixed", NS, LOWER, 0.05, "unprofiled step if all fixed", "the same with every finding's cause removed"),
    ("what_if.unprofiled.all_saving_share", SHARE, HIGHER, 0.1, "unprofiled saving share if all fixed", "1 - all_step_ns_if_fixed / step_ns"),
    ("what_if.median_idle_ns", NS, NEITHER, 0.05, "median step idle", "the median step's idle pool (not busy, not communication only)"),
    ("what_if.all.idle_left_ns", NS, NEITHER, 0.05, "idle left if all fixed", "what is left of the median step's idle pool with every cause removed"),
    ("findings[].caveat", TEXT, NEITHER, 0, "caveat", "why the finding's evidence may overstate: the profiler's own cost is a large part of the host time it reads; null otherwise"),
    ("findings[].profiler_overhead_share", SHARE, NEITHER, 0.1, "profiler overhead share", "`capture.profiler_overhead_share`, on findings whose evidence is host time"),
    ("findings[].saving.unprofiled_ns", NS, LOWER, 0.05, "saving unprofiled", "the saving restated on an unprofiled run where the trace places the profiler's cost in it (findings/trust.py): `unrecorded_host_time` less the recording cost inside its activity (`attribution.unrecorded_profiler_ns`), `host_sync` on the unprofiled step; null otherwise"),
    ("findings[].source", TEXT, NEITHER, 0, "source line", "the user's `file:line` where the finding's cause runs (the deepest frame of the user's own code on the activity it names, `attribution.*_source`; needs a capture with Python stacks); null otherwise"),
)
# fmt: on
