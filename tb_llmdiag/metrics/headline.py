"""The headline numbers (docs/report_schema.md Headline): what the tab's cards and the CLI's first lines show.

Each value is read from a metric topic (``docs/metrics.md``); unknown -> null.
- step_median/min/max_ns, step_cv: ``steps``; gpu_busy_share: ``idle.busy_share``;
- copy_share, gemm_share, copy_vs_gemm_ratio: ``kernels`` (copy = copy+memcpy; gemm = gemm+attention+conv);
- launches_per_step: ``launch``; mfu_share, tokens_per_s: ``flops``; generated_tokens_per_s,
  time_per_output_token_ns: ``inference`` (inference runs).

On XLA runs (``run.platform == "xla"``: XPlane traces, which hold the ``xla`` topic) the device numbers come from ``xla``, which classifies
ops by their HLO category / opcode instead of CUDA kernel names: gemm_share = ``xla.matmul_share``,
copy_share = ``xla.movement_share`` (data formatting + copies, what XLA's ``copy_heavy`` reads),
copy_vs_gemm_ratio = ``xla.matmul_vs_movement_ratio`` (movement / matmul time), gpu_busy_share =
``xla.device_duty_cycle_share`` (device busy / step time, averaged over devices), mfu_share =
``xla.flop_utilization_share`` (the compiler's op FLOPs against the trace's stated peak).
launches_per_step is null there: XLA launches whole compiled programs, so a count of runtime launch calls
per step says nothing about launch overhead.
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
    "generated_tokens_per_s": ("inference", "generated_tokens_per_s"),
    "time_per_output_token_ns": ("inference", "time_per_output_token_ns"),
}

#: on XLA runs (``run.platform``), these keys come from it instead (None: not measured there, null)
XLA_HEADLINE_SOURCES: dict[str, tuple[str, str] | None] = {
    "launches_per_step": None,
    "gpu_busy_share": ("xla", "device_duty_cycle_share"),
    "copy_share": ("xla", "movement_share"),
    "gemm_share": ("xla", "matmul_share"),
    "copy_vs_gemm_ratio": ("xla", "matmul_vs_movement_ratio"),
    "mfu_share": ("xla", "flop_utilization_share"),
}


def headline(metrics: dict[str, Any]) -> dict[str, Any]:
    sources: dict[str, tuple[str, str] | None] = dict(HEADLINE_SOURCES)
    if (metrics.get("run") or {}).get("platform") == "xla":
        sources.update(XLA_HEADLINE_SOURCES)
    out: dict[str, Any] = {}
    for key, src in sources.items():
        if src is None:
            out[key] = None
            continue
        topic, field = src
        t = metrics.get(topic) or {}
        out[key] = t.get(field) if isinstance(t, dict) else None
    return out
