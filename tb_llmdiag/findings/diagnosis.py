"""Diagnosis: the ranked findings of a run and what fixing them would give.

Contract:
- ``diagnose(metrics, rules=RULES) -> (findings, what_if)``: ``evaluate`` (``findings/engine.py``), then
  ``whatif.apply_in_sequence``: each finding's one ``saving`` (#25): what it takes off the median step (the mean
  step for causes only slower steps have) in sequence (applied by each rule's own share), never more than fixing it
  alone; findings ranked by severity then that saving, severity from it: both decided there only.
- ``what_if``: the top finding's own saving as a what-if, and all findings' causes removed, as bounds
  that never go below the GPU's compute floor, nor, for a fix of GPU time, the host floor; tokens/s beside step time (``findings/whatif.py``,
  ``docs/whatif.md``). Null without steps.
- The profiler's own cost (``findings/trust.py``): host-time findings carry a ``caveat`` when it could account for a
  large part of them, and the what-if is restated on the unprofiled step when the capture holds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tb_llmdiag.findings.engine import Rule, run_findings
from tb_llmdiag.findings.structs import Finding, WhatIf
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.findings.trust import with_caveats, with_unprofiled
from tb_llmdiag.findings.whatif import apply_in_sequence
from tb_llmdiag.metrics.entry import AS_METRIC, FLAG, HIGHER, LOWER, NEITHER, NS, PER_S, SHARE, TEXT, Entry, Intro


def what_if(findings: Sequence[Finding], metrics: Mapping[str, Any], rules: Sequence[Rule] = RULES) -> WhatIf | None:
    """The what-if of already ranked findings (``whatif.apply_in_sequence``)."""
    return with_unprofiled(apply_in_sequence(list(findings), metrics, rules)[1], metrics)


def diagnose(metrics: Mapping[str, Any], rules: Sequence[Rule] = RULES) -> tuple[list[Finding], WhatIf | None]:
    """Ranked findings with in-sequence savings, and the what-if (see the module docstring)."""
    findings, what = apply_in_sequence(run_findings(metrics, rules), metrics, rules)
    return with_caveats(findings, metrics, what, rules), with_unprofiled(what, metrics)


# The registry's entries of what the diagnosis adds to the run report: ``what_if`` and the numbers of each of
# ``findings[]`` (findings/engine.py, findings/whatif.py); one row per key (metrics/entry.py), collected by the whole
# registry (tb_llmdiag/registry.py)
WHAT_IF_INTRO: Intro = (
    "`what_if` (findings/diagnosis.py)",
    "What fixing the findings would give in the median step, as bounds (docs/whatif.md); null without steps.",
)
FINDINGS_INTRO: Intro = (
    "`findings[]` (findings/engine.py, docs/findings.md)",
    "The numbers a finding carries. Its `value`, `threshold` and `evidence` take the unit of the metric the rule "
    "reads them from (`as_metric`).",
)

# a declared table, one entry per row: left as laid out
# fmt: off
ENTRIES: tuple[Entry, ...] = (
    ("what_if.basis", TEXT, NEITHER, 0, "basis",
     "the top finding's saving basis (`findings[].saving.basis`): `median_step`, or `mean_step` when the top "
     "finding is about steps slower than the median"),
    ("what_if.bound", FLAG, NEITHER, 0, "bound", "true: every what-if number is an upper bound on the gain"),
    ("what_if.finding_id", TEXT, NEITHER, 0, "finding",
     "the top finding (`findings[0]`), when its saving takes at least 0.5 % off its step (null otherwise)"),
    ("what_if.finding_title", TEXT, NEITHER, 0, "finding title", "that finding's title"),
    ("what_if.step_ns", NS, LOWER, 0.05, "step", "that finding's `saving.step_ns` (the median step when none)"),
    ("what_if.step_ns_if_fixed", NS, LOWER, 0.05, "step if fixed",
     "that finding's `saving.step_ns_if_fixed`: the step with its cause removed entirely (a bound: docs/whatif.md)"),
    ("what_if.saving_share", SHARE, HIGHER, 0.1, "saving",
     "1 - step_ns_if_fixed / step_ns: that finding's `saving.share`"),
    ("what_if.compute_floor_ns", NS, NEITHER, 0.05, "compute floor",
     "the GPU's busy time in the median step (median of `idle.step_breakdown.busy_ns`), less the finding's cut "
     "when it claims device time; no what-if goes below it; null when device busy time is unknown"),
    ("what_if.host_floor_ns", NS, NEITHER, 0.05, "host floor",
     "the host's own time per step (`host_floor.median_ns`, at most the median step): no device-side cut takes the "
     "median step below it; null when unknown (XPlane, no launch calls)"),
    ("what_if.pool", TEXT, NEITHER, 0, "pool",
     "the pool that finding's cut comes out of: `idle`, `device`, `communication` or `excess` (docs/whatif.md); "
     "null without one"),
    ("what_if.bound_by", TEXT, NEITHER, 0, "bound by",
     "what bounds that finding's cut: `cause` (its own share), `pool` (all of its pool), `host_floor` (a device-side "
     "cut that would take the step below `host_floor_ns`); null without a finding"),
    ("what_if.tokens_per_s", PER_S, HIGHER, 0.05, "tokens/s",
     "`headline.tokens_per_s`, the run's one tokens/s: the median step's token slots / the median step "
     "(`flops.median_step_tokens_per_s`); null without shapes"),
    ("what_if.tokens_per_s_if_fixed", PER_S, HIGHER, 0.05, "tokens/s if fixed",
     "`tokens_per_s` x `step_ns` / `step_ns_if_fixed`: the median step's tokens in the fixed median step; null when "
     "the top finding's saving is of the mean step (`basis`: its cause is not in the median step)"),
    ("what_if.all.finding_ids[]", TEXT, NEITHER, 0, "findings", "the findings whose causes are in the median step"),
    ("what_if.all.step_ns", NS, LOWER, 0.05, "median step", "the median step (`steps.median_ns`)"),
    ("what_if.all.step_ns_if_fixed", NS, LOWER, 0.05, "median step if all fixed",
     "the median step with every finding's cause removed, applied in sequence on the remaining time (never added)"),
    ("what_if.all.saving_share", SHARE, HIGHER, 0.1, "saving if all fixed",
     "1 - all.step_ns_if_fixed / all.step_ns; never above 1 - compute_floor_ns / all.step_ns"),
    ("what_if.all.compute_floor_ns", NS, NEITHER, 0.05, "compute floor if all fixed",
     "the GPU's busy time in the median step less the device-time findings' cuts: the floor of `all.step_ns_if_fixed`"),
    ("what_if.all.host_floor_ns", NS, NEITHER, 0.05, "host floor if all fixed",
     "`host_floor_ns` less what the host-side (`idle`) findings take off the median step: the floor of "
     "`all.step_ns_if_fixed`; null when unknown"),
    ("what_if.all.bound_by", TEXT, NEITHER, 0, "bound by if all fixed",
     "`host_floor` when a device-side cut of the sequence stopped at the host floor, `compute_floor` when the step "
     "is down to the GPU's own work, else `causes`"),
    ("what_if.all.tokens_per_s_if_fixed", PER_S, HIGHER, 0.05, "tokens/s if all fixed",
     "`tokens_per_s` x `all.step_ns` / `all.step_ns_if_fixed`: the median step's tokens in the fixed median step"),
    ("what_if.mean_step_ns", NS, LOWER, 0.05, "mean step", "the mean step (`steps.mean_ns`)"),
    ("what_if.mean_step_ns_if_all_fixed", NS, LOWER, 0.05, "mean step if all fixed",
     "the mean step less every finding's in-sequence cut, outlier-step causes included"),
    ("what_if.statement", TEXT, NEITHER, 0, "statement", "the what-if in words, worded as a bound"),
    ("findings[].saving.basis", TEXT, NEITHER, 0, "saving basis",
     "the step the saving is of: `median_step` (every finding whose cause is in the median step), `mean_step` (a "
     "finding about steps slower than the median: the median step has none of it), `window` (no steps)"),
    ("findings[].saving.step_ns", NS, LOWER, 0.05, "step",
     "the step of `basis` (`steps.median_ns` or `steps.mean_ns`); null on `window`"),
    ("findings[].saving.ns", NS, LOWER, 0.05, "saving",
     "what removing this finding's cause entirely takes off that step, at most (its share of its pool, bounded by "
     "the pool and the host floor: docs/whatif.md); the one saving every surface shows, and the rank's key"),
    ("findings[].saving.share", SHARE, LOWER, 0.1, "saving share",
     "ns / step_ns (on `window`: the share of the profiled window)"),
    ("findings[].saving.step_ns_if_fixed", NS, LOWER, 0.05, "step if fixed",
     "step_ns - ns: this finding's own what-if"),
    ("findings[].saving.pool", TEXT, NEITHER, 0, "saving pool",
     "the pool the saving comes out of: `idle`, `device`, `communication`, `excess` (docs/whatif.md); null when "
     "the rule claims none"),
    ("findings[].saving.bound_by", TEXT, NEITHER, 0, "saving bound by",
     "what bounds this finding's cut: `cause` (its own share), `pool` (all of its pool), `host_floor` (a "
     "device-side cut that would take the step below the host's own time); null when it takes nothing"),
    ("findings[].saving.step_basis", TEXT, NEITHER, 0, "saving step basis",
     "`without_profiler`: the saving, its step and its bound are on the step with the profiler's own cost "
     "(`capture.profiler_overhead_ns`) taken out, the step the user runs (docs/whatif.md, #37); `profiled`: no such "
     "cost is known, the trace's own step"),
    ("findings[].saving.profiled.basis", TEXT, NEITHER, 0, "profiled saving basis", "`basis` on the profiled step"),
    ("findings[].saving.profiled.step_ns", NS, LOWER, 0.05, "profiled step",
     "the profiled step of `basis` (`steps.median_ns` or `steps.mean_ns`); `saving.profiled` is null when "
     "`step_basis` is `profiled`"),
    ("findings[].saving.profiled.ns", NS, LOWER, 0.05, "profiled saving",
     "the same saving on the profiled step, in the same sequence"),
    ("findings[].saving.profiled.share", SHARE, LOWER, 0.1, "profiled saving share", "profiled ns / profiled step_ns"),
    ("findings[].saving.profiled.step_ns_if_fixed", NS, LOWER, 0.05, "profiled step if fixed",
     "profiled step_ns - ns"),
    ("findings[].saving.profiled.bound_by", TEXT, NEITHER, 0, "profiled saving bound by",
     "`bound_by` on the profiled step (its host floor holds the profiler's host cost)"),
    ("what_if.step_basis", TEXT, NEITHER, 0, "what-if step basis",
     "`without_profiler` or `profiled`, as `findings[].saving.step_basis`"),
    ("what_if.profiled.step_ns", NS, LOWER, 0.05, "profiled step",
     "the profiled median step (the top finding's basis step); `what_if.profiled` is null when `step_basis` is "
     "`profiled`"),
    ("what_if.profiled.finding_id", TEXT, NEITHER, 0, "profiled leader",
     "the finding that would lead on the profiled step; null when none takes 0.5 % off it"),
    ("what_if.profiled.finding_title", TEXT, NEITHER, 0, "profiled leader title", "its title"),
    ("what_if.profiled.step_ns_if_fixed", NS, LOWER, 0.05, "profiled step if fixed",
     "the profiled step with that finding's cause removed"),
    ("what_if.profiled.saving_share", SHARE, HIGHER, 0.1, "profiled saving", "1 - step_ns_if_fixed / step_ns"),
    ("what_if.profiled.all_step_ns_if_fixed", NS, LOWER, 0.05, "profiled step if all fixed",
     "the profiled median step with every finding's cause removed"),
    ("what_if.profiled.all_saving_share", SHARE, HIGHER, 0.1, "profiled saving if all fixed",
     "1 - all_step_ns_if_fixed / the profiled median step"),
    ("what_if.profiled.host_floor_ns", NS, NEITHER, 0.05, "profiled host floor",
     "the host's own time per step as the trace shows it (`host_floor.median_ns`), the profiler's host cost in it"),
    ("what_if.profiled.leader_changes", FLAG, NEITHER, 0, "profiler changes the leader",
     "true when the profiled step would rank another finding first: the statement says so"),
    ("findings[].threshold.above", AS_METRIC, NEITHER, 0, "fires at or above",
     "the rule fires when the value is >= this"),
    ("findings[].threshold.below", AS_METRIC, NEITHER, 0, "fires below", "the rule fires when the value is < this"),
    ("findings[].value", AS_METRIC, NEITHER, 0, "observed", "the observed value of the finding's `metric`"),
    ("findings[].ranges[][]", NS, NEITHER, 0, "evidence range",
     "start or end of a time range where the finding's evidence is, on the trace's clock (`Rule.ranges`)"),
    ("findings[].evidence.*", AS_METRIC, NEITHER, 0, "evidence",
     "a value the rule shows as evidence, in the unit of the metric the rule reads it from (`evidence_units`)"),
    ("findings[].evidence.*[]", AS_METRIC, NEITHER, 0, "evidence item",
     "an item of an evidence list (steps, program ids), in the unit of the metric the rule reads it from"),
)
# fmt: on
