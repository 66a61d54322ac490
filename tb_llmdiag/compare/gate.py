"""``llmdiag check``: a comparison turned into pass / fail for CI.

A metric regressed when all hold (``core.metric_row``): it is gated (better ``lower`` or ``higher`` in the
registry), both runs did the same work per step where that matters, it moved the worse way by more than its
tolerance, and its noise band (when the per-step values allow one) excludes no change. A check that cannot
judge the primary throughput metric (no steps on a side) fails too, saying why: a gate that judged nothing
must not pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tb_llmdiag.compare.core import COMPARE_SCHEMA
from tb_llmdiag.compare.verdict import regression_line


def check(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``{"schema", "kind": "check", "passed", "judged", "unjudged", "regressions": [...], "compare": doc}``."""
    primary = next((r for r in doc["metrics"] if r["key"] == doc["work"]["primary"]), None)
    unjudged = None
    if primary is None or not primary["comparable"]:
        unjudged = (
            f"{doc['work']['primary']} is not known on both sides (no steps found?): "
            "profile with torch.profiler's schedule so ProfilerStep#N markers are recorded"
        )
    regressions = [
        {
            "key": r["key"],
            "label": r["label"],
            "unit": r["unit"],
            "before": r["before"],
            "after": r["after"],
            "change": r["change"],
            "tolerance": r["tolerance"],
            "band_lo_change": (r["noise"] or {}).get("band_lo_change"),
            "band_hi_change": (r["noise"] or {}).get("band_hi_change"),
            "line": regression_line(r),
        }
        for r in doc["metrics"]
        if r["regressed"]
    ]
    judged = sum(1 for r in doc["metrics"] if r["gated"] and r["comparable"])
    return {
        "schema": COMPARE_SCHEMA,
        "kind": "check",
        "passed": not regressions and unjudged is None,
        "judged": judged,
        "unjudged": unjudged,
        "regressions": regressions,
        "compare": doc,
    }
