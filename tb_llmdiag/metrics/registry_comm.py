"""Registry entries of the ``communication`` topic (``metrics/communication.py``; ``registry.py`` explains the fields)."""

from __future__ import annotations

from tb_llmdiag.metrics.registry_data import BYTES, COUNT, FLAG, LOWER, NEITHER, NS, SHARE, TEXT, Entry

_BY_KIND = (
    "per collective kind (`all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `send_recv`, "
    "`broadcast`, ...: `metrics.collectives.KINDS`) of the collectives starting inside a step window"
)

COMM_METRICS: tuple[Entry, ...] = (
    (
        "communication.available",
        FLAG,
        NEITHER,
        0,
        "available",
        "false when the trace has no device activity or no collective kernel (then `reason` says which)",
    ),
    ("communication.reason", TEXT, NEITHER, 0, "reason", "why the topic is unavailable"),
    (
        "communication.collective_count",
        COUNT,
        NEITHER,
        0.02,
        "collectives",
        "collective kernels (NCCL/RCCL `ncclKernel*`/`ncclDevKernel*`, DeepEP dispatch/combine, multimem/custom "
        "all-reduce, XLA collectives) starting inside a step window",
    ),
    (
        "communication.collective_ns",
        NS,
        LOWER,
        0.05,
        "collective time",
        "length of the union of collective kernels within the step windows (the device window of each step: from "
        "the first device event it launched to the first the next step launched)",
    ),
    ("communication.collective_share", SHARE, LOWER, 0.1, "collective share", "collective_ns / step windows' length"),
    (
        "communication.compute_ns",
        NS,
        NEITHER,
        0.05,
        "compute time",
        "length of the union of the other kernels (compute; memcpy/memset excluded) within the step windows",
    ),
    ("communication.compute_share", SHARE, NEITHER, 0.1, "compute share", "compute_ns / step windows' length"),
    (
        "communication.exposed_ns",
        NS,
        LOWER,
        0.05,
        "exposed communication",
        "collective time no compute kernel overlaps on any stream: the length of the union of collectives and compute, less compute_ns, within the "
        "step windows; a rank's exposed time includes waiting for peers (the job level splits waiting from transfer)",
    ),
    (
        "communication.exposed_share",
        SHARE,
        LOWER,
        0.1,
        "exposed communication share",
        "exposed_ns / step windows' length",
    ),
    (
        "communication.overlap_share",
        SHARE,
        NEITHER,
        0.1,
        "overlap share",
        "1 - exposed_ns / collective_ns: the part of collective time compute hides; null without collective time",
    ),
    (
        "communication.sync_in_collective_ns",
        NS,
        NEITHER,
        0.05,
        "sync in collective",
        "host time blocked in a synchronising runtime call while the device runs a collective, within the step "
        "markers' host windows",
    ),
    ("communication.by_kind[].kind", TEXT, NEITHER, 0, "kind", _BY_KIND),
    ("communication.by_kind[].count", COUNT, NEITHER, 0.02, "count", "collectives of the kind, " + _BY_KIND),
    (
        "communication.by_kind[].kernel_ns",
        NS,
        LOWER,
        0.05,
        "kernel time",
        "summed kernel durations of the kind (waiting for peers included), " + _BY_KIND,
    ),
    (
        "communication.by_kind[].bytes",
        BYTES,
        NEITHER,
        0.02,
        "bytes",
        "message bytes of the collectives whose size the trace states (`In msg nelems` x dtype size, from the NCCL "
        "args); null when none does (never guessed)",
    ),
    (
        "communication.by_kind[].bytes_known_count",
        COUNT,
        NEITHER,
        0.02,
        "sized collectives",
        "how many collectives of the kind state their size",
    ),
    (
        "communication.by_kind[].busbw_lower_bound_bytes_per_s",
        "bytes_per_s",
        NEITHER,
        0.1,
        "bus bandwidth (lower bound)",
        "nccl-tests bus bandwidth: known bytes / their kernel time x the kind's factor (all-reduce 2(n-1)/n, "
        "all-gather and reduce-scatter (n-1)/n, ...; n = group size, else the world size); a lower bound since a "
        "rank's kernel time includes waiting (the job level divides by transfer time); null when sizes are unknown",
    ),
)
