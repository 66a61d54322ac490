"""Figures as the run report and the tab print them, written out here without the product's formatter (#25: one
format in the verdict, the tables and the cards): a rate whole below 10 000 a second (1954/s), then three
significant digits with k or M (11.6 k/s, 354 k/s, 1.25 M/s); a duration to three significant digits in s, ms or
µs (575 ms, 86.3 µs); a share of the step to 0.1 % (64.4 %)."""

from __future__ import annotations


def _three(x: float) -> str:
    digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2
    text = f"{x:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def per_s(v: float) -> str:
    for scale, prefix in ((1e6, "M"), (1e4, "k")):
        if abs(v) >= scale:
            x = v / (scale if prefix == "M" else 1e3)
            return f"{_three(x)} {prefix}/s"
    return f"{v:.0f}/s" if float(v).is_integer() or abs(v) >= 100 else f"{v:.3g}/s"


def duration(ns: float) -> str:
    scale, unit = next(((s, u) for s, u in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")) if abs(ns) >= s), (1, "ns"))
    return f"{_three(ns / scale)} {unit}" if unit != "ns" else f"{ns:.0f} ns"


def share(x: float) -> str:
    return f"{100 * x:.1f} %"


assert [duration(v) for v in (575.2e6, 86_260, 1.5e9, 26.04e6)] == ["575 ms", "86.3 µs", "1.5 s", "26 ms"]
assert [per_s(v) for v in (1954.3, 11592.9, 353632.4, 40960, 1.25e6, 10000)] == [
    "1954/s", "11.6 k/s", "354 k/s", "41 k/s", "1.25 M/s", "10 k/s"]
