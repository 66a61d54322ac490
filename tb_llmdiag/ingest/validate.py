"""One validation layer for the numbers both readers take from a trace (#27): times and durations.

A row is rejected, and counted by reason, when it has no usable time, a device row has no usable duration
(``"dur": "x"`` or ``null`` on a kernel is not 0 us), its duration is negative, or its time or duration lies
beyond ``LIMIT_NS`` (relative times and ends then stay within int64 ns whatever the origin). The Kineto reader
applies the same tests per piece in ``_rows.c`` / ``kineto/columns.append_rows_py`` (float us, against
``LIMIT_US``); the XPlane reader through ``screen_ns`` (int64 ns from int64 ps offsets that may overflow).

What was rejected then decides the report (``Rejected.verdict``): every reason is a counted warning; when the
rejected rows are a large share of the trace (``PARTIAL_SHARE``) or include device work while none is left,
the trace is read as partial (``read_state.complete`` false with a reason naming what was dropped), so the
report is ``partial`` (exit 6), rules that need the whole file (``no_device_activity``) do not run, and
nothing says "no GPU activity" about a trace whose kernels all carried impossible numbers.

How many events a trace may hold at all is bounded here too (``MAX_EVENTS``, ``LLMDIAG_MAX_EVENTS``): both readers
call ``check_event_count`` as they go, so a trace past the bound stops early with one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.errors import TraceFormatError

#: |time| and duration beyond this many ns are rejected (~73 years): relative times and ends stay in int64 ns
LIMIT_NS = 2.0**61
LIMIT_US = LIMIT_NS / 1000
#: rejected rows at or above this share of all rows make the read partial
PARTIAL_SHARE = 0.05

_YEARS = LIMIT_NS / 1e9 / 3600 / 24 / 365
#: Events a trace may hold (#27): each costs ~180 bytes through the analysis, so a trace past this stops with a
#: one-line message rather than taking the machine's memory (8 M events: ~1.5 GB; the 1 GB bench trace holds 3.2 M).
MAX_EVENTS = int(os.environ.get("LLMDIAG_MAX_EVENTS", str(8_000_000)))


def check_event_count(n: int) -> None:
    """Raise TraceFormatError once a reader holds more than MAX_EVENTS events."""
    if n > MAX_EVENTS:
        raise TraceFormatError(
            f"the trace holds over {MAX_EVENTS:,} events (about {MAX_EVENTS * 180 / 1e9:.1f} GB to analyse): refused "
            "(set LLMDIAG_MAX_EVENTS to raise the bound, or profile fewer steps)"
        )


@dataclass
class Rejected:
    """Rows rejected so far, by reason; ``device``: how many of them were device rows (kernels, copies).
    ``unreadable``: events the Kineto decoder skipped before any row was made (a value of the wrong type, a number
    beyond float64 such as ``"dur": 1e400``); the decoder words their warning itself, they count in the verdict."""

    no_ts: int = 0
    no_dur: int = 0
    negative_dur: int = 0
    out_of_range: int = 0
    device: int = 0
    unreadable: int = 0

    def add(
        self,
        no_ts: int = 0,
        no_dur: int = 0,
        negative_dur: int = 0,
        out_of_range: int = 0,
        device: int = 0,
        unreadable: int = 0,
    ) -> None:
        self.no_ts += no_ts
        self.no_dur += no_dur
        self.negative_dur += negative_dur
        self.out_of_range += out_of_range
        self.device += device
        self.unreadable += unreadable

    @property
    def total(self) -> int:
        """Rows the time and duration tests rejected (``unreadable`` events not counted)."""
        return self.no_ts + self.no_dur + self.negative_dur + self.out_of_range

    def warnings(self) -> list[str]:
        """One counted line per reason."""
        lines = [
            (self.no_ts, "events without a usable timestamp were skipped"),
            (self.no_dur, "device events (kernels, copies) without a usable duration were rejected"),
            (self.negative_dur, "events with a negative duration were rejected"),
            (self.out_of_range, f"events with a time or duration beyond {_YEARS:,.0f} years were rejected"),
        ]
        return [f"{n} {what}" for n, what in lines if n]

    def verdict(self, kept_rows: int, kept_device_rows: int) -> str | None:
        """The reason the read counts as partial, or None: the rejected rows (unreadable events included) are
        PARTIAL_SHARE or more of all rows, or device rows were rejected and none is left."""
        total = self.total + self.unreadable
        if not total:
            return None
        share = total / (total + kept_rows)
        every_device = self.device > 0 and kept_device_rows == 0
        if share < PARTIAL_SHARE and not every_device:
            return None
        unreadable = [f"{self.unreadable} events of an unexpected shape were skipped"] if self.unreadable else []
        what = "; ".join(self.warnings() + unreadable)
        if every_device:
            return f"all {self.device:,} device events were rejected ({what}); the report covers the host events only"
        return f"{total:,} of {total + kept_rows:,} events ({share:.0%}) were rejected for impossible numbers ({what})"

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def screen_ns(
    base_ns: int, offset_ps: NDArray[np.int64], dur_ps: NDArray[np.int64], device: bool, rejected: Rejected
) -> NDArray[np.bool_]:
    """Which XPlane rows to keep (``base_ns + offset_ps / 1000`` and ``dur_ps / 1000`` within LIMIT_NS, durations
    not negative), counting the others into ``rejected``. Tested in float64 so int64 overflow cannot wrap a time
    into range."""
    start = float(base_ns) + offset_ps.astype(np.float64) / 1000
    dur = dur_ps.astype(np.float64) / 1000
    negative = dur < 0
    outside = ~negative & ((np.abs(start) > LIMIT_NS) | (dur > LIMIT_NS) | (np.abs(start + dur) > LIMIT_NS))
    keep = ~(negative | outside)
    n_bad = int(keep.size - keep.sum())
    if n_bad:
        rejected.add(negative_dur=int(negative.sum()), out_of_range=int(outside.sum()), device=n_bad if device else 0)
    return keep


def read_state_with(
    read_state: dict[str, Any], rejected: Rejected, kept_rows: int, kept_device_rows: int
) -> dict[str, Any]:
    """``read_state`` made partial (complete false, the reason, ``rejected_events``: how many) when
    ``rejected.verdict`` says so; a read that already stopped early keeps its own reason (the rejections are in the
    warnings)."""
    reason = rejected.verdict(kept_rows, kept_device_rows)
    if reason is None or not read_state.get("complete", True):
        return read_state
    return {**read_state, "complete": False, "reason": reason, "rejected_events": rejected.total + rejected.unreadable}
