"""The typed findings: ``Finding`` (a run's, docs/report_schema.md), its ``Saving`` and ``FindingFix``,
``JobFinding`` (a job's, docs/jobs.md), ``WhatIf`` (with ``WhatIfAll`` and ``Unprofiled``).

The findings layer builds and reads these objects; they become JSON once, at the surface (``jsonsafe.jsonable``
turns a Struct into its fields in declaration order, leaving out the ones ``UNSET``), with exactly the keys and the
key order the report has always had: a field that only some findings carry (``ranges``, ``culprit``, the profiler's
``caveat``) is ``UNSET`` until set, so it is absent from their JSON, not null. ``from_json`` reads a report's finding
back (a saved report, the tab's cache).
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, Struct, UnsetType

from tb_llmdiag.jsonsafe import json_object
from tb_llmdiag.metrics.entry import BYTES, FLAG, ID, NEITHER, SHARE, TEXT, Entry, Intro

Severity: TypeAlias = Literal["high", "medium", "low"]

__all__ = [
    "UNSET",
    "Finding",
    "FindingFix",
    "JobFinding",
    "ProfiledSaving",
    "ProfiledWhatIf",
    "RunReport",
    "Saving",
    "Severity",
    "TRACE_ENTRIES",
    "TRACE_INTRO",
    "Unprofiled",
    "UnsetType",
    "WhatIf",
    "WhatIfAll",
    "from_json",
    "replace",
]


class ProfiledSaving(Struct, kw_only=True):
    """A saving on the step without the profiler's own cost: the same finding's saving on the profiled step
    (``saving.profiled``, ``whatif.PROFILED_FIELDS``)."""

    basis: str
    step_ns: int | None
    ns: int | None
    share: float
    step_ns_if_fixed: int | None
    bound_by: str | None


class Saving(Struct, kw_only=True):
    """A finding's one saving (``findings/whatif.py``). Before the savings sequence, the rule's own bound: ``share``
    (of the summed step time) and ``ns`` (of the mean step) only; in sequence, what it takes off its ``basis``
    (``median_step``, ``mean_step``, ``window``), its pool and what bounded it, on which step (``step_basis``:
    ``profiled`` or ``without_profiler``), the profiled step's saving beside one without the profiler
    (``profiled``, else null), and on an unprofiled run (``unprofiled_ns``, ``findings/trust.py``)."""

    basis: str | UnsetType = UNSET
    step_ns: int | None | UnsetType = UNSET
    ns: int | None
    share: float
    step_ns_if_fixed: int | None | UnsetType = UNSET
    pool: str | None | UnsetType = UNSET
    bound_by: str | None | UnsetType = UNSET
    step_basis: str | UnsetType = UNSET
    profiled: ProfiledSaving | None | UnsetType = UNSET
    unprofiled_ns: int | None | UnsetType = UNSET


class FindingFix(Struct, kw_only=True):
    """A run finding's fix: its text and snippets, and the advice in the user's stack's words when the trace reveals
    the stack."""

    text: str
    pytorch: str
    hf_trainer: str
    stack: str | UnsetType = UNSET
    stack_text: str | UnsetType = UNSET


class Finding(Struct, kw_only=True):
    """A run finding (docs/report_schema.md Finding). ``severity`` and ``saving`` are decided by the savings
    sequence; ``ranges`` / ``culprit`` only for a rule with ``ranges``; ``caveat`` (and
    ``profiler_overhead_share`` for host-time findings) once the profiler's cost is weighed (``findings/trust.py``)."""

    id: str
    severity: Severity | None
    title: str
    summary: str
    evidence: dict[str, Any]
    source: str | None
    saving: Saving | None
    fix: FindingFix
    docs: str | None
    metric: str | None
    value: Any
    threshold: dict[str, float] | None
    ranges: list[list[int]] | UnsetType = UNSET
    culprit: str | None | UnsetType = UNSET
    caveat: str | None | UnsetType = UNSET
    profiler_overhead_share: float | UnsetType = UNSET


class JobFinding(Struct, kw_only=True):
    """A job finding (docs/jobs.md): no severity or saving; its fix is one text."""

    id: str
    title: str
    summary: str
    metric: str | None
    value: Any
    threshold: float | None
    evidence: dict[str, Any]
    fix: str
    what_if: Any


class WhatIfAll(Struct, kw_only=True):
    """The what-if's ``all`` part: the run's step (the median step; the mean step when the run's basis is) with every
    finding of the sequence applied."""

    finding_ids: list[str]
    step_ns: int
    step_ns_if_fixed: int
    saving_share: float
    compute_floor_ns: int | None
    host_floor_ns: int | None
    bound_by: str | None
    tokens_per_s_if_fixed: float | None
    idle_left_ns: int


class Unprofiled(Struct, kw_only=True):
    """The what-if restated on the unprofiled step (``findings/trust.py``)."""

    step_ns: int
    step_ns_if_fixed: int
    saving_share: float
    all_step_ns_if_fixed: int
    all_saving_share: float


class ProfiledWhatIf(Struct, kw_only=True):
    """The what-if on the profiled step, beside one on the step without the profiler: which finding leads there,
    what its fix and all of them give, and whether the profiler's cost changes the leader."""

    step_ns: int
    finding_id: str | None
    finding_title: str | None
    step_ns_if_fixed: int
    saving_share: float
    all_step_ns_if_fixed: int
    all_saving_share: float
    host_floor_ns: int | None
    leader_changes: bool


class WhatIf(Struct, kw_only=True):
    """The what-if (docs/whatif.md): the top finding's own saving, every finding's, and the steps beside them, on the
    step ``step_basis`` says (the profiled step's beside one without the profiler: ``profiled``)."""

    basis: str
    bound: bool
    finding_id: str | None
    finding_title: str | None
    step_ns: int
    step_ns_if_fixed: int
    saving_share: float
    compute_floor_ns: int | None
    host_floor_ns: int | None
    pool: str | None
    bound_by: str | None
    tokens_per_s: float | None
    tokens_per_s_if_fixed: float | None
    all: WhatIfAll
    median_idle_ns: int
    mean_step_ns: int
    mean_step_ns_if_all_fixed: int
    step_basis: str
    profiled: ProfiledWhatIf | None = None
    statement: str = ""
    unprofiled: Unprofiled | UnsetType = UNSET


class RunReport(Struct, kw_only=True):
    """One trace file's report (docs/report_schema.md RunReport), built once by the front door (``api``): where the
    file is, its status, what was read, the summary, headline and metric topics (plain mappings, as the topics give
    them), its typed findings and what-if, and, on an over-the-run window only, its place (``window``). ``json()``
    is its JSON, made once where it leaves the front door."""

    run: str
    worker: Any
    span: Any
    source_kind: Any
    path: str
    size_bytes: Any
    rank: Any
    phase: Any = None
    status: str
    error: str | None
    read_state: dict[str, Any] | None
    warnings: list[str]
    summary: dict[str, Any] | None
    headline: dict[str, Any] | None
    metrics: dict[str, Any]
    findings: list[Finding]
    what_if: WhatIf | None
    window: dict[str, Any] | UnsetType = UNSET

    def json(self) -> dict[str, Any]:
        """The report's JSON (no NaN, plain numbers), keys in the schema's order: the one conversion of it."""
        return json_object(self)


# The registry's entries of a run report's own fields (``RunReport``'s, outside its sections: ``trace.*``); one row per
# key (metrics/entry.py), collected by the whole registry (tb_llmdiag/registry.py)
TRACE_INTRO: Intro = ("`trace`: a run report's own fields", "")

# a declared table, one entry per row: left as laid out
# fmt: off
TRACE_ENTRIES: tuple[Entry, ...] = (
    ("trace.error", TEXT, NEITHER, 0, "error", "why the trace could not be analysed; null when it was"),
    ("trace.path", TEXT, NEITHER, 0, "path", "the trace file"),
    ("trace.phase", TEXT, NEITHER, 0, "phase", "the phase the file name gives (train, eval...), or empty"),
    ("trace.rank", ID, NEITHER, 0, "rank", "the distributed rank the file name or trace gives; null when unknown"),
    ("trace.run", TEXT, NEITHER, 0, "run", "the run folder (TensorBoard run)"),
    ("trace.size_bytes", BYTES, NEITHER, 0.02, "file size", "size of the trace file"),
    ("trace.source_kind", TEXT, NEITHER, 0, "format", "`kineto` or `xplane`"),
    ("trace.span", TEXT, NEITHER, 0, "span", "the profiling span (session folder or timestamp)"),
    ("trace.status", TEXT, NEITHER, 0, "status",
     "`ok`; `partial` when the reader stopped early (invalid JSON, a cut file) and the report covers what it read; "
     "`error` when nothing could be analysed"),
    ("trace.read_state.complete", FLAG, NEITHER, 0, "read in full", "false when the reader stopped before the end"),
    ("trace.read_state.read_bytes", BYTES, NEITHER, 0, "bytes read", "bytes of the (inflated) JSON read before stopping"),
    ("trace.read_state.total_bytes", BYTES, NEITHER, 0, "bytes in file",
     "the file's size as stored (compressed for .gz); null when unknown"),
    ("trace.read_state.read_share", SHARE, NEITHER, 0, "share read",
     "how far into the file the read got (1.0 for a file cut short: all of it was read, and it ends early)"),
    ("trace.read_state.reason", TEXT, NEITHER, 0, "why it stopped", "one line, with the byte offset; null when complete"),
    ("trace.worker", TEXT, NEITHER, 0, "worker", "the worker (host / process) the trace file names"),
    ("trace.warnings[]", TEXT, NEITHER, 0, "warning", "a problem the reader met in this trace"),
)
# fmt: on


S = TypeVar("S", bound=Struct)


def replace(obj: S, **changes: Any) -> S:
    """A copy of ``obj`` with ``changes`` (``msgspec.structs.replace``, typed)."""
    return msgspec.structs.replace(obj, **changes)


def from_json(kind: type[S], doc: Any) -> S:
    """``doc`` (a report's JSON value: a saved report, the tab's cache) as a ``kind``."""
    return msgspec.convert(doc, kind)
