"""Registry entries of the topics steps, idle, kernels, launch, host_sync (``registry.py`` explains the fields)."""

from __future__ import annotations

from tb_llmdiag.metrics.registry_data import (
    COUNT,
    FLAG,
    HIGHER,
    INDEX,
    LOWER,
    NEITHER,
    NS,
    PER_STEP,
    RATIO,
    SHARE,
    TEXT,
    Entry,
)

# a declared table, one entry per row: left as laid out
# fmt: off
GPU_METRICS: tuple[Entry, ...] = (
    ("steps.count", COUNT, NEITHER, 0.02, "count", "n, the number of steps"),
    ("steps.cv", RATIO, LOWER, 0.1, "cv", "std / mean (coefficient of variation); null when the mean is 0"),
    ("steps.cv_excluding_first", RATIO, LOWER, 0.1, "cv excluding first",
     "cv of d_1..d_n-1 (n >= 3), so a cold first step does not read as variance"),
    ("steps.first_index", INDEX, NEITHER, 0, "first index",
     "the first profiled step's number (0 means the run's first step was profiled)"),
    ("steps.first_over_rest", RATIO, NEITHER, 0.1, "first over rest",
     "d_0 / median(d_1..d_n-1); null with fewer than 3 steps"),
    ("steps.max_ns", NS, LOWER, 0.05, "max", "maximum of the step durations d"),
    ("steps.max_over_median", RATIO, NEITHER, 0.1, "max over median", "max / median"),
    ("steps.mean_excess_share", SHARE, LOWER, 0.1, "mean excess share",
     "max(0, (mean - median) / mean) over d_1..d_n-1: what steadier steps would save"),
    ("steps.mean_ns", NS, LOWER, 0.05, "mean", "mean of the step durations d"),
    ("steps.median_ns", NS, LOWER, 0.05, "median", "median of the step durations d"),
    ("steps.min_ns", NS, LOWER, 0.05, "min", "minimum of the step durations d"),
    ("steps.outlier_count", COUNT, LOWER, 0.02, "outlier count",
     "steps with d_i > median + max(3 x 1.4826 x MAD, 0.1 x median), MAD = median absolute deviation"),
    ("steps.outlier_excess_share", SHARE, LOWER, 0.1, "outlier excess share",
     "sum over outliers of (d_i - median) / sum(d)"),
    ("steps.outlier_main_cause", TEXT, NEITHER, 0, "outlier main cause",
     "the most frequent cause among outliers other than the first step (all outliers if it is the only "
     "one); ties by total excess; null without outliers"),
    ("steps.source", TEXT, NEITHER, 0, "source", "`profiler_step` / `xplane_step` / `optimizer_step` / `none`"),
    ("steps.std_ns", NS, LOWER, 0.05, "std", "population standard deviation of the step durations d"),
    ("steps.tokens_corr", RATIO, NEITHER, 0.1, "tokens corr",
     "Pearson correlation of d_1..d_n-1 with their tokens; null with fewer than 3 such steps or constant "
     "values"),
    ("steps.tokens_cv", RATIO, LOWER, 0.1, "tokens cv", "cv of the steps' `tokens` (`per_step[].tokens`)"),
    ("steps.tokens_per_step_median", PER_STEP, NEITHER, 0.05, "tokens per step median",
     "median of the steps' `tokens` (`per_step[].tokens`)"),
    ("steps.warmup_excess_share", SHARE, LOWER, 0.1, "warmup excess share",
     "(d_0 - median(d_1..)) / sum(d) when `warmup_first_step`, else 0: the window time warm-up adds"),
    ("steps.warmup_first_step", FLAG, NEITHER, 0, "warmup first step", "`first_over_rest` >= 1.5"),
    ("steps.outlier_causes[].cause", TEXT, NEITHER, 0, "outlier cause",
     "`cause` of each `outlier_causes` entry: per outlier step: `index`, `duration_ns`, `excess_ns` (over "
     "the median), `first` (the first profiled step), and `cause`: the component of the step "
     "(`steps.per_step`: GPU busy time, idle time by cause) whose excess over its own median across "
     "steps is largest: `data_loader`, `sync`, `host_wait`, `other`, or `gpu_work` (busy time grew), which "
     "becomes `longer_input` when the step had >= 10 % more tokens than the median step (R3)"),
    ("steps.outlier_causes[].duration_ns", NS, LOWER, 0.05, "outlier cause duration",
     "`duration_ns` of each `outlier_causes` entry: per outlier step: `index`, `duration_ns`, `excess_ns` "
     "(over the median), `first` (the first profiled step), and `cause`: the component of the step "
     "(`steps.per_step`: GPU busy time, idle time by cause) whose excess over its own median across "
     "steps is largest: `data_loader`, `sync`, `host_wait`, `other`, or `gpu_work` (busy time grew), which "
     "becomes `longer_input` when the step had >= 10 % more tokens than the median step (R3)"),
    ("steps.outlier_causes[].excess_ns", NS, LOWER, 0.05, "outlier cause excess",
     "`excess_ns` of each `outlier_causes` entry: per outlier step: `index`, `duration_ns`, `excess_ns` "
     "(over the median), `first` (the first profiled step), and `cause`: the component of the step "
     "(`steps.per_step`: GPU busy time, idle time by cause) whose excess over its own median across "
     "steps is largest: `data_loader`, `sync`, `host_wait`, `other`, or `gpu_work` (busy time grew), which "
     "becomes `longer_input` when the step had >= 10 % more tokens than the median step (R3)"),
    ("steps.outlier_causes[].first", FLAG, NEITHER, 0, "outlier cause first",
     "`first` of each `outlier_causes` entry: per outlier step: `index`, `duration_ns`, `excess_ns` (over "
     "the median), `first` (the first profiled step), and `cause`: the component of the step "
     "(`steps.per_step`: GPU busy time, idle time by cause) whose excess over its own median across "
     "steps is largest: `data_loader`, `sync`, `host_wait`, `other`, or `gpu_work` (busy time grew), which "
     "becomes `longer_input` when the step had >= 10 % more tokens than the median step (R3)"),
    ("steps.outlier_causes[].index", INDEX, NEITHER, 0, "outlier cause index",
     "`index` of each `outlier_causes` entry: per outlier step: `index`, `duration_ns`, `excess_ns` (over "
     "the median), `first` (the first profiled step), and `cause`: the component of the step "
     "(`steps.per_step`: GPU busy time, idle time by cause) whose excess over its own median across "
     "steps is largest: `data_loader`, `sync`, `host_wait`, `other`, or `gpu_work` (busy time grew), which "
     "becomes `longer_input` when the step had >= 10 % more tokens than the median step (R3)"),
    ("steps.outliers[]", INDEX, NEITHER, 0, "outliers",
     "steps with d_i > median + max(3 x 1.4826 x MAD, 0.1 x median), MAD = median absolute deviation"),
    ("steps.per_step[].index", INDEX, NEITHER, 0, "step", "the number in the step marker's name (else the ordinal)"),
    ("steps.per_step[].name", TEXT, NEITHER, 0, "marker", "the step marker's name"),
    ("steps.per_step[].start_ns", NS, NEITHER, 0.05, "start", "where the step starts, since the trace's first event: its marker's start, or the end of earlier steps' device work when that is later"),
    ("steps.per_step[].host_end_ns", NS, NEITHER, 0.05, "host end", "where the step's host marker ends"),
    ("steps.per_step[].end_ns", NS, NEITHER, 0.05, "end",
     "where the step ends: the later of the marker's end and the end of the device work launched inside it"),
    ("steps.per_step[].duration_ns", NS, LOWER, 0.05, "step time", "d_i = end_ns - start_ns"),
    ("steps.per_step[].busy_ns", NS, HIGHER, 0.05, "busy", "the union of the device events other than collectives within the step's [start, end) (changed in report schema 3: collectives no longer count as busy); null without device activity"),
    ("steps.per_step[].collective_ns", NS, LOWER, 0.05, "communication", "device time within the step's [start, end) that only collective kernels cover (communication nothing else on the device hides; NCCL/RCCL, DeepEP, XLA collectives, `metrics.collectives`); busy + collective + the four idle causes = `duration_ns`; null without device activity"),
    ("steps.per_step[].busy_share", SHARE, HIGHER, 0.1, "busy share", "busy_ns / duration_ns (collectives excluded); null without device activity"),
    ("steps.per_step[].host_wait_ns", NS, LOWER, 0.05, "host wait", "idle time of `host_wait` gaps within the step: the idle gaps (`idle`) are classified once over the whole gap (metrics/gaps.py), then split at step boundaries: a gap crossing a boundary has one cause on both sides, and busy + collective + the four causes = `duration_ns`; the tab's `/steps` rows and step timelines read the same breakdown; null without device activity"),
    ("steps.per_step[].sync_ns", NS, LOWER, 0.05, "sync", "idle time of `sync` gaps within the step: the idle gaps (`idle`) are classified once over the whole gap (metrics/gaps.py), then split at step boundaries: a gap crossing a boundary has one cause on both sides, and busy + collective + the four causes = `duration_ns`; the tab's `/steps` rows and step timelines read the same breakdown; null without device activity"),
    ("steps.per_step[].data_loader_ns", NS, LOWER, 0.05, "data loader", "idle time of `data_loader` gaps within the step: the idle gaps (`idle`) are classified once over the whole gap (metrics/gaps.py), then split at step boundaries: a gap crossing a boundary has one cause on both sides, and busy + collective + the four causes = `duration_ns`; the tab's `/steps` rows and step timelines read the same breakdown; null without device activity"),
    ("steps.per_step[].other_ns", NS, LOWER, 0.05, "other", "idle time of `other` gaps within the step: the idle gaps (`idle`) are classified once over the whole gap (metrics/gaps.py), then split at step boundaries: a gap crossing a boundary has one cause on both sides, and busy + collective + the four causes = `duration_ns`; the tab's `/steps` rows and step timelines read the same breakdown; null without device activity"),
    ("steps.per_step[].tokens", COUNT, NEITHER, 0.02, "tokens",
     "token slots B x L summed over `aten::embedding(weight [V, H], indices [B, L])` calls whose weight has the "
     "largest V seen (the token embedding) and whose start lies in the step's host window; padding included; "
     "null without recorded shapes"),
    ("idle.busy_ns", NS, HIGHER, 0.05, "busy", "length of the union of the device events other than collectives (kernels, memcpy, memset) inside the window (changed in report schema 3: collectives no longer count as busy)"),
    ("idle.collective_ns", NS, LOWER, 0.05, "communication only", "window time the device runs only collective kernels (neither busy nor idle); busy + collective + idle = window"),
    ("idle.collective_share", SHARE, LOWER, 0.1, "communication only share", "collective_ns / window_ns"),
    ("idle.busy_share", SHARE, HIGHER, 0.1, "busy share", "busy_ns / window_ns"),
    ("idle.data_loader_ns", NS, NEITHER, 0.05, "data loader",
     "idle time in `data_loader` gaps; the four causes sum to `idle_ns`"),
    ("idle.data_loader_share", SHARE, NEITHER, 0.1, "data loader share", "data_loader_ns / window_ns"),
    ("idle.gap_count", COUNT, LOWER, 0.02, "gap count",
     "idle gaps: maximal stretches of the window with no device event"),
    ("idle.host_wait_culprit", TEXT, NEITHER, 0, "host wait culprit",
     "the most specific of the leaders: among names within 90 % of the largest overlap, the one with the "
     "shortest mean call (a leaf such as `aten::_cudnn_attention_backward` rather than its callers); null "
     "when there is no `host_wait` gap"),
    ("idle.host_wait_culprit_hint", TEXT, NEITHER, 0, "host wait culprit hint",
     "why such an operation keeps the GPU waiting and what to do, from the table `idle.CULPRIT_HINTS`, given only "
     "when the events it names are in the trace (compile ranges inside its calls, new input shapes at its slow "
     "calls, host-to-device copies launched inside it); null otherwise"),
    ("idle.host_wait_culprit_hint_events", TEXT, NEITHER, 0, "hint's events",
     "the events in the trace that back `host_wait_culprit_hint` (how many compile ranges or copies inside its "
     "calls, or how many of the steps holding its slow calls have a new input shape); null without a hint"),
    ("idle.host_wait_culprit_mean_ns", NS, LOWER, 0.05, "host wait culprit mean", "its mean call duration"),
    ("idle.host_wait_culprit_ns", NS, LOWER, 0.05, "host wait culprit",
     "its time within `host_wait` gaps (as `idle_ns` above, so `_share` <= `host_wait_share` <= 1)"),
    ("idle.host_wait_culprit_share", SHARE, LOWER, 0.1, "host wait culprit share", "host_wait_culprit_ns / window_ns"),
    ("idle.host_wait_ns", NS, LOWER, 0.05, "host wait", "idle time in `host_wait` gaps"),
    ("idle.host_wait_per_shape_ns", NS, LOWER, 0.05, "host wait per shape",
     "among CPU operators doing per-shape work (`idle.PER_SHAPE_OPS`: cuDNN attention / convolution, "
     "torch.compile regions) whose mean call is >= 1 ms (so they are building plans or compiling, not just "
     "launching), the one with the largest overlap with host-wait gaps: its name, that overlap (ns), and / "
     "window_ns. The largest single name, not a sum, so nested callers are not double counted. null / 0 "
     "when none"),
    ("idle.host_wait_per_shape_op", TEXT, NEITHER, 0, "host wait per shape op",
     "among CPU operators doing per-shape work (`idle.PER_SHAPE_OPS`: cuDNN attention / convolution, "
     "torch.compile regions) whose mean call is >= 1 ms (so they are building plans or compiling, not just "
     "launching), the one with the largest overlap with host-wait gaps: its name, that overlap (ns), and / "
     "window_ns. The largest single name, not a sum, so nested callers are not double counted. null / 0 "
     "when none"),
    ("idle.host_wait_per_shape_share", SHARE, LOWER, 0.1, "host wait per shape share",
     "among CPU operators doing per-shape work (`idle.PER_SHAPE_OPS`: cuDNN attention / convolution, "
     "torch.compile regions) whose mean call is >= 1 ms (so they are building plans or compiling, not just "
     "launching), the one with the largest overlap with host-wait gaps: its name, that overlap (ns), and / "
     "window_ns. The largest single name, not a sum, so nested callers are not double counted. null / 0 "
     "when none"),
    ("idle.host_wait_share", SHARE, LOWER, 0.1, "host wait share", "host_wait_ns / window_ns"),
    ("idle.idle_ns", NS, LOWER, 0.05, "idle", "window time without any device event (collectives included): window_ns - busy_ns - collective_ns"),
    ("idle.idle_share", SHARE, LOWER, 0.1, "idle share", "idle_ns / window_ns"),
    ("idle.long_gap_count", COUNT, LOWER, 0.02, "long gap count",
     "idle gaps of 500 ms or more (Nsight Systems' \"GPU gaps\" rule)"),
    ("idle.long_gap_max_ns", NS, LOWER, 0.05, "long gap max", "the longest of them"),
    ("idle.long_gap_ns", NS, LOWER, 0.05, "long gap", "their summed length"),
    ("idle.long_gap_share", SHARE, LOWER, 0.1, "long gap share", "long_gap_ns / window_ns"),
    ("idle.low_util_step_count", COUNT, LOWER, 0.02, "low util step count",
     "steps whose `busy_share` (`steps.per_step[]`) < 0.5 (Nsight's 50 % rule, per step)"),
    ("idle.other_ns", NS, NEITHER, 0.05, "other", "idle time in `other` gaps"),
    ("idle.other_share", SHARE, NEITHER, 0.1, "other share", "other_ns / window_ns"),
    ("idle.sync_ns", NS, LOWER, 0.05, "sync", "idle time in `sync` gaps"),
    ("idle.sync_share", SHARE, LOWER, 0.1, "sync share", "sync_ns / window_ns"),
    ("idle.window_ns", NS, NEITHER, 0.05, "window", "length of the window (Common definitions)"),
    ("idle.window_source", TEXT, NEITHER, 0, "window source",
     "`steps`, `device` or `trace`: what the window is (Common definitions)"),
    ("idle.host_wait_top_ops[].idle_ns", NS, LOWER, 0.05, "host wait top op idle",
     "`idle_ns` of each `host_wait_top_ops` entry: the 5 host operator names (CPU ops) that ran longest "
     "during `host_wait` gaps: `name`, `idle_ns` (the union of the name's ranges within those gaps: nested "
     "calls, or calls on parallel threads such as XLA's compiler threads, count once, so it never exceeds "
     "`host_wait_ns`), `share` (/ window_ns)"),
    ("idle.host_wait_top_ops[].name", TEXT, NEITHER, 0, "host wait top op name",
     "`name` of each `host_wait_top_ops` entry: the 5 host operator names (CPU ops) that ran longest "
     "during `host_wait` gaps: `name`, `idle_ns` (the union of the name's ranges within those gaps: nested "
     "calls, or calls on parallel threads such as XLA's compiler threads, count once, so it never exceeds "
     "`host_wait_ns`), `share` (/ window_ns)"),
    ("idle.host_wait_top_ops[].share", SHARE, LOWER, 0.1, "host wait top op share",
     "`share` of each `host_wait_top_ops` entry: the 5 host operator names (CPU ops) that ran longest "
     "during `host_wait` gaps: `name`, `idle_ns` (the union of the name's ranges within those gaps: nested "
     "calls, or calls on parallel threads such as XLA's compiler threads, count once, so it never exceeds "
     "`host_wait_ns`), `share` (/ window_ns)"),
    ("idle.low_util_steps[]", INDEX, NEITHER, 0, "low util steps",
     "steps whose `busy_share` (`steps.per_step[]`) < 0.5 (Nsight's 50 % rule, per step)"),
    ("kernels.by_category.*.count", COUNT, NEITHER, 0.02, "category count", "the category's device events"),
    ("kernels.by_category.*.share", SHARE, NEITHER, 0.1, "category share",
     "time_ns / device_time_ns; the shares sum to 1"),
    ("kernels.by_category.*.time_ns", NS, NEITHER, 0.05, "category time",
     "summed duration of the category's device events (categories: `classify.CATEGORIES`)"),
    ("kernels.copy_ns", NS, LOWER, 0.05, "copy", "copy + memcpy time"),
    ("kernels.copy_share", SHARE, LOWER, 0.1, "copy share", "copy_ns / device_time_ns"),
    ("kernels.copy_step_share", SHARE, LOWER, 0.1, "copy step share",
     "length of the union of copy-class intervals in the window / window_ns: the most removing the copies "
     "could save"),
    ("kernels.copy_vs_gemm_ratio", RATIO, LOWER, 0.1, "copy vs gemm ratio",
     "copy_ns / gemm_ns; null with no matmul-class time"),
    ("kernels.device_events", COUNT, NEITHER, 0.02, "device events", "the number of device events in the window"),
    ("kernels.device_time_ns", NS, NEITHER, 0.05, "device time",
     "plain sum of device event durations (overlapping streams both count)"),
    ("kernels.gemm_ns", NS, NEITHER, 0.05, "gemm", "gemm + attention + conv time (matrix-multiply-class work)"),
    ("kernels.gemm_share", SHARE, NEITHER, 0.1, "gemm share", "gemm_ns / device_time_ns"),
    ("kernels.top_kernels[].category", TEXT, NEITHER, 0, "top kernel category",
     "`category` of each `top_kernels` entry: the 15 names with most time: `name`, `category`, `count`, "
     "`total_ns`, `mean_ns`, `share` (of device_time_ns)"),
    ("kernels.top_kernels[].count", COUNT, NEITHER, 0.02, "top kernel count",
     "`count` of each `top_kernels` entry: the 15 names with most time: `name`, `category`, `count`, "
     "`total_ns`, `mean_ns`, `share` (of device_time_ns)"),
    ("kernels.top_kernels[].mean_ns", NS, NEITHER, 0.05, "top kernel mean",
     "`mean_ns` of each `top_kernels` entry: the 15 names with most time: `name`, `category`, `count`, "
     "`total_ns`, `mean_ns`, `share` (of device_time_ns)"),
    ("kernels.top_kernels[].name", TEXT, NEITHER, 0, "top kernel name",
     "`name` of each `top_kernels` entry: the 15 names with most time: `name`, `category`, `count`, "
     "`total_ns`, `mean_ns`, `share` (of device_time_ns)"),
    ("kernels.top_kernels[].share", SHARE, NEITHER, 0.1, "top kernel share",
     "`share` of each `top_kernels` entry: the 15 names with most time: `name`, `category`, `count`, "
     "`total_ns`, `mean_ns`, `share` (of device_time_ns)"),
    ("kernels.top_kernels[].total_ns", NS, NEITHER, 0.05, "top kernel total",
     "`total_ns` of each `top_kernels` entry: the 15 names with most time: `name`, `category`, `count`, "
     "`total_ns`, `mean_ns`, `share` (of device_time_ns)"),
    ("launch.kernel_mean_ns", NS, NEITHER, 0.05, "kernel mean", "mean kernel duration"),
    ("launch.kernel_median_ns", NS, NEITHER, 0.05, "kernel median", "median kernel duration"),
    ("launch.kernels", COUNT, NEITHER, 0.02, "kernels", "KERNEL events in the window"),
    ("launch.kernels_per_step", PER_STEP, NEITHER, 0.05, "kernels per step", "kernels / steps"),
    ("launch.launch_api_median_ns", NS, NEITHER, 0.05, "launch api median",
     "median duration of the launch calls: the host's cost per launch"),
    ("launch.launches", COUNT, NEITHER, 0.02, "launches",
     "runtime/driver calls that submit work: `cudaLaunchKernel*`, `cudaLaunchCooperativeKernel`, "
     "`cudaGraphLaunch`, `cuLaunch*`, `hipLaunchKernel`, `hip(Ext)ModuleLaunchKernel`"),
    ("launch.launches_per_step", PER_STEP, NEITHER, 0.05, "launches per step", "launches / steps"),
    ("launch.runtime_ns", NS, NEITHER, 0.05, "runtime", "sum of all runtime + driver call durations in the window"),
    ("launch.runtime_share", SHARE, LOWER, 0.1, "runtime share",
     "length of the union of those calls within the window / window_ns"),
    ("launch.tiny_kernel_ns", NS, NEITHER, 0, "tiny kernel", "the \"tiny\" cut-off, 10 000 ns"),
    ("launch.tiny_kernel_saving_share", SHARE, LOWER, 0.1, "tiny kernel saving share",
     "min(`idle.host_wait_share`, tiny kernels per step x launch_api_median_ns / median step): what fusing "
     "them could save at most"),
    ("launch.tiny_kernel_share", SHARE, LOWER, 0.1, "tiny kernel share", "tiny_kernels / kernels launched one by one (graph replays left out)"),
    ("launch.graph_kernels", COUNT, NEITHER, 0.02, "replayed kernels", "kernels a CUDA/HIP graph replayed (not launched one by one; left out of the tiny-kernel counts)"),
    ("launch.tiny_kernel_time_share", SHARE, LOWER, 0.1, "tiny kernel time share", "their share of kernel time"),
    ("launch.tiny_kernels", COUNT, LOWER, 0.02, "tiny kernels", "kernels shorter than the cut-off"),
    ("launch.tiny_kernels_per_step", PER_STEP, LOWER, 0.05, "tiny kernels per step", "tiny_kernels / steps"),
    ("launch.api[].count", COUNT, NEITHER, 0.02, "api count",
     "`count` of each `api` entry: per runtime/driver API (top 15 by total): `name`, `count`, `total_ns`, "
     "`mean_ns`, `max_ns`, `share` (of runtime_ns), like Nsight's CUDA API summary"),
    ("launch.api[].max_ns", NS, NEITHER, 0.05, "api max",
     "`max_ns` of each `api` entry: per runtime/driver API (top 15 by total): `name`, `count`, `total_ns`, "
     "`mean_ns`, `max_ns`, `share` (of runtime_ns), like Nsight's CUDA API summary"),
    ("launch.api[].mean_ns", NS, NEITHER, 0.05, "api mean",
     "`mean_ns` of each `api` entry: per runtime/driver API (top 15 by total): `name`, `count`, "
     "`total_ns`, `mean_ns`, `max_ns`, `share` (of runtime_ns), like Nsight's CUDA API summary"),
    ("launch.api[].name", TEXT, NEITHER, 0, "api name",
     "`name` of each `api` entry: per runtime/driver API (top 15 by total): `name`, `count`, `total_ns`, "
     "`mean_ns`, `max_ns`, `share` (of runtime_ns), like Nsight's CUDA API summary"),
    ("launch.api[].share", SHARE, NEITHER, 0.1, "api share",
     "`share` of each `api` entry: per runtime/driver API (top 15 by total): `name`, `count`, `total_ns`, "
     "`mean_ns`, `max_ns`, `share` (of runtime_ns), like Nsight's CUDA API summary"),
    ("launch.api[].total_ns", NS, NEITHER, 0.05, "api total",
     "`total_ns` of each `api` entry: per runtime/driver API (top 15 by total): `name`, `count`, "
     "`total_ns`, `mean_ns`, `max_ns`, `share` (of runtime_ns), like Nsight's CUDA API summary"),
    ("host_sync.blocked_ns", NS, LOWER, 0.05, "blocked",
     "length of the union of those ranges within the window (host time spent waiting), less `in_collective_ns` (changed in report schema 3)"),
    ("host_sync.in_collective_ns", NS, NEITHER, 0.05, "blocked in collective",
     "host time blocked in a sync while the device runs a collective kernel (waiting for peers or the transfer): not counted in `blocked_ns`, so `host_sync` never blames a sync for it"),
    ("host_sync.in_collective_share", SHARE, NEITHER, 0.1, "blocked in collective share", "in_collective_ns / window_ns"),
    ("host_sync.blocked_share", SHARE, LOWER, 0.1, "blocked share", "blocked_ns / window_ns"),
    ("host_sync.idle_after_sync_ns", NS, LOWER, 0.05, "idle after sync",
     "`idle.sync_ns`: the GPU idle right after syncs"),
    ("host_sync.idle_after_sync_share", SHARE, LOWER, 0.1, "idle after sync share", "`idle.sync_share`"),
    ("host_sync.item_calls", COUNT, NEITHER, 0.02, "item calls",
     "`aten::_local_scalar_dense` (what `.item()`, `float(t)`, `if t:` run) on device tensors: calls that "
     "issue a runtime call on their thread. A CPU scalar's `.item()` (an optimizer's step count) syncs "
     "nothing and is not counted"),
    ("host_sync.item_calls_per_step", PER_STEP, NEITHER, 0.05, "item calls per step", "item_calls / steps"),
    ("host_sync.longest_ns", NS, LOWER, 0.05, "longest", "the longest single range"),
    ("host_sync.longest_call", TEXT, NEITHER, 0, "longest call", "the name of the call of the longest range"),
    ("host_sync.longest_call_kind", TEXT, NEITHER, 0, "longest call kind",
     "`blocking copy` (a synchronous `*Memcpy*`: it waits for all queued device work, then copies), "
     "`synchronize` (a `*Synchronize` call) or `device value read` (an operator such as `.item()`)"),
    ("host_sync.nonzero_calls", COUNT, NEITHER, 0.02, "nonzero calls",
     "`aten::nonzero` calls that reach the device (data-dependent output size)"),
    ("host_sync.saving_share", SHARE, LOWER, 0.1, "saving share",
     "min(`blocked_share`, `idle.idle_share` - `idle.data_loader_share`): the most removing the syncs "
     "could save. Model: without syncs the host never waits, so a step takes about max(step - blocked, GPU "
     "busy); the difference is min(blocked, idle). A host-bound step loses its blocked time (the host "
     "could have been launching); a GPU-bound one only its idle time"),
    ("host_sync.sync_calls", COUNT, LOWER, 0.02, "sync calls",
     "blocking runtime/driver calls in the window: `cuda/hip {Stream,Device,Event,Ctx}Synchronize`, "
     "`cuStreamSynchronize`..., synchronous `cudaMemcpy`/`cuMemcpy*`"),
    ("host_sync.sync_calls_per_step", PER_STEP, LOWER, 0.05, "sync calls per step", "sync_calls / steps"),
    ("host_sync.syncs_per_step", PER_STEP, LOWER, 0.05, "syncs per step",
     "sync sites per step: blocking API calls, plus syncing operators that wrap none (`aten::item` / "
     "`is_nonzero` wrapping `_local_scalar_dense` count once)"),
    ("host_sync.by_api[].count", COUNT, NEITHER, 0.02, "sync api count",
     "`count` of each `by_api` entry: per sync API: `name`, `count`, `total_ns`, `max_ns`"),
    ("host_sync.by_api[].max_ns", NS, NEITHER, 0.05, "sync api max",
     "`max_ns` of each `by_api` entry: per sync API: `name`, `count`, `total_ns`, `max_ns`"),
    ("host_sync.by_api[].name", TEXT, NEITHER, 0, "sync api name",
     "`name` of each `by_api` entry: per sync API: `name`, `count`, `total_ns`, `max_ns`"),
    ("host_sync.by_api[].total_ns", NS, NEITHER, 0.05, "sync api total",
     "`total_ns` of each `by_api` entry: per sync API: `name`, `count`, `total_ns`, `max_ns`"),
)
# fmt: on
