"""The headline numbers (docs/report_schema.md Headline): what the tab's cards and the CLI's first lines show.

Each value is read from a metric topic (``docs/metrics.md``); unknown -> null.
- step_median/min/max_ns, step_cv: ``steps``; gpu_busy_share: ``idle.busy_share``;
- copy_share, gemm_share, copy_vs_gemm_ratio: ``kernels`` (copy = copy+memcpy; gemm = gemm+attention+conv);
- launches_per_step: ``launch``; mfu_share, tokens_per_s: ``flops``.
"""

from __future__ import annotations

from typing import Any

#: headline key -> (topic, key in topic)
HEADLINE_SOURCES: dict[str, tuple[str, str]] = {
    "step_median_ns": ("steps", "median_ns"),
    "step_min_ns": ("steps", "min_ns"),
    "step_max_ns": ("steps", "max_ns"),
    "step_cv": ("steps", "cv"),
    "gpu_busy_share": ("idle", "busy_share"),
    "copy_share": ("kernels", "copy_share"),
    "gemm_share": ("kernels", "gemm_share"),
    "copy_vs_gemm_ratio": ("kernels", "copy_vs_gemm_ratio"),
    "launches_per_step": ("launch", "launches_per_step"),
    "mfu_share": ("flops", "mfu_share"),
    "tokens_per_s": ("flops", "tokens_per_s"),
}


def headline(metrics: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, (topic, field) in HEADLINE_SOURCES.items():
        t = metrics.get(topic) or {}
        out[key] = t.get(field) if isinstance(t, dict) else None
    return out
