"""The Python source of a trace range: the ``python_function`` frames (``with_stack=True``) around it.

``source_of(trace, name, (start_ns, end_ns))``: the host event named ``name`` at that range (else any host event
there), and the Python frames of its thread that enclose it, innermost first; ``line`` is the innermost frame in the
user's own code (not a library under ``site-packages``, ``torch/`` or a built-in), else the innermost frame. None
when the trace recorded no Python frames there (``with_stack=False``, the default).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.model import Kind, Trace

MAX_FRAMES = 8
_LIBRARY = ("site-packages", "dist-packages", "torch/", "<built-in", "lib/python", "threading.py")


def source_of(trace: Trace, name: str | None, rng: list[int] | tuple[int, int]) -> dict[str, Any] | None:
    """Module docstring."""
    ev = trace.events
    start, end = int(rng[0]), int(rng[1])
    py = ev.kind == int(Kind.PYTHON)
    if not py.any():
        return None
    at = np.flatnonzero((ev.ts_ns == start) & (ev.ts_ns + ev.dur_ns == end) & (ev.device < 0) & ~py)
    if name is not None and name in ev.names and at.size:
        named = at[ev.name_id[at] == ev.names.index(name)]
        at = named if named.size else at
    if not at.size:
        return None
    tid = ev.tid[int(at[0])]
    around = np.flatnonzero(py & (ev.tid == tid) & (ev.ts_ns <= start) & (ev.ts_ns + ev.dur_ns >= end))
    if not around.size:
        return None
    inner = around[np.argsort(ev.dur_ns[around], kind="stable")]
    frames = [ev.names[int(ev.name_id[i])] for i in inner[:MAX_FRAMES]]
    allnames = [ev.names[int(ev.name_id[i])] for i in inner]
    line = next((f for f in allnames if not any(k in f for k in _LIBRARY)), frames[0])
    return {"line": line, "frames": frames}
