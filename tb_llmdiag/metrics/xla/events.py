"""XLA host events over an XPlane trace: compiles and host<->device transfers, each placed in its step.

Part of the ``xla`` topic (``metrics.xla.topic``; definitions in its docstring and docs/xplane.md):
- A compile is an outermost compile event (nested and cross-thread compiles inside it count once).
- A transfer is an outermost ``TransferToDevice`` / ``TransferFromDevice`` (or ``ToLiteral``) host event.
- ``position``: ``in_step``, ``between_steps``, ``before_steps`` or ``after_steps``; "in the loop" means
  in a step or between two steps (a ``.item()`` or print after a step lands there).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.metrics.steps.windows import Steps
from tb_llmdiag.model import DEVICE_KINDS, Trace, kind_mask


def locate(t: NDArray[np.int64], steps: Steps) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
    """For host times t: the window index w of the last step whose host marker starts at or before t (-1 if
    none) and whether t lies inside that step (before its end). Steps must be sorted (find_steps sorts them)."""
    w = np.searchsorted(steps.host_starts, t, side="right") - 1
    inside = (w >= 0) & (t < steps.end_ns[np.clip(w, 0, None)]) if len(steps) else np.zeros(t.size, dtype=bool)
    return w, inside


def _position(w: int, inside: bool, n: int) -> str:
    if inside:
        return "in_step"
    if w < 0:
        return "before_steps"
    return "between_steps" if w < n - 1 else "after_steps"


def outermost(start: NDArray[np.int64], end: NDArray[np.int64]) -> NDArray[np.intp]:
    """Indices of outermost intervals: sorted by start (longest first), an interval starting before the end
    of an earlier one is nested in it (also across threads) and dropped; one starting at that end is not."""
    order = np.lexsort((-(end - start), start))
    reach = np.maximum.accumulate(end[order])
    keep = np.ones(order.size, dtype=bool)
    keep[1:] = start[order][1:] >= reach[:-1]
    return order[keep]


def device_ops(trace: Trace) -> NDArray[np.bool_]:
    """KERNEL / MEMCPY / MEMSET rows on a device."""
    ev = trace.events
    return kind_mask(ev.kind, DEVICE_KINDS) & (ev.device >= 0)


def role_roots(trace: Trace, role: str) -> NDArray[np.intp]:
    """Outermost events of an ``xla_role`` (``compile``, ``transfer_to_device``, ``transfer_from_device``)."""
    roles = trace.extra.get("xla_role")
    labels = trace.extra_names.get("xla_role", ())
    if roles is None or role not in labels:
        return np.zeros(0, dtype=np.intp)
    idx = np.flatnonzero(np.asarray(roles) == labels.index(role))
    if idx.size == 0:
        return idx
    ev = trace.events
    return idx[outermost(ev.ts_ns[idx], ev.end_ns[idx])]


def compiles(trace: Trace, steps: Steps) -> list[dict[str, Any]]:
    """One record per outermost compile: time, step, position, graph hash, module and program ids."""
    ev = trace.events
    roots = role_roots(trace, "compile")
    if roots.size == 0:
        return []
    ends = ev.end_ns
    gh = trace.extra.get("graph_hash_id")
    mod = trace.extra.get("hlo_module_id")
    gh_names = trace.extra_names.get("graph_hash_id", ())
    mod_names = trace.extra_names.get("hlo_module_id", ())
    compiler_evt = ev.name_mask(lambda n: "Compil" in n or "RunBackend" in n) & (ev.device < 0)
    has_gh = np.flatnonzero((np.asarray(gh) >= 0) & (ev.device < 0)) if gh is not None else np.zeros(0, np.intp)
    has_mod = np.flatnonzero((np.asarray(mod) >= 0) & compiler_evt) if mod is not None else np.zeros(0, np.intp)
    programs: dict[str, list[int]] = {}
    module_of: dict[int, str] = {}
    for p in trace.metadata.get("xla_programs", ()) or ():
        if isinstance(p, dict) and p.get("program_id") is not None:
            programs.setdefault(str(p.get("name")), []).append(int(p["program_id"]))
            module_of[int(p["program_id"])] = str(p.get("name"))
    first_run = _program_first_runs(trace)
    w, inside = locate(ev.ts_ns[roots], steps)
    out = []
    for k, i in enumerate(roots.tolist()):
        s, e = int(ev.ts_ns[i]), int(ends[i])

        def first_within(cands: NDArray[np.intp], s: int = s, e: int = e) -> int:
            c = cands[(ev.ts_ns[cands] >= s) & (ev.ts_ns[cands] < max(e, s + 1))]
            return int(c[0]) if c.size else -1

        if gh is not None and gh[i] >= 0:
            g = int(gh[i])
        else:
            j = first_within(has_gh)
            g = int(gh[j]) if j >= 0 and gh is not None else -1
        j = first_within(has_mod)
        module = mod_names[int(mod[j])] if j >= 0 and mod is not None else None
        # the programs this compile produced: those whose device ops first run after it starts (and before
        # the next compile), of its module when that is known; else every program of the module
        nxt = int(ev.ts_ns[roots[k + 1]]) if k + 1 < roots.size else None
        new = [
            p
            for p, t in first_run.items()
            if t >= s and (nxt is None or t < nxt) and (module is None or module_of.get(p, module) == module)
        ]
        if module is None and new:
            names = {module_of[p] for p in new if p in module_of}
            module = names.pop() if len(names) == 1 else None
        out.append(
            {
                "name": ev.name_of(i),
                "start_ns": s,
                "duration_ns": e - s,
                "step": int(steps.index[w[k]]) if w[k] >= 0 and len(steps) else None,
                "position": _position(int(w[k]), bool(inside[k]), len(steps)),
                "graph_hash": gh_names[g] if g >= 0 and g < len(gh_names) else None,
                "module": module,
                "program_ids": sorted(new) if new else sorted(programs.get(module, [])) if module else [],
            }
        )
    return out


def _program_first_runs(trace: Trace) -> dict[int, int]:
    """program id -> start of its first device op (device ops that carry a ``program_id``: GPU kernels of XLA
    programs, TPU ops through their metadata)."""
    pid = trace.extra.get("program_id")
    if pid is None:
        return {}
    ev = trace.events
    pid = np.asarray(pid, dtype=np.int64)
    dev = np.flatnonzero(device_ops(trace) & (pid >= 0))
    if dev.size == 0:
        return {}
    ids, first = np.unique(pid[dev], return_index=True)  # rows are sorted by start: the first row is the first run
    return {int(p): int(ev.ts_ns[dev[f]]) for p, f in zip(ids.tolist(), first.tolist())}


def transfers(trace: Trace, steps: Steps, role: str) -> list[dict[str, Any]]:
    """One record per outermost transfer of a direction, with its step and position."""
    ev = trace.events
    roots = role_roots(trace, role)
    if roots.size == 0:
        return []
    w, inside = locate(ev.ts_ns[roots], steps)
    return [
        {
            "start_ns": int(ev.ts_ns[i]),
            "duration_ns": int(ev.dur_ns[i]),
            "step": int(steps.index[w[k]]) if w[k] >= 0 and len(steps) else None,
            "position": _position(int(w[k]), bool(inside[k]), len(steps)),
        }
        for k, i in enumerate(roots.tolist())
    ]


def in_loop(rec: dict[str, Any]) -> bool:
    return rec["position"] in ("in_step", "between_steps")
