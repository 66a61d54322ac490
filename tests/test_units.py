"""The one value formatter that finding summaries and the terminal report share."""

from __future__ import annotations

from tb_llmdiag.units import fmt, fmt_bytes, fmt_ns, fmt_share, fmt_value


def test_each_unit() -> None:
    assert [fmt_ns(v) for v in (800, 1_500, 4_420, 2_500_000, 3e9, None)] == [
        "800 ns", "1.5 µs", "4.42 µs", "2.5 ms", "3 s", "n/a"]
    assert [fmt_share(v) for v in (0.123, 0.0, 1.0, None)] == ["12.3 %", "0.0 %", "100.0 %", "n/a"]
    assert [fmt_bytes(v) for v in (512, 1536, 3 << 30, 5 << 40)] == ["512 B", "1.5 KiB", "3.0 GiB", "5.0 TiB"]


def test_values_by_label() -> None:
    assert fmt_value("x_share", 0.123) == "12.3 %" and fmt_value("x_ns", 2_500_000) == "2.5 ms"
    assert fmt_value("x_bytes", 3 << 30) == "3.0 GiB" and fmt_value("n", None) == "n/a"
    assert fmt_value("ok", True) == "yes" and fmt_value("cv", 0.4963) == "0.5" and fmt_value("count", 7) == "7"
    assert fmt_value("steps", [3, 7]) == "3, 7" and fmt_value("steps", []) == "none"
    assert fmt_value("x_ns", list(range(10))) == "0 ns, 1 ns, 2 ns, 3 ns, 4 ns, 5 ns, 6 ns, 7 ns, … (2 more)"


def test_values_by_registry_unit() -> None:
    """``fmt`` takes the registry's unit: ids and step numbers whole, never "104 k" or 1.04e+05."""
    assert fmt("id", 103869) == "103869" and fmt("index", 104000) == "104000" and fmt("index", 3.0) == "3"
    assert fmt("ns", 12_300) == "12.3 µs" and fmt("share", 0.5) == "50.0 %" and fmt("bytes", 1536) == "1.5 KiB"
    assert fmt("ratio", 0.4963) == "0.5" and fmt("ratio", 12.34) == "12.3" and fmt("count", 7) == "7" and fmt("text", "jit_step") == "jit_step"
    assert fmt("index", [3, 7]) == "3, 7" and fmt("ns", None) == "n/a" and fmt("flag", False) == "no"


def test_counts_and_rates_read_as_the_tab_writes_them() -> None:
    """#25: "5.82e+03 launches" in the text beside "5816" on the card; now both write 5816, then 14.8 k."""
    assert [fmt("count_per_step", v) for v in (5816, 31_915.0, 2_500_000, 0.333)] == ["5816", "31.9 k", "2.5 M", "0.33"]
    assert fmt("per_s", 63_736.2) == "63.7 k/s" and fmt("share", 0.0004) == "<0.1 %"


def test_fmt_interval_writes_a_pair_in_its_unit() -> None:
    from tb_llmdiag.units import fmt_interval

    assert fmt_interval("share", [0.401, 0.523]) == "40.1 % – 52.3 %"
    assert fmt_interval("ns", (12_345, 2_150_000)) == "12.3 µs – 2.15 ms"
    assert [fmt_interval("share", v) for v in (None, [0.1], [0.1, 0.2, 0.3], 0.5)] == ["n/a"] * 4
