"""Test oracle for the reader's NCCL args (ingest/kineto/comm_args.py, docs/jobs.md): read the NCCL args of kernel
events with plain json and put them into ``Trace.extra`` by correlation id. Shares nothing with the product's
reader; tests/jobs/test_comm_args.py compares the two (the product reads them itself since report schema 3)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np

from tb_llmdiag.ingest import load_trace
from tb_llmdiag.model import Kind, Trace

KEYS = {"comm_in_nelems": "In msg nelems", "comm_out_nelems": "Out msg nelems", "comm_group_size": "Group size"}


def load_with_nccl_args(path: Path) -> Trace:
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    args = {e["args"]["correlation"]: e["args"] for e in doc["traceEvents"]
            if e.get("cat") == "kernel" and "In msg nelems" in e.get("args", {})}
    trace = load_trace(str(path))
    ev = trace.events
    cols = {k: np.full(len(ev), -1, np.int64) for k in (*KEYS, "comm_dtype_id", "comm_pg_id")}
    dtypes: list[str] = []
    pgs: list[str] = []
    for i in np.flatnonzero(ev.kind == Kind.KERNEL).tolist():
        a = args.get(int(ev.correlation[i]))
        if not a:
            continue
        for col, key in KEYS.items():
            cols[col][i] = a[key]
        for col, key, table in (("comm_dtype_id", "dtype", dtypes), ("comm_pg_id", "Process Group Name", pgs)):
            if a[key] not in table:
                table.append(a[key])
            cols[col][i] = table.index(a[key])
    return dataclasses.replace(trace, extra=cols, extra_names={"comm_dtype": tuple(dtypes), "comm_pg": tuple(pgs)})
