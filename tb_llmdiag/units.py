"""Human text for numbers by the unit in their name (``_ns``, ``_share``, ``_bytes``): the one formatter
shared by finding summaries (rules) and the terminal renderer, so both print a value the same way."""

from __future__ import annotations

from typing import Any


def fmt_ns(ns: float | int | None) -> str:
    """Human duration: 1.23 s, 45.6 ms, 12.3 us, 800 ns; 'n/a' for unknown."""
    if ns is None:
        return "n/a"
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
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


def fmt_value(label: str, v: Any) -> str:
    """One value by the unit its label names; lists item by item (8 at most), 'none' when empty."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        if label.endswith("_ns"):
            return fmt_ns(v)
        if label.endswith("_share"):
            return fmt_share(v)
        if label.endswith("_bytes"):
            return fmt_bytes(v)
        return f"{v:.3g}" if isinstance(v, float) else str(v)
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt_value(label, x) for x in v[:8]) + (" ..." if len(v) > 8 else "") if v else "none"
    return str(v)
