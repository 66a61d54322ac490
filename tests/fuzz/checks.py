"""The values no RunReport may hold (#27), checked at the report boundary by the fuzzer (tests/fuzz/fuzz_readers.py)
and the property tests over both readers (tests/test_validate.py). Shares by unit name, independent of the product.

- every ``*_share`` (and ``share``) number in [0, 1]; every ``*_ns`` duration >= 0 (positions on the trace's time
  axis, ``start_ns``/``end_ns``/``ts_ns``..., may be anything the trace says);
- the summary's window and every step duration >= 0; no NaN or infinity anywhere in the JSON text.
"""

from __future__ import annotations

import json
from typing import Any

#: the exit code the CLI gives a report of each status (README: 0 ok, 6 partial, 7 writing, 4 error)
EXIT_OF_STATUS = {"ok": 0, "partial": 6, "writing": 7, "error": 4}
#: *_ns keys that are positions on the time axis, not durations
POSITIONS = frozenset({"ts_ns", "start_ns", "end_ns", "host_start_ns", "host_end_ns", "origin_ns", "member_end_ns",
                       "start_offset_ns", "offset_ns", "profile_start_time_ns", "profile_stop_time_ns",
                       "base_time_ns"})
_EPS = 1e-9


def _bad_number(key: str, v: float) -> str | None:
    if (key.endswith("_share") or key == "share") and not -_EPS <= v <= 1 + _EPS:
        return f"{key}={v}"
    if key.endswith("_ns") and key not in POSITIONS and v < 0:
        return f"{key}={v}"
    return None


def impossible(report: dict[str, Any], text: str | None = None) -> str | None:
    """What is impossible in a RunReport (``text``: its JSON as rendered), or None."""
    if text is not None:
        try:
            json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError:
            return "NaN or infinity in the report JSON"
    stack: list[tuple[Any, str]] = [(report.get(k), k) for k in ("summary", "headline", "metrics", "findings", "what_if")]
    while stack:
        v, key = stack.pop()
        if isinstance(v, dict):
            stack.extend((x, k) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, key) for x in v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            bad = _bad_number(key, v)
            if bad:
                return bad
    return None
