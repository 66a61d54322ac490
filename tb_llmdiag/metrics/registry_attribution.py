"""Registry entries of the ``attribution`` topic (``metrics/attribution.py``: what the host does while the GPU waits,
and which host code launches the GPU's work; Kineto runs only)."""

from __future__ import annotations

from tb_llmdiag.metrics.registry_data import COUNT, FLAG, LOWER, NEITHER, NS, PER_STEP, SHARE, TEXT, Entry

ATTRIBUTION_INTRO: dict[str, tuple[str, str]] = {
    "attribution": (
        "`attribution` (metrics/attribution.py)",
        "Every GPU idle gap is attributed to the host activity open on the thread that launches the work ending it "
        "(the call tree of annotations, Python frames, operators and runtime calls, `metrics/host_tree.py`); the "
        "GPU's work to the operators that launch it. An activity's chain reads outermost first: user annotations, "
        "the deepest frame of the user's own code, operators, the runtime call.",
    ),
}

_S = "`straggler_cause_evidence` (from the ranks' attributions): "
_N = "each `nodes` entry: the 8 call-tree nodes holding the most GPU idle time (inclusive), "
_B = "each `busy` entry: the 8 operator nodes that launch the most GPU time themselves (their own launch calls), "

# a declared table, one entry per row: left as laid out
# fmt: off
ATTRIBUTION_METRICS: tuple[Entry, ...] = (
    ("attribution.available", FLAG, NEITHER, 0, "attribution available", "false when the trace has no device activity or no host events (then `reason` says why)"),
    ("attribution.reason", TEXT, NEITHER, 0, "attribution reason", "why the topic is unavailable"),
    ("attribution.idle_ns", NS, LOWER, 0.05, "attributed idle", "GPU idle time in the window, every gap attributed to one launching thread"),
    ("attribution.idle_share", SHARE, LOWER, 0.1, "attributed idle share", "`idle_ns` / window"),
    ("attribution.outside_ns", NS, LOWER, 0.05, "idle outside any event", "GPU idle time while the launching thread has no recorded event open at all"),
    ("attribution.outside_share", SHARE, LOWER, 0.1, "idle outside any event share", "`outside_ns` / window"),
    ("attribution.threads_count", COUNT, NEITHER, 0, "host threads", "host threads with recorded events"),
    ("attribution.nodes_count", COUNT, NEITHER, 0.05, "call-tree nodes", "distinct chains of names in the host call tree"),
    ("attribution.frames", FLAG, NEITHER, 0, "python frames", "whether the trace records Python frames (`with_stack=True`): source lines need them"),
    ("attribution.dominant", FLAG, NEITHER, 0, "one activity dominates", "whether one activity holds at least half of the GPU idle time (`top_*` is then the deepest such one)"),
    ("attribution.spread_nodes", COUNT, NEITHER, 0.1, "activities holding half the idle", "when no activity dominates: how many call-tree nodes (by their own idle time) it takes to hold half of it; null otherwise"),
    ("attribution.top_name", TEXT, NEITHER, 0, "top activity", "the activity holding the GPU's idle time: the dominant one, else the node holding the most in its own time (innermost open)"),
    ("attribution.top_chain", TEXT, NEITHER, 0, "top activity chain", "its chain: annotations, the user's deepest frame, operators, the runtime call (outermost first, ` > `)"),
    ("attribution.top_source", TEXT, NEITHER, 0, "top activity source line", "`file:line` of the deepest frame of the user's own code on its chain (needs `with_stack=True`); null without frames"),
    ("attribution.top_kind", TEXT, NEITHER, 0, "top activity kind", "what holds its idle time, from its own events: `allocator`, `sync`, `dataloader`, `compile`, `outside` (host code no operator records), `cpu_work` (operators or frames that launch nothing), `launch` (operators launching work at the host's pace)"),
    ("attribution.top_share", SHARE, LOWER, 0.1, "top activity idle share", "GPU idle time inside it / window"),
    ("attribution.top_ns", NS, LOWER, 0.05, "top activity idle", "GPU idle time inside it"),
    ("attribution.top_calls_per_step", PER_STEP, NEITHER, 0.05, "top activity calls per step", "its calls per profiled step"),
    ("attribution.top_mean_call_ns", NS, NEITHER, 0.1, "top activity mean call", "its mean call duration (host time)"),
    ("attribution.top_launches_per_step", PER_STEP, NEITHER, 0.05, "top activity launches per step", "kernel launch calls inside it per step"),
    ("attribution.top_steps_hit", COUNT, NEITHER, 0, "top activity steps hit", "steps in which its GPU idle time is at least 1 % of the step (null when it is not among `nodes`)"),
    ("attribution.top_parts.*.idle_ns", NS, LOWER, 0.05, "top activity idle by part", "its own-time idle inside allocator calls, blocking calls, the data loader, compiles, host code no operator records (`outside`), and operators/frames launching nothing (`cpu_work`)"),
    ("attribution.top_parts.*.calls", COUNT, NEITHER, 0.05, "top activity calls by part", "the calls of each part"),
    ("attribution.allocator_idle_ns", NS, LOWER, 0.05, "allocator idle", "GPU idle time while the host is inside allocator calls (cudaMalloc/cudaFree/hipMalloc/..., `empty_cache` frames)"),
    ("attribution.allocator_idle_share", SHARE, LOWER, 0.1, "allocator idle share", "`allocator_idle_ns` / window"),
    ("attribution.allocator_calls_per_step", PER_STEP, LOWER, 0.05, "allocator calls per step", "allocator calls per profiled step"),
    ("attribution.allocator_chain", TEXT, NEITHER, 0, "allocator chain", "the activity around the allocator call holding the most idle time"),
    ("attribution.allocator_source", TEXT, NEITHER, 0, "allocator source line", "its user source line (`with_stack=True`), else null"),
    ("attribution.sync_idle_ns", NS, LOWER, 0.05, "sync idle", "GPU idle time while the host is inside blocking runtime calls (cuda*Synchronize, blocking copies)"),
    ("attribution.sync_idle_share", SHARE, LOWER, 0.1, "sync idle share", "`sync_idle_ns` / window"),
    ("attribution.sync_chain", TEXT, NEITHER, 0, "sync chain", "the activity around the blocking call holding the most idle time (the operator that syncs: `aten::nonzero` under `aten::index`...)"),
    ("attribution.sync_source", TEXT, NEITHER, 0, "sync source line", "its user source line (`with_stack=True`), else null"),
    ("attribution.unrecorded_ns", NS, LOWER, 0.05, "unrecorded host time idle", "GPU idle time while the host pauses in code no operator, runtime call or frame records: the own time of the range (or frame) holding the most of it when that is at least 1 ms per call and most of its idle time, else the stretches of at least 1 ms with nothing open"),
    ("attribution.unrecorded_share", SHARE, LOWER, 0.1, "unrecorded host time idle share", "`unrecorded_ns` / window"),
    ("attribution.unrecorded_chain", TEXT, NEITHER, 0, "unrecorded host time chain", "the range or frame holding it; null for stretches with nothing open"),
    ("attribution.unrecorded_source", TEXT, NEITHER, 0, "unrecorded host time source line", "its user source line (`with_stack=True`), else null"),
    ("attribution.unrecorded_profiler_ns", NS, NEITHER, 0.05, "profiler cost inside it", "the profiler's modelled cost of recording the host records that start inside that range or frame (count per kind x `overhead.MODEL`'s cost per record x the host's speed scale; at most `unrecorded_ns`): the Python tracer's records inside a pure-Python function; 0 for stretches with nothing open"),
    ("attribution.nodes[].name", TEXT, NEITHER, 0, "node name", "`name` of " + _N + "the event's name"),
    ("attribution.nodes[].kind", TEXT, NEITHER, 0, "node kind", "`kind` of " + _N + "cpu_op, annotation, python, runtime, driver"),
    ("attribution.nodes[].chain_text", TEXT, NEITHER, 0, "node chain", "`chain_text` of " + _N + "its chain joined by ` > `"),
    ("attribution.nodes[].source", TEXT, NEITHER, 0, "node source line", "`source` of " + _N + "`file:line` of the user's deepest frame, else null"),
    ("attribution.nodes[].idle_ns", NS, LOWER, 0.05, "node idle", "`idle_ns` of " + _N + "GPU idle time inside it"),
    ("attribution.nodes[].idle_share", SHARE, LOWER, 0.1, "node idle share", "`idle_share` of " + _N + "`idle_ns` / window"),
    ("attribution.nodes[].self_idle_ns", NS, LOWER, 0.05, "node own idle", "`self_idle_ns` of " + _N + "GPU idle time while it is the innermost event open"),
    ("attribution.nodes[].calls", COUNT, NEITHER, 0.05, "node calls", "`calls` of " + _N + "its events"),
    ("attribution.nodes[].calls_per_step", PER_STEP, NEITHER, 0.05, "node calls per step", "`calls_per_step` of " + _N + "calls / steps"),
    ("attribution.nodes[].mean_call_ns", NS, NEITHER, 0.1, "node mean call", "`mean_call_ns` of " + _N + "mean duration of its calls"),
    ("attribution.nodes[].launches_per_step", PER_STEP, NEITHER, 0.05, "node launches per step", "`launches_per_step` of " + _N + "kernel launch calls inside it per step"),
    ("attribution.nodes[].busy_ns", NS, NEITHER, 0.05, "node GPU work", "`busy_ns` of " + _N + "device time of the work launched inside it"),
    ("attribution.nodes[].steps_hit", COUNT, NEITHER, 0, "node steps hit", "`steps_hit` of " + _N + "steps where its idle is >= 1 % of the step"),
    ("attribution.busy[].name", TEXT, NEITHER, 0, "launching op", "`name` of " + _B + "the operator"),
    ("attribution.busy[].chain_text", TEXT, NEITHER, 0, "launching op chain", "`chain_text` of " + _B + "its chain"),
    ("attribution.busy[].source", TEXT, NEITHER, 0, "launching op source line", "`source` of " + _B + "the user's deepest frame, else null"),
    ("attribution.busy[].busy_ns", NS, NEITHER, 0.05, "launched GPU time", "`busy_ns` of " + _B + "summed durations of the device events it launches"),
    ("attribution.busy[].busy_share", SHARE, NEITHER, 0.1, "launched GPU time share", "`busy_share` of " + _B + "of all launched device time"),
    ("attribution.busy[].calls", COUNT, NEITHER, 0.05, "launching op calls", "`calls` of " + _B + "its calls"),
    # the job level: what the straggler does that the others do not (jobs/attribution.py straggler_activity)
    ("job.straggler_cause_evidence.activity", TEXT, NEITHER, 0, "straggler activity", _S + "what the straggler does that the others do not: the chain of its attribution (host activity the GPU waits in, or that launches the GPU's work) with the largest excess over the median rank"),
    ("job.straggler_cause_evidence.activity_kind", TEXT, NEITHER, 0, "straggler activity kind", _S + "`idle` (GPU idle time inside it) or `busy` (GPU time launched from it)"),
    ("job.straggler_cause_evidence.activity_ns_per_step", NS, NEITHER, 0.05, "straggler activity per step", _S + "the straggler's time in that activity per step"),
    ("job.straggler_cause_evidence.activity_difference_ns_per_step", NS, NEITHER, 0.05, "straggler activity excess", _S + "straggler - median rank for that activity (a rank not listing it counts as 0: an upper bound)"),
)
# fmt: on
