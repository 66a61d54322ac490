"""Collective kernels of one trace: which device events they are, their kind, bytes and process group.

Contract:
- ``COLLECTIVE_PATTERNS`` is data: ``(kind, regex)`` rows tried top to bottom on the kernel name, first
  match wins (NCCL/RCCL ``ncclKernel_*`` / ``ncclDevKernel_*``, DeepEP dispatch/combine, multimem and custom
  all-reduce, XLA collective ops). Work is per unique name, then broadcast by ``name_id``.
- The kind a host annotation states (``nccl:all_to_all``, ``c10d::alltoall_base_``) overrides the kernel's
  name: an all-to-all runs as NCCL ``SendRecv`` kernels. The annotation is the innermost such host range
  enclosing the kernel's launch (joined by correlation id).
- Bytes, group size, process group and sequence number come from per-event columns in ``Trace.extra``
  (``ARG_COLUMNS``), filled by a reader that keeps the NCCL args (``In msg nelems``, ``dtype``, ``Group
  size``, ``Process Group Name``/``Ranks``, ``Seq``) on kernel or ``record_param_comms`` rows; without them
  every such field is -1 (unknown), never guessed.
- Bus bandwidth uses nccl-tests' factors (``BUS_FACTOR``): busbw = bytes / time x factor(n).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.model import Kind, Trace

_Scalar = TypeVar("_Scalar", bound=np.generic)

#: Collective kinds; a kind code is the index. ``UNKNOWN`` marks rows that are not collectives.
KINDS: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "send_recv",
    "broadcast",
    "reduce",
    "other_collective",
)
KIND_CODE: dict[str, int] = {k: i for i, k in enumerate(KINDS)}
NOT_COLLECTIVE = 255

#: (kind, regex on the kernel name, case-insensitive, searched); first match wins. Specific before broad.
COLLECTIVE_PATTERNS: tuple[tuple[str, str], ...] = (
    # DeepEP (deep_ep:: / dpsk::ep::, its intranode / internode / internode_ll kernels): token dispatch / combine,
    # their count exchange (notify_dispatch) and the cached layout's notify-and-clean (cached_notify,
    # cached_notify_dispatch / _combine) all move data between the expert-parallel ranks: all-to-all. Its
    # get_dispatch_layout is local arithmetic (the tokens per rank and per expert), not communication.
    (
        "all_to_all",
        r"(?:deep_ep|dpsk::ep)::\w+::(?:cached_notify(?:_dispatch|_combine)?|(?:notify_)?(?:dispatch|combine))\b",
    ),
    # NCCL / RCCL device kernels: ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_AllGather_RING_LL
    ("all_reduce", r"nccl(?:Dev)?Kernel_AllReduce"),
    ("all_gather", r"nccl(?:Dev)?Kernel_AllGather"),
    ("reduce_scatter", r"nccl(?:Dev)?Kernel_ReduceScatter"),
    ("all_to_all", r"nccl(?:Dev)?Kernel_AllToAll"),
    ("send_recv", r"nccl(?:Dev)?Kernel_(?:SendRecv|Send|Recv)"),
    ("broadcast", r"nccl(?:Dev)?Kernel_Broadcast"),
    ("reduce", r"nccl(?:Dev)?Kernel_Reduce"),
    ("other_collective", r"nccl(?:Dev)?Kernel"),
    # symmetric-memory / custom all-reduce (torch multimem, vLLM and SGLang custom all-reduce)
    ("all_reduce", r"multimem_all_reduce|cross_device_reduce|one_shot_all_reduce|two_shot_all_reduce"),
    # XLA collective ops (HLO names: all-reduce.3, all-gather-start, reduce-scatter, collective-permute-done)
    ("all_reduce", r"^all-reduce"),
    ("all_gather", r"^all-gather"),
    ("reduce_scatter", r"^reduce-scatter"),
    ("all_to_all", r"^all-to-all|^ragged-all-to-all"),
    ("send_recv", r"^collective-permute|^(?:send|recv)(?:-done)?(?:\.\d+)?$"),
    ("broadcast", r"^collective-broadcast"),
)

#: Host annotations and c10d operators that state the kind of the collective they launch.
ANNOTATION_KINDS: tuple[tuple[str, str], ...] = (
    ("all_to_all", r"^nccl:all_to_all|^c10d::alltoall"),
    ("all_reduce", r"^nccl:all_reduce|^c10d::allreduce"),
    ("all_gather", r"^nccl:(?:all_gather|_all_gather)|^c10d::(?:_?allgather)"),
    ("reduce_scatter", r"^nccl:(?:reduce_scatter|_reduce_scatter)|^c10d::(?:_?reduce_scatter)"),
    ("send_recv", r"^nccl:(?:send|recv)|^c10d::(?:send|recv)"),
    ("broadcast", r"^nccl:broadcast|^c10d::broadcast"),
)

#: nccl-tests bus-bandwidth factor by kind, n = ranks in the group (PERFORMANCE.md of nccl-tests).
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}

#: ``Trace.extra`` columns a reader may fill (aligned with ``Trace.events``; -1 = unknown). ``*_id`` columns
#: index ``Trace.extra_names[<name without _id>]``.
ARG_COLUMNS: dict[str, str] = {
    "comm_in_nelems": "In msg nelems",
    "comm_out_nelems": "Out msg nelems",
    "comm_group_size": "Group size",
    "comm_seq": "Seq",
    "comm_dtype_id": "dtype",
    "comm_pg_id": "Process Group Name (+ Process Group Ranks when present)",
}

#: bytes per element of the dtype names PyTorch writes in ``dtype``.
DTYPE_BYTES: dict[str, int] = {
    "Float": 4,
    "Int": 4,
    "Long": 8,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Short": 2,
    "Bool": 1,
    "Byte": 1,
    "Char": 1,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "float": 4,
    "c10::BFloat16": 2,
    "c10::Half": 2,
}

_PATTERNS = tuple((KIND_CODE[k], re.compile(rx, re.IGNORECASE)) for k, rx in COLLECTIVE_PATTERNS)
_ANNOTATIONS = tuple((KIND_CODE[k], re.compile(rx)) for k, rx in ANNOTATION_KINDS)


def collective_kind(name: str) -> str | None:
    """The kind of one kernel name, None when it is not a collective."""
    code = int(kind_codes((name,))[0])  # through the hint filter, as traces are
    return None if code == NOT_COLLECTIVE else KINDS[code]


def _code(name: str, table: tuple[tuple[int, re.Pattern[str]], ...]) -> int:
    for code, rx in table:
        if rx.search(name[:512]):
            return code
    return NOT_COLLECTIVE


#: Lower-cased substrings one of which every name matching a table contains: names without any skip the regexes.
_HINTS = (
    "nccl",
    "ep::",
    "multimem",
    "all_reduce",
    "cross_device",
    "all-",
    "reduce-scatter",
    "collective-",
    "send",
    "recv",
    "ragged",
    "c10d::",
)


def kind_codes(
    names: tuple[str, ...],
    table: tuple[tuple[int, re.Pattern[str]], ...] = _PATTERNS,
    used: NDArray[np.intp] | None = None,
) -> NDArray[np.uint8]:
    """Kind code per interned name (NOT_COLLECTIVE when none matches); only the ``used`` name ids are tried."""
    out = np.full(len(names), NOT_COLLECTIVE, dtype=np.uint8)
    for i in range(len(names)) if used is None else used.tolist():
        low = names[i][:512].lower()
        if any(h in low for h in _HINTS):
            out[i] = _code(names[i], table)
    return out


def _used(name_id: NDArray[np.int32], mask: NDArray[np.bool_], n_names: int) -> NDArray[np.intp]:
    return np.flatnonzero(np.bincount(name_id[mask], minlength=n_names)) if n_names else np.zeros(0, np.intp)


@dataclass(frozen=True)
class Collectives:
    """One row per collective device event of a trace, sorted by start. -1 = unknown.

    ``row`` indexes ``Trace.events``; ``pg_id`` indexes ``pg_names``; ``bytes`` is the message size
    (the output for all-gather, the input otherwise, as nccl-tests counts it).
    """

    row: NDArray[np.intp]
    kind: NDArray[np.uint8]
    start_ns: NDArray[np.int64]
    end_ns: NDArray[np.int64]
    stream: NDArray[np.int32]
    bytes: NDArray[np.int64]
    group_size: NDArray[np.int32]
    pg_id: NDArray[np.int32]
    seq: NDArray[np.int64]
    pg_names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.row.shape[0])

    @property
    def dur_ns(self) -> NDArray[np.int64]:
        return self.end_ns - self.start_ns


def _enclosing(
    host_s: NDArray[np.int64],
    host_e: NDArray[np.int64],
    host_tid: NDArray[np.int64],
    t: NDArray[np.int64],
    tid: NDArray[np.int64],
) -> NDArray[np.intp]:
    """For each time t on thread tid, the index of the latest-starting host range on that thread that
    contains t, -1 if that range ended before t (ranges of one family do not nest)."""
    out = np.full(t.shape, -1, dtype=np.intp)
    if host_s.size == 0 or t.size == 0:
        return out
    order = np.lexsort((host_s, host_tid))
    s_tid, s_start = host_tid[order], host_s[order]
    for u in np.unique(tid):  # one search per host thread (a handful), vectorised over its times
        m = tid == u
        a, b = int(np.searchsorted(s_tid, u, side="left")), int(np.searchsorted(s_tid, u, side="right"))
        if a == b:
            continue
        j = np.searchsorted(s_start[a:b], t[m], side="right") - 1
        ok = j >= 0
        cand = order[a + np.clip(j, 0, None)]
        ok &= host_e[cand] >= t[m]
        out[np.flatnonzero(m)[ok]] = cand[ok]
    return out


def _launch_of(trace: Trace, rows: NDArray[np.intp]) -> NDArray[np.intp]:
    """The runtime/driver row that launched each device row (same correlation id), -1 if none."""
    ev = trace.events
    host = np.flatnonzero(((ev.kind == Kind.RUNTIME) | (ev.kind == Kind.DRIVER)) & (ev.correlation >= 0))
    out = np.full(rows.shape, -1, dtype=np.intp)
    if host.size == 0 or rows.size == 0:
        return out
    order = host[np.argsort(ev.correlation[host], kind="stable")]
    corr = ev.correlation[order]
    want = ev.correlation[rows]
    pos = np.clip(np.searchsorted(corr, want), 0, corr.size - 1)
    hit = (corr[pos] == want) & (want >= 0)
    out[hit] = order[pos[hit]]
    return out


def _annotation_kinds(trace: Trace, rows: NDArray[np.intp]) -> NDArray[np.uint8]:
    """Kind stated by the innermost ``nccl:*`` / ``c10d::*`` host range around each row's launch."""
    ev = trace.events
    out = np.full(rows.shape, NOT_COLLECTIVE, dtype=np.uint8)
    if rows.size == 0:
        return out
    on_host = ev.stream < 0
    codes = kind_codes(ev.names, _ANNOTATIONS, _used(ev.name_id, on_host, len(ev.names)))
    host = np.flatnonzero((codes[ev.name_id] != NOT_COLLECTIVE) & on_host)
    launch = _launch_of(trace, rows)
    ok = launch >= 0
    if host.size == 0 or not ok.any():
        return out
    # c10d ops enclose their nccl:* annotation; the latest-starting range around the launch is the innermost
    li = launch[ok]
    hit = _enclosing(ev.ts_ns[host], ev.end_ns[host], ev.tid[host], ev.ts_ns[li], ev.tid[li])
    found = hit >= 0
    sub = out[ok]
    sub[found] = codes[ev.name_id[host[hit[found]]]]
    out[ok] = sub
    return out


def _arg(trace: Trace, key: str, rows: NDArray[np.intp], dtype: type[_Scalar]) -> NDArray[_Scalar]:
    col = trace.extra.get(key)
    if col is None or len(col) != len(trace.events):
        return np.full(rows.shape, -1, dtype=dtype)
    return np.asarray(col)[rows].astype(dtype)


def _message_bytes(trace: Trace, rows: NDArray[np.intp], kind: NDArray[np.uint8]) -> NDArray[np.int64]:
    n_in = _arg(trace, "comm_in_nelems", rows, np.int64)
    n_out = _arg(trace, "comm_out_nelems", rows, np.int64)
    dtype_id = _arg(trace, "comm_dtype_id", rows, np.int64)
    names = trace.extra_names.get("comm_dtype", ())
    per_name = np.array([DTYPE_BYTES.get(n, -1) for n in names] + [-1], dtype=np.int64)
    elem = per_name[np.where((dtype_id >= 0) & (dtype_id < len(names)), dtype_id, len(names))]
    nelems = np.where(kind == KIND_CODE["all_gather"], n_out, n_in)
    return np.where((nelems >= 0) & (elem > 0), nelems * elem, -1).astype(np.int64)


def find_collectives(trace: Trace) -> Collectives:
    """The trace's collective device events (see the module docstring)."""
    ev = trace.events
    device = (ev.kind == Kind.KERNEL) & (ev.stream >= 0)
    per_name = kind_codes(ev.names, _PATTERNS, _used(ev.name_id, device, len(ev.names)))
    rows = np.flatnonzero(device & (per_name[ev.name_id] != NOT_COLLECTIVE)) if len(ev.names) else np.zeros(0, np.intp)
    kind = per_name[ev.name_id[rows]] if rows.size else np.zeros(0, np.uint8)
    stated = _annotation_kinds(trace, rows)
    kind = np.where(stated != NOT_COLLECTIVE, stated, kind).astype(np.uint8)
    return Collectives(
        row=rows,
        kind=kind,
        start_ns=ev.ts_ns[rows],
        end_ns=ev.ts_ns[rows] + ev.dur_ns[rows],
        stream=ev.stream[rows],
        bytes=_message_bytes(trace, rows, kind),
        group_size=_arg(trace, "comm_group_size", rows, np.int32),
        pg_id=_arg(trace, "comm_pg_id", rows, np.int32),
        seq=_arg(trace, "comm_seq", rows, np.int64),
        pg_names=tuple(trace.extra_names.get("comm_pg", ())),
    )


def bus_bandwidth_bytes_per_s(kind: str, bytes_: int, dur_ns: int, ranks: int) -> float | None:
    """nccl-tests bus bandwidth of one collective (or of a total): bytes / time x BUS_FACTOR[kind](ranks).
    None when the size, the time or the group size is unknown."""
    if bytes_ < 0 or dur_ns <= 0 or ranks < 1 or kind not in BUS_FACTOR:
        return None
    return bytes_ / (dur_ns / 1e9) * BUS_FACTOR[kind](ranks)
