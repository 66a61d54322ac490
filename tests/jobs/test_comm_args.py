"""The reader's second pass for NCCL args (ingest/kineto/comm_args.py; Kineto reader: Trace.extra) against
tests/jobs/nccl_args.py, which reads the same args with plain json and shares nothing with it; and on
hand-written args objects."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from nccl_args import load_with_nccl_args
from tracepaths import TEST_DATA
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.ingest.kineto.comm_args import CommArgs
from tb_llmdiag.model import Kind

CAPTURES = sorted(TEST_DATA.glob("*/rank*.pt.trace.json.gz"))
CAPTURES = [p for p in CAPTURES if p.parent.name in ("ddp_straggler", "ddp_slow_transport", "ddp_fast_transport", "fsdp")]

@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name[:5]}")
def test_same_columns_as_plain_json(path: Path) -> None:
    raw = gzip.open(path).read()
    args = CommArgs()
    mid = raw.find(b'"ph": "X", "cat": "kernel"', len(raw) // 2)  # two pieces, cut between events
    mid = raw.rfind(b"{", 0, mid)
    args.scan(raw[:mid], mid)
    args.scan(raw[mid:], len(raw) - mid)
    trace = load_trace(str(path))
    extra, names = args.columns(trace.events)
    ref = load_with_nccl_args(path)
    for col in ("comm_in_nelems", "comm_out_nelems", "comm_group_size"):
        assert np.array_equal(extra[col], ref.extra[col]), col
    assert [names["comm_dtype"][i] if i >= 0 else None for i in extra["comm_dtype_id"]] == \
        [ref.extra_names["comm_dtype"][i] if i >= 0 else None for i in ref.extra["comm_dtype_id"]]
    # the process group: its name and ranks ("0" and "[0, 1]" on these 2-GPU captures)
    pgs = {names["comm_pg"][i] for i in extra["comm_pg_id"] if i >= 0}
    assert pgs == {f"{ref.extra_names['comm_pg'][0]}|[0, 1]"}
    assert (extra["comm_seq"] == -1).all()  # these PyTorch versions write no Seq
    sized = extra["comm_in_nelems"] >= 0
    assert sized.sum() == len(args) and (trace.events.kind[sized] == Kind.KERNEL).all()

def test_hand_written_args() -> None:
    text = (b'[{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "args": {"In msg nelems": 7, "dtype": "Float"}},'
            b'{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "args": {"correlation": 5, "grid": [1, 1, 1], '
            b'"In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 4, "dtype": "BFloat16", "Seq": 17, '
            b'"Process Group Name": "3", "Process Group Ranks": "[0, 1, 2, 3]"}},'
            b'{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather", "args": {"correlation": 9, '
            b'"In msg nelems": "x", "Out msg nelems": 4096, "dtype": "Float"}}]')
    args = CommArgs()
    args.scan(text, len(text))
    assert len(args) == 2  # the CPU row carries no correlation
    assert args.ints["comm_in_nelems"] == [1024, -1] and args.ints["comm_out_nelems"] == [1024, 4096]
    assert args.ints["comm_group_size"] == [4, -1] and args.ints["comm_seq"] == [17, -1]
    assert list(args.dtype_names) == ["BFloat16", "Float"] and list(args.pg_names) == ["3|[0, 1, 2, 3]"]
    assert args.pg == [0, -1]

def test_no_args_no_columns() -> None:
    args = CommArgs()
    text = b'[{"ph": "X", "cat": "kernel", "name": "k", "args": {"correlation": 1}}]'
    args.scan(text, len(text))
    assert len(args) == 0


@pytest.mark.parametrize("path", CAPTURES[:2] + CAPTURES[-2:], ids=lambda p: f"{p.parent.name}/{p.name[:5]}")
def test_the_reader_keeps_them(path: Path) -> None:
    """load_trace fills Trace.extra itself: the same columns as the plain-json stand-in."""
    trace = load_trace(str(path))
    ref = load_with_nccl_args(path)
    for col in ("comm_in_nelems", "comm_out_nelems", "comm_group_size"):
        assert np.array_equal(trace.extra[col], ref.extra[col]), col
    assert trace.extra_names["comm_dtype"] == ref.extra_names["comm_dtype"] == ("BFloat16",)


def test_traces_without_nccl_args_have_no_extra() -> None:
    trace = load_trace(str(next((TEST_DATA / "gpu_seed").glob("*.pt.trace.json.gz"))))
    # no NCCL (or CUDA graph) column; the forward-backward links of its fwdbwd flows are the only extra
    assert set(trace.extra) == {"fwd_links"} and dict(trace.extra_names) == {}
