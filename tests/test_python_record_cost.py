"""The Python tracer's cost per record (``metrics.overhead.PYTHON_RECORD_NS``) against the captures that measure it
(docs/whatif.md, "The Python tracer's cost per record"; follow-up of issue #23).

Read here from the raw trace JSON and truth.json, sharing no code with the product:
- the two host-bound pairs that differ only in ``with_stack`` (trust_host_full / _default, trust4_host_full /
  _default): the profiler's measured cost (profiled median host step less the unprofiled reference median) with stacks
  less without, per Python record per recorded step, is the cost the constant states (0.82 and 0.78 us);
- ``blame_host_python``: the trace bounds the cost of its records: inside ``build_masks`` a quarter of the records
  (the token loop's ``list.append``, alike the others) start less than 1 us after the one before, the loop's own code
  included, so the 3.7 us a record that the truth's steps after the window would imply (window less post-window
  ``build_masks`` time, per record) is not the tracer's; against the steps before the window it is 1.1 us. The two
  unprofiled windows of the truth disagree (issue #23's 1.71x).
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from tb_llmdiag.metrics.overhead import PYTHON_RECORD_NS

DATA = Path(__file__).resolve().parent / "data"
PAIRS = [("trust_host_full", "trust_host_default"), ("trust4_host_full", "trust4_host_default")]
#: the pairs' per-record costs must each be within this of the constant (their own spread is 0.04 us)
PAIR_TOLERANCE_NS = 100.0


def _events(name: str) -> list[dict]:
    (path,) = (DATA / name).glob("*.pt.trace.json.gz")
    with gzip.open(path, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def _truth(name: str) -> dict:
    return json.loads((DATA / name / "truth.json").read_text())


def _overhead_ms(name: str) -> float:
    r = _truth(name)["ranks"][0]
    return r["profiled"]["active_median_host_ms"] - r["reference"]["median_wall_ms"]


def _python_records_per_step(name: str) -> float:
    ev = _events(name)
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in ev
             if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
    inside = sum(1 for e in ev if e.get("cat") == "python_function" and any(a <= e["ts"] < b for a, b in steps))
    return inside / len(steps)


@pytest.mark.parametrize(("full", "default"), PAIRS)
def test_the_pairs_with_and_without_stacks_measure_the_per_record_cost(full: str, default: str) -> None:
    # GIVEN two runs of one host-bound config, one with with_stack, each timed profiled and unprofiled
    assert _truth(full)["profiler"]["with_stack"] and not _truth(default)["profiler"]["with_stack"]
    # WHEN the extra profiler cost with stacks is divided by the Python records each recorded step holds
    per_record_ns = (_overhead_ms(full) - _overhead_ms(default)) * 1e6 / _python_records_per_step(full)
    # THEN it is the cost per record the product states
    assert abs(per_record_ns - PYTHON_RECORD_NS) <= PAIR_TOLERANCE_NS, per_record_ns


def test_the_host_python_trace_bounds_its_records_cost() -> None:
    ev = _events("blame_host_python")
    r = _truth("blame_host_python")["ranks"][0]
    calls = [e for e in ev if e.get("cat") == "python_function" and e["name"].endswith("build_masks")]
    assert len(calls) == 4
    cycles, records = [], []
    for c in calls:
        inside = sorted(e["ts"] for e in ev if e.get("cat") == "python_function" and e.get("tid") == c["tid"]
                        and c["ts"] < e["ts"] < c["ts"] + c["dur"])
        records.append(len(inside))
        cycles += [b - a for a, b in zip(inside, inside[1:])]
    # THEN a quarter of the records start < 1 us after the one before: the record and the code between them included
    assert statistics.quantiles(cycles, n=4)[0] < 1.0 and records == [8201] * 4
    # AND the truth's build_masks times per record: 1.1 us against the steps before the window, 3.7 us against those
    # after it; the trace rules out the second as the tracer's cost, the first agrees with the pairs
    work = r["host_work_ms"]["build_masks_ms"]
    phases = dict(zip(r["profiled"]["steps"], r["profiled"]["phases"]))
    window = statistics.median(work[s] for s, p in phases.items() if p == "active")
    before = statistics.median(work[s] for s, p in phases.items() if p in ("skip", "warmup"))
    after = statistics.median(work[s] for s in r["reference"]["steps"])
    per_record_before_ns = (window - before) * 1e6 / records[0]
    per_record_after_ns = (window - after) * 1e6 / records[0]
    assert per_record_after_ns > 3 * 1.0e3 and abs(per_record_before_ns - PYTHON_RECORD_NS) < 0.4e3
