"""Communication by purpose: what each collective is for (issue #33).

Which kernels are communication is ``metrics.comm.collectives.find_collectives`` (the one source: ``Context.coll``, which
the model-parts topic's ``communication`` part reads too); this topic says what each of them is for.

Definitions:
- Per collective, from its launch (the runtime call with its correlation id) on the host:
  ``chain`` = the names of the host ranges (operators and annotations) around the launch on its thread;
  ``phase`` = ``backward`` when the chain holds an autograd backward node (``autograd::engine::evaluate_function:``,
  ``*Backward0``), ``optimizer`` when it holds ``Optimizer.step``/``optimizer``, else ``after_backward`` when a
  backward operator started earlier in the same step and none later (the gradients are ready: a sync after
  ``loss.backward()``), else ``forward``. Without a known launch: ``unknown``.
- ``purpose`` = the first row of ``PURPOSE_RULES`` that matches (a kind set, a regex one of the chain's names must
  match, a phase set; each optional): ``expert`` (all-to-all: MoE token dispatch/combine, DeepEP; also a
  recommender's sharded embeddings, which the kind alone does not tell apart), ``pipeline``
  (send/recv: stage-to-stage activations and gradients), ``other`` (barrier, broadcast), ``fsdp`` (FSDP/ZeRO:
  ``FSDP::`` annotations), ``tensor_parallel`` (DTensor ``Redistribute``, its functional collectives'
  ``_FromTorchTensorBackward``, Megatron's parallel layers; or an all-reduce issued in forward), ``fsdp``
  (all-gather / reduce-scatter otherwise), ``data_parallel`` (an all-reduce in backward or after it: gradient
  sync, DDP buckets or by hand), ``other`` (the rest: metrics, losses, optimizer norms).
- Per purpose, over the collectives starting inside a step window (``communication.windows``): ``count``,
  ``kernel_ns`` (summed durations, waiting for peers included), ``exposed_ns`` (its collectives' time no compute kernel
  on any stream overlaps, ``communication.exposed_per_collective``, summed: collectives overlapping each other count
  once), ``bytes`` (known sizes),
  ``median_bytes``, per-step figures (÷ step windows), phase counts, ``group_size`` (the largest stated),
  ``busbw_lower_bound_bytes_per_s`` (nccl-tests factor; a lower bound: kernel time includes waiting) and
  ``annotation``: the user annotation (not a ``nccl:``/``c10d::`` one) most of them are issued inside, innermost.
- Data-parallel rounds (null unless every data-parallel collective states its size): per step, the sizes of the data-parallel collectives in issue order; the step's rounds =
  the largest r such that the sequence is r repeats of one block (DDP issues the same buckets every backward, so
  an all-reduce every micro-batch under accumulation repeats the block once per micro-batch); ``dp_rounds_per_step``
  is their median. ``dp_count_per_round`` = count per step / rounds, ``dp_round_bytes`` likewise;
  ``dp_buckets_expected`` = ceil(bytes per round / ``DDP_BUCKET_BYTES``), the all-reduces DDP's default buckets
  would issue for the same bytes.
- ``dp_after_backward_share``: per step, the device span of the data-parallel collectives issued after backward
  (first start to last end) / the step window; the median over steps.
- ``fsdp_backward_all_gathers`` / ``fsdp_prefetched_all_gathers`` per step: FSDP all-gathers issued in backward (or
  under an ``FSDP::pre_backward`` range), and those of them issued by a prefetch (a chain name with ``prefetch``).
- Layout the collectives imply (``*_group``: the largest group size a purpose's collectives state, null when none
  is stated or the purpose is absent).
- The link (``LINKS``, a documented table by device name: the trace states the GPU, never which link carried a
  collective): ``link`` = the fastest link the GPU's peers on one host can share (NVLink / Infinity Fabric for
  SXM/OAM parts, PCIe for PCIe cards), ``link_bytes_per_s`` its per-GPU bandwidth in one direction (what
  nccl-tests' bus bandwidth approaches); null for a device the table does not list. Per purpose
  ``busbw_vs_link_ratio`` = its ``busbw_lower_bound_bytes_per_s`` / ``link_bytes_per_s``.
- ``link_purpose``: among the purposes whose median message is at least ``BANDWIDTH_BOUND_BYTES`` (smaller ones
  are latency-bound: their bus bandwidth says little about the link) and whose bandwidth is known, the one with the
  most exposed time; ``link_busbw_bytes_per_s``, ``link_busbw_ratio`` (/ ``link_bytes_per_s``),
  ``link_network_ratio`` (/ ``NETWORK_BYTES_PER_S``, a 400 Gb/s RDMA NIC per GPU, the H100/H200 reference
  design's network), ``link_exposed_share`` and ``link_median_bytes`` are that purpose's; all null without one.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.intervals import merge
from tb_llmdiag.metrics.comm.collectives import KIND_CODE, KINDS, Collectives, bus_bandwidth_bytes_per_s
from tb_llmdiag.metrics.comm.communication import exposed_per_collective, window_of, windows
from tb_llmdiag.metrics.context import Context, RowCache
from tb_llmdiag.metrics.entry import (
    BYTES,
    COUNT,
    FLAG,
    HIGHER,
    LOWER,
    NEITHER,
    NS,
    PER_STEP,
    RATIO,
    SHARE,
    TEXT,
    Entry,
    Intro,
)
from tb_llmdiag.metrics.steps.windows import Steps
from tb_llmdiag.model import Kind, Trace

I64 = NDArray[np.int64]

PURPOSES: tuple[str, ...] = ("data_parallel", "fsdp", "tensor_parallel", "pipeline", "expert", "other")
PURPOSE_CODE = {p: i for i, p in enumerate(PURPOSES)}
PHASES: tuple[str, ...] = ("forward", "backward", "after_backward", "optimizer", "unknown")
PHASE_CODE = {p: i for i, p in enumerate(PHASES)}

#: DDP's default bucket (``bucket_cap_mb=25``)
DDP_BUCKET_BYTES = 25 * 1024 * 1024

#: (device-name regex searched case-insensitively, link, per-GPU bandwidth in one direction, bytes/s): the fastest
#: link a GPU's peers on one host can share, from the vendors' data sheets; first match wins (PCIe cards before
#: their SXM namesakes). NVLink 5 (B200, GB200): 18 links x 50 GB/s; NVLink 4 (H100, H200, GH200 SXM): 18 x 25 GB/s;
#: H800 / A800 (export parts): 8 x 25 GB/s; NVLink 3 (A100 SXM): 12 x 25 GB/s; NVLink 2 (V100 SXM2): 6 x 25 GB/s;
#: MI300X / MI325X Infinity Fabric: 7 x 64 GB/s; PCIe 5.0 x16 ~64 GB/s, PCIe 4.0 x16 ~32 GB/s.
LINKS: tuple[tuple[str, str, float], ...] = (
    (r"H100 PCIe|H100 NVL|RTX PRO 6000|RTX 5090|L40S?\b|\bL20\b", "PCIe 5.0 x16", 64e9),
    (r"A100.*PCIe|\bA10G?\b|\bA30\b|\bA40\b|\bL4\b|RTX 4090|RTX 6000 Ada|RTX A6000|RTX 3090|\bT4\b", "PCIe 4.0 x16", 32e9),
    (r"\bG?B(?:100|200|300)\b", "NVLink 5", 900e9),
    (r"\bH800\b|\bA800\b", "NVLink (export part, 8 links)", 200e9),
    (r"\bH100\b|\bH200\b|\bGH200\b|\bH20\b", "NVLink 4", 450e9),
    (r"\bA100\b", "NVLink 3", 300e9),
    (r"\bV100\b", "NVLink 2", 150e9),
    (r"MI300X|MI325X", "Infinity Fabric", 448e9),
)  # fmt: skip
_LINK_RX = tuple((re.compile(rx, re.IGNORECASE), name, bw) for rx, name, bw in LINKS)
#: a 400 Gb/s RDMA NIC per GPU (the H100/H200 reference design's network), bytes/s
NETWORK_BYTES_PER_S = 50e9
#: median message size from which a collective is bandwidth-bound (its bus bandwidth says something of the link)
BANDWIDTH_BOUND_BYTES = 1024 * 1024


def link_of(device_name: str | None) -> tuple[str | None, float | None]:
    """(link, per-GPU bandwidth in one direction, bytes/s) of a device by ``LINKS``; (None, None) when unlisted."""
    for rx, name, bw in _LINK_RX if device_name else ():
        if rx.search(device_name or ""):
            return name, bw
    return None, None


#: chain-name patterns the rules and phases read (searched on each distinct host name once)
CHAIN_PATTERNS: dict[str, str] = {
    "backward": r"^autograd::engine::evaluate_function: |Backward\d*$",
    "optimizer": r"^Optimizer\.(?:step|zero_grad)|^optimizer",
    "fsdp": r"^FSDP::|FullyShardedDataParallel|^fsdp::",
    "tensor_parallel": r"^Redistribute$|^_FromTorchTensorBackward|^_ToTorchTensorBackward|RowParallelLinear"
    r"|ColumnParallelLinear|reduce_from_tensor_model_parallel|copy_to_tensor_model_parallel"
    r"|(?:gather|scatter)_(?:from|to)_sequence_parallel",
    "other": r"barrier|^c10d::broadcast|^nccl:broadcast",
    "prefetch": r"prefetch",
    "pre_backward": r"^FSDP::pre_backward",
}
_CHAIN_RX = {k: re.compile(v) for k, v in CHAIN_PATTERNS.items()}
#: annotations that are the collective's own wrappers, never "where it is issued"
_OWN = re.compile(r"^nccl:|^c10d::|^record_param_comms|^_c10d_functional::|^ProfilerStep#|^gloo:")

_ALL = frozenset(KINDS)
#: (purpose, kinds or None, chain pattern key or None, phases or None); first match wins
PURPOSE_RULES: tuple[tuple[str, frozenset[str] | None, str | None, frozenset[str] | None], ...] = (
    ("expert", frozenset({"all_to_all"}), None, None),
    ("pipeline", frozenset({"send_recv"}), None, None),
    ("other", frozenset({"broadcast"}), None, None),
    ("other", None, "other", None),
    ("fsdp", None, "fsdp", None),
    ("tensor_parallel", None, "tensor_parallel", None),
    ("tensor_parallel", frozenset({"all_reduce"}), None, frozenset({"forward"})),
    ("fsdp", frozenset({"all_gather", "reduce_scatter"}), None, None),
    ("data_parallel", frozenset({"all_reduce"}), None, frozenset({"backward", "after_backward"})),
    ("other", None, None, None),
)


@dataclass(frozen=True)
class Purposes:
    """Per collective (aligned with ``Collectives``): purpose and phase codes, the innermost user annotation (a name
    id, -1 none) and whether a prefetch issued it."""

    purpose: NDArray[np.uint8]
    phase: NDArray[np.uint8]
    annotation: NDArray[np.int64]
    prefetch: NDArray[np.bool_]
    pre_backward: NDArray[np.bool_]


def _inside_any(s: I64, e: I64, tid: I64, t: I64, t_tid: I64) -> NDArray[np.bool_]:
    """Whether each time t (on thread t_tid) lies in one of the ranges [s, e] of the same thread."""
    out = np.zeros(t.shape, bool)
    for u in np.unique(t_tid).tolist():
        m, on = t_tid == u, tid == u
        if not on.any():
            continue
        ms, me = merge(s[on], e[on])
        i = np.searchsorted(ms, t[m], side="right") - 1
        out[np.flatnonzero(m)] = (i >= 0) & (t[m] <= me[np.clip(i, 0, None)])
    return out


def _innermost_annotation(trace: Trace, cache: RowCache, t: I64, t_tid: I64, ok: NDArray[np.bool_]) -> I64:
    """The name id of the latest-starting user annotation (not the collective's own) that holds each launch."""
    ev = trace.events
    rows = cache.kinds(Kind.ANNOTATION)
    out = np.full(t.shape, -1, np.int64)
    if rows.size == 0:
        return out
    names = ev.names
    keep = np.array([_OWN.search(names[i]) is None for i in range(len(names))], bool)
    rows = rows[keep[ev.name_id[rows]]]
    for u in np.unique(t_tid[ok]).tolist():
        r = rows[ev.tid[rows] == u]
        if r.size == 0:
            continue
        r = r[np.argsort(ev.ts_ns[r], kind="stable")]
        m = np.flatnonzero(ok & (t_tid == u))
        j = np.searchsorted(ev.ts_ns[r], t[m], side="right") - 1
        # walk back over ranges that ended before t (siblings) a few times: nesting is shallow
        for _ in range(8):
            cand = r[np.clip(j, 0, None)]
            done = (j < 0) | (ev.end_ns[cand] >= t[m])
            if done.all():
                break
            j = np.where(done, j, j - 1)
        cand = r[np.clip(j, 0, None)]
        hit = (j >= 0) & (ev.end_ns[cand] >= t[m])
        out[m[hit]] = ev.name_id[cand[hit]]
    return out


def _phase(
    flags: dict[str, NDArray[np.bool_]], t: I64, ok: NDArray[np.bool_], bwd_starts: I64, steps: Steps
) -> NDArray[np.uint8]:
    """Phase codes (see the module docstring)."""
    n = t.size
    phase = np.full(n, PHASE_CODE["forward"], np.uint8)
    if len(steps):
        hs, he = steps.host_starts.astype(np.int64), steps.host_end_ns.astype(np.int64)
        k = np.clip(np.searchsorted(hs, t, side="right") - 1, 0, None)
        lo = np.where(t >= hs[k], hs[k], t)
        hi = np.where(t < he[k], he[k], t)
    else:
        lo, hi = np.full(n, np.iinfo(np.int64).min), np.full(n, np.iinfo(np.int64).max)
    before = np.searchsorted(bwd_starts, t, side="left") - np.searchsorted(bwd_starts, lo, side="left")
    after = np.searchsorted(bwd_starts, hi, side="left") - np.searchsorted(bwd_starts, t, side="right")
    phase[(before > 0) & (after == 0)] = PHASE_CODE["after_backward"]
    phase[flags["optimizer"]] = PHASE_CODE["optimizer"]
    phase[flags["backward"]] = PHASE_CODE["backward"]
    phase[~ok] = PHASE_CODE["unknown"]
    return phase


def classify_purposes(trace: Trace, coll: Collectives, steps: Steps, cache: RowCache | None = None) -> Purposes:
    """Each collective's purpose and phase (see the module docstring). ``cache``: the analysis's RowCache
    (``Context.cache``), in which they are kept, classified once per analysis (the topic and the rank's summary)."""
    if cache is None:
        return _classify(trace, coll, steps, RowCache(trace))
    return cache.derived("comm_purpose.purposes", (coll, steps), lambda: _classify(trace, coll, steps, cache))


def _classify(trace: Trace, coll: Collectives, steps: Steps, cache: RowCache) -> Purposes:
    ev = trace.events
    n = len(coll)
    launch = cache.launcher(coll.row) if n else np.zeros(0, np.intp)
    ok = launch >= 0
    t = np.where(ok, ev.ts_ns[np.clip(launch, 0, None)], coll.start_ns) if n else np.zeros(0, np.int64)
    tid = np.where(ok, ev.tid[np.clip(launch, 0, None)], -1) if n else np.zeros(0, np.int64)
    flags: dict[str, NDArray[np.bool_]] = {}
    for key, rx in _CHAIN_RX.items():
        rows = cache.rows_named(rx, Kind.CPU_OP, Kind.ANNOTATION)
        flags[key] = ok & _inside_any(ev.ts_ns[rows], ev.end_ns[rows], ev.tid[rows], t, tid) if n else np.zeros(0, bool)
    bwd = cache.rows_named(_CHAIN_RX["backward"], Kind.CPU_OP)
    phase = _phase(flags, t, ok, np.sort(ev.ts_ns[bwd]), steps)
    kinds = np.asarray([KINDS[k] if k < len(KINDS) else "" for k in coll.kind.tolist()], dtype=object)
    purpose = np.full(n, 255, np.uint8)
    for name, kset, chain, phases in PURPOSE_RULES:
        m = purpose == 255
        if kset is not None and kset != _ALL:
            m &= np.isin(kinds, list(kset)) if n else m
        if chain is not None:
            m &= flags[chain]
        if phases is not None:
            m &= np.isin(phase, [PHASE_CODE[p] for p in phases])
        purpose[m] = PURPOSE_CODE[name]
    purpose[purpose == 255] = PURPOSE_CODE["other"]
    return Purposes(
        purpose=purpose,
        phase=phase,
        annotation=_innermost_annotation(trace, cache, t, tid, ok),
        prefetch=flags["prefetch"],
        pre_backward=flags["pre_backward"],
    )


def rounds_of(sizes: list[int]) -> int:
    """The largest r such that ``sizes`` is r repeats of one block (1 for an empty or non-repeating sequence)."""
    n = len(sizes)
    for r in range(n, 1, -1):
        if n % r == 0 and sizes == sizes[: n // r] * r:
            return r
    return 1


def _median(v: I64) -> int | None:
    return int(np.median(v)) if v.size else None


def _one_purpose(
    code: int,
    p: Purposes,
    coll: Collectives,
    exposed_of: I64,
    sel: NDArray[np.bool_],
    n_steps: int,
    window_ns: int,
    names: tuple[str, ...],
) -> dict[str, Any]:
    m = sel & (p.purpose == code)
    known = m & (coll.bytes >= 0)
    kinds = Counter(KINDS[k] for k in coll.kind[m].tolist())
    by = sorted(kinds, key=lambda k: -kinds[k])
    gs = coll.group_size[m]
    group = int(gs.max()) if gs.size and gs.max() > 0 else None
    b = int(coll.bytes[known].sum()) if known.any() else None
    kernel = int(coll.dur_ns[m].sum())
    ann = Counter(int(a) for a in p.annotation[m].tolist() if a >= 0)
    top = names[ann.most_common(1)[0][0]] if ann else None
    phases = {f"{ph}_count": int((m & (p.phase == PHASE_CODE[ph])).sum()) for ph in PHASES}
    exposed = int(exposed_of[m].sum())
    return {
        "purpose": PURPOSES[code],
        "kinds": ", ".join(by),
        "count": int(m.sum()),
        "count_per_step": float(m.sum()) / n_steps,
        "kernel_ns": kernel,
        "exposed_ns": exposed,
        "exposed_share": exposed / window_ns if window_ns else None,
        "bytes": b,
        "step_bytes": b / n_steps if b is not None else None,
        "median_bytes": _median(coll.bytes[known]),
        "group_size": group,
        "busbw_lower_bound_bytes_per_s": bus_bandwidth_bytes_per_s(by[0], b, int(coll.dur_ns[known].sum()), group or 0)
        if b is not None and by
        else None,
        "annotation": top,
        **phases,
    }


def _dp_rounds(p: Purposes, coll: Collectives, step: I64, sel: NDArray[np.bool_]) -> dict[str, Any]:
    m = sel & (p.purpose == PURPOSE_CODE["data_parallel"])
    if not m.any():
        return {"dp_rounds_per_step": None, "dp_count_per_round": None, "dp_round_bytes": None,
                "dp_buckets_expected": None}  # fmt: skip
    rows = np.flatnonzero(m)
    if (coll.bytes[rows] < 0).any():  # sizes unknown: no block to repeat, nothing guessed
        return {"dp_rounds_per_step": None, "dp_count_per_round": None, "dp_round_bytes": None,
                "dp_buckets_expected": None}  # fmt: skip
    order = rows[np.lexsort((coll.start_ns[rows], step[rows]))]
    rounds, counts, sizes = [], [], []
    for k in np.unique(step[order]).tolist():
        r = order[step[order] == k]
        seq = coll.bytes[r].tolist()
        rounds.append(rounds_of(seq))
        counts.append(len(seq))
        sizes.append(sum(x for x in seq if x > 0))
    rr = int(np.median(rounds))
    per_round_bytes = float(np.median(sizes)) / rr
    return {
        "dp_rounds_per_step": rr,
        "dp_count_per_round": float(np.median(counts)) / rr,
        "dp_round_bytes": per_round_bytes,
        "dp_buckets_expected": int(np.ceil(per_round_bytes / DDP_BUCKET_BYTES)) if per_round_bytes > 0 else None,
    }


def _after_backward_share(p: Purposes, coll: Collectives, step: I64, ws: I64, we: I64) -> float | None:
    """Median over steps of the device span of the data-parallel collectives issued after backward / the step."""
    m = (p.purpose == PURPOSE_CODE["data_parallel"]) & (p.phase == PHASE_CODE["after_backward"]) & (step >= 0)
    if not m.any():
        return None
    shares = []
    for k in np.unique(step[m]).tolist():
        r = m & (step == k)
        span = int(coll.end_ns[r].max() - coll.start_ns[r].min())
        shares.append(span / max(int(we[k] - ws[k]), 1))
    return float(np.median(shares))


def _layout(rows: list[dict[str, Any]]) -> dict[str, Any]:
    g = {r["purpose"]: r["group_size"] for r in rows if r["count"]}
    dp = g.get("data_parallel") or g.get("fsdp")
    return {"dp_group": dp, "tp_group": g.get("tensor_parallel"), "pp_group": g.get("pipeline"),
            "ep_group": g.get("expert")}  # fmt: skip


def _link_metrics(rows: list[dict[str, Any]], device_name: str | None) -> dict[str, Any]:
    """The link and each purpose's bus bandwidth against it (module docstring); adds ``busbw_vs_link_ratio`` to
    each row."""
    link, bw = link_of(device_name)
    for r in rows:
        b = r["busbw_lower_bound_bytes_per_s"]
        r["busbw_vs_link_ratio"] = b / bw if b is not None and bw else None
    big = [
        r
        for r in rows
        if r["busbw_lower_bound_bytes_per_s"] is not None and (r["median_bytes"] or 0) >= BANDWIDTH_BOUND_BYTES
    ]
    top = max(big, key=lambda r: r["exposed_ns"]) if big else None
    busbw = top["busbw_lower_bound_bytes_per_s"] if top else None
    return {
        "link": link,
        "link_bytes_per_s": bw,
        "link_purpose": top["purpose"] if top else None,
        "link_busbw_bytes_per_s": busbw,
        "link_busbw_ratio": top["busbw_vs_link_ratio"] if top else None,
        "link_network_ratio": busbw / NETWORK_BYTES_PER_S if busbw is not None else None,
        "link_exposed_share": top["exposed_share"] if top else None,
        "link_median_bytes": top["median_bytes"] if top else None,
    }


def comm_purpose_metrics(ctx: Context) -> dict[str, Any]:
    """The ``comm_purpose`` topic (see the module docstring)."""
    trace, coll = ctx.trace, ctx.coll
    if len(coll) == 0:
        return {"available": False, "reason": "no collective kernels (NCCL/RCCL, DeepEP, XLA) in the trace"}
    w = windows(trace, ctx.steps, ctx.cache)
    ws, we = w.start_ns, w.end_ns
    if ws.size == 0:
        return {"available": False, "reason": "no device activity"}
    p = classify_purposes(trace, coll, ctx.steps, ctx.cache)
    exposed = exposed_per_collective(trace, coll, ctx.cache)
    step = window_of(coll.start_ns, ws, we)
    sel = step >= 0
    n_steps, window_ns = int(ws.size), int((we - ws).sum())
    names = trace.events.names
    rows = [_one_purpose(c, p, coll, exposed, sel, n_steps, window_ns, names) for c in range(len(PURPOSES))]
    rows = sorted((r for r in rows if r["count"]), key=lambda r: -r["exposed_ns"])
    fsdp_ag = sel & (p.purpose == PURPOSE_CODE["fsdp"]) & (coll.kind == KIND_CODE["all_gather"])
    in_bwd = fsdp_ag & ((p.phase == PHASE_CODE["backward"]) | p.pre_backward)
    top = rows[0] if rows else None
    dp = _dp_rounds(p, coll, step, sel)
    per_bucket = dp["dp_count_per_round"] / dp["dp_buckets_expected"] if dp["dp_buckets_expected"] else None
    exposed_by = {r["purpose"]: r["exposed_share"] for r in rows}
    return {
        "available": True,
        "top_purpose": top["purpose"] if top else None,
        "top_exposed_share": top["exposed_share"] if top else None,
        "by_purpose": rows,
        **_layout(rows),
        **_link_metrics(rows, trace.devices[0].name if trace.devices else None),
        **dp,
        "dp_collectives_per_bucket": per_bucket,
        "dp_after_backward_share": _after_backward_share(p, coll, step, ws, we),
        **{f"{name}_exposed_share": exposed_by.get(name, 0.0) for name in PURPOSES},
        "fsdp_backward_all_gathers": float(in_bwd.sum()) / n_steps,
        "fsdp_prefetched_all_gathers": float((in_bwd & p.prefetch).sum()) / n_steps,
        "fsdp_unprefetched_share": float((in_bwd & ~p.prefetch).sum()) / float(in_bwd.sum()) if in_bwd.any() else None,
    }


INTRO: Intro = (
    "`comm_purpose` (metrics/comm/purpose.py)",
    "What each collective is for, from its kind, where its launch sits on the host (forward, backward, after "
    "backward, optimizer; inside which annotation) and the annotations around it (`FSDP::`, DTensor "
    "`Redistribute`): data-parallel gradient sync, FSDP/ZeRO gathers and reduce-scatters, tensor-parallel "
    "activation collectives, pipeline send/recv, expert all-to-all, other. Unavailable without collectives.",
)

_PP = "per purpose (`data_parallel`, `fsdp`, `tensor_parallel`, `pipeline`, `expert`, `other`), over the collectives starting inside a step window"
ENTRIES: tuple[Entry, ...] = (
    ("comm_purpose.available", FLAG, NEITHER, 0, "available", "false without collectives (then `reason`)"),
    ("comm_purpose.reason", TEXT, NEITHER, 0, "reason", "why the topic is unavailable"),
    ("comm_purpose.top_purpose", TEXT, NEITHER, 0, "top purpose", "the purpose with the most exposed time"),
    (
        "comm_purpose.top_exposed_share",
        SHARE,
        NEITHER,
        0.1,
        "top purpose's exposed share",
        "its exposed time / the step windows' length",
    ),
    ("comm_purpose.by_purpose[].purpose", TEXT, NEITHER, 0, "purpose", _PP),
    ("comm_purpose.by_purpose[].kinds", TEXT, NEITHER, 0, "kinds", "its collective kinds, most frequent first"),
    ("comm_purpose.by_purpose[].count", COUNT, NEITHER, 0.02, "count", "collectives, " + _PP),
    ("comm_purpose.by_purpose[].count_per_step", PER_STEP, NEITHER, 0.02, "per step", "count / step windows"),
    (
        "comm_purpose.by_purpose[].kernel_ns",
        NS,
        NEITHER,
        0.05,
        "kernel time",
        "summed kernel durations (waiting for peers included), " + _PP,
    ),
    (
        "comm_purpose.by_purpose[].exposed_ns",
        NS,
        LOWER,
        0.05,
        "exposed time",
        "summed per-collective time no compute kernel overlaps, " + _PP,
    ),
    (
        "comm_purpose.by_purpose[].exposed_share",
        SHARE,
        LOWER,
        0.1,
        "exposed share",
        "exposed_ns / the step windows' length",
    ),
    ("comm_purpose.by_purpose[].bytes", BYTES, NEITHER, 0.02, "bytes", "known message bytes (null: none stated)"),
    ("comm_purpose.by_purpose[].step_bytes", BYTES, NEITHER, 0.02, "bytes per step", "bytes / step windows"),
    ("comm_purpose.by_purpose[].median_bytes", BYTES, NEITHER, 0.02, "median message", "median known message bytes"),
    ("comm_purpose.by_purpose[].group_size", COUNT, NEITHER, 0, "group size", "largest group size stated"),
    (
        "comm_purpose.by_purpose[].busbw_lower_bound_bytes_per_s",
        "bytes_per_s",
        NEITHER,
        0.1,
        "bus bandwidth (lower bound)",
        "known bytes / their kernel time x the nccl-tests factor of its leading kind",
    ),
    (
        "comm_purpose.by_purpose[].annotation",
        TEXT,
        NEITHER,
        0,
        "issued in",
        "the user annotation most of them are issued inside (innermost; not the collective's own `nccl:`/`c10d::`)",
    ),
    *(
        (
            f"comm_purpose.by_purpose[].{ph}_count",
            COUNT,
            NEITHER,
            0.02,
            f"{ph.replace('_', ' ')}",
            f"collectives issued in the {ph.replace('_', ' ')} phase (module docstring)",
        )
        for ph in PHASES
    ),
    (
        "comm_purpose.dp_group",
        COUNT,
        NEITHER,
        0,
        "data-parallel group",
        "largest group of data-parallel or FSDP collectives",
    ),
    (
        "comm_purpose.tp_group",
        COUNT,
        NEITHER,
        0,
        "tensor-parallel group",
        "largest group of tensor-parallel collectives",
    ),
    ("comm_purpose.pp_group", COUNT, NEITHER, 0, "pipeline group", "group of the send/recv (the ranks they may reach)"),
    ("comm_purpose.ep_group", COUNT, NEITHER, 0, "expert-parallel group", "largest group of all-to-alls"),
    (
        "comm_purpose.by_purpose[].busbw_vs_link_ratio",
        RATIO,
        HIGHER,
        0.1,
        "bus bandwidth vs the link",
        "busbw_lower_bound_bytes_per_s / link_bytes_per_s (null when the device is not in the link table)",
    ),
    ("comm_purpose.link", TEXT, NEITHER, 0, "link", "the fastest link the GPU's peers on one host can share (`LINKS`)"),
    (
        "comm_purpose.link_bytes_per_s",
        "bytes_per_s",
        NEITHER,
        0,
        "link bandwidth",
        "that link's per-GPU bandwidth in one direction, from the vendors' data sheets (`LINKS`)",
    ),
    (
        "comm_purpose.link_purpose",
        TEXT,
        NEITHER,
        0,
        "purpose on the link",
        "the purpose with the most exposed time among those with a median message of at least 1 MiB",
    ),
    (
        "comm_purpose.link_busbw_bytes_per_s",
        "bytes_per_s",
        HIGHER,
        0.1,
        "achieved bus bandwidth",
        "that purpose's bus bandwidth (a lower bound: kernel time includes waiting for peers)",
    ),
    ("comm_purpose.link_busbw_ratio", RATIO, HIGHER, 0.1, "vs the link", "link_busbw_bytes_per_s / link_bytes_per_s"),
    (
        "comm_purpose.link_network_ratio",
        RATIO,
        HIGHER,
        0.1,
        "vs a 400 Gb/s NIC",
        "link_busbw_bytes_per_s / 50 GB/s (a 400 Gb/s RDMA NIC per GPU)",
    ),
    (
        "comm_purpose.link_exposed_share",
        SHARE,
        LOWER,
        0.1,
        "exposed share",
        "that purpose's exposed time / the step windows",
    ),
    ("comm_purpose.link_median_bytes", BYTES, NEITHER, 0.1, "median message", "that purpose's median message size"),
    (
        "comm_purpose.dp_rounds_per_step",
        PER_STEP,
        NEITHER,
        0,
        "gradient syncs per step",
        "median per step of the repeats of one block of data-parallel message sizes (one per backward that syncs)",
    ),
    (
        "comm_purpose.dp_count_per_round",
        COUNT,
        NEITHER,
        0.02,
        "collectives per gradient sync",
        "data-parallel collectives per step / dp_rounds_per_step",
    ),
    (
        "comm_purpose.dp_round_bytes",
        BYTES,
        NEITHER,
        0.02,
        "bytes per gradient sync",
        "data-parallel bytes per step / dp_rounds_per_step",
    ),
    (
        "comm_purpose.dp_buckets_expected",
        COUNT,
        NEITHER,
        0,
        "DDP buckets for those bytes",
        "ceil(dp_round_bytes / 25 MiB): the all-reduces DDP's default buckets issue for the same bytes",
    ),
    (
        "comm_purpose.fsdp_backward_all_gathers",
        PER_STEP,
        NEITHER,
        0.02,
        "FSDP backward all-gathers",
        "per step, FSDP all-gathers issued in backward",
    ),
    (
        "comm_purpose.fsdp_prefetched_all_gathers",
        PER_STEP,
        NEITHER,
        0.02,
        "prefetched",
        "per step, those of them issued by a prefetch (a host range named `*prefetch*` around the launch)",
    ),
    (
        "comm_purpose.dp_collectives_per_bucket",
        RATIO,
        NEITHER,
        0.05,
        "collectives per DDP bucket",
        "dp_count_per_round / dp_buckets_expected: above 1, smaller collectives than DDP's buckets (per tensor)",
    ),
    (
        "comm_purpose.dp_after_backward_share",
        SHARE,
        LOWER,
        0.1,
        "gradient sync after backward",
        "median over steps of the device span from the first start to the last end of the data-parallel collectives "
        "issued after backward, / the step: the sync no backward compute hides (DDP's buckets run inside backward)",
    ),
    *(
        (
            f"comm_purpose.{name}_exposed_share",
            SHARE,
            LOWER,
            0.1,
            f"{name.replace('_', ' ')} exposed share",
            f"exposed time of the {name.replace('_', '-')} collectives / the step windows' length (0 when none)",
        )
        for name in PURPOSES
    ),
    (
        "comm_purpose.fsdp_unprefetched_share",
        SHARE,
        NEITHER,
        0.1,
        "unprefetched FSDP all-gathers",
        "of the FSDP all-gathers issued in backward, the share no prefetch issued (null when none)",
    ),
)
