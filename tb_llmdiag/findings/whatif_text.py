"""The what-if and the savings in words: one text per number, the same the tab writes (frontend/format.js
``fmtSaving`` / ``fmtWhatIf``; tests/test_saving_text.py holds the two together)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tb_llmdiag.findings.engine import finite
from tb_llmdiag.findings.structs import Saving, WhatIf
from tb_llmdiag.jsonsafe import json_object
from tb_llmdiag.units import fmt, fmt_ns, fmt_share


def _named(title: Any) -> str:
    """A finding's title inside a sentence: its first letter lowered unless it starts an acronym ("XLA")."""
    t = str(title or "the top finding")
    return t[:1].lower() + t[1:] if t[1:2].islower() else t


BASIS_WORDS = {"median_step": "median step", "mean_step": "mean step", "window": "profiled window"}


def statement(w: WhatIf) -> str:
    """The what-if in words, as a bound; on the step without the profiler, the profiled step's beside it and, when
    the profiler's cost changes which finding leads, which one leads there."""
    body = _statement(w)
    p = w.profiled
    if w.step_basis != "without_profiler" or p is None:
        return body
    tail = f"profiled: median step {fmt_ns(p.step_ns)}"
    if p.finding_id:
        tail += f" → at most {fmt_ns(p.step_ns_if_fixed)} (−{fmt_share(p.saving_share)}) for its top finding"
    if p.leader_changes:
        tail += "; the profiler's own cost changes which finding leads: on the profiled step " + (
            f"{_named(p.finding_title)} would lead" if p.finding_id else "no finding takes 0.5 % off it"
        )
    return body[:-1] + f" ({tail})."


def _statement(w: WhatIf) -> str:
    a = w.all
    parts = []
    bare = BARE_WORDS if w.step_basis == "without_profiler" else ""
    if w.finding_id:
        top = Saving(
            basis=w.basis,
            step_ns=w.step_ns,
            ns=None,
            share=w.saving_share,
            step_ns_if_fixed=w.step_ns_if_fixed,
            step_basis=w.step_basis,
        )
        parts.append(
            f"{what_if_text(top)} if the top finding's cause ({_named(w.finding_title)}) were removed entirely"
            + (
                f", bounded by the host's own time per step, {fmt_ns(w.host_floor_ns)} (the GPU would then wait "
                f"for the host)"
                if w.bound_by == "host_floor"
                else ""
            )
        )
    else:
        parts.append(f"median step{bare} {fmt_ns(a.step_ns)}: no finding's cause is in the median step")
    basis = BASIS_WORDS.get(w.basis, "median step") if w.finding_id else "median step"
    if len(a.finding_ids) > 1 or (a.finding_ids and w.basis != "median_step"):
        parts.append(
            f"{basis}{bare} {fmt_ns(a.step_ns)} → at most {fmt_ns(a.step_ns_if_fixed)} "
            f"(−{fmt_share(a.saving_share)}) with all {len(a.finding_ids)} findings' causes removed, applied in "
            f"sequence" + (", bounded by the host's own time per step" if a.bound_by == "host_floor" else "")
        )
    if a.compute_floor_ns is not None:
        parts.append(
            f"the GPU's own work in the median step is {fmt_ns(a.compute_floor_ns or 0)}, a floor no fix of "
            f"idle time goes below"
        )
    if a.host_floor_ns is not None and w.host_floor_ns is not None:
        parts.append(
            f"the host's own time per step (to its last launch, syncs excluded) is {fmt_ns(w.host_floor_ns)}, a "
            f"floor no fix of GPU time goes below"
        )
    if w.mean_step_ns > 1.05 * a.step_ns and w.basis != "mean_step":
        parts.append(
            f"slower steps make the mean step {fmt_ns(w.mean_step_ns)}: at most "
            f"{fmt_ns(w.mean_step_ns_if_all_fixed)} with every cause removed"
        )
    if w.tokens_per_s and w.tokens_per_s_if_fixed:
        parts.append(
            f"throughput {fmt('per_s', w.tokens_per_s)} → at most {fmt('per_s', w.tokens_per_s_if_fixed)} tokens"
        )
    return "; ".join(parts) + "."


#: the words after a step on the step without the profiler's own cost (``saving.step_basis``)
BARE_WORDS = " without the profiler"


def _bare(saving: Mapping[str, Any]) -> str:
    return BARE_WORDS if saving.get("step_basis") == "without_profiler" else ""


def _profiled_words(saving: Mapping[str, Any]) -> str:
    """The "; profiled: 18 ms of 90 ms" words: the same saving on the profiled step, beside one without the profiler."""
    p = saving.get("profiled")
    if not _bare(saving) or not isinstance(p, Mapping) or not finite(p.get("ns")) or not finite(p.get("step_ns")):
        return ""
    return f"; profiled: {fmt_ns(p['ns'])} of {fmt_ns(p['step_ns'])}"


def _as_json(saving: Saving | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A saving's fields as its JSON holds them (the words below read a report's JSON, as the tab's do)."""
    return json_object(saving) if isinstance(saving, Saving) else saving


def saving_text(saving: Saving | Mapping[str, Any] | None) -> str:
    """A finding's saving in words, the same text the tab's ``fmtSaving`` (frontend/format.js) writes:
    "saves at most 12.1 ms of the 32.1 ms median step (37.7 %)", on the step without the profiler "saves at most
    12.1 ms of the 60 ms median step without the profiler (20.2 %; profiled: 18 ms of 90 ms)"; time first, the
    number findings are ranked by."""
    saving = _as_json(saving)
    if not saving or not finite(saving.get("share")):
        return "saving not estimable"
    share = fmt_share(saving["share"])
    if saving.get("basis") == "window" or not finite(saving.get("ns")) or not finite(saving.get("step_ns")):
        return f"saves at most {share} of the profiled window"
    step = f"{fmt_ns(saving['step_ns'])} {BASIS_WORDS.get(str(saving.get('basis')), 'step')}{_bare(saving)}"
    if saving["ns"] <= 0:
        return f"saves nothing of the {step} once the findings above it are fixed{_profiled_words(saving)}"
    return f"saves at most {fmt_ns(saving['ns'])} of the {step} ({share}{_profiled_words(saving)})"


def what_if_text(saving: Saving | Mapping[str, Any] | None) -> str:
    """A finding's own what-if in words, as the tab's ``fmtWhatIf`` writes it: "median step 32.1 ms → at most
    20 ms (−37.7 %)"; empty without a step."""
    saving = _as_json(saving)
    if not saving or not finite(saving.get("step_ns")) or not finite(saving.get("step_ns_if_fixed")):
        return ""
    return (
        f"{BASIS_WORDS.get(str(saving.get('basis')), 'step')}{_bare(saving)} {fmt_ns(saving['step_ns'])} → at most "
        f"{fmt_ns(saving['step_ns_if_fixed'])} (−{fmt_share(saving.get('share'))})"
    )
