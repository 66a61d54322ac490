"""Registry entries of ``activities``: what the host and the GPU do in a time range (``traceview/activities.py``,
``api.Analysed.activities``, the agent's ``top_activities`` tool; not part of the run report; ``registry.py`` explains the
fields). Computed above the metrics layer, which the registry may not import: declared here."""

from __future__ import annotations

from tb_llmdiag.metrics.entry import COUNT, INDEX, LOWER, NEITHER, NS, SHARE, TEXT, Entry, Intro

_UNION = (
    "the union of the time its events cover inside the range (streams or calls running one name at once count once)"
)

#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`activities` (traceview/activities.py; `api.analyze(tf).activities`, not part of the run report)",
    "What the host and the GPU do in one time range or step: the top activities by time, with the numbers the "
    "trace view draws. The agent's `top_activities` tool answers with it (docs/agents.md).",
)

# a declared table, one entry per row: left as laid out
# fmt: off
ENTRIES: tuple[Entry, ...] = (
    ("activities.start_ns", NS, NEITHER, 0, "range start",
     "start of the range asked about, in ns since the trace's first event (the clock of `steps.per_step`)"),
    ("activities.end_ns", NS, NEITHER, 0, "range end", "end of the range (exclusive)"),
    ("activities.duration_ns", NS, NEITHER, 0, "range", "end_ns - start_ns"),
    ("activities.step", INDEX, NEITHER, 0, "step", "the step whose window the range is, or null for a range given by times"),
    ("activities.gpu.busy_ns", NS, NEITHER, 0.05, "GPU busy",
     "device time in the range covered by work other than collectives (the union over devices and streams); for a "
     "step's range, its `steps.per_step[].busy_ns`"),
    ("activities.gpu.busy_share", SHARE, NEITHER, 0.05, "GPU busy share", "busy_ns / duration_ns"),
    ("activities.gpu.collective_ns", NS, LOWER, 0.05, "collectives only",
     "device time in the range that only collectives cover (`steps.per_step[].collective_ns` for a step)"),
    ("activities.gpu.host_wait_ns", NS, LOWER, 0.05, "GPU waits for the host",
     "idle time in the range of gaps of cause `host_wait` (`metrics/gaps.py`; `steps.per_step[].host_wait_ns`)"),
    ("activities.gpu.sync_ns", NS, LOWER, 0.05, "GPU idle after a sync", "idle time in the range of gaps of cause `sync`"),
    ("activities.gpu.data_loader_ns", NS, LOWER, 0.05, "GPU waits for data",
     "idle time in the range of gaps of cause `data_loader`"),
    ("activities.gpu.other_ns", NS, LOWER, 0.05, "GPU idle, other", "idle time in the range of gaps of cause `other`"),
    ("activities.gpu.by_category.*.time_ns", NS, NEITHER, 0.05, "category time",
     "per trace-view category of device events (kernel categories of `classify`, memcpy, memset): " + _UNION),
    ("activities.gpu.by_category.*.share", SHARE, NEITHER, 0.05, "category share", "time_ns / duration_ns"),
    ("activities.gpu.top[].name", TEXT, NEITHER, 0, "device activity", "a kernel, memcpy or memset name"),
    ("activities.gpu.top[].category", TEXT, NEITHER, 0, "category", "its trace-view category"),
    ("activities.gpu.top[].time_ns", NS, NEITHER, 0.05, "time", "of the top device names by time: " + _UNION),
    ("activities.gpu.top[].share", SHARE, NEITHER, 0.05, "share of the range", "time_ns / duration_ns"),
    ("activities.gpu.top[].count", COUNT, NEITHER, 0.05, "events", "its events overlapping the range"),
    ("activities.parts_busy_ns", NS, NEITHER, 0.05, "GPU busy in the range (by part)",
     "the agent's `anatomy` tool with a step or range: for a step, the sum of its parts' `anatomy.parts.*.step_time_ns` "
     "(device events counted in the step they start in); for a range given by times, the device-busy union within "
     "it (all devices and streams, collectives included)"),
    ("activities.parts[].name", TEXT, NEITHER, 0, "model part",
     "a part of the model (`anatomy.parts`) with device time in the range, largest first"),
    ("activities.parts[].time_ns", NS, NEITHER, 0.05, "part time in the range",
     "its share of `parts_busy_ns`, each instant split equally among the device events running then"),
    ("activities.parts[].share", SHARE, NEITHER, 0.05, "part share of the range's busy time", "time_ns / parts_busy_ns"),
    ("activities.host.*[].name", TEXT, NEITHER, 0, "host activity",
     "per host category of the trace view (`cpu_op`, `annotation`, `python`, `runtime`, `driver`, `host_other`), "
     "the top names by time"),
    ("activities.host.*[].time_ns", NS, NEITHER, 0.05, "time", _UNION),
    ("activities.host.*[].share", SHARE, NEITHER, 0.05, "share of the range", "time_ns / duration_ns"),
    ("activities.host.*[].count", COUNT, NEITHER, 0.05, "calls", "its calls overlapping the range"),
    ("activities.host.*[].gpu_host_wait_ns", NS, LOWER, 0.05, "while the GPU waited",
     "the part of time_ns in which the GPU sat idle waiting for the host (gaps of cause `host_wait`): the measure "
     "`idle.host_wait_top_ops` and the `host_bound` finding's `host_op` read over the whole window"),
)
# fmt: on
