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
  (excess pool; when it is 0, excess findings take from the idle pool). The four pools add up to T. Causes first, then symptoms (``Rule.symptom``: host-bound, tiny kernels, long
  gaps, step variance: what the causes' time shows up as), each group in rank order, each finding removes the
  fraction r = min(1, share x T / its pool's initial size) of what is *left* of its pool: savings are applied in
  sequence on the remaining time, never added, so causes that claim the same idle time (host-bound, a slow host
  op, syncs) do not count it twice, and the shares shown (``saving.share``, each finding's cut / T) add up to at
  most 1. The finding's own bound, alone, stays in ``saving.alone_share`` / ``alone_ns``. Findings are then
  shown by what they add in that sequence (``saving.share``), highest first.
- On the median step M (the what-if): its busy time B_M (median of the per-step busy times, else busy share x M)
  and idle time M - B_M; each ``idle`` / ``device`` finding removes the same fraction r of what is left of its
  pool in M; ``excess`` findings remove nothing from M. ``compute_floor_ns`` is B_M less what the ``device``
  findings take off kernels: no what-if step goes below it (idle findings cannot remove busy time).
- Without steps the shares are of the analysis window (``idle.window_ns``): they are applied in sequence on it
  the same way (``ns`` stays null) and there is no what-if.
- Tokens/s: ``steps.tokens_per_step_median`` / step time (padded token slots), before and after.
Every number is an upper bound ("at most ... if ... removed entirely"): it assumes the cause's time disappears
and nothing else moves in to fill it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tb_llmdiag.findings.engine import Rule, applicable, finite, lookup
from tb_llmdiag.units import fmt_ns

#: the what-if names the first finding that takes at least this share off the median step (less reads as noise)
MIN_CUT_SHARE = 0.005


def _pool_of(claims: str | None) -> str | None:
    return {"idle": "idle", "excess": "excess", "device": "device", "communication": "communication"}.get(claims or "")


def _busy_share(m: Mapping[str, Any]) -> float | None:
    v = lookup(m, "idle.busy_share")
    if not finite(v):
        v = lookup(m, "xla.device_duty_cycle_share")
    return min(max(float(v), 0.0), 1.0) if finite(v) else None


def _median_busy_ns(m: Mapping[str, Any], median: int, busy_share: float | None) -> int | None:
    rows = lookup(m, "steps.per_step")
    per = [r.get("busy_ns") for r in rows] if isinstance(rows, list) else None
    n = lookup(m, "steps.count")
    if isinstance(per, list) and per and len(per) == n and all(finite(x) for x in per):
        s = sorted(float(x) for x in per)
        mid = len(s) // 2
        b = s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
        return int(round(min(b, median)))
    return int(round(busy_share * median)) if busy_share is not None else None


def _median_collective_ns(m: Mapping[str, Any], median: int) -> int:
    """The median step's time only collectives cover (median of ``steps.per_step[].collective_ns``), else
    ``idle.collective_share`` x the median step; 0 when unknown (no collectives)."""
    rows = lookup(m, "steps.per_step")
    per = [r.get("collective_ns") for r in rows] if isinstance(rows, list) else None
    if isinstance(per, list) and per and all(finite(x) for x in per):
        s = sorted(float(x) for x in per)
        mid = len(s) // 2
        return int(round(min(s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2, median)))
    c = lookup(m, "idle.collective_share")
    return int(round(float(c) * median)) if finite(c) else 0


def _claims(rules: Sequence[Rule], metrics: Mapping[str, Any]) -> dict[str, str | None]:
    """Rule id -> the pool it claims on this run (a named function of the metrics, or a fixed pool); a rule
    of the run's platform wins over a neutral one of the same id (``engine.applicable``)."""
    return {r.id: (r.claims(metrics) if callable(r.claims) else r.claims) for r in applicable(metrics, rules)}


def _tokens_per_s(tokens: Any, step_ns: float) -> float | None:
    return float(tokens) / (step_ns / 1e9) if finite(tokens) and tokens > 0 and step_ns > 0 else None


def _saving_share(f: Mapping[str, Any]) -> float:
    s = f.get("saving") or {}
    v = s.get("share")
    return float(v) if finite(v) else 0.0


def apply_in_sequence(
    findings: list[dict[str, Any]], metrics: Mapping[str, Any], rules: Sequence[Rule]
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Ranked findings with in-sequence savings (module docstring), and the what-if on the median step."""
    claims = _claims(rules, metrics)
    mean = lookup(metrics, "steps.mean_ns")
    median = lookup(metrics, "steps.median_ns")
    busy = _busy_share(metrics)
    out = [dict(f) for f in findings]
    has_steps = finite(mean) and mean > 0
    if not has_steps:  # no steps: the shares are of the analysis window; apply them in sequence on it
        mean = lookup(metrics, "idle.window_ns")
        median = None
        if not finite(mean) or mean <= 0:
            return out, None
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
    left = dict(pool0)
    med0 = (
        {
            "idle": float(median) - (med_busy or 0) - med_coll,
            "device": float(med_busy or 0),
            "communication": float(med_coll),
        }
        if have_median
        else {}
    )
    med_left = dict(med0)
    symptom = {r.id for r in applicable(metrics, rules) if r.symptom}
    # causes first, then symptoms (each group in rank order): a symptom keeps only the time the causes leave
    order = sorted(range(len(out)), key=lambda i: (out[i]["id"] in symptom, i))
    alone_cut: dict[int, tuple[float, str]] = {}
    for i in order:
        f = out[i]
        alone = _saving_share(f)
        s = f.get("saving")
        if not isinstance(s, dict):
            continue
        pool = _pool_of(claims.get(f["id"]))
        if pool == "excess" and pool0["excess"] <= 0:
            pool = "idle"  # no step adds time over the median (or no steps): the excess is idle time
        cut = med_cut = 0.0
        if pool is not None and alone > 0 and pool0[pool] > 0:
            r = min(1.0, alone * mean / pool0[pool])
            cut = r * left[pool]
            left[pool] -= cut
            if have_median and pool != "excess" and claims.get(f["id"]) != "excess":
                med_cut = r * med_left[pool]
                med_left[pool] -= med_cut
                alone_cut[i] = (r * med0[pool], pool)
        f["saving"] = {
            "share": cut / mean,
            "ns": int(round(cut)) if has_steps else None,
            "alone_share": s.get("share"),
            "alone_ns": s.get("ns"),
            "median_step_ns": int(round(med_cut)) if have_median else None,
        }
    # shown by what each adds in that sequence (then by their own rank)
    ranked = sorted(range(len(out)), key=lambda i: (-_saving_share(out[i]), i))
    out = [out[i] for i in ranked]
    top: dict[str, Any] | None = None
    for i in ranked:  # the what-if: the first finding that alone takes >= 0.5 % off the median step
        if i in alone_cut and have_median and alone_cut[i][0] >= MIN_CUT_SHARE * float(median):
            top = {"finding_id": findings[i]["id"], "median_cut": alone_cut[i][0], "pool": alone_cut[i][1]}
            break
    if not have_median:
        return out, None
    tokens = lookup(metrics, "steps.tokens_per_step_median")
    fixed_all = med_left["idle"] + med_left["device"] + med_left["communication"]
    floor = med_left["device"]
    ids = [f["id"] for f in out if (f.get("saving") or {}).get("median_step_ns")]
    if top is None:
        single_fixed = float(median)
        single_floor = med0["device"]
    else:
        single_fixed = float(median) - top["median_cut"]
        single_floor = med0["device"] - (top["median_cut"] if top["pool"] == "device" else 0.0)
    what = {
        "basis": "median_step",
        "bound": True,
        "finding_id": top["finding_id"] if top else None,
        "step_ns": int(median),
        "step_ns_if_fixed": int(round(single_fixed)),
        "saving_share": 1.0 - single_fixed / median,
        "compute_floor_ns": int(round(single_floor)) if med_busy is not None else None,
        "tokens_per_s": _tokens_per_s(tokens, float(median)),
        "tokens_per_s_if_fixed": _tokens_per_s(tokens, single_fixed),
        "all": {
            "finding_ids": ids,
            "step_ns_if_fixed": int(round(fixed_all)),
            "saving_share": 1.0 - fixed_all / median,
            "compute_floor_ns": int(round(floor)) if med_busy is not None else None,
            "tokens_per_s_if_fixed": _tokens_per_s(tokens, fixed_all),
        },
        "mean_step_ns": int(mean),
        "mean_step_ns_if_all_fixed": int(round(left["idle"] + left["device"] + left["communication"] + left["excess"])),
    }
    what["statement"] = statement(what)
    return out, what


def statement(w: Mapping[str, Any]) -> str:
    """The what-if in words, as a bound."""
    med = w["step_ns"]
    parts = []
    if w.get("finding_id"):
        parts.append(
            f"median step {fmt_ns(med)}: at most {fmt_ns(med)} -> {fmt_ns(w['step_ns_if_fixed'])} "
            f"(-{100 * w['saving_share']:.0f} %) if the cause of `{w['finding_id']}` were removed entirely"
        )
    else:
        parts.append(f"median step {fmt_ns(med)}: no finding's cause is in the median step")
    a = w["all"]
    if len(a["finding_ids"]) > 1:
        parts.append(
            f"at most {fmt_ns(a['step_ns_if_fixed'])} (-{100 * a['saving_share']:.0f} %) with all "
            f"{len(a['finding_ids'])} findings' causes removed, applied in sequence"
        )
    if w.get("compute_floor_ns") is not None:
        parts.append(
            f"the GPU's own work in the median step is {fmt_ns(w['all']['compute_floor_ns'] or 0)}, a floor no fix of "
            f"idle time goes below"
        )
    if w["mean_step_ns"] > 1.05 * med:
        parts.append(
            f"slower steps make the mean step {fmt_ns(w['mean_step_ns'])}: at most "
            f"{fmt_ns(w['mean_step_ns_if_all_fixed'])} with every cause removed"
        )
    if w.get("tokens_per_s") and w.get("tokens_per_s_if_fixed"):
        parts.append(f"{w['tokens_per_s']:,.0f} -> at most {w['tokens_per_s_if_fixed']:,.0f} tokens/s")
    return "; ".join(parts) + "."
