"""Hardware counters a capture holds: CUPTI range-profiler records and counter tracks, summed per counter.

Two kinds of records carry them (a second, small pass over the pieces that contain them, like ``comm_args.py``):
- ``cuda_profiler_range`` complete events (torch.profiler with CUPTI profiler metrics, ``experimental_config``): one
  per kernel, the counters in ``args`` (``smsp__sass_thread_inst_executed_op_ffma_pred_on.sum``...);
- counter events (``"ph": "C"``): a track (``name``, e.g. on a ``GPU 0 Counters`` process) whose ``args`` hold one
  sample per series (SM activity, tensor-pipe activity...).

Contract:
- ``CounterArgs.after_piece(buf, end)``: adds the numeric args of every such record in ``buf[:end]``; non-numeric
  values are skipped, never raised.
- ``CounterArgs.summary()``: ``{counter: (samples, sum)}`` with counter ``range:<arg>`` for profiler ranges and
  ``<track>:<series>`` for counter tracks; empty when none.
"""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(rb'"name"\s*:\s*"([^"\\]{0,200})"')
_ARGS = re.compile(rb'"args"\s*:\s*\{([^{}]{0,65536})\}')
_NUM = re.compile(rb'"([^"\\]{1,200})"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*[,}]')
_NEEDLES = (b'"cuda_profiler_range"', b'"ph": "C"', b'"ph":"C"')
_MAX_EVENT_BYTES = 1 << 17
#: at most this many distinct counters are kept (a trace with more keeps the first ones)
MAX_COUNTERS = 256


class CounterArgs:
    """Accumulates the counter records of one trace's pieces (module docstring)."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}  # counter -> [samples, sum]

    def __len__(self) -> int:
        return len(self.totals)

    @staticmethod
    def wanted(buf: Any, end: int) -> bool:
        """Whether ``buf[:end]`` may hold counter records: literal searches only (a regex would try every event's
        ``"ph"``), for the two spacings writers use."""
        return any(buf.find(needle, 0, end) >= 0 for needle in _NEEDLES)

    def after_piece(self, buf: Any, end: int) -> None:
        for needle in _NEEDLES:
            kind = "range" if needle == _NEEDLES[0] else "track"
            at = buf.find(needle, 0, end)
            while at >= 0:
                self._event(buf, at, end, kind)
                at = buf.find(needle, at + len(needle), end)

    def _event(self, buf: Any, at: int, end: int, kind: str) -> None:
        lo = buf.rfind(b"{", max(0, at - _MAX_EVENT_BYTES), at)
        args = _ARGS.search(buf, at, min(end, at + _MAX_EVENT_BYTES)) if lo >= 0 else None
        if args is None:
            return
        prefix = "range"
        if kind == "track":
            name = _NAME.search(buf, lo, args.start())
            prefix = name.group(1).decode("ascii", "replace") if name else "counter"
        for key, val in _NUM.findall(args.group(1) + b"}"):
            self._add(f"{prefix}:{key.decode('ascii', 'replace')}", float(val))

    def _add(self, counter: str, value: float) -> None:
        t = self.totals.get(counter)
        if t is None:
            if len(self.totals) >= MAX_COUNTERS:
                return
            t = self.totals[counter] = [0.0, 0.0]
        t[0] += 1
        t[1] += value

    def summary(self) -> dict[str, tuple[int, float]]:
        return {k: (int(n), s) for k, (n, s) in self.totals.items()}
