"""Human text for numbers by their unit: the one formatter shared by finding summaries and the terminal
renderer, so both print a value the same way. ``fmt(unit, value)`` takes a unit of the metric registry's
vocabulary (``tb_llmdiag.metrics.registry.UNITS``); ``fmt_value(label, value)`` guesses it from a key's
suffix (``_ns``, ``_share``, ``_bytes``) where no registry key is known. Durations use "µs", never "us";
ids and indexes are printed whole, never abbreviated."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def fmt_ns(ns: float | int | None) -> str:
    """Human duration: 1.23 s, 45.6 ms, 12.3 µs, 800 ns; 'n/a' for unknown."""
    if ns is None:
        return "n/a"
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{sig(ns / scale)} {unit}"
    return f"{math.floor(ns + 0.5):.0f} ns"


def fmt_share(x: float | None) -> str:
    """A fraction 0..1 as a percentage: 12.3 %; "<0.1 %" for a small non-zero one (as the tab's fmtShare)."""
    if x is None:
        return "n/a"
    p = 100 * float(x)
    return "<0.1 %" if p != 0 and abs(p) < 0.1 else f"{p:.1f} %"


def _trim(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text


def sig(x: float | int) -> str:
    """3 significant digits, no trailing zeros, never an exponent above 0.01: 12.30 -> 12.3, 1234 -> 1234
    (the tab's ``sig`` in frontend/format.js, digit for digit)."""
    x = float(x)
    a = abs(x)
    if a >= 100:
        return str(int(math.floor(x + 0.5)))
    if a >= 10:
        return _trim(f"{x:.1f}")
    if a >= 0.01 or a == 0:
        return _trim(f"{x:.2f}")
    return _trim(f"{x:.2g}")


def fmt_count(x: float | int | None) -> str:
    """Counts: in full below 10 000, then 14.8 k, 2.5 M; fractions to 3 significant digits (the tab's fmtCount)."""
    if x is None:
        return "n/a"
    if abs(x) >= 1e6:
        return f"{sig(x / 1e6)} M"
    if abs(x) >= 1e4:
        return f"{sig(x / 1e3)} k"
    return str(int(x)) if float(x).is_integer() else sig(x)


def fmt_flop(x: float | int | None) -> str:
    """Floating-point operations with SI prefixes: 3.2e14 -> 320 TFLOP (the tab's fmtFlop)."""
    if x is None:
        return "n/a"
    v, i = float(x), 0
    while abs(v) >= 1000 and i < 6:
        v, i = v / 1000, i + 1
    return f"{sig(v)} {['', 'k', 'M', 'G', 'T', 'P', 'E'][i]}FLOP"


def fmt_bytes(n: float | int | None) -> str:
    """Binary units: 512 B, 1.5 KiB, 17.6 GiB."""
    if n is None:
        return "n/a"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def fmt_bytes_per_s(n: float | int | None) -> str:
    """A rate in binary units: 4.1 GiB/s."""
    return "n/a" if n is None else fmt_bytes(n) + "/s"


#: registry unit -> formatter of one number (units not listed: plain numbers, 3 significant digits for floats);
#: the same text as the tab's formatValue (frontend/format.js) for every unit
_BY_UNIT: dict[str, Callable[[Any], str]] = {
    "ns": fmt_ns,
    "share": fmt_share,
    "bytes": fmt_bytes,
    "bytes_per_s": fmt_bytes_per_s,
    "count": fmt_count,
    "count_per_step": fmt_count,
    "per_s": lambda v: fmt_count(v) + "/s",
    "flop": fmt_flop,
    "flop_per_s": lambda v: fmt_flop(v) + "/s",
    "tflop_per_s": lambda v: fmt_flop(v * 1e12) + "/s",
    "ratio": sig,
}
#: units printed whole: ids and step numbers are names, never rounded or abbreviated
_WHOLE = frozenset({"index", "id"})


def fmt(unit: str, v: Any) -> str:
    """One value in its registry unit; lists item by item (8 at most), 'none' when empty; 'n/a' for unknown."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        more = f", … ({len(v) - 8} more)" if len(v) > 8 else ""
        return ", ".join(fmt(unit, x) for x in v[:8]) + more if v else "none"
    if isinstance(v, (int, float)):
        if unit in _BY_UNIT:
            return _BY_UNIT[unit](v)
        if unit in _WHOLE:
            return str(int(v)) if float(v).is_integer() else str(v)
        return sig(v) if isinstance(v, float) else str(v)
    return str(v)


def fmt_interval(unit: str, v: Any) -> str:
    """An interval [lo, hi] in its registry unit: "40.1 % – 52.3 %" (as the tab's ``formatInterval``); 'n/a' for
    anything but a pair."""
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        return "n/a"
    return f"{fmt(unit, v[0])} – {fmt(unit, v[1])}"


def unit_from_name(label: str) -> str:
    """The unit a key's suffix names (``_ns``, ``_share``, ``_bytes``), else ``ratio`` (a plain number)."""
    for suffix, unit in (("_ns", "ns"), ("_share", "share"), ("_bytes", "bytes")):
        if label.endswith(suffix):
            return unit
    return "ratio"


def fmt_value(label: str, v: Any) -> str:
    """One value by the unit its label names (``unit_from_name``); see ``fmt``."""
    return fmt(unit_from_name(label), v)
