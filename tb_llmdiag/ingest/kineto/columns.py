"""Decoded events -> numpy columns, piece by piece: kinds, names, ids, times in ns, memory samples.

``Columns.scan`` uses the compiled one-pass scanner (_scan.c) when it was built and ``scan_py``
otherwise; both give the same result (tests/test_scan.py).
"""

from __future__ import annotations

import collections
import contextlib
import math
from typing import Any

import numpy as np

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest.kineto import scan_ext
from tb_llmdiag.ingest.kineto.in_order import put_in_order
from tb_llmdiag.ingest.kineto.layout import (
    DEVICE_ROW,
    DEVICE_SIDE,
    DIGITS,
    FLOW_DTYPES,
    INT64_MAX,
    INT64_MIN,
    KIND_OF_CATEGORY,
    LAUNCH_ROW,
    MEMORY_DTYPES,
    ROW_ARGS,
    ROW_DTYPES,
    SCAN_DTYPES,
    SKIP,
    SKIPPED_CATEGORIES,
    SLAB_ROWS,
    STR_ID_BASE,
    Scan,
)
from tb_llmdiag.ingest.kineto.links import fwd_links
from tb_llmdiag.ingest.kineto.structs import (
    COMPLETE,
    FLOW_TYPES,
    FLOWS,
    FWDBWD,
    INSTANTS,
    NO_ARGS,
    Args,
    EventExactTs,
    MemoryArgs,
)
from tb_llmdiag.ingest.kineto.values import (
    SHAPE_NAME,
    STEP_NAME,
    Interner,
    float_column,
    int_column,
    is_oversized_step,
    memory_column,
    memory_table,
    plausible_shape,
    relative_us,
    step_warnings,
)
from tb_llmdiag.ingest.source import threads_wanted
from tb_llmdiag.ingest.validate import LIMIT_US, Rejected, check_event_count
from tb_llmdiag.model import EventTable, Kind, MemoryTable, kind_mask

#: Scan's columns in the order _rows.c reads them
_ROWS_IN = ("kind", "ts", "dur", "name_id", "tid", "pid", "correlation", "stream", "device", "bytes", "shape_id")
#: by kind code, for _rows.c: 1 = a device-side kind (DEVICE_SIDE), 2 = a kind a ProfilerStep marker can have
_KIND_BITS = bytes(
    (1 if k in DEVICE_SIDE else 0) | (2 if k in (Kind.ANNOTATION, Kind.CPU_OP) else 0) for k in range(256)
)


class Columns:
    """Accumulates columns piece by piece; interns names, shapes and string thread/stream ids."""

    def __init__(self, threaded: bool | None = None) -> None:
        self.names = Interner()
        self.threaded = threaded  # finish() sorts on two threads (None: unless LLMDIAG_READ_THREADS=0)
        self.shapes: dict[bytes, int] = {}
        self.str_ids: dict[str, int] = {}
        self.parts: list[dict[str, np.ndarray]] = []  # filled slabs (views of their used rows)
        self.slab: dict[str, np.ndarray] = {}  # the slab being filled, and its used rows
        self.slab_used = 0
        self.mem_parts: list[dict[str, np.ndarray]] = []
        self.flow_parts: list[dict[str, np.ndarray]] = []  # the fwdbwd flows' columns, piece by piece (FLOW_DTYPES)
        self.fwd_links: np.ndarray | None = None  # set by finish(): links.fwd_links of the flows
        # category -> Kind code; categories never seen before are OTHER (the profiler's own span: SKIP)
        self.kind_of: collections.defaultdict[Any, int] = collections.defaultdict(
            lambda: int(Kind.OTHER),
            {**{c: int(k) for c, k in KIND_OF_CATEGORY.items()}, **{c: SKIP for c in SKIPPED_CATEGORIES}},
        )
        self.origin_us: float | None = None  # the first piece's whole-us origin of ts_ns
        self.ts_min = float("inf")  # the earliest timestamp (us) of all rows
        self.rejected = Rejected()  # rows rejected for impossible times or durations, by reason (validate.py)
        self.events_seen = 0  # decoded events so far, against validate.MAX_EVENTS
        self.ts_base_us: int | None = None  # set when timestamps are read exactly (see values.relative_us)

    def _id(self, value: Any) -> int:
        """A pid/tid/stream value that is not an int64: "stream 7" -> 7, "0x0" -> 0, 7.0 -> 7; others
        (names, numbers beyond int64) are interned at STR_ID_BASE - k."""
        if value is None:
            return -1
        number: int | None = None
        if isinstance(value, float):
            number = int(value) if math.isfinite(value) else None
        elif isinstance(value, int):
            number = value
        else:
            text = str(value)
            m = DIGITS.search(text)
            if m and (m.group(0) == text.strip() or text.startswith("stream")):
                number = int(m.group(0))
            elif text.startswith("0x"):
                with contextlib.suppress(ValueError):
                    number = int(text, 16)
        if number is not None and INT64_MIN <= number <= INT64_MAX:
            return number
        return STR_ID_BASE - self.str_ids.setdefault(str(value), len(self.str_ids))

    def _ids(self, values: list[Any]) -> np.ndarray:
        """Column of pid/tid/stream values: ints kept, missing -1, other values converted once per unique value."""
        try:
            return np.array(values, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            pass
        try:
            return np.array([-1 if v is None else v for v in values], dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            conv = {v: self._id(v) for v in set(values)}
            return np.array([conv[v] for v in values], dtype=np.int64)

    def scan(self, events: list[Any], has_memory: bool = True) -> Scan:
        """The rows of one decoded piece (its complete events, skipped categories dropped) with their
        per-row columns, and its ``[memory]`` samples. Uses the compiled one-pass scanner when it was
        built, else scan_py; both give the same result."""
        ext = scan_ext.ext
        if ext is None:
            return self.scan_py(events, has_memory)
        xs, found, mem, mem_found, flows, flow_found = ext.scan(
            events,
            COMPLETE,
            INSTANTS,
            FLOW_TYPES,
            Args,
            MemoryArgs,
            self.kind_of,
            self.names,
            self.names.flags,
            self.shapes,
            ROW_ARGS,
        )
        kind = np.frombuffer(found["kind"], dtype=np.uint8)
        # the scanner leaves a column to Python when its values are not all plain numbers
        cols: dict[str, np.ndarray] = {}
        for name, dtype in SCAN_DTYPES.items():
            cols[name] = (
                np.frombuffer(found[name], dtype=dtype) if name in found else self._column(name, xs, kind, cols)
            )
        mem_cols = {
            name: np.frombuffer(mem_found[name], dtype=dtype) if name in mem_found else memory_column(name, mem)
            for name, dtype in MEMORY_DTYPES.items()
        }
        # the flows are listed only when a column is left to Python
        flow_cols = {
            name: np.frombuffer(flow_found[name], dtype=dtype) if name in flow_found else self._flow_column(name, flows)
            for name, dtype in FLOW_DTYPES.items()
        }
        return Scan(xs=xs, kind=kind, memory=mem_cols, flows=flow_cols if flow_cols["end"].size else {}, **cols)

    def scan_py(self, events: list[Any], has_memory: bool = True) -> Scan:
        """scan in Python: one list comprehension per field. ``has_memory=False`` skips looking for
        ``[memory]`` samples (the caller knows the piece has none)."""
        xs = [e for e in events if e.__class__ in COMPLETE]
        mem = (
            [e for e in events if e.__class__ in INSTANTS and e.name == "[memory]" and e.args is not None]
            if has_memory
            else []
        )
        kind_of = self.kind_of
        kind = np.array([kind_of[e.cat] for e in xs], dtype=np.uint8)
        skip = kind == SKIP
        if skip.any():  # the profiler's own "PyTorch Profiler (0)" span is not an event of the run
            keep = np.flatnonzero(~skip)
            xs = [xs[i] for i in keep.tolist()]
            kind = kind[keep]
        cols: dict[str, np.ndarray] = {}
        for name in SCAN_DTYPES:
            cols[name] = self._column(name, xs, kind, cols)
        flows = [e for e in events if e.__class__ in FLOW_TYPES and e.cat == FWDBWD]
        return Scan(
            xs=xs,
            kind=kind,
            memory={name: memory_column(name, mem) for name in MEMORY_DTYPES},
            flows={name: self._flow_column(name, flows) for name in FLOW_DTYPES} if flows else {},
            **cols,
        )

    def _flow_column(self, name: str, flows: list[Any]) -> np.ndarray:
        """One column of the fwdbwd flows in Python: ts as the rows' (exact where they are), tid and id as the rows'
        thread ids (-1: none), end 1 on a flow's end."""
        if name == "end":
            ends = (FLOWS[False][1], FLOWS[True][1])
            return np.fromiter((e.__class__ in ends for e in flows), np.uint8, count=len(flows))
        if name == "ts" and flows and flows[0].__class__ in FLOWS[True]:
            out, self.ts_base_us = relative_us([e.ts for e in flows], self.ts_base_us)
            return out
        # any JSON value decodes here (structs.FlowStart): a list or an object is no value at all
        values = [
            v if v is None or isinstance(v, (int, float, str)) else None for v in (getattr(e, name) for e in flows)
        ]
        return float_column(values) if name == "ts" else self._ids(values)

    def _column(self, name: str, xs: list[Any], kind: np.ndarray, done: dict[str, np.ndarray]) -> np.ndarray:
        """One per-row column in Python (``done``: the columns before it in SCAN_DTYPES). The args fields
        and pid are read only for the rows that carry them (device rows; launch rows too for the
        correlation id) and are -1 elsewhere; Input Dims only for SHAPE_OPS operators."""
        if name == "ts":
            ts_list = [e.ts for e in xs]
            if xs and xs[0].__class__ is EventExactTs:
                out, self.ts_base_us = relative_us(ts_list, self.ts_base_us)
                return out
            return float_column(ts_list)
        if name == "dur":
            return float_column([e.dur for e in xs])  # a missing "dur" is NaN here and 0 in finish()
        if name == "name_id":
            names = self.names
            return np.array([names[e.name] for e in xs], dtype=np.int32)
        if name == "tid":
            return self._ids([e.tid for e in xs])
        if name == "shape_id":  # Input Dims only for the operators analyses read (model.SHAPE_OPS)
            out32 = np.full(len(xs), -1, dtype=np.int32)
            flags = np.frombuffer(bytes(self.names.flags), dtype=np.uint8)
            rows = np.flatnonzero((kind == Kind.CPU_OP) & (flags[done["name_id"]] & SHAPE_NAME > 0))
            if rows.size:
                shapes = self.shapes
                dims = [(xs[i].args or NO_ARGS).input_dims for i in rows.tolist()]
                out32[rows] = [shapes.setdefault(bytes(d), len(shapes)) if len(d) else -1 for d in dims]
            return out32
        out = np.full(len(xs), -1, dtype=np.int64)
        mask = np.frombuffer(ROW_ARGS, dtype=np.uint8)[kind] & (
            DEVICE_ROW | (LAUNCH_ROW if name == "correlation" else 0)
        )
        rows = np.flatnonzero(mask).tolist()
        if rows:
            if name == "pid":
                out[rows] = self._ids([xs[i].pid for i in rows])
            else:
                values = [getattr(xs[i].args or NO_ARGS, name) for i in rows]
                out[rows] = int_column(values) if name in ("correlation", "bytes") else self._ids(values)
        return out

    def add(self, events: list[Any], has_memory: bool = True) -> None:
        """Append one decoded piece: scan() it, keep its memory samples, and finish its rows."""
        self.events_seen += len(events)
        check_event_count(self.events_seen)  # before the piece's columns are built (validate.MAX_EVENTS)
        s = self.scan(events, has_memory)
        if s.memory["ts"].size:
            self.mem_parts.append(s.memory)
        if s.flows:
            self.flow_parts.append(s.flows)
        if s.xs:
            self._append_rows(s)

    def _append_rows(self, s: Scan) -> None:
        """Turn one piece's scan into the model's columns (while its arrays are small and in cache) and
        keep them for finish(): ns times relative to the first piece's whole-us origin, durations
        cleaned, ProfilerStep ranges marked, device/stream on device rows and tid on host rows. In one
        compiled pass (_rows.c) when the extension was built, else ``append_rows_py``: the same rows."""
        ext = scan_ext.ext
        if ext is None:
            self.append_rows_py(s)
            return
        n = len(s.ts)
        out = self._reserve(n)  # at most n rows: the unused ones are handed back below
        kept, lowest, no_ts, no_dur, negative, outside, device = ext.rows(
            tuple(getattr(s, k) for k in _ROWS_IN),
            tuple(out[k] for k in ROW_DTYPES),
            bytes(self.names.flags),
            _KIND_BITS,
            int(Kind.STEP),
            math.nan if self.origin_us is None else self.origin_us,
            LIMIT_US,
        )
        self.slab_used -= n - kept
        self.rejected.add(no_ts, no_dur, negative, outside, device)
        if kept:
            if self.origin_us is None:
                self.origin_us = float(np.floor(lowest))
            self.ts_min = min(self.ts_min, lowest)

    def append_rows_py(self, s: Scan) -> None:
        """_append_rows in numpy."""
        cols = {
            "ts": s.ts,
            "dur": s.dur,
            "kind": s.kind,
            "name_id": s.name_id,
            "tid": s.tid,
            "pid": s.pid,
            "correlation": s.correlation,
            "stream": s.stream,
            "device": s.device,
            "bytes": s.bytes,
            "shape_id": s.shape_id,
        }
        # rows no trace can mean are rejected and counted (validate.py): no usable timestamp (NaN), a device
        # row without a duration, a negative duration, a time or duration beyond what int64 ns can hold once
        # relative to the origin (LIMIT_US). One combined test in the common case where every row is fine;
        # NaN fails every comparison.
        ts, dur = s.ts, s.dur
        device_side = np.frombuffer(_KIND_BITS, dtype=np.uint8)[s.kind] & 1 > 0
        if not ((np.abs(ts) <= LIMIT_US) & ~(dur < 0) & ~(dur > LIMIT_US) & ~(device_side & np.isnan(dur))).all():
            finite = np.isfinite(ts)
            no_dur = finite & device_side & np.isnan(dur)
            negative = finite & ~no_dur & (dur < 0)
            outside = finite & ~no_dur & ~negative & ((np.abs(ts) > LIMIT_US) | (dur > LIMIT_US))
            keep = finite & ~no_dur & ~negative & ~outside
            self.rejected.add(
                int((~finite).sum()),
                int(no_dur.sum()),
                int(negative.sum()),
                int(outside.sum()),
                int((device_side & ~keep).sum()),
            )
            cols = {k: v[keep] for k, v in cols.items()}
            ts, dur = cols["ts"], cols["dur"]
        if not ts.size:
            return
        lowest = float(ts.min())
        if self.origin_us is None:
            self.origin_us = float(np.floor(lowest))
        self.ts_min = min(self.ts_min, lowest)
        # computed straight into the slab's next rows (no per-piece temporaries to copy there after)
        out = self._reserve(ts.size)
        tmp = (ts - self.origin_us) * 1000.0  # us -> ns relative to a whole-us origin: exact for Kineto's ns decimals
        out["ts_ns"][...] = np.rint(tmp, out=tmp)
        np.multiply(dur, 1000.0, out=tmp)
        out["dur_ns"][...] = np.fmax(np.rint(tmp, out=tmp), 0.0, out=tmp)  # a missing duration (NaN) is 0
        kind = out["kind"]
        kind[...] = cols["kind"]
        step_name = np.frombuffer(bytes(self.names.flags), dtype=np.uint8)[cols["name_id"]] & STEP_NAME > 0
        kind[kind_mask(kind, (Kind.ANNOTATION, Kind.CPU_OP)) & step_name] = Kind.STEP
        host_side = ~kind_mask(kind, DEVICE_SIDE)
        loc = cols["tid"]  # the tid, which is the stream on device rows
        out["device"][...] = np.where(cols["device"] >= 0, cols["device"], cols["pid"])
        out["device"][host_side] = -1
        out["stream"][...] = np.where(cols["stream"] != -1, cols["stream"], loc)
        out["stream"][host_side] = -1
        out["tid"][...] = np.where(host_side, loc, -1)
        for k in ("name_id", "correlation", "bytes", "shape_id"):
            out[k][...] = cols[k]

    @property
    def has_rows(self) -> bool:
        return bool(self.parts) or self.slab_used > 0

    def _reserve(self, n: int) -> dict[str, np.ndarray]:
        """Views of the next ``n`` rows of the current slab, for the caller to fill: big arrays (np.empty: pages
        cost memory once written, and go back to the system when freed), not one small array per piece and
        column, whose freed memory the allocator keeps in holes finish() cannot reuse."""
        if not self.slab or self.slab_used + n > len(self.slab["ts_ns"]):
            self._flush_slab()
            size = max(SLAB_ROWS, n)
            self.slab = {k: np.empty(size, dtype=dtype) for k, dtype in ROW_DTYPES.items()}
        rows = {k: v[self.slab_used : self.slab_used + n] for k, v in self.slab.items()}
        self.slab_used += n
        return rows

    def _flush_slab(self) -> None:
        if self.slab and self.slab_used:
            self.parts.append({k: v[: self.slab_used] for k, v in self.slab.items()})
        self.slab, self.slab_used = {}, 0

    def _links(self, table: EventTable, shift_ns: int) -> np.ndarray | None:
        """The flows' forward-backward links (``links.fwd_links``), their times in ns as the rows' are (relative to
        the first piece's origin, then shifted to the final one); the flows are dropped."""
        parts, self.flow_parts = self.flow_parts, []
        if not parts or self.origin_us is None:
            return None
        flows = {k: np.concatenate([p[k] for p in parts]) for k in FLOW_DTYPES}
        del parts
        ts = flows["ts"]
        ok = np.isfinite(ts) & (np.abs(ts) <= LIMIT_US)
        ts_ns = np.rint((ts[ok] - self.origin_us) * 1000.0).astype(np.int64) - shift_ns
        return fwd_links(table, ts_ns, flows["tid"][ok], flows["id"][ok], flows["end"][ok] > 0)

    def finish(self) -> tuple[EventTable, MemoryTable, int, tuple[str, ...]]:
        """The pieces' rows as one EventTable sorted by time, the memory samples, the origin (ns) and warnings."""
        self._flush_slab()
        if not self.parts:
            if self.rejected.total:
                raise TraceFormatError(
                    "no event of the trace has a usable time (missing, negative or out-of-range "
                    "timestamps and durations)"
                )
            raise TraceFormatError("the trace has no timed events ('traceEvents' holds no complete events)")
        warnings: list[str] = self.rejected.warnings()
        big_steps = sum(1 for t in self.names.texts if is_oversized_step(t))
        if big_steps:
            warnings.append(f"{big_steps} ProfilerStep markers with a step number beyond int64 were ignored")
        # column by column, each piece's array dropped as it is copied: the peak is the columns plus one
        # column, not twice the columns (the 1 GB bench trace: 453 -> see README)
        parts, self.parts = self.parts, []
        single = len(parts) == 1  # one slab (up to SLAB_ROWS rows): its views are sorted below, not copied first
        col = parts[0] if single else {k: np.concatenate([p.pop(k) for p in parts]) for k in list(parts[0])}
        del parts
        assert self.origin_us is not None
        origin_us = np.floor(self.ts_min)  # relative to ts_base_us when timestamps were read exactly
        ts_ns = col["ts_ns"]
        if origin_us != self.origin_us:  # an earlier event came in a later piece: whole us, so exact
            ts_ns -= int(origin_us - self.origin_us) * 1000
        shapes = tuple(s.decode("utf-8", "replace") for s in self.shapes)
        huge = [i for i, text in enumerate(shapes) if not plausible_shape(text)]
        if huge:  # a dimension beyond 2^40, negative or not an integer is no real shape: its FLOPs would be nonsense
            bad_rows = np.isin(col["shape_id"], huge)
            col["shape_id"][bad_rows] = -1
            warnings.append(
                f"{int(bad_rows.sum())} operators' recorded shapes hold a dimension beyond 2^40 (or "
                "one that is negative or not an integer) and were ignored"
            )
        # None: already in time order (Kineto mostly is not; small files are), where the stable sort is the
        # identity: one comparison pass over the times instead of sorting them and then checking the sort
        order = None if bool((ts_ns[1:] >= ts_ns[:-1]).all()) else np.argsort(ts_ns, kind="stable")
        del ts_ns
        if order is not None or single:  # in time order; half of the columns on a second thread (in_order.py)
            put_in_order(col, order, threads_wanted() if self.threaded is None else self.threaded)
        del order
        table = EventTable(
            ts_ns=col["ts_ns"],
            dur_ns=col["dur_ns"],
            kind=col["kind"],
            name_id=col["name_id"],
            device=col["device"],
            stream=col["stream"],
            tid=col["tid"],
            correlation=col["correlation"],
            bytes=col["bytes"],
            shape_id=col["shape_id"],
            names=tuple(self.names.texts),
            shapes=shapes,
        )
        self.fwd_links = self._links(table, int(origin_us - self.origin_us) * 1000)
        base = self.ts_base_us or 0
        origin_ns = (int(origin_us) + base) * 1000
        if not INT64_MIN < origin_ns < INT64_MAX:
            raise TraceFormatError("the trace's timestamps are beyond what int64 nanoseconds can hold")
        memory = memory_table(self.mem_parts, origin_us + base)
        return table, memory, origin_ns, tuple(warnings) + step_warnings(table)
