"""The XLA steps charged to causes, and the savings the XLA findings claim (keys added to the ``xla`` topic).

``step_split_metrics(xla, durations_ns, indices) -> dict`` is a pure function of the ``xla`` topic's own keys
(``compute_xla``) and the step windows (``Steps``: listed once in the report, as ``steps.per_step``), so
the rules (``tb_llmdiag/findings/xla.py``) read finished numbers and do no metric work. Each step is charged
to one cause, so two findings do not claim the same time:

- a step in which a compile starts is a *compile step* (``recompile_steps``, and the first step when the
  warm-up compile is inside it);
- a steady step with a device-to-host transfer inside it is a *transfer step*: its excess over the median
  *clean* step is the stall the read-back caused (the host waits for the device inside ``np.asarray`` /
  ``.item()``, mostly outside the short ``ToLiteral`` event the metrics time);
- the other steps are *clean*.

Keys (shares are of the summed step time T, like every saving; None where not computable):

- ``transfer_stall_ns``: sum over transfer steps of max(0, d - median clean step);
- ``host_transfer_saving_share``: max(``host_transfer_share``, transfer stall / T) (without step durations:
  ``host_transfer_share``);
- ``clean_step_cv``: population std / mean of the clean steps, or of all steady steps when fewer than three
  are clean (a read-back in every step is ``host_transfer``'s, but the steps can still vary); None with < 3;
- ``clean_step_excess_share``: n x (mean - median) over those same steps, / T (what steadier steps save);
- ``steady_device_idle_saving_share``: (1 - ``steady_device_duty_cycle_share``) x steady time - transfer
  stall, / T (an upper bound: the host has to dispatch the work in some of that time);
- ``movement_saving_share``: ``movement_step_share`` x steady time, / T.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tb_llmdiag.metrics.steps.windows import Steps

SPLIT_KEYS = (
    "transfer_stall_ns",
    "host_transfer_saving_share",
    "clean_step_cv",
    "clean_step_excess_share",
    "steady_device_idle_saving_share",
    "movement_saving_share",
)


def _num(v: Any) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None


def _of_window(ns: float | None, total_ns: float) -> float | None:
    if ns is None or total_ns <= 0:
        return None
    return max(0.0, ns) / total_ns


def step_split_metrics(
    x: Mapping[str, Any], durations_ns: NDArray[np.int64], indices: NDArray[np.int64]
) -> dict[str, Any]:
    """The ``SPLIT_KEYS`` of one ``xla`` topic and its steps' durations and indexes (module docstring); None
    without steps."""
    out: dict[str, Any] = dict.fromkeys(SPLIT_KEYS)
    own = _num(x.get("host_transfer_share"))
    out["host_transfer_saving_share"] = own
    if len(durations_ns) == 0 or len(durations_ns) != len(indices):
        return out
    d = np.asarray(durations_ns, dtype=np.float64)
    idx = np.asarray(indices, dtype=np.int64)
    compile_steps = set(x.get("recompile_steps") or ())
    if x.get("warmup_compile_in_steps"):
        compile_steps.add(int(idx[0]))  # warm-up compiles inside a step are in the first one
    transfer_steps = {
        t.get("step")
        for t in x.get("transfers_from_device") or ()
        if isinstance(t, Mapping) and t.get("position") == "in_step"
    } - compile_steps
    steady = ~np.isin(idx, sorted(compile_steps))
    transfer = steady & np.isin(idx, sorted(s for s in transfer_steps if isinstance(s, int)))
    clean = d[steady & ~transfer]
    total = float(d.sum())
    steady_ns = float(d[steady].sum())
    stall = float(np.maximum(0.0, d[transfer] - np.median(clean)).sum()) if clean.size else 0.0
    out["transfer_stall_ns"] = int(round(stall))
    vals = [v for v in (own, _of_window(stall, total)) if v is not None]
    out["host_transfer_saving_share"] = max(vals) if vals else None
    c = clean if clean.size >= 3 else d[steady]
    if c.size:
        mean = c.mean()
        out["clean_step_cv"] = float(c.std() / mean) if c.size >= 3 and mean > 0 else None
        out["clean_step_excess_share"] = _of_window(float(c.size * (mean - np.median(c))), total)
    duty = _num(x.get("steady_device_duty_cycle_share"))
    if duty is not None:
        out["steady_device_idle_saving_share"] = _of_window((1.0 - duty) * steady_ns - stall, total)
    movement = _num(x.get("movement_step_share"))
    if movement is not None:
        out["movement_saving_share"] = _of_window(movement * steady_ns, total)
    return out


def with_step_split(x: dict[str, Any], steps: Steps) -> dict[str, Any]:
    """The ``xla`` topic with the ``SPLIT_KEYS`` added (unchanged when the topic is unavailable)."""
    if x.get("available") is False:
        return x
    return {**x, **step_split_metrics(x, steps.duration_ns, steps.index)}
