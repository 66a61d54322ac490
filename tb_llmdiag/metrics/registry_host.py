"""Registry entries of the topics memcpy, dataloader, memory, annotations, flops (``registry.py`` explains the fields)."""

from __future__ import annotations

from tb_llmdiag.metrics.registry_data import (
    BYTES,
    COUNT,
    FLOP,
    HIGHER,
    INDEX,
    LOWER,
    NEITHER,
    NS,
    PER_S,
    PER_STEP,
    SHARE,
    TEXT,
    TFLOP_PER_S,
    Entry,
)

HOST_METRICS: tuple[Entry, ...] = (
    ("memcpy.count", COUNT, NEITHER, 0.02, "count", "memcpy events"),
    ("memcpy.dtod_bytes", BYTES, NEITHER, 0.02, "dtod bytes", "payload of dtod copies"),
    ("memcpy.dtod_count", COUNT, NEITHER, 0.02, "dtod count", "number of dtod copies"),
    ("memcpy.dtod_host_ns", NS, NEITHER, 0.05, "dtod host", "host time (the issuing runtime call) of dtod copies"),
    ("memcpy.dtod_time_ns", NS, NEITHER, 0.05, "dtod time", "device time of dtod copies"),
    ("memcpy.dtoh_pageable_bytes", BYTES, NEITHER, 0.02, "dtoh pageable bytes", "payload of dtoh pageable copies"),
    ("memcpy.dtoh_pageable_count", COUNT, LOWER, 0.02, "dtoh pageable count", "number of dtoh pageable copies"),
    ("memcpy.dtoh_pageable_host_ns", NS, LOWER, 0.05, "dtoh pageable host",
     "host time (the issuing runtime call) of dtoh pageable copies"),
    ("memcpy.dtoh_pageable_time_ns", NS, LOWER, 0.05, "dtoh pageable time", "device time of dtoh pageable copies"),
    ("memcpy.dtoh_pinned_bytes", BYTES, NEITHER, 0.02, "dtoh pinned bytes", "payload of dtoh pinned copies"),
    ("memcpy.dtoh_pinned_count", COUNT, NEITHER, 0.02, "dtoh pinned count", "number of dtoh pinned copies"),
    ("memcpy.dtoh_pinned_host_ns", NS, NEITHER, 0.05, "dtoh pinned host",
     "host time (the issuing runtime call) of dtoh pinned copies"),
    ("memcpy.dtoh_pinned_time_ns", NS, NEITHER, 0.05, "dtoh pinned time", "device time of dtoh pinned copies"),
    ("memcpy.htod_pageable_bytes", BYTES, NEITHER, 0.02, "htod pageable bytes", "payload of htod pageable copies"),
    ("memcpy.htod_pageable_count", COUNT, LOWER, 0.02, "htod pageable count", "number of htod pageable copies"),
    ("memcpy.htod_pageable_host_ns", NS, LOWER, 0.05, "htod pageable host",
     "host time (the issuing runtime call) of htod pageable copies"),
    ("memcpy.htod_pageable_per_step", PER_STEP, LOWER, 0.05, "htod pageable per step",
     "pageable host-to-device copies per step"),
    ("memcpy.htod_pageable_time_ns", NS, LOWER, 0.05, "htod pageable time", "device time of htod pageable copies"),
    ("memcpy.htod_pinned_bytes", BYTES, NEITHER, 0.02, "htod pinned bytes", "payload of htod pinned copies"),
    ("memcpy.htod_pinned_count", COUNT, NEITHER, 0.02, "htod pinned count", "number of htod pinned copies"),
    ("memcpy.htod_pinned_host_ns", NS, NEITHER, 0.05, "htod pinned host",
     "host time (the issuing runtime call) of htod pinned copies"),
    ("memcpy.htod_pinned_time_ns", NS, NEITHER, 0.05, "htod pinned time", "device time of htod pinned copies"),
    ("memcpy.pageable_htod_share", SHARE, LOWER, 0.1, "pageable htod share",
     "length of the union of those copies' host spans within the window / window_ns: the most pinning "
     "could save"),
    ("memcpy.by_name[].bytes", BYTES, NEITHER, 0.02, "copy bytes",
     "`bytes` of each `by_name` entry: per name: `name`, `count`, `bytes` (sum of known payloads), "
     "`time_ns` (device time)"),
    ("memcpy.by_name[].count", COUNT, NEITHER, 0.02, "copy count",
     "`count` of each `by_name` entry: per name: `name`, `count`, `bytes` (sum of known payloads), "
     "`time_ns` (device time)"),
    ("memcpy.by_name[].name", TEXT, NEITHER, 0, "copy name",
     "`name` of each `by_name` entry: per name: `name`, `count`, `bytes` (sum of known payloads), "
     "`time_ns` (device time)"),
    ("memcpy.by_name[].time_ns", NS, NEITHER, 0.05, "copy time",
     "`time_ns` of each `by_name` entry: per name: `name`, `count`, `bytes` (sum of known payloads), "
     "`time_ns` (device time)"),
    ("dataloader.calls", COUNT, NEITHER, 0.02, "calls", "ranges in the window"),
    ("dataloader.calls_per_step", PER_STEP, NEITHER, 0.05, "calls per step", "calls / steps"),
    ("dataloader.host_ns", NS, NEITHER, 0.05, "host", "length of their union within the window"),
    ("dataloader.host_share", SHARE, NEITHER, 0.1, "host share", "host_ns / window_ns"),
    ("dataloader.iterator", TEXT, NEITHER, 0, "iterator",
     "`single_process` (`num_workers=0`), `multi_process`, or null, from the iterator class in the name"),
    ("dataloader.stall_ns", NS, LOWER, 0.05, "stall",
     "length of (loader ranges ∩ GPU idle gaps): the wait the GPU sees"),
    ("dataloader.stall_share", SHARE, LOWER, 0.1, "stall share", "stall_ns / window_ns"),
    ("memory.device", INDEX, NEITHER, 0, "device", "device index"),
    ("memory.fragmentation_bytes", BYTES, NEITHER, 0.02, "fragmentation",
     "reserved - allocated at the peak-reservation sample (cached but unused)"),
    ("memory.fragmentation_share", SHARE, LOWER, 0.1, "fragmentation share", "fragmentation_bytes / total_bytes"),
    ("memory.headroom_bytes", BYTES, HIGHER, 0.02, "headroom", "total_bytes - peak_used_bytes"),
    ("memory.peak_allocated_bytes", BYTES, NEITHER, 0.02, "peak allocated",
     "max of the allocator's Total Allocated (memory allocated before the profiler started counts)"),
    ("memory.peak_allocated_share", SHARE, NEITHER, 0.1, "peak allocated share", "peak_allocated_bytes / total_bytes"),
    ("memory.peak_reserved_bytes", BYTES, NEITHER, 0.02, "peak reserved", "max of the allocator's Total Reserved"),
    ("memory.peak_reserved_share", SHARE, NEITHER, 0.1, "peak reserved share", "peak_reserved_bytes / total_bytes"),
    ("memory.peak_used_bytes", BYTES, NEITHER, 0.02, "peak used",
     "peak reserved, or peak allocated when the samples carry no reservation"),
    ("memory.peak_used_share", SHARE, NEITHER, 0.1, "peak used share", "peak_used_bytes / total_bytes"),
    ("memory.samples", COUNT, NEITHER, 0.02, "samples", "its allocator sample count"),
    ("memory.total_bytes", BYTES, NEITHER, 0.02, "total",
     "the device's `totalGlobalMem`; null when the trace does not say"),
    ("annotations.count", COUNT, NEITHER, 0.02, "count",
     "host user annotations (`record_function` ranges) in the window"),
    ("annotations.optimizer_step_share", SHARE, NEITHER, 0.1, "optimizer step share",
     "union of `Optimizer.step#...` ranges within the window / window_ns"),
    ("annotations.stack", TEXT, NEITHER, 0, "stack",
     "the training stack the trace reveals: `lightning` (`Framework` metadata or `[pl]` labels, "
     "`lightning/pytorch` frames), `hf_trainer` (`transformers/trainer.py` frames), `torchtune`, "
     "`accelerate`; null when unknown. Findings use it to word fixes"),
    ("annotations.zero_grad_share", SHARE, NEITHER, 0.1, "zero grad share", "the same for `Optimizer.zero_grad#...`"),
    ("annotations.top[].count", COUNT, NEITHER, 0.02, "top count",
     "`count` of each `top` entry: per name (top 15 by time): `name`, `count`, `total_ns` (sum of "
     "durations: nested or repeated ranges all count), `share` (total_ns / window_ns; may exceed 1 for "
     "nested ranges)"),
    ("annotations.top[].name", TEXT, NEITHER, 0, "top name",
     "`name` of each `top` entry: per name (top 15 by time): `name`, `count`, `total_ns` (sum of "
     "durations: nested or repeated ranges all count), `share` (total_ns / window_ns; may exceed 1 for "
     "nested ranges)"),
    ("annotations.top[].share", SHARE, NEITHER, 0.1, "top share",
     "`share` of each `top` entry: per name (top 15 by time): `name`, `count`, `total_ns` (sum of "
     "durations: nested or repeated ranges all count), `share` (total_ns / window_ns; may exceed 1 for "
     "nested ranges)"),
    ("annotations.top[].total_ns", NS, NEITHER, 0.05, "top total",
     "`total_ns` of each `top` entry: per name (top 15 by time): `name`, `count`, `total_ns` (sum of "
     "durations: nested or repeated ranges all count), `share` (total_ns / window_ns; may exceed 1 for "
     "nested ranges)"),
    ("flops.achieved_tflops", TFLOP_PER_S, HIGHER, 0.05, "achieved tflops", "flops / window seconds / 1e12"),
    ("flops.device", TEXT, NEITHER, 0, "device", "the device name the peak is looked up for"),
    ("flops.flops", FLOP, NEITHER, 0.02, "flops",
     "FLOPs of counted operators starting in the window (hardware FLOPs: recompute included)"),
    ("flops.flops_per_step", FLOP, NEITHER, 0.02, "flops per step", "flops / steps"),
    ("flops.matmul_flops", FLOP, NEITHER, 0.02, "matmul flops", "the GEMM part of `flops`"),
    ("flops.mfu_share", SHARE, HIGHER, 0.1, "mfu share",
     "achieved / peak; null when either is unknown or when `mfu_withheld` says why it is not shown"),
    ("flops.token_batch_share", SHARE, NEITHER, 0.02, "token batch share",
     "the share of matmul FLOPs whose left operand has as many rows as a token-embedding call has token slots "
     "(an LLM's linear layers run on its [tokens, hidden] batch: near 1 on LLM training, prefill and decode, "
     "near 0 for a diffusion transformer beside its T5/CLIP text encoder); null without token-embedding calls"),
    ("flops.mfu_withheld", TEXT, NEITHER, 0, "mfu withheld",
     "why `mfu_share` and `tokens_per_s` are null though FLOPs were counted: only part of the file was read, no "
     "device activity, or `token_batch_share` < 0.5 (the recorded token embedding is not what the GEMMs run on: "
     "not an LLM's token batch); null when they are shown"),
    ("flops.peak_tflops", TFLOP_PER_S, NEITHER, 0.05, "peak tflops",
     "the trace's own peak (XPlane) or the dense BF16/FP16 tensor-core peak of the device name in "
     "`flops.PEAK_TFLOPS` (H100 SXM/H200 989.4, H100 PCIe 756.5, A100 312, ...; never a sparse figure); "
     "null for unknown devices"),
    ("flops.tokens_per_s", PER_S, HIGHER, 0.05, "tokens per s",
     "sum of the steps' `tokens` (`steps.per_step[].tokens`) / sum of step durations (padded token slots per "
     "second); null when `mfu_withheld` says why"),
)
