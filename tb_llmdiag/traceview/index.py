"""A loaded trace-view index (``build``'s meta and arrays, possibly memory-mapped) and its queries.

Contract:
- ``TraceIndex.load(meta, arrays)`` checks the whole index before it is used (dtypes, lengths, offsets,
  sortedness of every row's starts and running ends, event ids in range) and raises ``BadIndex`` with one
  line otherwise: a damaged or planted cache entry is never queried.
- ``view(start_ns, end_ns, px, ...)``: per lane, the intervals overlapping the range merged at
  ``(end - start) / px`` ns (``lod.query``) and the memory counter reduced to per-pixel maxima. Cost
  O(rows x log n + output); output is bounded by ``MAX_INTERVALS`` (the resolution doubles until it holds).
- ``event(i)`` the details of one event and its launch <-> kernel flow (same correlation id);
  ``search(text)`` the events whose name contains ``text``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_llmdiag.errors import BadIndex
from tb_llmdiag.model import Kind
from tb_llmdiag.traceview.build import TRACEVIEW_VERSION
from tb_llmdiag.traceview.lod import Level, query

#: Intervals one answer may hold (about 1 MB of JSON before gzip).
MAX_INTERVALS = 40_000
DEFAULT_DEPTH = 6
SEARCH_LIMIT = 200

_EV_COLS = {
    "ev_ts": np.int64,
    "ev_dur": np.int64,
    "ev_name": np.int32,
    "ev_kind": np.uint8,
    "ev_cat": np.uint8,
    "ev_corr": np.int64,
    "ev_shape": np.int32,
    "ev_bytes": np.int64,
    "ev_row": np.int32,
    "ev_tid": np.int64,
    "ev_stream": np.int32,
    "ev_device": np.int16,
}
_LV_COLS = {"off": np.int64, "start": np.int64, "end": np.int64, "cmax": np.int64, "ev": np.int32, "n": np.int32}
_OTHER = {
    "corr_sorted": np.int64,
    "corr_ev": np.int64,
    "row_lane": np.int64,
    "row_depth": np.int64,
    "mem_ts": np.int64,
    "mem_alloc": np.int64,
    "mem_reserved": np.int64,
}


def expected_arrays(meta: Mapping[str, Any]) -> dict[str, type]:
    """Every array name the meta implies, with its dtype."""
    out: dict[str, type] = {**_EV_COLS, **_OTHER}
    for i in range(len(meta.get("levels") or [])):
        out.update({f"lv{i}_{c}": t for c, t in _LV_COLS.items()})
    return out


def _sorted(a: np.ndarray, off: np.ndarray) -> bool:
    """Non-decreasing within every row (a drop is allowed only at a row boundary)."""
    if a.shape[0] < 2:
        return True
    drops = np.flatnonzero(a[1:] < a[:-1]) + 1
    return bool(np.isin(drops, off).all())


@dataclass
class TraceIndex:
    meta: dict[str, Any]
    a: dict[str, np.ndarray]
    levels: list[Level]

    @classmethod
    def load(cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> TraceIndex:
        if meta.get("traceview_version") != TRACEVIEW_VERSION:
            raise BadIndex("not a trace-view index of this version")
        want = expected_arrays(meta)
        if set(arrays) != set(want):
            raise BadIndex("the index's arrays are not the ones its meta names")
        for k, t in want.items():
            if arrays[k].dtype != np.dtype(t) or arrays[k].ndim != 1:
                raise BadIndex(f"array {k} has the wrong type")
        n, n_rows = meta.get("n_events"), meta.get("n_rows")
        if not (isinstance(n, int) and isinstance(n_rows, int) and n >= 0 and n_rows >= 0):
            raise BadIndex("bad event or row count")
        if any(arrays[k].shape[0] != n for k in _EV_COLS):
            raise BadIndex("event columns of unequal length")
        names, shapes = meta.get("names"), meta.get("shapes")
        if not (isinstance(names, list) and isinstance(shapes, list)):
            raise BadIndex("no name tables")
        if n and not (int(arrays["ev_name"].min()) >= 0 and int(arrays["ev_name"].max()) < len(names)):
            raise BadIndex("event names out of range")
        if n and int(arrays["ev_shape"].max()) >= len(shapes):
            raise BadIndex("event shapes out of range")
        if n and int(arrays["ev_cat"].max()) >= len(meta.get("categories") or []):
            raise BadIndex("event categories out of range")
        if arrays["row_lane"].shape[0] != n_rows or arrays["row_depth"].shape[0] != n_rows:
            raise BadIndex("row tables of the wrong length")
        ce = arrays["corr_ev"]
        if ce.shape[0] != arrays["corr_sorted"].shape[0] or (ce.size and not (ce.min() >= 0 and ce.max() < n)):
            raise BadIndex("correlation index out of range")
        if not _sorted(arrays["corr_sorted"], np.zeros(0, np.int64)):
            raise BadIndex("correlation index not sorted")
        levels = []
        for i, tol in enumerate(meta["levels"]):
            g = {c: arrays[f"lv{i}_{c}"] for c in _LV_COLS}
            off, m = g["off"], g["start"].shape[0]
            if off.shape[0] != n_rows + 1 or (off.size and (off[0] != 0 or off[-1] != m)) or np.any(np.diff(off) < 0):
                raise BadIndex(f"level {i}: bad row offsets")
            if any(g[c].shape[0] != m for c in ("end", "cmax", "ev", "n")):
                raise BadIndex(f"level {i}: columns of unequal length")
            if m and not (g["ev"].min() >= 0 and g["ev"].max() < n):
                raise BadIndex(f"level {i}: event ids out of range")
            if not (_sorted(g["start"], off) and _sorted(g["cmax"], off)) or np.any(g["end"] < g["start"]):
                raise BadIndex(f"level {i}: rows not sorted")
            if not isinstance(tol, int) or tol < 0:
                raise BadIndex(f"level {i}: bad tolerance")
            levels.append(Level(tol, **g))
        if [lv.tol_ns for lv in levels] != sorted(lv.tol_ns for lv in levels):
            raise BadIndex("levels out of order")
        mts = arrays["mem_ts"]
        if not (mts.shape[0] == arrays["mem_alloc"].shape[0] == arrays["mem_reserved"].shape[0]):
            raise BadIndex("memory columns of unequal length")
        for ln in meta.get("lanes") or []:
            if not isinstance(ln, dict) or not isinstance(ln.get("id"), str):
                raise BadIndex("bad lane")
            if ln.get("kind") == "memory":
                a, b = ln.get("samples", [0, -1])
                if not (0 <= a <= b <= mts.shape[0]) or not _sorted(mts[a:b], np.zeros(0, np.int64)):
                    raise BadIndex("bad memory lane")
            else:
                r0, r1 = ln.get("rows", [0, -1])
                if not (0 <= r0 <= r1 <= n_rows):
                    raise BadIndex("bad lane rows")
        return cls(dict(meta), dict(arrays), levels)

    # -- queries
    def view(
        self, start_ns: int, end_ns: int, px: int, *, depth: int = DEFAULT_DEPTH, expand: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """The answer of the ``trace_view`` route (docs/http_api.md)."""
        a, b = int(start_ns), max(int(end_ns), int(start_ns) + 1)
        px = max(1, int(px))
        res = (b - a) / px
        names: dict[int, int] = {}
        for _ in range(40):
            lanes, total = self._lanes(a, b, res, depth, expand, names)
            if total <= MAX_INTERVALS:
                break
            res *= 2
            names.clear()
        inv = sorted(names, key=names.__getitem__)
        return {
            "traceview_version": TRACEVIEW_VERSION,
            "start_ns": a,
            "end_ns": b,
            "px": px,
            "resolution_ns": int(res),
            "span_ns": int(self.meta["span_ns"]),
            "intervals": total,
            "names": [self.meta["names"][i] for i in inv],
            "categories": self.meta["categories"],
            "lanes": lanes,
        }

    def _lanes(
        self, a: int, b: int, res: float, depth: int, expand: frozenset[str], names: dict[int, int]
    ) -> tuple[list[dict[str, Any]], int]:
        out, total = [], 0
        ev_name, ev_cat = self.a["ev_name"], self.a["ev_cat"]
        for ln in self.meta["lanes"]:
            lane = {"id": ln["id"], "label": ln["label"], "kind": ln["kind"]}
            if "launches" in ln:  # host lanes: the launch calls they make (none: no step work of their own)
                lane["launches"] = ln["launches"]
            if ln["kind"] == "memory":
                lane.update(self._memory(ln, a, b, res))
                total += len(lane["ts_ns"])
                out.append(lane)
                continue
            r0, r1 = ln["rows"]
            shown = r1 - r0 if ln["id"] in expand else min(r1 - r0, depth)
            lane["depth"], lane["shown_depth"] = r1 - r0, shown
            rows = []
            for r in range(r0, r0 + shown):
                # step boundaries are few and are what the lane is for: never merged
                sl = query(self.levels, r, a, b, 0 if ln["kind"] == "steps" else res, self.a["ev_dur"])
                nid = ev_name[sl.ev]
                lut = {x: names.setdefault(x, len(names)) for x in np.unique(nid).tolist()}
                rows.append(
                    {
                        "start_ns": sl.start.tolist(),
                        "dur_ns": (sl.end - sl.start).tolist(),
                        "ev": sl.ev.tolist(),
                        "n": sl.n.tolist(),
                        "name": [lut[x] for x in nid.tolist()],
                        "cat": ev_cat[sl.ev].tolist(),
                    }
                )
                total += sl.start.shape[0]
            lane["rows"] = rows
            out.append(lane)
        return out, total

    def _memory(self, ln: dict[str, Any], a: int, b: int, res: float) -> dict[str, Any]:
        s0, s1 = ln["samples"]
        ts = self.a["mem_ts"][s0:s1]
        lo = max(int(np.searchsorted(ts, a, "right")) - 1, 0)  # the value in force at a
        hi = int(np.searchsorted(ts, b, "left"))
        t = np.asarray(ts[lo:hi], np.int64)
        v = np.asarray(self.a["mem_alloc"][s0:s1][lo:hi], np.int64)
        if t.shape[0] > 2 and res > 0:
            bins = np.floor((np.maximum(t, a) - a) / res).astype(np.int64)
            first = np.r_[0, np.flatnonzero(bins[1:] != bins[:-1]) + 1]
            t, v = np.maximum(t[first], a), np.maximum.reduceat(v, first)
        return {"ts_ns": t.tolist(), "bytes": v.tolist(), "max_bytes": int(v.max()) if v.size else 0}

    def event(self, i: int) -> dict[str, Any]:
        """One event's details and the events sharing its correlation id (launch <-> kernel)."""
        a = self.a
        out = self._brief(i)
        sid = int(a["ev_shape"][i])
        out["shapes"] = self.meta["shapes"][sid] if sid >= 0 else None
        corr = int(a["ev_corr"][i])
        out["correlation"] = corr if corr >= 0 else None
        nbytes = int(a["ev_bytes"][i])
        out["bytes"] = nbytes if nbytes >= 0 else None
        k = int(a["ev_kind"][i])
        out["kind"] = Kind(k).name.lower() if k in Kind._value2member_map_ else "other"
        if int(a["ev_device"][i]) >= 0:
            out.update(device=int(a["ev_device"][i]), stream=int(a["ev_stream"][i]))
        else:
            out["tid"] = int(a["ev_tid"][i])
        flow = []
        if corr >= 0:
            cs = a["corr_sorted"]
            lo, hi = int(np.searchsorted(cs, corr, "left")), int(np.searchsorted(cs, corr, "right"))
            flow = [self._brief(int(j)) for j in a["corr_ev"][lo : min(hi, lo + 16)] if int(j) != i]
        out["flow"] = flow
        return out

    def _brief(self, i: int) -> dict[str, Any]:
        a = self.a
        r = int(a["ev_row"][i])
        lane = self._lane_of_row(r) if r >= 0 else None
        return {
            "ev": i,
            "name": self.meta["names"][int(a["ev_name"][i])],
            "ts_ns": int(a["ev_ts"][i]),
            "dur_ns": int(a["ev_dur"][i]),
            "category": self.meta["categories"][int(a["ev_cat"][i])],
            "lane": lane,
            "depth": int(a["row_depth"][r]) if r >= 0 else None,
        }

    def _lane_of_row(self, r: int) -> str | None:
        for ln in self.meta["lanes"]:
            rows = ln.get("rows")
            if rows and rows[0] <= r < rows[1]:
                return str(ln["id"])
        return None

    def search(self, text: str, limit: int = SEARCH_LIMIT) -> dict[str, Any]:
        """Events whose name contains ``text`` (case-insensitive), in time order: the first ``limit``."""
        needle = text.lower()
        ids = [i for i, nm in enumerate(self.meta["names"]) if needle in nm.lower()]
        hits = np.zeros(0, np.int64)
        if ids:
            lut = np.zeros(len(self.meta["names"]), dtype=bool)
            lut[ids] = True
            hits = np.flatnonzero(lut[self.a["ev_name"]] & (self.a["ev_row"] >= 0))
        return {
            "query": text,
            "names": len(ids),
            "count": int(hits.shape[0]),
            "events": [self._brief(int(i)) for i in hits[:limit]],
        }
