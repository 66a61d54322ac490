"""Registry entries of the ``capture`` topic (``metrics/capture.py``, ``metrics/overhead.py``, ``metrics/graphs.py``),
the what-if on the unprofiled step and the findings' overhead caveat (``findings/trust.py``)."""

from __future__ import annotations

from tb_llmdiag.metrics.registry_data import (
    COUNT,
    FLAG,
    HIGHER,
    ID,
    LOWER,
    NEITHER,
    NS,
    SHARE,
    TEXT,
    Entry,
)

CAPTURE_TOPIC_INTROS: dict[str, tuple[str, str]] = {
    "capture": (
        "`capture` (metrics/capture.py, metrics/overhead.py, metrics/graphs.py)",
        "What the capture holds, what it lost, and the profiler's own cost in the profiled step, checked before any "
        "finding is trusted. The tab's trust card and the CLI's `capture` lines show it.",
    ),
}

# a declared table, one entry per row: left as laid out
# fmt: off
CAPTURE_METRICS: tuple[Entry, ...] = (
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
    ("capture.problems[].kind", TEXT, NEITHER, 0, "problem", "truncated, event_cap, dropped_records, launches_without_kernels, kernels_without_launches, out_of_window, rocm_queue_streams, graph_replays"),
    ("capture.problems[].count", COUNT, NEITHER, 0, "count", "how many records the problem concerns; null when it is not a count"),
    ("capture.problems[].severity", TEXT, NEITHER, 0, "severity", "`warning`: it can change the verdict; `info`: worth knowing"),
    ("capture.problems[].text", TEXT, NEITHER, 0, "what", "the problem in words"),
    ("capture.problem_count", COUNT, LOWER, 0, "problems", "number of `warning` problems"),
    ("capture.profiled_step_ns", NS, LOWER, 0.05, "profiled step", "the profiled median step (`steps.median_ns`)"),
    ("capture.unprofiled_step_ns", NS, LOWER, 0.05, "unprofiled step", "median of the unprofiled step times the capture helper wrote into the trace; null when none"),
    ("capture.unprofiled_steps", COUNT, NEITHER, 0, "unprofiled steps", "how many unprofiled step times the trace holds"),
    ("capture.overhead_model_ns", NS, NEITHER, 0.1, "modelled recording cost", "per step: records per step x fitted cost per record, plus Kineto overhead rows; null when not modelled"),
    ("capture.overhead_room_ns", NS, NEITHER, 0.1, "host-wait room", "per step: 0.6 x the median step's host-wait and sync idle time, the most the host cost can lengthen the step; null when not modelled"),
    ("capture.profiler_overhead_ns", NS, LOWER, 0.1, "profiler overhead", "the profiler's own cost in the profiled median step: measured (profiled - unprofiled) or modelled min(model, room)"),
    ("capture.profiler_overhead_share", SHARE, LOWER, 0.1, "profiler overhead share", "profiler_overhead_ns / the profiled median step"),
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
)
# fmt: on
