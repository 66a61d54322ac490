"""Scale a real Kineto trace to about N bytes of JSON, in Kineto's layout and in re-serialised layouts.

    python bench/scale_trace.py [--trace T] [--bytes 1e9] [--out bench/data] [--gzip]

Writes, under --out (gitignored; never commit the outputs):
  scaled.kineto.json  Kineto's own layout (the source text, copies appended inside "traceEvents")
  scaled.lines.json   the same events re-serialised one per line (what scripts and other tools write)
  scaled.oneline.json the same document on one line
Copy k of the events is shifted by k x (the source's time span + 1 ms), and its correlation ids,
External ids and ProfilerStep numbers are offset, so the scaled trace reads as one longer capture
with k x the steps, not overlapping duplicates. Works on the text (regex substitution of those
fields), so the events keep Kineto's exact formatting.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = REPO / "bench" / "traces" / "lora_qwen1.5b_6steps.pt.trace.json.gz"
_TS = re.compile(rb'"ts": (-?\d+)(\.\d+)?')
_IDS = re.compile(rb'"(correlation|External id)": (\d+)')
_STEP = re.compile(rb"ProfilerStep#(\d+)")
_SEP = b"\n  },\n  {"  # Kineto's boundary between two events


def split_source(text: bytes) -> tuple[bytes, bytes, bytes]:
    """(header through the events array's '[', the events' text, the rest from the array's ']')."""
    start = text.index(b'"traceEvents": [') + len(b'"traceEvents": [')
    end = text.rindex(b"\n  }\n  ]") + len(b"\n  }")  # Kineto ends its array "  }\n  ]" then metadata
    return text[:start], text[start:end], text[end:]


def copy_events(events: bytes, k: int, shift_us: int, id_shift: int, step_shift: int) -> bytes:
    if k == 0:
        return events
    events = _TS.sub(lambda m: b'"ts": %d%s' % (int(m.group(1)) + k * shift_us, m.group(2) or b""), events)
    events = _IDS.sub(lambda m: b'"%s": %d' % (m.group(1), int(m.group(2)) + k * id_shift), events)
    return _STEP.sub(lambda m: b"ProfilerStep#%d" % (int(m.group(1)) + k * step_shift), events)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(DEFAULT_TRACE))
    ap.add_argument("--bytes", type=float, default=1e9)
    ap.add_argument("--out", default=str(REPO / "bench" / "data"))
    ap.add_argument("--layouts", default="kineto,lines,oneline")
    args = ap.parse_args()
    raw = Path(args.trace).read_bytes()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    head, events, tail = split_source(text)
    ts = [int(m.group(1)) for m in _TS.finditer(events)]
    shift_us = max(ts) - min(ts) + 1000
    id_shift = max((int(m.group(2)) for m in _IDS.finditer(events)), default=0) + 1
    step_shift = max((int(m.group(1)) for m in _STEP.finditer(events)), default=0) + 1
    copies = max(1, round(args.bytes / len(events)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    layouts = args.layouts.split(",")
    files = {name: open(out / f"scaled.{name}.json", "wb") for name in layouts}
    try:
        if "kineto" in files:
            files["kineto"].write(head)
        # the same header (deviceProperties, distributedInfo...) with its whitespace squeezed out, as for the events
        flat_head = re.sub(rb"\n\s*", b"", head).strip()
        if "lines" in files:
            files["lines"].write(flat_head + b"\n")
        if "oneline" in files:
            files["oneline"].write(flat_head)
        for k in range(copies):
            part = copy_events(events, k, shift_us, id_shift, step_shift)
            if "kineto" in files:
                files["kineto"].write((b"," if k else b"") + part)  # part starts "\n  {": Kineto's "},\n  {"
            if "lines" in files or "oneline" in files:
                # Kineto breaks lines only between tokens (JSON strings hold no raw newline): mark the
                # event boundaries, squeeze the rest of the whitespace out, then lay the events out
                flat = re.sub(rb"\n\s*", b"", part.replace(_SEP, b"}\x00{")).strip()
                if "lines" in files:
                    files["lines"].write((b",\n" if k else b"") + flat.replace(b"}\x00{", b"},\n{"))
                if "oneline" in files:
                    files["oneline"].write((b"," if k else b"") + flat.replace(b"}\x00{", b"},{"))
        meta = tail[tail.index(b"]") + 1:]
        if "kineto" in files:
            files["kineto"].write(tail)
        if "lines" in files:
            files["lines"].write(b"\n]" + re.sub(rb"\n\s*", b"", meta) + b"\n")
        if "oneline" in files:
            files["oneline"].write(b"]" + re.sub(rb"\n\s*", b"", meta))
    finally:
        for f in files.values():
            f.close()
    for name in layouts:
        p = out / f"scaled.{name}.json"
        print(f"{p}: {os.path.getsize(p) / 1e6:,.0f} MB, {copies} copies of {len(ts):,} events")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
