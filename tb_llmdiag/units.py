"""Human text for numbers by their unit: the one formatter shared by finding summaries and the terminal
renderer, so both print a value the same way. ``fmt(unit, value)`` takes a unit of the metric registry's
vocabulary (``tb_llmdiag.metrics.registry.UNITS``); ``fmt_value(label, value)`` guesses it from a key's
suffix (``_ns``, ``_share``, ``_bytes``) where no registry key is known. Durations use "µs", never "us";
ids and indexes are printed whole, never abbreviated."""

from __future__ import annotations

from typing import Any


def fmt_ns(ns: float | int | None) -> str:
    """Human duration: 1.23 s, 45.6 ms, 12.3 µs, 800 ns; 'n/a' for unknown."""
    if ns is None:
        return "n/a"
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def fmt_share(x: float | None) -> str:
    """A fraction 0..1 as a percentage: 12.3 %."""
    return "n/a" if x is None else f"{100 * x:.1f} %"


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


#: registry unit -> formatter of one number (units not listed: plain numbers, 3 significant digits for floats)
_BY_UNIT = {"ns": fmt_ns, "share": fmt_share, "bytes": fmt_bytes, "bytes_per_s": fmt_bytes_per_s}
#: units printed whole: ids and step numbers are names, never rounded or abbreviated
_WHOLE = frozenset({"index", "id"})


def fmt(unit: str, v: Any) -> str:
    """One value in its registry unit; lists item by item (8 at most), 'none' when empty; 'n/a' for unknown."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt(unit, x) for x in v[:8]) + (" ..." if len(v) > 8 else "") if v else "none"
    if isinstance(v, (int, float)):
        if unit in _BY_UNIT:
            return _BY_UNIT[unit](v)
        if unit in _WHOLE:
            return str(int(v)) if float(v).is_integer() else str(v)
        return f"{v:.3g}" if isinstance(v, float) else str(v)
    return str(v)


def unit_from_name(label: str) -> str:
    """The unit a key's suffix names (``_ns``, ``_share``, ``_bytes``), else ``ratio`` (a plain number)."""
    for suffix, unit in (("_ns", "ns"), ("_share", "share"), ("_bytes", "bytes")):
        if label.endswith(suffix):
            return unit
    return "ratio"


def fmt_value(label: str, v: Any) -> str:
    """One value by the unit its label names (``unit_from_name``); see ``fmt``."""
    return fmt(unit_from_name(label), v)
