"""Small converters from decoded JSON values to typed columns, and the name interner."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from tb_llmdiag.ingest.kineto.layout import MEMORY_DTYPES, PLAIN_DECIMAL
from tb_llmdiag.ingest.validate import LIMIT_US
from tb_llmdiag.model import SHAPE_OPS, EventTable, Kind, MemoryTable, empty_memory

_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")

#: Interner flags of a name: its operator's Input Dims are kept (model.SHAPE_OPS); a ProfilerStep#N range
SHAPE_NAME, STEP_NAME = 1, 2


def _name_flags(text: str) -> int:
    """A ProfilerStep#N name is a step marker only when N fits an int64 (a larger N is no real step)."""
    step = _PROFILER_STEP.match(text) is not None and int(text[len("ProfilerStep#") :]) < 2**63
    return (SHAPE_NAME if SHAPE_OPS.match(text) else 0) | (STEP_NAME if step else 0)


def is_oversized_step(text: str) -> bool:
    """A ProfilerStep#N name whose N does not fit an int64 (ignored as a step marker)."""
    return _PROFILER_STEP.match(text) is not None and int(text[len("ProfilerStep#") :]) >= 2**63


class Interner(dict):
    """Event name -> id, numbered in order of first appearance. ``__missing__`` runs once per distinct
    name, so the per-event lookup is a plain dict subscript. Non-string names (a number) share the id
    of their text. ``flags[id]`` holds the name's SHAPE_NAME/STEP_NAME bits."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.flags = bytearray()

    def __missing__(self, key: Any) -> int:
        text = key if isinstance(key, str) else str(key)
        ident = dict.get(self, text)
        if ident is None:
            ident = len(self.texts)
            self.texts.append(text)
            self.flags.append(_name_flags(text))
            self[text] = ident
        self[key] = ident
        return ident


def memory_column(name: str, mem: list[Any]) -> np.ndarray:
    """One column of memory samples (instant events with _MemoryArgs) in Python."""
    if name == "ts":
        return float_column([e.ts for e in mem])
    attr = "mem_bytes" if name == "bytes" else name
    return int_column([getattr(e.args, attr) for e in mem])


def float_column(values: Any) -> np.ndarray:
    """Numbers -> float64; a missing value (None) is NaN, and strings are parsed (NaN if they do not)."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_to_float(v) for v in values], dtype=np.float64)


def _to_float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def int_column(values: list[Any]) -> np.ndarray:
    """Optional ints -> int64 with -1 for missing; strings and floats are parsed (-1 if they do not)."""
    try:
        return np.array(values, dtype=np.int64)  # the common case: every value present
    except (TypeError, ValueError, OverflowError):
        pass
    try:
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        out = np.empty(len(values), dtype=np.int64)
        for i, v in enumerate(values):
            try:
                out[i] = -1 if v is None else int(float(v))
            except (TypeError, ValueError, OverflowError):
                out[i] = -1
        return out


def plausible_shape(text: str) -> bool:
    """Every number in an Input Dims text is a whole dimension in [0, 2^40)."""
    return all(n.isdigit() and (len(n) < 13 or int(n) < 2**40) for n in _NUMBER.findall(text))


def step_warnings(table: EventTable) -> tuple[str, ...]:
    """Step markers of one thread that overlap, or one step number marked twice: the step split is then
    doubtful, and the report says so."""
    rows = np.flatnonzero(table.kind == Kind.STEP)
    if rows.size < 2:
        return ()
    tid, ts, end, name = table.tid[rows], table.ts_ns[rows], table.ts_ns[rows] + table.dur_ns[rows], table.name_id[rows]
    order = np.lexsort((ts, tid))
    tid, ts, end, name = tid[order], ts[order], end[order], name[order]
    same = tid[1:] == tid[:-1]
    overlaps = int((same & (ts[1:] < end[:-1])).sum())
    _, counts = np.unique(name, return_counts=True)
    duplicates = int((counts > 1).sum())
    out = []
    if overlaps:
        out.append(
            f"{overlaps} ProfilerStep markers start before the previous one on their thread ends "
            "(overlapping steps: the step split may be wrong)"
        )
    if duplicates:
        example = table.names[int(np.unique(name, return_counts=True)[0][counts > 1][0])]
        out.append(f"{duplicates} step numbers are marked more than once (e.g. {example}): the step split may be wrong")
    return tuple(out)


def memory_table(parts: list[dict[str, np.ndarray]], origin_us: float) -> MemoryTable:
    """The "[memory]" samples of all pieces, within the time limit, relative to the origin, in time order."""
    if not parts:
        return empty_memory()
    col = {k: np.concatenate([p[k] for p in parts]) for k in MEMORY_DTYPES}
    keep = np.isfinite(col["ts"]) & (np.abs(col["ts"] - origin_us) <= LIMIT_US)
    if not keep.all():
        col = {k: v[keep] for k, v in col.items()}
    ts_ns = np.rint((col["ts"] - origin_us) * 1000.0).astype(np.int64)
    # Device Type 0 is the CPU in Kineto's encoding; any other type is an accelerator
    device = np.where(col["device_type"] == 0, -1, col["device_id"]).astype(np.int16)
    # samples mostly come in time order: then the (stable) sort is the identity and nothing is gathered
    order = slice(None) if bool((ts_ns[1:] >= ts_ns[:-1]).all()) else np.argsort(ts_ns, kind="stable")
    return MemoryTable(
        ts_ns=ts_ns[order],
        device=device[order],
        bytes=col["bytes"][order],
        total_allocated_bytes=col["total_allocated"][order],
        total_reserved_bytes=col["total_reserved"][order],
    )


def relative_us(raws: list[Any], base_us: int | None) -> tuple[np.ndarray, int | None]:
    """Exact JSON timestamps (msgspec.Raw) -> float us relative to a whole-us base, so ns decimals survive, and
    the base (``base_us``, else set from these). A value that is not a plain decimal number is parsed as a float
    (exponents, numeric strings) or is NaN."""
    text = np.array([bytes(r) for r in raws], dtype="S40")
    try:
        whole, _, frac = np.char.partition(text, b".").T
        whole_us = whole.astype(np.int64)
        frac_ns = np.char.ljust(frac, 3, b"0").astype("S3").astype(np.int64)
        frac_ns[np.char.startswith(whole, b"-")] *= -1  # "-3.25" is -3 - 0.25
    except (ValueError, OverflowError):  # not all plain decimals: parse one by one
        return _relative_us_slow(text.tolist(), base_us)
    if base_us is None:
        base_us = int(whole_us.min())
    return (whole_us - base_us) + frac_ns / 1000.0, base_us


def _relative_us_slow(texts: list[bytes], base_us: int | None) -> tuple[np.ndarray, int | None]:
    out = np.full(len(texts), np.nan)
    for i, t in enumerate(texts):
        m = PLAIN_DECIMAL.fullmatch(t.strip(b'"'))
        if m:
            whole, frac = int(m.group(1)), int((m.group(2) or b"").ljust(3, b"0")[:3])
            if base_us is None:
                base_us = whole
            out[i] = (whole - base_us) + (-frac if m.group(1).startswith(b"-") else frac) / 1000.0
        else:
            value = _to_float(t.strip(b'"'))
            if math.isfinite(value):
                if base_us is None:
                    base_us = int(math.floor(value))
                out[i] = value - base_us
    return out, base_us
