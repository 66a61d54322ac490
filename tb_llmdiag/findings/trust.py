"""What the profiler's own cost does to the findings and the what-if (``capture`` topic, ``metrics/capture/overhead.py``).

Contract:
- ``with_caveats(findings, metrics, what, rules)``: a finding whose evidence is host time (its rule's
  ``profiler.host_time``, ``engine.ProfilerCost``) gets
  ``profiler_overhead_share`` (``capture.profiler_overhead_share``) and, when that overhead could account for a large
  part of its saving (overhead >= ``LARGE_PART`` x the finding's own saving share, and >= ``MIN_OVERHEAD_SHARE``),
  a ``caveat`` saying so; every other finding gets ``caveat`` null.
  Each finding's ``saving.unprofiled_ns`` is its saving restated on an unprofiled run where the trace places the
  profiler's cost in it, else null: a rule with ``profiler.records_inside`` (``unrecorded_host_time``) less the
  modelled cost of the records inside the activity that holds the time (``attribution.unrecorded_profiler_ns``: the
  Python tracer's records inside a pure Python function; none inside a sleep or a stretch with nothing open), scaled
  to the saving; a rule with ``profiler.spread_over_idle`` (``host_sync``: the idle after a sync is the host
  relaunching recorded operators) on the unprofiled step U when the capture holds it, with the measured cost O = M - U spread over the idle pool I as in the what-if:
  U - max(M - saving - O x (I - saving) / I, the GPU's own work).
- ``with_unprofiled(what_if, metrics)``: when the capture holds unprofiled step times, ``what_if.unprofiled`` restates
  the what-if on the unprofiled median step U: the profiled step M carries the profiler's cost O = M - U in its idle
  pool I (``what_if.median_idle_ns``; O is capped at I), spread evenly over it, so a cut that leaves idle time L
  leaves O x L / I of the profiler's cost in the step: fixed step unprofiled = fixed step profiled - O x L / I; a
  fixed step bound by the host's own time (``bound_by`` ``host_floor``) keeps all of the profiler's host cost, which a
  GPU-bound step had hidden (``capture.overhead_model_ns``, else O): fixed step profiled - that. An unprofiled step
  longer than the profiled one (noise; a host that runs ahead of the GPU, whose profiled host step under-states the
  step) holds none of the profiler's cost: a cut removes the same time from it (U - M is added back). Never above U
  nor below the GPU's own work. The statement then leads with the unprofiled step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tb_llmdiag.findings.engine import Rule, finite, lookup, rules_of
from tb_llmdiag.findings.structs import Finding, ProfiledSaving, Unprofiled, WhatIf, replace
from tb_llmdiag.findings.whatif_text import statement
from tb_llmdiag.units import fmt_ns

#: the overhead "could account for a large part" of a finding's saving from this ratio on
LARGE_PART = 1 / 3
MIN_OVERHEAD_SHARE = 0.05


def unprofiled_saving_ns(f: Finding, rule: Rule | None, metrics: Mapping[str, Any], what: WhatIf | None) -> int | None:
    """The finding's saving restated on an unprofiled run, where the trace places the profiler's cost in it (module
    docstring: ``saving.unprofiled_ns``; ``rule``: the finding's, whose ``profiler`` says how); None elsewhere."""
    saving = f.saving
    if saving is None or rule is None:
        return None
    bare = saving.step_basis == "without_profiler"
    # the profiled step's saving, beside one without the profiler: the trace's own numbers
    held_by = saving.profiled if isinstance(saving.profiled, ProfiledSaving) else saving
    ns, step = held_by.ns, held_by.step_ns
    if not isinstance(ns, int) or not isinstance(step, int) or step <= 0:
        return None
    if bare and rule.profiler.spread_over_idle and saving.pool == "idle":
        return saving.ns  # the saving is already on the step without the profiler, its cost spread so
    if rule.profiler.records_inside is not None:
        held_at, cost_at = rule.profiler.records_inside
        held, cost = lookup(metrics, held_at), lookup(metrics, cost_at)
        if not finite(held) or not finite(cost) or held <= 0:
            return None
        return int(round(float(ns) * max(0.0, 1.0 - float(cost) / float(held))))
    u = lookup(metrics, "capture.unprofiled_step_ns")
    idle0 = float(what.median_idle_ns or 0.0) if what is not None else 0.0
    spread = rule.profiler.spread_over_idle
    if not spread or not finite(u) or u <= 0 or saving.pool != "idle" or idle0 <= 0:
        return None
    over = min(max(0.0, float(step) - float(u)), idle0)
    floor = float(what.all.compute_floor_ns or 0.0) if what is not None else 0.0
    # the cut leaves idle0 - ns of idle time, and over x (idle0 - ns) / idle0 of the profiler's cost with it
    fixed = float(step) - float(ns) - over * max(idle0 - float(ns), 0.0) / idle0
    return int(round(float(u) - min(float(u), max(fixed, min(floor, float(u))))))


def with_caveats(
    findings: list[Finding], metrics: Mapping[str, Any], what: WhatIf | None, rules: Sequence[Rule]
) -> list[Finding]:
    """The findings with their overhead caveat and unprofiled saving (module docstring; ``what``: their what-if;
    ``rules``: the table they come from)."""
    share = lookup(metrics, "capture.profiler_overhead_share")
    basis = lookup(metrics, "capture.overhead_basis")
    out = []
    for f, rule in zip(findings, rules_of([f.id for f in findings], metrics, rules)):
        if f.saving is not None:
            f = replace(f, saving=replace(f.saving, unprofiled_ns=unprofiled_saving_ns(f, rule, metrics, what)))
        f = replace(f, caveat=None)
        if rule is not None and rule.profiler.host_time and finite(share):
            f.profiler_overhead_share = share
            saving = f.saving.share if f.saving is not None else None
            if share >= MIN_OVERHEAD_SHARE and (not finite(saving) or share >= LARGE_PART * saving):
                how = "measured against unprofiled steps" if basis == "unprofiled_steps" else "estimated from the trace"
                f.caveat = (
                    f"The profiler's own cost is {100 * share:.0f} % of the profiled step ({how}): it lands in host "
                    f"time, so it could account for a large part of this finding; check it on an unprofiled run "
                    f"or a capture that records no shapes, memory or stacks."
                )
        out.append(f)
    return out


def with_unprofiled(what: WhatIf | None, metrics: Mapping[str, Any]) -> WhatIf | None:
    """The what-if restated on the unprofiled step when it is known (module docstring)."""
    u = lookup(metrics, "capture.unprofiled_step_ns")
    if what is None or not finite(u) or u <= 0:
        return what
    if what.step_basis == "without_profiler":
        # the what-if is already on the step without the profiler (``whatif._without_profiler``): the same numbers
        return replace(what, unprofiled=_own_unprofiled(what))
    m = float(what.step_ns)
    idle0 = float(what.median_idle_ns or 0.0)
    over = min(max(0.0, m - float(u)), idle0)
    floor = float(what.compute_floor_ns or 0.0)
    host_cost = lookup(metrics, "capture.overhead_model_ns")
    host_cost = float(host_cost) if finite(host_cost) else over
    longer = max(0.0, float(u) - m)  # an unprofiled step longer than the profiled one: the cut is taken as is

    def unprofiled(fixed: float, idle_left: float, bound_by: Any, floor: float) -> float:
        # a step bound by the host's own time keeps all of the profiler's host cost; else the share of it that is
        # left in the idle time the fixes leave
        left = host_cost if bound_by == "host_floor" else over * idle_left / idle0 if idle0 > 0 else 0.0
        return min(float(u), max(fixed + longer - left, min(floor, float(u))))

    top_cut = m - float(what.step_ns_if_fixed)
    top_left = idle0 - top_cut if what.pool == "idle" else idle0
    one = unprofiled(float(what.step_ns_if_fixed), max(top_left, 0.0), what.bound_by, floor)
    every = unprofiled(
        float(what.all.step_ns_if_fixed),
        float(what.all.idle_left_ns or 0.0),
        what.all.bound_by,
        # the device-side findings shorten the GPU's own work: every finding removed leaves the lower floor
        float(what.all.compute_floor_ns or floor),
    )
    what = replace(
        what,
        unprofiled=Unprofiled(
            step_ns=int(u),
            step_ns_if_fixed=int(round(one)),
            saving_share=1.0 - one / float(u),
            all_step_ns_if_fixed=int(round(every)),
            all_saving_share=1.0 - every / float(u),
        ),
    )
    what.statement = unprofiled_statement(what)
    return what


def _own_unprofiled(w: WhatIf) -> Unprofiled:
    """``what_if.unprofiled`` of a what-if already on the step without the profiler: its own numbers."""
    return Unprofiled(
        step_ns=w.step_ns,
        step_ns_if_fixed=w.step_ns_if_fixed,
        saving_share=w.saving_share,
        all_step_ns_if_fixed=w.all.step_ns_if_fixed,
        all_saving_share=w.all.saving_share,
    )


def unprofiled_statement(w: WhatIf) -> str:
    """The what-if's words, led by the unprofiled step."""
    up = w.unprofiled
    assert isinstance(up, Unprofiled)
    head = f"unprofiled median step {fmt_ns(up.step_ns)} (profiled {fmt_ns(w.step_ns)}, the rest is the profiler's own cost)"
    if w.finding_id:
        head += (
            f": at most {fmt_ns(up.step_ns)} -> {fmt_ns(up.step_ns_if_fixed)} (-{100 * up.saving_share:.0f} %) "
            f"if the cause of `{w.finding_id}` were removed entirely"
        )
        if len(w.all.finding_ids) > 1:
            head += (
                f", at most {fmt_ns(up.all_step_ns_if_fixed)} (-{100 * up.all_saving_share:.0f} %) with all "
                f"{len(w.all.finding_ids)} findings' causes removed"
            )
    return head + "; on the profiled step: " + statement(w)
