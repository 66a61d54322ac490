"""What fixing the findings would give: per finding in sequence, the top one alone, and all of them, as bounds.

The model (docs/whatif.md is the prose):
- Every rule claims one *pool* of time (``Rule.claims``): ``idle`` (GPU idle time: waiting for the host, the data
  loader, syncs, compiles), ``device`` (GPU busy time: kernels that could run faster or not at all),
  ``communication`` (time the GPU runs only collectives: ``steps.per_step[].collective_ns``), ``excess``
  (time that only some steps add over the median step: outliers, warm-up, XLA recompile steps). A rule that
  claims nothing has no saving.
- On the mean step T (findings' shares are shares of the summed step time, i.e. of T): T = its regular part
  min(M, T) (M the median step), busy in the median step's proportion B_M / M (device pool), communication in
  its proportion C_M / M (communication pool) and idle otherwise (idle pool), plus the excess max(0, T - M)
  (excess pool; when it is 0, excess findings take from the idle pool). The four pools add up to T. Host-side findings first, then device-side ones (the host floor below); in each,
  causes first, then symptoms (``Rule.symptom``: host-bound, tiny kernels, long
  gaps, step variance: what the causes' time shows up as), each group by its own saving (highest first), each
  finding removes the fraction r = min(1, share x T / its pool's initial size) of what is *left* of its pool: savings are applied in
  sequence on the remaining time, never added, so causes that claim the same idle time (host-bound, a slow host
  op, syncs) do not count it twice, and the shares shown (``saving.share``, each finding's cut / T) add up to at
  most 1. The finding's own bound, alone, stays in ``saving.alone_share`` / ``alone_ns``. Findings are then
  shown by what they add in that sequence (``saving.share``), highest first.
- On the median step M (the what-if): its busy time B_M (median of the per-step busy times, else busy share x M)
  and idle time M - B_M; each ``idle`` / ``device`` finding removes the same fraction r of what is left of its
  pool in M; ``excess`` findings remove nothing from M. ``compute_floor_ns`` is B_M less what the ``device``
  findings take off kernels: no what-if step goes below it (idle findings cannot remove busy time).
- The host floor H (``host_floor.median_ns``: the host's own time per step, from its start to its last launch,
  syncs excluded; at most M): a ``device`` / ``communication`` cut shrinks the GPU's work by r x its pool but
  the step only down to H; the rest is time the GPU would then wait for the host, which no finding claims (no
  finding measured it: a symptom's share is of the idle time the trace shows). An ``idle`` (host-side) cut
  lowers H by what it takes off the step, a launch-overhead one to H x (1 - r) when that is lower
  (``Rule.host_floor``); no cut takes the step below the floor its fix leaves. Host-side findings come before device-side ones, so the floor they leave is the one that binds;
  without a host floor (XPlane, no launch calls) nothing changes. On the mean step the same floor applies, scaled to its regular part
  (H x min(M, T) / M). ``saving.bound_by`` / ``what_if.bound_by`` say what bounded each cut: ``cause`` (its own
  share), ``pool`` (all that is left of its pool), ``host_floor``.
- Without steps the shares are of the analysis window (``idle.window_ns``): they are applied in sequence on it
  the same way (``ns`` stays null) and there is no what-if.
- Tokens/s, on the median step as the step and the savings: the run's one tokens/s (``headline.tokens_per_s`` =
  ``flops.median_step_tokens_per_s``: ``steps.tokens_per_step_median`` / ``steps.median_ns``, padded token slots)
  before, and the same tokens in the fixed median step after; null after for a top finding whose saving is of the mean
  step (its cause is not in the median step). Never the mean step's ``flops.tokens_per_s`` scaled by a median step:
  that counted the mean step's tokens in the median step (fp32_math: 3,637 of its 4,096 a step, -12 %).
Every number is an upper bound ("at most ... if ... removed entirely"): it assumes the cause's time disappears
and nothing else moves in to fill it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as with_fields
from typing import Any

from tb_llmdiag.findings.engine import Pool, Rule, finite, lookup, rules_of
from tb_llmdiag.findings.structs import (
    Finding,
    ProfiledSaving,
    ProfiledWhatIf,
    Saving,
    Severity,
    UnsetType,
    WhatIf,
    WhatIfAll,
    replace,
)
from tb_llmdiag.findings.whatif_text import statement

#: the what-if names the first finding that takes at least this share off the median step (less reads as noise)
MIN_CUT_SHARE = 0.005


_POOLS: dict[str, Pool] = {"idle": "idle", "excess": "excess", "device": "device", "communication": "communication"}


def _pool_of(rule: Rule | None, metrics: Mapping[str, Any]) -> Pool | None:
    """The pool the rule claims on this run (``Rule.claims``: a fixed pool, or a named function of the metrics)."""
    claims = None if rule is None else rule.claims(metrics) if callable(rule.claims) else rule.claims
    return _POOLS.get(claims or "")


def _busy_share(m: Mapping[str, Any]) -> float | None:
    v = lookup(m, "idle.busy_share")
    if not finite(v):
        v = lookup(m, "xla.device_duty_cycle_share")
    return min(max(float(v), 0.0), 1.0) if finite(v) else None


def _median_of_steps(m: Mapping[str, Any], key: str) -> float | None:
    """The median of ``steps.per_step[].<key>``; None without steps or when a step lacks it."""
    rows = lookup(m, "steps.per_step")
    per = [r.get(key) for r in rows] if isinstance(rows, list) else None
    if not (isinstance(per, list) and per and all(finite(x) for x in per)):
        return None
    s = sorted(float(x) for x in per)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _median_busy_ns(m: Mapping[str, Any], median: int, busy_share: float | None) -> int | None:
    """The GPU's busy time in the median step (median of ``steps.per_step[].busy_ns`` when every step has it), else
    ``busy_share`` x the median step; None when unknown."""
    rows = lookup(m, "steps.per_step")
    whole = isinstance(rows, list) and len(rows) == lookup(m, "steps.count")
    b = _median_of_steps(m, "busy_ns") if whole else None
    if b is not None:
        return int(round(min(b, median)))
    return int(round(busy_share * median)) if busy_share is not None else None


def _median_collective_ns(m: Mapping[str, Any], median: int) -> int:
    """The median step's time only collectives cover (median of ``steps.per_step[].collective_ns``), else
    ``idle.collective_share`` x the median step; 0 when unknown (no collectives)."""
    c_ns = _median_of_steps(m, "collective_ns")
    if c_ns is not None:
        return int(round(min(c_ns, median)))
    c = lookup(m, "idle.collective_share")
    return int(round(float(c) * median)) if finite(c) else 0


#: the run's one tokens/s (module docstring; ``headline.tokens_per_s`` reads it too): the median step's token slots
#: over the median step
TOKENS_PER_S_SOURCE = "flops.median_step_tokens_per_s"


def _tokens_per_s(tokens_per_s: Any, step_ratio: float) -> float | None:
    """The median step's tokens/s (``TOKENS_PER_S_SOURCE``) with the median step scaled by ``step_ratio`` (the fixed
    median step over the median step): the same tokens in a shorter step."""
    ok = finite(tokens_per_s) and tokens_per_s > 0 and step_ratio > 0
    return float(tokens_per_s) / step_ratio if ok else None


def _saving_share(f: Finding) -> float:
    v = f.saving.share if f.saving is not None else None
    return float(v) if finite(v) else 0.0


#: the pools whose cuts shrink device-side time: the host's own time per step bounds them (the host floor)
FLOORED = ("device", "communication")
# How a host-side (``idle``) finding's fix moves the host floor is its rule's ``host_floor``: ``cut`` (the default)
# lowers it by its cut: the host does that much less waiting or work (syncs too: the code that issues them is host
# work of its own, the per-parameter ``.item()`` loop's dispatch and copies); ``fraction``: launch overhead: the fix
# (fewer, larger launches: a larger batch, fusion, CUDA graphs) shortens the host's own time itself, so removing the
# fraction r of the waits it causes is taken to remove the fraction r of the floor too, when that is more than the
# cut (generous, so the what-if stays a bound).


def _host_floor_ns(m: Mapping[str, Any], median: float) -> float | None:
    """The host's own time per step (``host_floor.median_ns``), never above the median step; None when unknown."""
    v = lookup(m, "host_floor.median_ns")
    return min(max(float(v), 0.0), median) if finite(v) else None


def _bound(r: float) -> str:
    return "pool" if r >= 1.0 else "cause"


def _take(
    left: dict[str, float], pool: str, r: float, host: dict[str, float | None], key: str, effect: str = "cut"
) -> tuple[float, str]:
    """Remove the fraction r of what is left of ``pool`` (in place), and say what bound the cut.

    A host-side (``idle``) cut first moves the host floor ``host[key]`` as its rule's ``effect`` says
    (``Rule.host_floor``): down by as much as it takes off the step (``cut``), or to floor x (1 - r) when that is
    lower (``fraction``), so it never binds a host-side cut. Then no cut takes the step below the floor: a
    device-side one (``FLOORED``) still shrinks the GPU's work by r x its pool, but the rest of the step it cannot take becomes
    ``host_wait``, time the GPU would then wait for the host, which no finding claims (none measured it)."""
    raw = r * left[pool]
    floor = host[key]
    if floor is None or pool not in (*FLOORED, "idle"):
        left[pool] -= raw
        return raw, _bound(r)
    if pool == "idle":
        floor = max(0.0, min(floor - raw, floor * (1.0 - r)) if effect == "fraction" else floor - raw)
        host[key] = floor
    step = left["idle"] + left["device"] + left["communication"] + left["host_wait"]
    cut = min(raw, max(0.0, step - floor))
    left[pool] -= raw
    left["host_wait"] += raw - cut
    return cut, "host_floor" if cut < raw - 0.5 else _bound(r)  # half a ns: float noise is no bound


def _all_bound(host_floor: bool, fixed_all: float, floor: float | None) -> str:
    """What bounds the median step with every cause removed: ``host_floor`` when a device-side cut of the
    sequence stopped at the host floor, ``compute_floor`` when the step is down to the GPU's own work, else
    ``causes`` (the findings' own shares)."""
    if host_floor:
        return "host_floor"
    return "compute_floor" if floor is not None and fixed_all <= floor + 1 else "causes"


#: severity by the share of the median step a finding's saving takes off (at least): high, medium, else low
SEVERITY_SHARES: tuple[tuple[Severity, float], ...] = (("high", 0.20), ("medium", 0.05))


def severity_of(rule: Rule | None, saving: Saving | None, median: float | None) -> Severity:
    """A run finding's severity, decided here only: from the number it is ranked by (``saving.ns`` over the median
    step; on a run without steps ``saving.share`` of the window), so a finding never outranks one of a higher
    severity; a finding without a saving has its rule's fixed ``severity``, else low."""
    if saving is None:
        return (rule.severity if rule is not None else None) or "low"
    ns = saving.ns
    share = (
        float(ns) / float(median)
        if ns is not None and finite(ns) and median is not None and median > 0
        else saving.share
    )
    share = float(share) if finite(share) else 0.0
    return next((sev for sev, at in SEVERITY_SHARES if share >= at), "low")


_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


def _rank_key(f: Finding) -> tuple[int, float]:
    """Severity (from the saving where there is one), then the saving in ns per step (the share of the window
    without steps); a finding with no saving sits last in its severity."""
    s = f.saving
    v = (s.ns if finite(s.ns) else s.share) if s is not None else None
    return (_SEVERITY_ORDER.get(str(f.severity), 3), -float(v) if v is not None and finite(v) else 1.0)


def _alone_key(f: Finding) -> tuple[float, float]:
    """The order the sequence applies the findings in, within each group (``_order``): by each finding's own saving,
    alone (ns, then share), highest first; an unknown saving counts as 0."""
    s = f.saving
    return (-float(s.ns or 0), -float(s.share or 0)) if s is not None else (0.0, 0.0)


def _shows_a_cut(s: Saving | None) -> bool:
    """A saving with a what-if of its own: a step basis and a cut of at least ``MIN_CUT_SHARE`` of it."""
    if s is None or not isinstance(s.ns, int) or not isinstance(s.step_ns, int):
        return False
    return finite(s.ns) and finite(s.step_ns) and s.ns >= MIN_CUT_SHARE * s.step_ns > 0


def _saving(
    basis: str,
    step: float | None,
    cut: float,
    window: float,
    pool: str | None,
    bound_by: str | None,
    step_basis: str,
) -> Saving:
    """A finding's one saving (module docstring): what it takes off ``step`` in sequence, after the findings
    applied before it; ``step_ns_if_fixed`` is that step less it. On ``window`` (no steps): a share only.
    ``step_basis``: the step it is on, the profiled one or the one without the profiler (``_without_profiler``)."""
    if step is None:
        return Saving(
            basis=basis,
            step_ns=None,
            ns=None,
            share=cut / window if window > 0 else 0.0,
            step_ns_if_fixed=None,
            pool=pool,
            bound_by=bound_by,
            step_basis=step_basis,
        )
    ns = int(round(cut))
    return Saving(
        basis=basis,
        step_ns=int(round(step)),
        ns=ns,
        share=ns / step if step > 0 else 0.0,
        step_ns_if_fixed=int(round(step)) - ns,
        pool=pool,
        bound_by=bound_by,
        step_basis=step_basis,
    )


def _top_what_if(
    top: Finding | None,
    median: float,
    busy: float | None,
    host0: float | None,
    gpu_cut: Mapping[str, float],
    tokens_per_s: Any,
) -> dict[str, Any]:
    """The what-if's top part: the top finding's own saving (its step, the step with its cause removed) when it takes
    at least ``MIN_CUT_SHARE`` off its step, else the median step unchanged; the median step's floors beside it (the
    GPU's own work less the top finding's cut of it, the host's own time), for a top finding on the median step."""
    s_top = top.saving if top is not None and _shows_a_cut(top.saving) else None
    step = float(s_top.step_ns or 0) if s_top else median
    fixed = float(s_top.step_ns_if_fixed or 0) if s_top else step
    on_median = s_top is None or s_top.basis == "median_step"
    device_cut = gpu_cut.get(top.id, 0.0) if s_top and top else 0.0
    return {
        "basis": s_top.basis if s_top else "median_step",
        "bound": True,
        "finding_id": top.id if s_top and top else None,
        "finding_title": top.title if s_top and top else None,
        "step_ns": int(step),
        "step_ns_if_fixed": int(round(fixed)),
        "saving_share": 1.0 - fixed / step,
        "compute_floor_ns": int(round(busy - device_cut)) if busy is not None and on_median else None,
        "host_floor_ns": int(round(host0)) if host0 is not None and on_median else None,
        "pool": s_top.pool if s_top else None,
        "bound_by": s_top.bound_by if s_top else None,
        "tokens_per_s": _tokens_per_s(tokens_per_s, 1.0),
        # the tokens are the median step's: a saving of the mean step leaves the median step, and its tokens/s, alone
        "tokens_per_s_if_fixed": _tokens_per_s(tokens_per_s, fixed / step) if on_median else None,
    }


@dataclass(frozen=True)
class _Start:
    """The step the findings' savings come out of, before any is taken (module docstring): the mean step (without
    steps: the analysis window) cut into pools, the median step's pools, and the host floor."""

    has_steps: bool
    mean: float  # the mean step; without steps, the analysis window
    median: float | None  # the median step; None without steps or with a median of 0
    med_busy: int | None  # the GPU's busy time in the median step; None when unknown
    pool0: dict[str, float]  # the mean step: idle, device, communication and the excess over the median
    med0: dict[str, float]  # the median step: idle, device, communication ({} without a median)
    host0: float | None  # the host floor of the median step
    host_mean: float | None  # its share of the mean step's regular part
    # the pools the findings' shares are of (the profiled step's: a rule reads the trace), and the mean step they are
    # shares of; None: these pools themselves
    claim_pool0: dict[str, float] | None = None
    claim_mean: float | None = None
    step_basis: str = "profiled"  # or "without_profiler": the profiler's own cost taken out (``_without_profiler``)
    profiler_ns: float = 0.0  # what was taken out of the median step


def _start(metrics: Mapping[str, Any]) -> _Start | None:
    """The pools before any finding is applied; None when there is no step and no window to take savings from."""
    mean = lookup(metrics, "steps.mean_ns")
    median = lookup(metrics, "steps.median_ns")
    busy = _busy_share(metrics)
    has_steps = finite(mean) and mean > 0
    if not has_steps:  # no steps: the shares are of the analysis window; apply them in sequence on it
        mean = lookup(metrics, "idle.window_ns")
        median = None
        if not finite(mean) or mean <= 0:
            return None
    have_median = finite(median) and median > 0
    med_busy = _median_busy_ns(metrics, int(median), busy) if have_median else None
    # the mean step T = a median-like part min(M, T), busy in proportion b, and the excess max(0, T - M) that
    # only some steps add; without steps: the window, all of it the regular part
    b = (med_busy / median if med_busy is not None else 0.0) if have_median else (busy or 0.0)
    med_coll = (
        min(_median_collective_ns(metrics, int(median)), max(int(median) - (med_busy or 0), 0)) if have_median else 0
    )
    c = med_coll / median if have_median else float(lookup(metrics, "idle.collective_share") or 0.0)
    c = min(max(c, 0.0), max(1.0 - b, 0.0))
    regular = min(float(median), float(mean)) if have_median else float(mean)
    pool0 = {
        "idle": (1.0 - b - c) * regular,
        "device": b * regular,
        "communication": c * regular,
        "excess": float(mean) - regular,
    }
    med0 = (
        {
            "idle": float(median) - (med_busy or 0) - med_coll,
            "device": float(med_busy or 0),
            "communication": float(med_coll),
        }
        if have_median
        else {}
    )
    # the host floor (module docstring): the median step's, and its share of the mean step's regular part
    host0 = _host_floor_ns(metrics, float(median)) if have_median else None
    host_mean = host0 * regular / float(median) if host0 is not None else None
    return _Start(has_steps, mean, median if have_median else None, med_busy, pool0, med0, host0, host_mean)


def profiler_host_cost_ns(metrics: Mapping[str, Any], over_ns: float) -> float:
    """The profiler's cost in the host's own time per step (the host floor), given ``over_ns``, its cost in the step
    (``capture.profiler_overhead_ns``): the modelled recording cost (``capture.overhead_model_ns``; ``over_ns``
    without a model), never below ``over_ns`` (what lengthened the step was host time) nor above ``over_ns`` plus the
    time the host sat blocked on the device (``host_floor.blocked_median_ns``: only there can host cost hide)."""
    model = lookup(metrics, "capture.overhead_model_ns")
    blocked = lookup(metrics, "host_floor.blocked_median_ns")
    cost = float(model) if finite(model) else over_ns
    return min(max(cost, over_ns), over_ns + (float(blocked) if finite(blocked) else 0.0))


def _without_profiler(metrics: Mapping[str, Any], start: _Start) -> _Start | None:
    """The same step with the profiler's own cost taken out (``capture.profiler_overhead_ns``, measured or modelled):
    the step the user runs, which savings, severity and rank are on; None when the capture shows no such cost.

    The cost O sits in the median step's idle pool I (host time the GPU waits through; at most I), spread evenly:
    the step is M - O, its idle pool I - O, the GPU's work and collectives as they are; the mean step's regular part
    loses O in the same proportion. A finding claims the same fraction of its pool as on the profiled step (its share
    is of the trace). The host floor loses the profiler's cost in the host's own time (``profiler_host_cost_ns``),
    never above the step."""
    o = lookup(metrics, "capture.profiler_overhead_ns")
    if start.median is None or not finite(o) or o <= 0 or start.med0["idle"] <= 0:
        return None
    m = float(start.median)
    o = min(float(o), start.med0["idle"])
    regular = start.pool0["idle"] + start.pool0["device"] + start.pool0["communication"]
    o_mean = o * regular / m
    host0 = None
    if start.host0 is not None:
        host0 = min(max(start.host0 - profiler_host_cost_ns(metrics, o), 0.0), m - o)
    return with_fields(
        start,
        mean=start.mean - o_mean,
        median=m - o,
        pool0={**start.pool0, "idle": max(start.pool0["idle"] - o_mean, 0.0)},
        med0={**start.med0, "idle": start.med0["idle"] - o},
        host0=host0,
        host_mean=host0 * (regular - o_mean) / (m - o) if host0 is not None else None,
        claim_pool0=start.pool0,
        claim_mean=start.mean,
        step_basis="without_profiler",
        profiler_ns=o,
    )


@dataclass
class _Sequence:
    """What the findings applied so far left: of the mean step and of the median step (each pool, and the time the
    GPU would wait for the host once a device-side cut reaches the host floor), and the host floor itself."""

    left: dict[str, float]
    med_left: dict[str, float]
    host: dict[str, float | None]  # the host floor in the median step and in the mean step, lowered by host-side cuts
    ids: set[int] = field(default_factory=set)  # the findings that take something off the median step
    on_mean: dict[int, Saving] = field(default_factory=dict)  # each finding's saving of the mean step
    host_floor: bool = False  # a device-side cut of the sequence stopped at the host floor
    gpu_cut: dict[str, float] = field(default_factory=dict)  # finding id -> what it takes off the GPU's own work


def _order(pools: list[Pool | None], rules: list[Rule | None]) -> list[int]:
    """The order the findings (in ``_alone_key`` order) are applied in: host-side cuts first (they lower the host
    floor), then device-side ones (the floor bounds them): the pools are apart but for the floor, so without it this
    order changes nothing; in each, causes first, then symptoms (``Rule.symptom``; each group by its own saving): a
    symptom keeps only the time the causes leave."""
    symptom = [r is not None and r.symptom for r in rules]
    return sorted(range(len(pools)), key=lambda i: (pools[i] in FLOORED, symptom[i], i))


def _cut_median(seq: _Sequence, start: _Start, i: int, fid: str, pool: str, r: float, effect: str) -> tuple[float, str]:
    """What finding ``i`` (of rule ``fid``) takes off the median step in sequence, and what bound it; notes its cut of
    the GPU's own work and whether it joins the sequence."""
    assert start.median is not None
    med_cut, by = _take(seq.med_left, pool, r, seq.host, "median", effect)
    seq.gpu_cut[fid] = r * start.med0[pool] if pool == "device" else 0.0  # the GPU's work shrinks by all of it
    seq.host_floor = seq.host_floor or by == "host_floor"
    if med_cut > 0.5:
        seq.ids.add(i)
    # never more than fixing it alone would: a device-side cut stops at the host's own time per step
    # as the trace shows it (host-side fixes before it in the sequence may have lowered that floor)
    room = max(0.0, float(start.median) - start.host0) if start.host0 is not None and pool in FLOORED else math.inf
    if med_cut > room + 0.5:
        med_cut, by = room, "host_floor"
    return med_cut, by


def _apply_one(
    f: Finding, i: int, pool: Pool | None, claimed: Pool | None, effect: str, start: _Start, seq: _Sequence
) -> Saving:
    """Finding ``i``'s saving in sequence: what it takes from what the findings before it left, on its basis
    (``effect``: how its fix moves the host floor, ``Rule.host_floor``)."""
    alone = _saving_share(f)
    excess = claimed == "excess" or pool == "excess"
    # the fraction of its pool the finding claims, as the trace shows it (its share is of the profiled mean step)
    pool0 = start.claim_pool0 if start.claim_pool0 is not None else start.pool0
    mean0 = start.claim_mean if start.claim_mean is not None else start.mean
    r = min(1.0, alone * mean0 / pool0[pool]) if pool is not None and alone > 0 and pool0[pool] > 0 else 0.0
    cut, med_cut, by = 0.0, 0.0, None
    by_mean: str | None = None
    if r > 0 and pool is not None:
        cut, by = _take(seq.left, pool, r, seq.host, "mean", effect)
        by_mean = by
        if start.median is not None and not excess:
            med_cut, by = _cut_median(seq, start, i, f.id, pool, r, effect)
    if start.has_steps and r > 0 and pool is not None:  # the run's basis may be the mean step (``_one_basis``)
        seq.on_mean[i] = _saving(
            "mean_step", float(start.mean), cut, float(start.mean), pool, by_mean, start.step_basis
        )
    if not start.has_steps:  # no steps: a share of the analysis window
        basis, step, ns = "window", None, cut
    elif excess or start.median is None:  # steps slower than the median: the median step has none of it
        basis, step, ns = "mean_step", float(start.mean), cut
    else:
        basis, step, ns = "median_step", float(start.median), med_cut
    return _saving(basis, step, ns, float(start.mean), pool, by, start.step_basis)


def _all_fixed(out: list[Finding], ranked: list[int], start: _Start, seq: _Sequence, tokens: Any) -> WhatIfAll:
    """The what-if's ``all`` part: the median step with every finding of the sequence applied."""
    assert start.median is not None
    median = start.median
    med_left = seq.med_left
    fixed_all = med_left["idle"] + med_left["device"] + med_left["communication"] + med_left["host_wait"]
    floor = med_left["device"]
    host_floor = seq.host["median"]
    return WhatIfAll(
        finding_ids=[out[j].id for j in range(len(out)) if ranked[j] in seq.ids],
        step_ns=int(median),
        step_ns_if_fixed=int(round(fixed_all)),
        saving_share=1.0 - fixed_all / median,
        compute_floor_ns=int(round(floor)) if start.med_busy is not None else None,
        host_floor_ns=int(round(host_floor)) if host_floor is not None else None,
        bound_by=_all_bound(seq.host_floor, fixed_all, floor if start.med_busy is not None else None),
        tokens_per_s_if_fixed=_tokens_per_s(tokens, fixed_all / median),
        idle_left_ns=int(round(med_left["idle"])),
    )


def _on_mean(f: Finding) -> bool:
    """The finding's saving is of the mean step: its cause is in slower steps only, not in the median step."""
    return f.saving is not None and f.saving.basis == "mean_step" and _shows_a_cut(f.saving)


def _all_on_mean(out: list[Finding], seq: _Sequence, start: _Start) -> WhatIfAll:
    """The what-if's ``all`` part on the mean step, the run's basis when its top finding's cause is in slower steps
    only: the mean step with every finding of the sequence applied (the median step's floors are not its own)."""
    mean = float(start.mean)
    fixed_all = sum(seq.left.values())
    return WhatIfAll(
        finding_ids=[f.id for f in out if f.saving is not None and (f.saving.ns or 0) > 0],
        step_ns=int(mean),
        step_ns_if_fixed=int(round(fixed_all)),
        saving_share=1.0 - fixed_all / mean if mean > 0 else 0.0,
        compute_floor_ns=None,
        host_floor_ns=None,
        bound_by=None,
        tokens_per_s_if_fixed=None,
        idle_left_ns=int(round(seq.left["idle"])),
    )


def _rank(out: list[Finding], of: list[Rule | None], start: _Start | None, seq: _Sequence | None) -> list[int]:
    """Each finding's severity (``severity_of``, its entry of ``out`` replaced) and the ranked order (``_rank_key``);
    when the top finding's saving is of the mean step, every saving of the mean step (one basis per run, #36), ranked
    again."""
    median = start.median if start is not None else None
    out[:] = [replace(f, severity=severity_of(rule, f.saving, median)) for f, rule in zip(out, of)]
    ranked = sorted(range(len(out)), key=lambda i: (*_rank_key(out[i]), i))
    if seq is not None and start is not None and ranked and _on_mean(out[ranked[0]]):
        for i, (f, rule) in enumerate(zip(out, of)):
            if f.saving is not None:
                none = _saving("mean_step", float(start.mean), 0.0, 0.0, None, None, start.step_basis)
                on_mean = seq.on_mean.get(i, none)
                out[i] = replace(f, saving=on_mean, severity=severity_of(rule, on_mean, median))
        ranked = sorted(range(len(out)), key=lambda i: (*_rank_key(out[i]), i))
    return ranked


#: the saving's fields kept under ``saving.profiled`` (``structs.ProfiledSaving``): the same saving on the profiled
#: step
PROFILED_FIELDS = tuple(ProfiledSaving.__struct_fields__)


def _profiled_saving(s: Saving) -> ProfiledSaving:
    """The profiled step's saving, kept beside the one without the profiler (``saving.profiled``)."""
    assert isinstance(s.basis, str)
    assert not isinstance(s.step_ns, UnsetType) and not isinstance(s.step_ns_if_fixed, UnsetType)
    assert not isinstance(s.bound_by, UnsetType)
    return ProfiledSaving(
        basis=s.basis,
        step_ns=s.step_ns,
        ns=s.ns,
        share=s.share,
        step_ns_if_fixed=s.step_ns_if_fixed,
        bound_by=s.bound_by,
    )


def _what_if(out: list[Finding], ranked: list[int], start: _Start, seq: _Sequence, tokens_per_s: Any) -> WhatIf:
    """The what-if of ranked findings on ``start``'s step (the top finding's own saving, all of them)."""
    assert start.median is not None
    top = out[ranked[0]] if out and out[ranked[0]].saving is not None else None
    busy = start.med0["device"] if start.med_busy is not None else None
    ordered = [out[i] for i in ranked]
    top_part = _top_what_if(top, float(start.median), busy, start.host0, seq.gpu_cut, tokens_per_s)
    on_mean = top_part["basis"] == "mean_step"
    return WhatIf(
        **top_part,
        all=_all_on_mean(ordered, seq, start) if on_mean else _all_fixed(ordered, ranked, start, seq, tokens_per_s),
        median_idle_ns=int(round(start.med0["idle"])),
        mean_step_ns=int(start.mean),
        mean_step_ns_if_all_fixed=int(round(sum(seq.left.values()))),
        step_basis=start.step_basis,
    )


def _profiled_what_if(w: WhatIf, lead: WhatIf) -> ProfiledWhatIf:
    """The what-if on the profiled step, beside one on the step without the profiler (``lead``'s): which finding
    leads there, what its fix and all of them give, and whether the profiler's cost changes the leader."""
    return ProfiledWhatIf(
        step_ns=w.step_ns,
        finding_id=w.finding_id,
        finding_title=w.finding_title,
        step_ns_if_fixed=w.step_ns_if_fixed,
        saving_share=w.saving_share,
        all_step_ns_if_fixed=w.all.step_ns_if_fixed,
        all_saving_share=w.all.saving_share,
        host_floor_ns=w.all.host_floor_ns if w.host_floor_ns is None else w.host_floor_ns,
        leader_changes=w.finding_id != lead.finding_id,
    )


def apply_in_sequence(
    findings: list[Finding], metrics: Mapping[str, Any], rules: Sequence[Rule]
) -> tuple[list[Finding], WhatIf | None]:
    """Ranked findings with in-sequence savings (module docstring), and the what-if on the median step: the one
    place a run finding's severity (``severity_of``) and rank (``_rank_key``) are decided. Both on the step without
    the profiler's own cost when the capture shows one (``_without_profiler``), the profiled step's beside them
    (``saving.profiled``, ``what_if.profiled``)."""
    alone = sorted(range(len(findings)), key=lambda i: (*_alone_key(findings[i]), i))
    out = [findings[i] for i in alone]
    of = rules_of([f.id for f in out], metrics, rules)
    start = _start(metrics)
    bare = _without_profiler(metrics, start) if start is not None else None
    basis = bare if bare is not None else start
    profiled = list(out)
    seq = None if basis is None else _in_sequence(out, of, metrics, basis)
    ranked = _rank(out, of, basis, seq)
    prof = None
    if bare is not None and start is not None:
        prof_seq = _in_sequence(profiled, of, metrics, start)
        prof = (prof_seq, _rank(profiled, of, start, prof_seq))
    for i, (f, p) in enumerate(zip(out, profiled)):
        if f.saving is not None:
            keep = _profiled_saving(p.saving) if bare is not None and p.saving is not None else None
            out[i] = replace(f, saving=replace(f.saving, profiled=keep))
    if basis is None or seq is None or basis.median is None:
        return [out[i] for i in ranked], None
    tokens = lookup(metrics, TOKENS_PER_S_SOURCE)
    prof_median = start.median if bare is not None and start is not None else None
    tokens_bare = _tokens_per_s(tokens, float(basis.median) / float(prof_median)) if prof_median else tokens
    what = _what_if(out, ranked, basis, seq, tokens_bare)
    if prof is not None and start is not None:
        what.profiled = _profiled_what_if(_what_if(profiled, prof[1], start, prof[0], tokens), what)
    what.statement = statement(what)
    return [out[i] for i in ranked], what


def _in_sequence(out: list[Finding], of: list[Rule | None], metrics: Mapping[str, Any], start: _Start) -> _Sequence:
    """Each finding's saving in sequence (``_order``), in place in ``out``; what the sequence left."""
    claimed = [_pool_of(rule, metrics) for rule in of]
    # no step adds time over the median (or no steps): the excess is idle time
    pools: list[Pool | None] = ["idle" if p == "excess" and start.pool0["excess"] <= 0 else p for p in claimed]
    seq = _Sequence(
        left={**start.pool0, "host_wait": 0.0},
        med_left={**start.med0, "host_wait": 0.0},
        host={"median": start.host0, "mean": start.host_mean},
    )
    for i in _order(pools, of):
        f, rule = out[i], of[i]
        if f.saving is not None:
            effect = rule.host_floor if rule is not None else "cut"
            out[i] = replace(f, saving=_apply_one(f, i, pools[i], claimed[i], effect, start, seq))
    return seq
