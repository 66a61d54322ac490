"""The reader's forward-backward links (``Trace.extra["fwd_links"]``, ``ingest/kineto/links.py``) against a second parse.

The expectation is read here from the JSON text with ``json`` alone (timestamps as exact decimals, nothing of
``tb_llmdiag``): each ``fwdbwd`` flow pair names a thread and a time at each end; the operator there is the ``cpu_op``
of that thread starting at that time (the shortest where several start then). Every pair the product links must be
one of those, and every such pair must be linked.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_llmdiag.ingest import load_trace
from tracepaths import TEST_DATA, shared_trace

Op = tuple[str, int, int]  # name, tid, absolute start in ns


def _ns(ts: Any) -> int:
    return int(Decimal(str(ts)) * 1000)


def expected_pairs(path: Path) -> set[tuple[Op, Op]]:
    """(backward operator, forward operator) per fwdbwd flow pair, from the raw JSON."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    at: dict[tuple[int, int], tuple[int, str]] = {}  # (tid, ns) -> (dur ns, name) of the shortest operator there
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator"):
            key, op = (int(e["tid"]), _ns(e["ts"])), (_ns(e.get("dur", 0)), e["name"])
            at[key] = min(at.get(key, op), op)
    starts: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.get("ph") == "s" and e.get("cat") == "fwdbwd":
            starts.setdefault(e["id"], e)
    pairs = set()
    for e in events:
        if e.get("ph") != "f" or e.get("cat") != "fwdbwd" or e["id"] not in starts:
            continue
        s = starts[e["id"]]
        b, f = (int(e["tid"]), _ns(e["ts"])), (int(s["tid"]), _ns(s["ts"]))
        if b in at and f in at:
            pairs.add(((at[b][1], *b), (at[f][1], *f)))
    return pairs


def product_pairs(path: Path) -> set[tuple[Op, Op]]:
    trace = load_trace(str(path))
    ev, links = trace.events, trace.extra["fwd_links"]
    assert links.dtype == np.int32 and links.shape[0] == 2
    assert (np.diff(links[0]) > 0).all()  # the backward rows ascending, each once

    def op(r: int) -> Op:
        return ev.names[ev.name_id[r]], int(ev.tid[r]), int(ev.ts_ns[r]) + trace.origin_ns

    return {(op(b), op(f)) for b, f in links.T.tolist()}


CASES = {
    "trust5_gpu_full": (lambda: next((TEST_DATA / "trust5_gpu_full").glob("*.json.gz")), 1800),  # with_stack
    "gpu_seed": (lambda: next((TEST_DATA / "gpu_seed").glob("*.json.gz")), 1100),
    "grad_ckpt": (lambda: next((TEST_DATA / "grad_ckpt").glob("*.json.gz")), 3000),  # recomputed forward ops
    # epoch timestamps with ns decimals: read exactly (structs.FlowStartExactTs)
    "ns_resolution": (lambda: shared_trace("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"), 900),
    "deepseek": (lambda: shared_trace("external/deepseek-ai_profile-data/train.json.gz"), 8),  # two forward threads
}


@pytest.mark.parametrize("case", list(CASES))
def test_links_equal_the_flow_pairs_read_apart(case: str) -> None:
    path_of, at_least = CASES[case]
    path = path_of()
    want = expected_pairs(path)
    got = product_pairs(path)
    assert len(want) >= at_least
    assert got == want


def test_backward_names_link_to_their_forward_ops() -> None:
    """What the links say, by name, on a training capture: each backward node to the operator that recorded it."""
    got = product_pairs(next((TEST_DATA / "trust5_gpu_full").glob("*.json.gz")))
    names = {(b[0], f[0]) for b, f in got}
    assert ("LogSoftmaxBackward0", "aten::_log_softmax") in names
    assert ("NllLossBackward0", "aten::nll_loss_forward") in names
    assert ("MmBackward0", "aten::mm") in names
    assert all(b[0].endswith(("Backward0", "Backward1")) or "Backward" in b[0] for b, _ in got)
    assert len({b for b, _ in got}) == len(got)  # one forward operator per backward operator


def _write(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _op(name: str, tid: Any, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def _flow(ph: str, fid: Any, tid: Any, ts: Any, cat: str = "fwdbwd") -> dict[str, Any]:
    return {"ph": ph, "id": fid, "pid": 1, "tid": tid, "ts": ts, "cat": cat, "name": cat}


def test_odd_flows(tmp_path: Path) -> None:
    """Nested operators opened in the same ns (the innermost is meant), a launch flow (ac2g) with a fwdbwd flow's id,
    a flow at a time where no operator starts, an id with one end only, a missing id, thread ids written as strings."""
    path = _write(tmp_path, [
        _op("aten::linear", 10, 100.0, 50.0), _op("aten::t", 10, 100.0, 2.0),  # same start: aten::t is innermost
        _op("aten::mm", 10, 110.5, 5.0), _op("aten::add", "10", 120.25, 1.0),
        _op("TBackward0", 20, 300.0, 4.0), _op("MmBackward0", 20, 310.0, 4.0), _op("AddBackward0", 20, 320.0, 1.0),
        _op("NegBackward0", 20, 330.0, 1.0), _op("MulBackward0", 20, 340.0, 1.0),
        _flow("s", 1, 10, 100.0), _flow("f", 1, 20, 300.0),
        _flow("s", 2, 10, 110.5), _flow("f", 2, 20, 310.0, cat="ac2g"), _flow("f", 2, 20, 310.0),
        _flow("s", 3, "10", 120.25), _flow("f", 3, "20", 320.0),  # string thread ids, as the rows' are read
        _flow("s", 4, 10, 111.0), _flow("f", 4, 20, 330.0),  # no operator starts at 111.0
        _flow("s", 5, 10, 100.0),  # no end
        _flow("s", None, 10, 110.5), _flow("f", None, 20, 340.0),  # no id
    ])
    trace = load_trace(str(path))
    ev = trace.events
    name = {r: ev.names[ev.name_id[r]] for r in range(len(ev))}
    got = {name[b]: name[f] for b, f in trace.extra["fwd_links"].T.tolist()}
    assert got == {"TBackward0": "aten::t", "MmBackward0": "aten::mm", "AddBackward0": "aten::add"}


def test_no_flows_no_column(tmp_path: Path) -> None:
    path = _write(tmp_path, [_op("aten::mm", 1, 1.0, 1.0), _flow("s", 1, 1, 1.0, cat="ac2g"), _flow("f", 1, 1, 1.0)])
    assert "fwd_links" not in load_trace(str(path)).extra
