"""Source lines through backward (``metrics/host/source_lines.py``): a backward operator's ``source`` is its forward
operator's user frame.

Expectations by hand from the raw JSON (``json`` only, nothing of ``tb_llmdiag``): the culprit's calls on the autograd
thread, the backward operator around each (the one a ``fwdbwd`` flow ends on), the flow's start (the forward operator,
on the forward thread), the Python frames around that operator, the innermost one in the capture's own scripts (named
here, by hand), and the line holding most of the calls' time.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_llmdiag import api
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.ingest.discover import discover
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.host.source_lines import MAX_ROWS, rows_source
from tb_llmdiag.metrics.steps.windows import find_steps
from tracepaths import TEST_DATA

FRAME = re.compile(r"^(?P<file>[^()]+\.py)\((?P<line>\d+)\)")


def _ns(v: Any) -> int:
    return int(Decimal(str(v)) * 1000)


def by_hand(path: Path, culprit: str, scripts: tuple[str, ...]) -> tuple[int, str]:
    """The autograd thread (where the fwdbwd flows end), and the forward operators' frame (in ``scripts``) of the
    culprit's calls there inside linked backward operators, weighted by the calls' durations (the ``MAX_ROWS``
    longest)."""
    with gzip.open(path, "rt") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    frames = [e for e in events if e.get("ph") == "X" and e.get("cat") == "python_function"]
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "fwdbwd"}
    ends = [e for e in events if e.get("ph") == "f" and e.get("cat") == "fwdbwd" and e["id"] in starts]
    at = {(e["tid"], _ns(e["ts"])): e for e in ops}
    backward = [(at[(f["tid"], _ns(f["ts"]))], starts[f["id"]]) for f in ends if (f["tid"], _ns(f["ts"])) in at]

    def around(e: dict[str, Any], among: list[tuple[dict[str, Any], Any]]) -> list[Any]:
        t0, t1 = _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])
        return [(o, x) for o, x in among if o["tid"] == e["tid"] and _ns(o["ts"]) <= t0 and _ns(o["ts"]) + _ns(o["dur"]) >= t1]

    (tid,) = {f["tid"] for f in ends}
    calls = sorted((e for e in ops if e["name"] == culprit and e["tid"] == tid), key=lambda e: -_ns(e["dur"]))
    calls = calls[:MAX_ROWS]
    weight: Counter[str] = Counter()
    for call in calls:
        outer = around(call, backward)
        if not outer:
            continue
        op, start = max(outer, key=lambda p: _ns(p[0]["ts"]))  # the innermost linked backward operator
        fwd = at[(start["tid"], _ns(start["ts"]))]
        mine = [(fr, None) for fr in frames if (m := FRAME.match(fr["name"])) and m["file"] in scripts]
        inner = around(fwd, mine)
        if inner:
            fr = max(inner, key=lambda p: (_ns(p[0]["ts"]), -_ns(p[0]["dur"])))[0]
            m = FRAME.match(fr["name"])
            assert m is not None
            weight[f"{m['file']}:{m['line']}"] += _ns(call["dur"])
    assert weight, "no linked call of the culprit"
    return tid, weight.most_common(1)[0][0]


def _trace(name: str) -> Path:
    return next((TEST_DATA / name).glob("*.pt.trace.json.gz"))


CASES = [
    # torch.compile: cuDNN attention backward inside the compiled backward graph, on the autograd thread; the
    # forward is the compiled graph called from the capture script
    ("anatomy_compile_breaks", "aten::_cudnn_attention_backward", ("anatomy_run.py",), "anatomy_run.py:192"),
    # eager LoRA: the backward GEMMs of the adapters, whose forward runs in the user's model file
    ("blame_host_python", "aten::mm", ("../lora_finetune.py", "capture_run.py"), "../lora_finetune.py:77"),
]


@pytest.mark.parametrize(("name", "culprit", "scripts", "line"), CASES, ids=[c[0] for c in CASES])
def test_backward_culprit_source_is_its_forward_frame(name: str, culprit: str, scripts: tuple[str, ...], line: str) -> None:
    path = _trace(name)
    tid, want = by_hand(path, culprit, scripts)
    assert want == line
    trace = load_trace(str(path))
    ev = trace.events
    ctx = Context.build(trace, find_steps(trace))
    rows = np.flatnonzero((ev.name_id == ev.names.index(culprit)) & (ev.tid == tid))  # its calls on the autograd thread
    assert rows.size
    assert rows_source(ctx, rows) == line


def test_busy_backward_operators_name_the_forward_line() -> None:
    """The attribution's launching operators on the autograd thread: their source is the forward line, not the
    compiled graph's generated code (``/tmp/torchinductor_*``) around them on that thread, nor null."""
    rep = api.analyze(discover(str(TEST_DATA / "anatomy_compile_breaks")).files[0]).report
    busy = rep["metrics"]["attribution"]["busy"]
    bwd = [b for b in busy if "CompiledFunctionBackward" in b["chain_text"]]
    assert any(b["name"] == "aten::_cudnn_attention_backward" for b in bwd)
    assert {b["source"] for b in bwd} == {"anatomy_run.py:192"}
    fwd = [b for b in busy if b["chain_text"].startswith("anatomy_run.py(179): step > Optimizer.step")]
    assert fwd and {b["source"] for b in fwd} == {"anatomy_run.py:179"}  # forward-thread sources as before


def test_without_links_or_frames_no_source() -> None:
    """A capture without Python frames (gpu_seed: its culprit is cuDNN attention backward) keeps a null source."""
    rep = api.analyze(discover(str(TEST_DATA / "gpu_seed")).files[0]).report
    idle = rep["metrics"]["idle"]
    assert "cudnn_attention_backward" in idle["host_wait_culprit"]
    assert idle["host_wait_culprit_source"] is None
    slow = [f for f in rep["findings"] if f["id"] == "slow_host_op"]
    assert slow and slow[0]["source"] is None
