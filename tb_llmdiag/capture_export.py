"""Writing one profiled window of `tb_llmdiag.capture` to its trace file, with a top-level key added.

Pure Python (no torch). torch's `add_metadata_json` only reaches the trace while the profiler session is live, but the
capture helper knows the steps after the window only once they have run: it keeps the window's results, exports
them to a temporary JSON in the output folder (`export(path)`, torch's `export_chrome_trace`) and
`write_window` streams that file into the final one, the key inserted first in the top-level object. One pass,
bounded memory (1 MiB at a time), gzip as `torch.profiler.tensorboard_trace_handler` writes it, named as that
handler names it (`<worker>.<time_ns>.pt.trace.json[.gz]`), and renamed into place only when complete (a reader
never sees half a file).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

CHUNK_BYTES = 1 << 20
_WS = b" \t\r\n"


def trace_file_name(worker: str, use_gzip: bool, now_ns: int | None = None) -> str:
    """`<worker>.<time_ns>.pt.trace.json[.gz]`, as `torch.profiler.tensorboard_trace_handler` names it."""
    name = f"{worker}.{time.time_ns() if now_ns is None else now_ns}.pt.trace.json"
    return name + ".gz" if use_gzip else name


def insert_top_level(
    src: BinaryIO, dst: BinaryIO, key: str, value: Any, extra: Mapping[str, Any] | None = None
) -> bool:
    """Copy the JSON object in `src` to `dst` with `"key": value` as its first member (then `extra`'s members, in
    order); False (copied unchanged) when `src` does not start with an object (leading white space allowed)."""
    head = src.read(CHUNK_BYTES)
    while head and not head.lstrip(_WS):  # white space only so far: read on to the first character
        more = src.read(CHUNK_BYTES)
        if not more:
            break
        head += more
    body = head.lstrip(_WS)
    if not body.startswith(b"{"):
        dst.write(head)
        shutil.copyfileobj(src, dst, CHUNK_BYTES)
        return False
    at = len(head) - len(body) + 1  # just past the opening brace
    rest = head[at:]
    while not rest.lstrip(_WS):  # white space only so far: read on to see whether the object is empty
        more = src.read(CHUNK_BYTES)
        if not more:
            break
        rest += more
    empty = rest.lstrip(_WS).startswith(b"}")
    members = {key: value, **(extra or {})}
    member = json.dumps(members, separators=(",", ":"), allow_nan=False)[1:-1].encode()
    dst.write(head[:at] + b"\n  " + member + (b"" if empty else b","))
    dst.write(rest)
    shutil.copyfileobj(src, dst, CHUNK_BYTES)
    return True


def write_window(
    export: Callable[[str], Any],
    out_dir: str,
    worker: str,
    key: str,
    value: Any,
    *,
    use_gzip: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Export one window (`export(tmp_json_path)`) and write `<out_dir>/<worker>.<ns>.pt.trace.json[.gz]` with `key`
    (and `extra`'s keys) at the top level; returns the path written. The temporary files are hidden (a leading dot, no `.pt.trace.json`
    in the name) and removed whatever happens."""
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f".{worker}.{os.getpid()}.{time.time_ns()}")
    raw, partial = stem + ".export.tmp", stem + ".partial.tmp"
    try:
        export(raw)
        final = os.path.join(out_dir, trace_file_name(worker, use_gzip))
        with open(raw, "rb") as src, open(partial, "wb") as out:
            # gzip.open's defaults (level 9), as tensorboard_trace_handler's export writes the file
            dst: BinaryIO = gzip.GzipFile(fileobj=out, mode="wb") if use_gzip else out  # type: ignore[assignment]
            with dst if use_gzip else contextlib.nullcontext():
                insert_top_level(src, dst, key, value, extra)
        os.replace(partial, final)
        return final
    finally:
        for path in (raw, partial):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
