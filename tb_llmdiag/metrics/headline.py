"""The headline numbers (docs/report_schema.md Headline): what the tab's cards and the CLI's first lines show.

Each value is read from a metric topic (``docs/metrics.md``); unknown -> null.
- step_median/min/max_ns, step_cv: ``steps``; gpu_busy_share: ``idle.busy_share``;
- copy_share, gemm_share, copy_vs_gemm_ratio: ``kernels`` (copy = copy+memcpy; gemm = gemm+attention+conv);
- launches_per_step: ``launch``; mfu_share: ``flops``; tokens_per_s: ``flops.median_step_tokens_per_s`` (the median
  step's, the basis of the step time and the what-if); generated_tokens_per_s,
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

from tb_llmdiag.metrics.entry import HIGHER, LOWER, NEITHER, NS, PER_S, PER_STEP, RATIO, SHARE, Entry, Intro

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
    "tokens_per_s": ("flops", "median_step_tokens_per_s"),
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


# The registry's entries of the `headline` section: one row per key (metrics/entry.py); metrics/registry.py collects
# them, docs/metrics.md is generated from them.
#: docs/metrics.md: the section's title and the prose before its table
INTRO: Intro = (
    "`headline` (metrics/headline.py)",
    "`step_median_ns`, `step_min_ns`, `step_max_ns`, `step_cv` from `steps`; `gpu_busy_share` = `idle.busy_share`;\n`copy_share`, `gemm_share`, `copy_vs_gemm_ratio` from `kernels`; `launches_per_step` from `launch`;\n`mfu_share` from `flops`; `tokens_per_s` = `flops.median_step_tokens_per_s` (the median step's, as the step time and the what-if).\n\nOn XLA runs (`run.platform` is `xla`: XPlane traces, which hold the `xla` topic) the device numbers come from `xla`, which classifies ops by\nHLO category / opcode rather than CUDA kernel names: `gemm_share` = `xla.matmul_share`, `copy_share` =\n`xla.movement_share` (data formatting + copies, what XLA's `copy_heavy` reads), `copy_vs_gemm_ratio` =\n`xla.matmul_vs_movement_ratio` (movement / matmul time), `gpu_busy_share` = `xla.device_duty_cycle_share`,\n`mfu_share` = `xla.flop_utilization_share`; null when the `xla` topic lacks them (never the kernel-name numbers).\n`launches_per_step` is null on XPlane runs: XLA launches whole compiled programs (and on GPU a handful of\nruntime calls per program), so launch calls per step say nothing about launch overhead there.\nOn the synthetic TPU capture `gemm_share` is 9600 / 14655 = 0.655 (the kernel-name classification said 0.368).",
)

# a declared table, one entry per row: left as laid out
# fmt: off
ENTRIES: tuple[Entry, ...] = (
    ("headline.copy_share", SHARE, LOWER, 0.1, "copy", "`kernels.copy_share` (XPlane: `xla.movement_share`)"),
    ("headline.copy_vs_gemm_ratio", RATIO, LOWER, 0.1, "copy vs GEMM",
     "`kernels.copy_vs_gemm_ratio` (XPlane: `xla.matmul_vs_movement_ratio`)"),
    ("headline.gemm_share", SHARE, NEITHER, 0.1, "GEMM", "`kernels.gemm_share` (XPlane: `xla.matmul_share`)"),
    ("headline.gpu_busy_share", SHARE, HIGHER, 0.1, "GPU busy",
     "`idle.busy_share`: device busy without collective kernels (report schema 3 on) / step time (XPlane: `xla.device_duty_cycle_share`)"),
    ("headline.launches_per_step", PER_STEP, NEITHER, 0.05, "launches per step",
     "`launch.launches_per_step` (null on XPlane runs`)"),
    ("headline.mfu_share", SHARE, HIGHER, 0.1, "MFU", "`flops.mfu_share` (XPlane: `xla.flop_utilization_share`)"),
    ("headline.step_cv", RATIO, LOWER, 0.1, "step variation (CV)", "`steps.cv`"),
    ("headline.step_max_ns", NS, LOWER, 0.05, "slowest step", "`steps.max_ns`"),
    ("headline.step_median_ns", NS, LOWER, 0.05, "median step", "`steps.median_ns`"),
    ("headline.step_min_ns", NS, LOWER, 0.05, "fastest step", "`steps.min_ns`"),
    ("headline.tokens_per_s", PER_S, HIGHER, 0.05, "tokens/s",
     "`flops.median_step_tokens_per_s`: the median step's token slots (`steps.tokens_per_step_median`) / the median "
     "step (`steps.median_ns`); the run's one tokens/s, on the median step as the step time, the savings and the "
     "what-if (which scales it)"),
    ("headline.generated_tokens_per_s", PER_S, HIGHER, 0.05, "generated tokens/s",
     "inference: `inference.generated_tokens_per_s` (tokens the decode steps generate / their time); null otherwise"),
    ("headline.time_per_output_token_ns", NS, LOWER, 0.05, "time per output token",
     "inference: `inference.time_per_output_token_ns`; null otherwise"),
)
# fmt: on
