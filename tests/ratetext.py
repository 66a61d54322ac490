"""A rate as the run report and the tab print it, written out here without the product's formatter (#25: one
format in the verdict, the tables and the cards): whole below 10 000 a second (1954/s), then three significant
digits with k or M (11.6 k/s, 354 k/s, 1.2 M/s)."""

from __future__ import annotations


def per_s(v: float) -> str:
    for scale, prefix in ((1e6, "M"), (1e4, "k")):
        if abs(v) >= scale:
            x = v / (scale if prefix == "M" else 1e3)
            digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2
            text = f"{x:.{digits}f}"
            return (text.rstrip("0").rstrip(".") if "." in text else text) + f" {prefix}/s"
    return f"{v:.0f}/s" if float(v).is_integer() or abs(v) >= 100 else f"{v:.3g}/s"


assert [per_s(v) for v in (1954.3, 11592.9, 353632.4, 40960, 1.25e6, 10000)] == [
    "1954/s", "11.6 k/s", "354 k/s", "41 k/s", "1.25 M/s", "10 k/s"]
