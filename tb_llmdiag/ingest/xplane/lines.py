"""XPlane lines -> rows: one device or host line's events into the builder's columns, and the flows
that link device ops to their host launches (see reader.py for the mapping)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.ingest.validate import check_event_count, screen_ns
from tb_llmdiag.ingest.xplane.base import (
    COMPILE_OF_MODULE,
    COMPILER_EVENT,
    DERIVED_LINES,
    INT_COLUMNS,
    INT_STATS,
    MEMCPY,
    MEMCPY_SIZE,
    MEMSET,
    META_STATS,
    ROLE_PATTERNS,
    STR_COLUMNS,
    STR_STATS,
    Builder,
    Chunk,
    as_int,
    stat_value,
)
from tb_llmdiag.model import DEVICE_KINDS, Kind, kind_mask


@dataclass(frozen=True)
class _OpTable:
    """A plane's event metadata, one row per id (sorted) plus a spare last row for ids missing from the map:
    global name id, name-based kinds and role, whether it is a compiler event, and the per-op constants."""

    ids: NDArray[np.int64]
    name: NDArray[np.int64]
    kind_host: NDArray[np.uint8]
    kind_dev: NDArray[np.uint8]
    role: NDArray[np.uint8]
    compiler: NDArray[np.bool_]
    meta: dict[str, NDArray[np.int64]]  # META_STATS (hlo_category as a global id) + module

    def rows(self, mid: NDArray[np.int64]) -> NDArray[np.intp]:
        """The row of each metadata id (the spare row when the id is not in the map)."""
        pos = np.searchsorted(self.ids, mid)
        ok = pos < self.ids.size
        found = np.zeros(mid.size, dtype=bool)
        found[ok] = self.ids[pos[ok]] == mid[ok]
        return np.where(found, pos, self.ids.size)


def op_table(plane: Any, b: Builder, stat_names: dict[int, str]) -> _OpTable:
    ids: list[int] = []
    name_ids: list[int] = []
    kind_host: list[int] = []
    kind_dev: list[int] = []
    roles: list[int] = []
    compiler: list[bool] = []
    meta: dict[str, list[int]] = {k: [] for k in (*META_STATS, "module")}
    for mid, md in plane.event_metadata.items():
        name = md.name or md.display_name
        ids.append(int(mid))
        name_ids.append(b.names(name))
        kind_host.append(_host_kind(name))
        kind_dev.append(Kind.MEMCPY if MEMCPY.match(name) else Kind.MEMSET if MEMSET.match(name) else Kind.KERNEL)
        python = name.startswith("$")
        roles.append(0 if python else next((r for r, pat in ROLE_PATTERNS if pat.match(name)), 0))
        compiler.append(COMPILER_EVENT.search(name) is not None)
        vals: dict[str, Any] = {}
        for st in md.stats:
            key = stat_names.get(st.metadata_id)
            if key in meta:
                vals[key] = stat_value(st, stat_names)
        meta["hlo_category"].append(
            b.strs["hlo_category_id"](vals["hlo_category"]) if isinstance(vals.get("hlo_category"), str) else -1
        )
        for key in ("flops", "bytes_accessed", "program_id"):
            meta[key].append(as_int(vals[key]) if key in vals else -1)
        cm = None if python else COMPILE_OF_MODULE.match(name)
        meta["module"].append(b.strs["hlo_module_id"](cm.group(1)) if cm else -1)
    order = np.argsort(np.array(ids, dtype=np.int64), kind="stable")

    def column(values: list[Any], dtype: Any, missing: Any) -> NDArray[Any]:
        return np.append(np.array(values, dtype=dtype)[order], np.array([missing], dtype=dtype))

    return _OpTable(
        ids=np.array(ids, dtype=np.int64)[order],
        name=column(name_ids, np.int64, b.names("")),
        kind_host=column(kind_host, np.uint8, Kind.OTHER),
        kind_dev=column(kind_dev, np.uint8, Kind.KERNEL),
        role=column(roles, np.uint8, 0),
        compiler=column(compiler, bool, False),
        meta={k: column(v, np.int64, -1) for k, v in meta.items()},
    )


def _host_kind(name: str) -> int:
    if name.startswith("$"):
        return Kind.PYTHON
    if (name.startswith("cuda") and name[4:5].isupper()) or (name.startswith("hip") and name[3:4].isupper()):
        return Kind.RUNTIME
    if name.startswith("cu") and name[2:3].isupper():
        return Kind.DRIVER
    return Kind.CPU_OP


def _screened(line: Any, b: Builder, device: bool) -> tuple[list[Any], NDArray[np.int64]] | None:
    """The line's events and their (metadata id, offset ps, duration ps, stat count) rows, less the rows
    ``validate.screen_ns`` rejects (counted on ``b``); None when none is left. Counts events against the bound."""
    evs = list(line.events)
    if not evs:
        return None
    b.events_seen += len(evs)
    check_event_count(b.events_seen)  # validate.MAX_EVENTS
    rows = np.array([(e.metadata_id, e.offset_ps, e.duration_ps, len(e.stats)) for e in evs], dtype=np.int64)
    keep = screen_ns(int(line.timestamp_ns), rows[:, 1], rows[:, 2], device, b.rejected)
    if not keep.all():
        evs, rows = [e for e, k in zip(evs, keep.tolist()) if k], rows[keep]
    return (evs, rows) if evs else None


def add_line(line: Any, b: Builder, stat_names: dict[int, str], device: int, is_tpu: bool, ops: _OpTable) -> None:
    got = _screened(line, b, device >= 0)
    if got is None:
        return
    evs, rows = got
    n = len(evs)
    mid, off_ps, dur_ps, nstats = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    md_idx = ops.rows(mid)
    base = np.int64(line.timestamp_ns)
    # in range: screen_ns kept only rows within validate.LIMIT_NS; (off_ps + dur_ps) // 1000 without its int64 sum
    start = base + off_ps // 1000
    end = start + dur_ps // 1000 + (off_ps % 1000 + dur_ps % 1000) // 1000

    ints = {k: np.full(n, -1, dtype=np.int64) for k in (*INT_COLUMNS, "correlation", "producer", "consumer", "bytes")}
    strs = {k: np.full(n, -1, dtype=np.int32) for k in STR_COLUMNS}
    for key in ("flops", "bytes_accessed", "program_id"):
        ints[key] = ops.meta[key][md_idx]
    strs["hlo_category_id"] = ops.meta["hlo_category"][md_idx].astype(np.int32)
    strs["hlo_module_id"] = ops.meta["module"][md_idx].astype(np.int32)  # event stats may override it
    has = np.flatnonzero(nstats)
    if has.size:
        _store_stats(_gather_stats(evs, has, stat_names), ints, strs, b, ops.compiler[md_idx])
    kind, role, device_step, stream, tid = _line_kinds(line, b, device, is_tpu, ops, md_idx, ints["step_num"])
    b.chunks.append(
        Chunk(
            start=start,
            end=end,
            kind=kind,
            name_id=ops.name[md_idx].astype(np.int32),
            device=device,
            stream=stream,
            tid=tid,
            ints=ints,
            strs=strs,
            role=role,
            device_step=device_step,
        )
    )


def _gather_stats(
    evs: Any, has: NDArray[np.intp], stat_names: dict[int, str]
) -> dict[str, tuple[list[int], list[Any]]]:
    """Per-event stats we read, by slot: (rows, values); only events that have any (``has``) are visited."""
    slots = {
        sid: INT_STATS.get(nm) or STR_STATS[nm] for sid, nm in stat_names.items() if nm in INT_STATS or nm in STR_STATS
    }
    found: dict[str, tuple[list[int], list[Any]]] = {slot: ([], []) for slot in set(slots.values())}
    get_slot, get_name = slots.get, stat_names.get
    for i in has.tolist() if slots else ():
        for st in evs[i].stats:
            slot = get_slot(st.metadata_id)
            if slot is None:
                continue
            which = st.WhichOneof("value")
            if which is None or which == "bytes_value":
                continue
            rows_i, vals = found[slot]
            rows_i.append(i)
            vals.append(get_name(st.ref_value, "") if which == "ref_value" else getattr(st, which))
    return found


def _store_stats(
    found: dict[str, tuple[list[int], list[Any]]],
    ints: dict[str, NDArray[np.int64]],
    strs: dict[str, NDArray[np.int32]],
    b: Builder,
    compiler: NDArray[np.bool_],
) -> None:
    """The gathered stats into the line's columns (``compiler``: per row, whether its op is a compiler event)."""
    for slot, (rows_i, vals) in sorted(found.items(), key=lambda kv: kv[0] == "name_stat"):  # name_stat last
        if not rows_i:
            continue
        at = np.array(rows_i, dtype=np.intp)
        if slot in ints:
            ints[slot][at] = np.array([as_int(v) for v in vals], dtype=np.int64)
            continue
        texts = [v if isinstance(v, str) else str(v) for v in vals]
        if slot == "memcpy_details":
            sizes = [MEMCPY_SIZE.search(t) for t in texts]
            ints["bytes"][at] = np.array([as_int(int(m.group(1))) if m else -1 for m in sizes], dtype=np.int64)
        elif slot == "name_stat":
            # the `name` stat of compiler events names the module being compiled (JAX, torch_xla on CPU/GPU)
            # (the first such stat of an event; an hlo_module stat or a module in the name wins)
            first = np.ones(at.size, dtype=bool)
            first[1:] = at[1:] != at[:-1]
            take = first & (strs["hlo_module_id"][at] < 0) & compiler[at]
            intern = b.strs["hlo_module_id"]
            strs["hlo_module_id"][at[take]] = [intern(t) for t, k in zip(texts, take.tolist()) if k]
        else:
            intern = b.strs[slot]
            strs[slot][at] = np.array([intern(t) for t in texts], dtype=np.int32)


def _line_kinds(
    line: Any,
    b: Builder,
    device: int,
    is_tpu: bool,
    ops: _OpTable,
    md_idx: NDArray[np.intp],
    step_num: NDArray[np.int64],
) -> tuple[NDArray[np.uint8], NDArray[np.uint8], NDArray[np.bool_], int, int]:
    """A line's rows: (kind, xla_role, device step marks, stream, tid), by its plane (device or host) and name."""
    n = md_idx.size
    role = ops.role[md_idx]
    device_step = np.zeros(n, dtype=bool)
    if device < 0:
        kind = ops.kind_host[md_idx]
        kind[(step_num >= 0) & (kind != Kind.PYTHON)] = Kind.STEP
        return kind, role, device_step, -1, int(line.id)
    lname = line.name
    if is_tpu:
        kind = np.full(n, Kind.KERNEL if lname == "XLA Ops" else Kind.GPU_ANNOTATION, dtype=np.uint8)
    elif lname in DERIVED_LINES:
        kind = np.full(n, Kind.GPU_ANNOTATION, dtype=np.uint8)
    else:
        kind = ops.kind_dev[md_idx]
    if lname == "Steps":
        device_step = step_num >= 0
    lid = int(line.id)
    stream = lid if 0 <= lid < 2**31 else b.stream_ids(str(lid)) + 1_000_000
    return kind, np.zeros(n, dtype=np.uint8), device_step, stream, -1


def link_device_flows(b: Builder, device: int) -> None:
    """TPU: ops inherit the ``_c`` flow id of the enclosing ``XLA Modules`` event as their correlation."""
    chunks = [c for c in b.chunks if c.device == device]
    mods = [
        c for c in chunks if c.kind.size and (c.kind == Kind.GPU_ANNOTATION).all() and (c.ints["consumer"] >= 0).any()
    ]
    if not mods:
        return
    ms = np.concatenate([c.start for c in mods])
    me = np.concatenate([c.end for c in mods])
    mc = np.concatenate([c.ints["consumer"] for c in mods])
    keep = mc >= 0
    ms, me, mc = ms[keep], me[keep], mc[keep]
    order = np.argsort(ms, kind="stable")
    ms, me, mc = ms[order], me[order], mc[order]
    for c in mods:
        c.ints["correlation"] = np.where(c.ints["correlation"] >= 0, c.ints["correlation"], c.ints["consumer"])
    for c in chunks:
        dev = kind_mask(c.kind, DEVICE_KINDS) & (c.ints["correlation"] < 0)
        if not dev.any():
            continue
        w = np.searchsorted(ms, c.start, side="right") - 1
        inside = dev & (w >= 0) & (c.start < me[np.clip(w, 0, None)])
        c.ints["correlation"][inside] = mc[w[inside]]
