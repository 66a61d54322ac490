"""Hardware counters a capture holds: CUPTI range-profiler records and counter tracks, summed per counter.

Two kinds of records carry them (a second, small pass over the pieces that contain them, like ``comm_args.py``):
- ``cuda_profiler_range`` complete events (torch.profiler with CUPTI profiler metrics, ``experimental_config``): one
  per kernel, the counters in ``args`` (``smsp__sass_thread_inst_executed_op_ffma_pred_on.sum``...);
- counter events (``"ph": "C"``): a track (``name``, e.g. on a ``GPU 0 Counters`` process) whose ``args`` hold one
  sample per series (SM activity, tensor-pipe activity...).

Cost: profiler ranges are searched for only once their category has been seen (the reader's category table, no
text search); Kineto's counter events (``"ph": "C"``) in the first ``TRACK_PIECES`` pieces, and in every piece after one was found (counter
samples run through the whole capture in time order: a capture with none in its first pieces is taken to have none).
Contract:
- ``CounterArgs.after_piece(buf, end, categories)``: adds the numeric args of every such record in ``buf[:end]``;
  non-numeric values are skipped, never raised. ``categories``: the categories seen so far (a container).
- ``CounterArgs.summary()``: ``{counter: (samples, sum)}`` with counter ``range:<arg>`` for profiler ranges and
  ``<track>:<series>`` for counter tracks; empty when none.
"""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(rb'"name"\s*:\s*"([^"\\]{0,200})"')
_ARGS = re.compile(rb'"args"\s*:\s*\{([^{}]{0,65536})\}')
_NUM = re.compile(rb'"([^"\\]{1,200})"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*[,}]')
RANGE_CATEGORY = "cuda_profiler_range"
_RANGE_NEEDLE = b'"cuda_profiler_range"'
_TRACK_NEEDLES = (b'"ph": "C"',)  # as Kineto writes it
#: counter events are looked for in this many first pieces (2 MiB each), then only once found
TRACK_PIECES = 2
_MAX_EVENT_BYTES = 1 << 17
#: at most this many distinct counters are kept (a trace with more keeps the first ones)
MAX_COUNTERS = 256


class CounterArgs:
    """Accumulates the counter records of one trace's pieces (module docstring)."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}  # counter -> [samples, sum]
        self.pieces = 0
        self.ranges = False  # the range category was seen
        self.tracks = False  # a counter event was found

    def __len__(self) -> int:
        return len(self.totals)

    def after_piece(self, buf: Any, end: int, categories: Any) -> None:
        self.pieces += 1
        if not self.ranges and RANGE_CATEGORY in categories:
            self.ranges = True
        if self.ranges:
            self._scan(buf, end, _RANGE_NEEDLE, "range")
        if self.tracks or self.pieces <= TRACK_PIECES:
            for needle in _TRACK_NEEDLES:
                if self._scan(buf, end, needle, "track"):
                    self.tracks = True

    def _scan(self, buf: Any, end: int, needle: bytes, kind: str) -> bool:
        at = buf.find(needle, 0, end)
        found = at >= 0
        while at >= 0:
            self._event(buf, at, end, kind)
            at = buf.find(needle, at + len(needle), end)
        return found

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
