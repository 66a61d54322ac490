"""Build a big Kineto trace by repeating a real one in time: ``python bench/make_big_trace.py OUT [--gb 1.0]``.

Each copy of ``bench/traces/lora_qwen1.5b_6steps.pt.trace.json.gz``'s events is shifted by the source's span
(plus 1 ms), with correlation and External ids offset so that launches still pair with their own kernels,
and ``ProfilerStep#N`` renumbered; copies are added until the uncompressed JSON reaches ``--gb`` GB (10^9
bytes). Written gzip level 1. The result reads as one long profiled window of 6 x copies steps.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parent / "traces" / "lora_qwen1.5b_6steps.pt.trace.json.gz"
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def shifted(ev: dict[str, Any], k: int, dt_us: float, dcorr: int, dstep: int) -> dict[str, Any]:
    if k == 0:
        return ev
    e = dict(ev)
    if isinstance(e.get("ts"), (int, float)):
        e["ts"] = round(e["ts"] + k * dt_us, 3)
    args = e.get("args")
    if isinstance(args, dict):
        a = dict(args)
        for key in ("correlation", "External id", "Ev Idx"):
            if isinstance(a.get(key), int) and a[key] > 0:
                a[key] = a[key] + k * dcorr
        e["args"] = a
    m = _STEP.match(str(e.get("name", "")))
    if m:
        e["name"] = f"ProfilerStep#{int(m.group(1)) + k * dstep}"
    if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
        e["id"] = e["id"] + k * dcorr
    return e


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--src", default=str(SRC))
    args = ap.parse_args()
    with gzip.open(args.src, "rt") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    dt_us = (t1 - t0) + 1000.0
    ids = [v for e in events if isinstance(e.get("args"), dict)
           for v in (e["args"].get("correlation"), e["args"].get("External id")) if isinstance(v, int)]
    dcorr = max(ids, default=0) + 1
    steps = [int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", ""))))]
    dstep = (max(steps) - min(steps) + 1) if steps else 0
    is_meta = [not isinstance(e.get("ts"), (int, float)) or e.get("ph") == "M" for e in events]
    meta = [e for e, m in zip(events, is_meta) if m]
    body = [e for e, m in zip(events, is_meta) if not m]
    head = json.dumps(doc)[:-1]
    written, k = 0, 0
    with gzip.open(args.out, "wt", compresslevel=1) as out:
        out.write(head + ', "traceEvents": [\n')
        first = True
        for e in meta:
            out.write(("" if first else ",\n") + json.dumps(e))
            first = False
        while written < args.gb * 1e9:
            chunk = ",\n".join(json.dumps(shifted(e, k, dt_us, dcorr, dstep)) for e in body)
            out.write(("" if first else ",\n") + chunk)
            first = False
            written += len(chunk)
            k += 1
        out.write("\n]}\n")
    print(f"{args.out}: {k} copies, {written / 1e9:.2f} GB of events uncompressed")


if __name__ == "__main__":
    main()
