"""Top-level trace fields beyond the envelope's declared ones: what the capture says about itself.

Read from the small texts around the events (the header and the metadata after them), never from the events:
- ``*_version`` fields (``cupti_version``, ``cuda_runtime_version``, ``roctracer_version``, ``hip_runtime_version``...),
  ``with_flops`` / ``with_modules``: the profiler and its options;
- ``WARNING`` / ``ERROR``: the messages Kineto's logger collected during the capture (lists of strings; a CUPTI
  buffer overflow says how many records it dropped);
- the unprofiled step times a capture helper wrote into the trace (``prof.add_metadata_json``): any field whose name
  holds ``unprofiled``, with a list of step times (or an object holding one, or a single median). The unit is read
  from the name (``_ms``, ``_us``, ``_ns``, ``_s``; ms when it names none) and the times become
  ``unprofiled_step_ns`` (a list of ints, positive values only). ``tb_llmdiag.capture`` writes
  ``llmdiag_unprofiled_step_ns``: ``{"steps": [0, 1, 2], "step_ns": [...], "synchronized": true, ...}``; step 0's
  time is left out when two others remain (a run's first step pays one-time costs). From its schema 2 on it adds
  the steps timed after the window (``after_steps``, ``after_step_ns``). The basis (``unprofiled_step_ns``) is the
  steps before the window when at least ``MIN_BEFORE`` remain with step 0 left out (and any step at or past the
  first window's warm-up: with ``repeat``, a later window's ``wait`` steps ran after a profiler), as they are the job
  before any profiler ran in the process: a profiler's state can outlive its window (Kineto keeps CUPTI attached
  unless ``TEARDOWN_CUPTI=1``), so the steps after it may run slower than the job the user runs (docs/captures_5.md);
  else the steps after the window, else the few before it. Both lists are kept for the metrics
  (``unprofiled_before_step_ns``, ``unprofiled_after_step_ns``: the helper's object only) and ``unprofiled_when``
  says which is the basis: ``before_window``, ``after_window``, or absent (another writer's field: not known).
  Schema 3 (``synchronized: "run_edges"``: the times on the host clock, a sync only at the edges of each run of them)
  reads as schema 2.

- the over-the-run window's own object (``llmdiag_window``, written by ``tb_llmdiag.capture_series``): kept as
  ``llmdiag_window`` with only its known fields of the right types (``window_metadata``): the series id, the
  window's index, why it was taken, its global step and steps, the unprofiled step it is measured against and the
  steps before it, tokens a step, the trigger and the capture's cost so far. A field of another type is dropped,
  an object without a series id or a global step is not kept at all.

``extra_metadata(text)`` never raises: a text that is not a JSON object, or a field that does not decode, gives
nothing.
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_WANTED = re.compile(
    r"unprofiled|^(?:WARNING|ERROR)$|_version$|^with_(?:flops|modules)$|^llmdiag_window$", re.IGNORECASE
)
WINDOW_KEY = "llmdiag_window"
_REASONS = frozenset({"first", "periodic", "triggered", "final"})
_UNIT_NS = (("_ns", 1.0), ("_us", 1e3), ("_ms", 1e6), ("_s", 1e9))
_MAX_FIELD_BYTES = 1 << 16
_MAX_MESSAGES = 50
#: names in an unprofiled-steps object that are not times
_TIME_NAME = re.compile(r"time|wall|dur|median|mean", re.IGNORECASE)
_NOT_TIMES = frozenset({"steps", "step", "index", "indices", "step_index", "schema", "synchronized"})


def extra_metadata(text: bytes) -> dict[str, Any]:
    """The wanted top-level fields of a trace document's text (module docstring)."""
    try:
        doc = _TOP.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
        return {}
    out: dict[str, Any] = {}
    for key, raw in doc.items():
        if key == "traceEvents" or len(raw) > _MAX_FIELD_BYTES or not _WANTED.search(key):
            continue
        try:
            value = msgspec.json.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
        if key == WINDOW_KEY:
            window = window_metadata(value)
            if window is not None:
                out[WINDOW_KEY] = window
        elif "unprofiled" in key.lower():
            helper = _helper_steps_ns(value)
            if helper is None:
                helper = {"unprofiled_step_ns": unprofiled_steps_ns(key, value)}
            if helper["unprofiled_step_ns"]:
                out.update(helper)
                out["unprofiled_source"] = key
        elif key in ("WARNING", "ERROR"):
            msgs = value if isinstance(value, list) else [value]
            out[key] = [str(m)[:500] for m in msgs[:_MAX_MESSAGES]]
        elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
            out[key] = value
        elif isinstance(value, bool):
            out[key] = int(value)
    return out


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**62 else None


def _num(v: Any) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) < 1e18
    return float(v) if ok else None


def _ints(v: Any, limit: int = 1000) -> list[int] | None:
    if not isinstance(v, list):
        return None
    got = [_int(x) for x in v[:limit]]
    return [x for x in got if x is not None] if all(x is not None for x in got) else None


_WINDOW_INTS = ("schema", "index", "global_step", "step_ns", "every", "every_effective", "first_step", "cooldown_steps")
_WINDOW_LISTS = ("warmup_steps", "window_steps", "profiled_step_ns", "before_steps", "before_step_ns", "after_steps",
                 "after_step_ns")  # fmt: skip
_TRIGGER_NUMS = ("step", "step_ns", "median_ns", "threshold_share", "confirm_steps")
_COST_NUMS = ("window_ns", "profiler_start_ns", "profiler_stop_export_ns", "spent_ns", "one_time_ns", "helper_ns",
              "elapsed_ns", "spent_share", "budget_share", "total_steps")  # fmt: skip


def _numbers(obj: Any, names: tuple[str, ...]) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    for name in names:
        v = obj.get(name)
        i, x = _int(v), _num(v)
        if i is not None:
            out[name] = i
        elif x is not None:
            out[name] = x
    return out


def window_metadata(value: Any) -> dict[str, Any] | None:
    """The known fields of an over-the-run window's object (module docstring), or None without a series id and a
    global step."""
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("series"), str)
        or _int(value.get("global_step")) is None
    ):
        return None
    out: dict[str, Any] = {"series": value["series"][:64]}
    out.update({k: v for k in _WINDOW_INTS if (v := _int(value.get(k))) is not None})
    out.update({k: xs for k in _WINDOW_LISTS if (xs := _ints(value.get(k))) is not None})
    if value.get("reason") in _REASONS:
        out["reason"] = value["reason"]
    tokens = _num(value.get("tokens_per_step"))
    if tokens is not None and tokens > 0:
        out["tokens_per_step"] = tokens
    trigger = value.get("trigger")
    if isinstance(trigger, dict):
        t: dict[str, Any] = dict(_numbers(trigger, _TRIGGER_NUMS))
        for k in ("slow_steps", "slow_step_ns"):
            if (listed := _ints(trigger.get(k), 100)) is not None:
                t[k] = listed
        out["trigger"] = t
    cost = value.get("cost")
    if isinstance(cost, dict):
        out["cost"] = dict(_numbers(cost, _COST_NUMS))
        if (skipped := _ints(cost.get("skipped_steps"))) is not None:
            out["cost"]["skipped_steps"] = skipped
    return out


def _unit(key: str, default: float) -> float:
    k = key.lower()
    for suffix, ns in _UNIT_NS:
        if k.endswith(suffix) or f"{suffix}_" in k:
            return ns
    return default


def unprofiled_steps_ns(key: str, value: Any, unit_ns: float | None = None) -> list[int]:
    """Step times in ns from a field's value: a list of numbers, a number, a JSON string of either, or an object
    whose times are taken from its first member named with a unit or as times (``*_ns``, ``wall_ms``, ``times``...;
    lists before single values, never nested objects nor ``steps``), in its own name's unit, else the field's, else
    ms."""
    unit = _unit(key, unit_ns if unit_ns is not None else 1e6)
    if isinstance(value, str):
        try:
            value = msgspec.json.decode(value.encode())
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return []
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        value = [value]
    if isinstance(value, list):
        nums = [float(v) for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return [int(round(v * unit)) for v in nums if 0 < v < 1e15 and v * unit < 2**62]
    if isinstance(value, dict):
        # the times are the list (or number) whose name gives a unit; step indices (``steps``) are not times
        keys = [
            k
            for k in value
            if str(k).lower() not in _NOT_TIMES
            and not isinstance(value[k], dict)
            and (_unit(str(k), 0.0) != 0.0 or _TIME_NAME.search(str(k)))
        ]
        keys.sort(key=lambda k: (_unit(str(k), 0.0) == 0.0, not isinstance(value[k], list), "median" in str(k).lower()))
        for k in keys:
            got = unprofiled_steps_ns(str(k), value[k], unit)
            if got:
                return _without_first_step(got, value.get("steps"))
    return []


#: the fewest steps before the window (step 0 left out) taken as the basis over those after it
MIN_BEFORE = 3


def _helper_steps_ns(value: Any) -> dict[str, Any] | None:
    """The fields read from ``tb_llmdiag.capture``'s object (it names its ``schema``; module docstring): the basis
    ``unprofiled_step_ns`` and ``unprofiled_when``, and the lists before and after the window; None for another
    writer's field."""
    if not isinstance(value, dict) or not isinstance(value.get("schema"), int) or "step_ns" not in value:
        return None
    after = unprofiled_steps_ns("after_step_ns", value.get("after_step_ns", []))
    before, step0_free = _pristine(
        unprofiled_steps_ns("step_ns", value["step_ns"]), value.get("steps"), value.get("schedule")
    )
    out: dict[str, Any] = {"unprofiled_before_step_ns": before}
    if after:
        out["unprofiled_after_step_ns"] = after
    if len(before) >= MIN_BEFORE and step0_free:
        return {"unprofiled_step_ns": before, "unprofiled_when": "before_window", **out}
    if after:
        return {"unprofiled_step_ns": after, "unprofiled_when": "after_window", **out}
    return {"unprofiled_step_ns": before, "unprofiled_when": "before_window", **out}


def _pristine(times: list[int], steps: Any, schedule: Any) -> tuple[list[int], bool]:
    """The times before the window less step 0's (``_without_first_step``) and less those at or past the first
    window's warm-up (``skip_first + wait`` of the schedule, when it names them: with ``repeat``, a later window's
    steps before it hold the earlier cycles' ``wait`` steps, which ran after a profiler); and whether they are known
    to hold no step 0 (the object names its steps)."""
    if not isinstance(steps, list) or len(steps) != len(times):
        return times, False
    first = (schedule.get("skip_first"), schedule.get("wait", 0)) if isinstance(schedule, dict) else (None,)
    if all(isinstance(x, int) and not isinstance(x, bool) for x in first):
        pairs = [(s, t) for s, t in zip(steps, times) if not isinstance(s, int) or s < sum(first)]
        steps, times = [s for s, _ in pairs], [t for _, t in pairs]
    kept = _without_first_step(times, steps)
    return kept, len(kept) < len(times) or 0 not in steps


def _without_first_step(times: list[int], steps: Any) -> list[int]:
    """The times less step 0's when the object names its steps and at least two others remain: a run's first step
    pays one-time costs (allocator growth, cuBLAS handles, compilation) no later step pays."""
    if not isinstance(steps, list) or len(steps) != len(times):
        return times
    kept = [t for s, t in zip(steps, times) if s != 0]
    return kept if len(kept) >= 2 else times
