"""The rule engine, for runs and jobs: ``Rule`` (with its parts ``Fix``, ``Flavour``, ``Floor``, ``ProfilerCost``,
``Locate``), ``lookup``, ``fires``, ``verdict``, ``finding``, ``evaluate(metrics, rules)``, ``rule_of`` /
``rules_of``, ``rank``.

A rule is one declaration: its ``Rule`` entry in its table holds everything done for it (what it matches, its
wording per platform and run trait, its saving's pool and role in the sequence of savings, what the profiler's
cost does to it, where the trace view and the agent find its evidence). Code elsewhere reads the rule's fields,
finding it by id through ``rule_of`` (``rules_of``) only; no module but the tables keys anything by a rule id
(``tests/test_rule_declaration.py``).

Contract:
- A ``Rule`` reads one observed value from the metrics by a dotted path (``"dataloader.stall_share"``) and
  fires when it is >= ``above`` or < ``below``, and the rule's named predicate ``when`` (if any) holds.
  Rules do no metric work: every number they read is a metric (``docs/metrics.md``, the metric registry
  ``tb_llmdiag/metrics/registry.py``); predicates only compare.
- A rule's ``level`` says whose metrics it reads: ``"run"`` (one trace's metrics, this docstring) or ``"job"``
  (the job's flat metrics, ``jobs.report.job_metrics``; the table is ``findings/job.py``). A job rule fires when
  its value is strictly above ``above`` and its ``floors`` hold: declared checks in order, each a metric that
  must be strictly above its own threshold (or the rule's); the first that fails holds the finding back, and a
  floor whose value is unknown lets it fire under its ``unknown_as`` (``verdict`` says which check decided).
  A job finding is the job report's (docs/jobs.md): its fix is the text ``fixes`` gives for the value of
  ``fix_by`` (else the rule's fix text), its ``what_if`` the metric ``what_if`` names; no severity or saving.
- Its saving is another dotted path holding a share of step time, or a named function of the metrics
  returning one (``None``: not estimable); saving ns = share x mean step. Evidence values are dotted paths
  or named functions too. A run finding's severity and rank are decided once, by the savings sequence
  (``findings/whatif.py``): from the saving it shows there, else the rule's fixed ``severity`` (else low).
- Platforms (``run_platform``, the one place that decides): ``metrics["run"]["platform"]`` (``"cuda"`` |
  ``"xla"``) when the metrics carry it, else ``"xla"`` when they hold the ``xla`` topic (XPlane traces: TPU,
  torch_xla, JAX), else ``"cuda"`` (Kineto: PyTorch eager on CUDA/ROCm, or CPU only). A rule with
  ``platform`` set applies only to runs of that platform (the CUDA-launch rules are ``"cuda"``, the XLA
  rules ``"xla"``); a rule for the run's platform owns its id, so a platform-neutral rule with the same id
  is not evaluated there, whether or not the platform's rule fires.
- Run traits (``run_traits``, the one place that decides which rules a kind of run gets): the run's workload
  (``"training"`` | ``"inference"``, ``metrics.run.workload``; none when unknown) and ``"partial"`` when only
  part of the file was read (``metrics.run.read_complete`` false). A rule with ``skip_on`` does not apply to a
  run that has one of those traits: training-only advice is ``skip_on=("inference",)``, a claim that needs the
  whole file (an absence, a maximum) ``skip_on=("partial",)``.
- Every finding repeats the rule's id, metric, observed value and threshold, its evidence (label ->
  value; empty lists are left out: the trace does not record them), a one-sentence summary from ``summary``
  (a ``str.format`` template over the evidence labels), and the fix (text + PyTorch and HF Trainer
  snippets). Wording follows the run: a rule's ``flavours`` entry for one of the run's traits (its workload), else for its
  platform, replaces its title, summary, fix and docs; ``stack_fix`` adds advice in the user's stack's words when the trace reveals it
  (``annotations.stack``).
- Where the evidence is: a rule with ``ranges`` (a dotted path or named function giving time ranges,
  ``[[start_ns, end_ns], ...]`` or dicts with ``start_ns`` + ``duration_ns``) adds ``ranges`` (the
  ``MAX_RANGES`` longest, in time order, ns on the trace's clock) and ``culprit`` (the op it blames, from
  ``culprit``, or null) to its finding; the tab's trace view zooms there.
  Every run finding carries ``source``: the user's ``file:line`` where its cause runs (the rule's ``source`` path, an
  ``attribution.*_source``), or null. A rule whose metrics hold no ranges may name the search the trace view runs
  for them (``locate``: ``traceview/evidence.py``), and the per-step column that holds its time (``step_part``:
  the agent's ``explain_finding``).
- ``rank`` orders job findings by their value, a share of the job step, highest first, ties in table order.
- ``rule_of(id, metrics, rules)``: the rule behind a finding on this run (the applicable one with that id);
  ``rules_of`` for several.

The tables are data beside this module: ``findings/gpu.py`` (``GPU_RULES``, with ``gpu_causes.py`` and
``attribution_rules.py``; ``INFERENCE_RULES``), ``findings/comm.py`` (``COMM_RULES``), ``findings/xla.py``
(``XLA_RULES``), combined in ``findings/table.py`` (``RULES``); ``findings/job.py`` (``JOB_RULES``) for jobs.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeGuard

from tb_llmdiag.findings.structs import Finding, FindingFix, JobFinding, Saving, Severity
from tb_llmdiag.metrics.labels import text_words, words_of
from tb_llmdiag.metrics.registry import metric
from tb_llmdiag.units import fmt, unit_from_name

Metrics: TypeAlias = Mapping[str, Any]
#: a value a rule reads: a dotted path into the metrics (a registry key), or a named function of the metrics
Read: TypeAlias = "str | Callable[[Metrics], Any]"
#: the time a finding's saving comes out of (``findings/whatif.py``)
Pool: TypeAlias = Literal["idle", "device", "communication", "excess"]
Platform: TypeAlias = Literal["cuda", "xla"]


@dataclass(frozen=True)
class Fix:
    text: str
    pytorch: str
    hf_trainer: str


@dataclass(frozen=True)
class Flavour:
    """A rule's wording on one platform: each field given replaces the rule's own."""

    title: str | None = None
    summary: str | None = None
    fix: Fix | None = None
    docs: str | None = None


@dataclass(frozen=True)
class Floor:
    """A check a job rule needs besides its threshold: the metric ``metric`` must be above ``above`` (None: the
    rule's own threshold). Failed: held back as ``fails_as`` (passed as ``passes_as`` when ``passes_when`` is true);
    unknown: failed too, unless ``unknown_as`` names the verdict under which the rule fires on its threshold alone."""

    metric: str
    above: float | None
    fails_as: str
    meaning: str
    unknown_as: str = ""
    passes_when: str = ""
    passes_as: str = ""


@dataclass(frozen=True)
class ProfilerCost:
    """What the profiler's own cost does to a rule's finding (``findings/trust.py``).

    ``host_time``: its evidence is host time the profiler's per-op recording inflates: the finding carries the
    overhead, and a caveat when it could account for a large part of the saving. ``spread_over_idle``: its saving is
    the host relaunching recorded operators after the GPU drained, so on an unprofiled run the profiler's cost is
    spread over it as over the rest of the idle pool. ``records_inside``: (dotted path of the time the finding holds,
    of the profiler's modelled cost inside it): on an unprofiled run the saving is less that part of it."""

    host_time: bool = False
    spread_over_idle: bool = False
    records_inside: tuple[str, str] | None = None


@dataclass(frozen=True)
class Locate:
    """Where the trace view finds a finding's evidence when its metrics hold no time ranges (``traceview/evidence.py``
    runs the search ``how`` names over the trace, with ``at``): ``chain``: the host events named by the innermost
    activity of the chain at the dotted path ``at`` (``a > b > c``: ``c``); ``op``: the host operator named at the
    dotted path ``at``; ``family``: the host events of the name family ``at`` (``metrics/context.py``
    ``NAME_PATTERNS``), the longest one named; ``long_gaps``: the device's long idle gaps; ``pageable_htod``: the
    pageable host-to-device copies. It draws what the report decided; it measures nothing new."""

    how: Literal["chain", "op", "family", "long_gaps", "pageable_htod"]
    at: str = ""


@dataclass(frozen=True)
class Rule:
    """One finding, declared once: everything the engine, the savings sequence, the trust caveats, the trace view and
    the agent do for it is a field here (module docstring); no other module keys anything by its id."""

    # what it matches
    id: str
    title: str
    metric: str | None  # dotted path of the observed value (None: predicate only)
    fix: Fix
    above: float | None = None  # fires when value >= above
    below: float | None = None  # fires when value < below
    when: Callable[[Metrics], bool] | None = None  # extra condition, a named function beside the table
    platform: Platform | None = None  # only runs of that platform; None: every run
    skip_on: tuple[str, ...] = ()  # run traits (run_traits) on which the rule does not apply
    level: Literal["run", "job"] = "run"  # whose metrics the rule reads, and the finding's shape (module docstring)
    # its wording
    summary: str | Callable[[Metrics], str] = ""  # str.format template over evidence labels, or a named function
    docs: str | None = None
    stack_fix: tuple[tuple[str, str], ...] = field(default=())  # (stack, fix text in that stack's words)
    flavours: tuple[tuple[str, Flavour], ...] = field(default=())  # (run trait or platform, wording there)
    # wording chosen by the evidence: the first (named predicate, Flavour) whose predicate holds replaces the
    # title, summary, fix and docs it gives (after the platform's flavour): a title claims only what holds
    variants: tuple[tuple[Callable[[Metrics], bool], Flavour], ...] = field(default=())
    # its saving, in the sequence of savings (findings/whatif.py)
    saving: Read | None = None  # dotted path (or named function) of a share of step time saved if fixed
    severity: Severity | None = None  # fixed severity when there is no saving; else decided by the savings sequence
    # the time its saving comes out of, or a named function of the metrics returning one
    claims: Pool | Callable[[Metrics], str] | None = None
    # a symptom (the GPU waits for the host, long gaps, step variance) rather than a cause: in the sequence of
    # savings it comes after the causes, so it keeps only the time they leave
    symptom: bool = False
    # how its fix (an ``idle`` cut) moves the host floor: ``cut``: down by what it takes off the step; ``fraction``:
    # launch overhead, whose fix shortens the host's own time itself: to floor x (1 - r) when that is lower
    host_floor: Literal["cut", "fraction"] = "cut"
    profiler: ProfilerCost = ProfilerCost()  # what the profiler's own cost does to it (findings/trust.py)
    # where its evidence is
    evidence: tuple[tuple[str, Read], ...] = ()  # (label, dotted path or named function)
    ranges: Read | None = None  # dotted path (or named function) of the evidence's time ranges
    culprit: Read | None = None  # dotted path (or named function) of the op the finding blames
    source: str | None = None  # dotted path of the user's file:line where its cause runs (``source`` of the finding)
    locate: Locate | None = None  # without ``ranges``: where the trace view finds its evidence
    step_part: str | None = None  # the column of ``steps.per_step`` that holds its time in each step (the agent)
    # a job rule's checks and words
    floors: tuple[Floor, ...] = ()  # checked in order after the threshold; the first that fails decides
    fix_by: str | None = None  # dotted path whose value picks the fix text from ``fixes`` (else the fix's own)
    fixes: tuple[tuple[str, str], ...] = ()  # (value of fix_by, fix text)
    what_if: str | None = None  # dotted path of a job finding's what-if


def lookup(metrics: Metrics, path: Read | None) -> Any:
    """The value at a dotted path (or of a named function of the metrics), or None when any part is missing."""
    if path is None:
        return None
    if callable(path):
        return path(metrics)
    cur: Any = metrics
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def evidence_unit(label: str, path: Read) -> str:
    """The unit of an evidence value: its metric's registry unit; for a named function's value, the unit its label
    names (``_ns``, ``_share``, ``_bytes``), else ``text`` (such functions return names: what was recompiled)."""
    m = metric(path) if isinstance(path, str) else None
    if m is not None:
        return m.unit
    unit = unit_from_name(label)
    return "text" if unit == "ratio" and not isinstance(path, str) else unit


def run_platform(m: Metrics) -> str:
    """The run's platform, decided here only: ``metrics["run"]["platform"]`` when present, else ``"xla"``
    when the metrics hold the ``xla`` topic (an XPlane trace), else ``"cuda"``."""
    run = m.get("run")
    if isinstance(run, Mapping) and run.get("platform") in ("cuda", "xla"):
        return str(run["platform"])
    return "xla" if "xla" in m else "cuda"


def run_traits(m: Metrics) -> frozenset[str]:
    """The run's traits that select rules and wordings (module docstring): its workload when known
    (``metrics.run.workload``), and ``"partial"`` when only part of the file was read."""
    run = m.get("run")
    if not isinstance(run, Mapping):
        return frozenset()
    traits = {str(run["workload"])} if run.get("workload") in ("training", "inference") else set()
    if run.get("read_complete") is False:
        traits.add("partial")
    return frozenset(traits)


def flavour_of(rule: Rule, metrics: Metrics) -> Flavour:
    """The rule's wording for this run: its flavour for one of the run's traits, else for its platform."""
    flavours = dict(rule.flavours)
    for key in (*sorted(run_traits(metrics)), run_platform(metrics)):
        if key in flavours:
            return flavours[key]
    return Flavour()


def finite(v: Any) -> TypeGuard[float]:
    """An int or float (not a bool) that is neither NaN nor infinite."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def over_threshold(rule: Rule, value: float) -> bool:
    """Whether the value passes the rule's thresholds: >= ``above`` (a job rule: strictly above), < ``below``."""
    if rule.above is not None and not (value > rule.above if rule.level == "job" else value >= rule.above):
        return False
    return rule.below is None or value < rule.below


def verdict(rule: Rule, metrics: Metrics) -> str | None:
    """Which check decides a rule over a metric: None when its value is unknown; ``below_threshold``; else the first
    failing floor's ``fails_as`` (or ``passes_as``); else ``significant``, or an unknown floor's ``unknown_as``."""
    value = lookup(metrics, rule.metric)
    if not finite(value):
        return None
    if not over_threshold(rule, value):
        return "below_threshold"
    unknown = passed = ""
    for f in rule.floors:
        v = lookup(metrics, f.metric)
        limit = rule.above if f.above is None else f.above
        if v is None and f.unknown_as:
            unknown = unknown or f.unknown_as
        elif not finite(v) or limit is None or v <= limit:
            if lookup(metrics, f.passes_when or "-") is not True:
                return f.fails_as
            passed = passed or f.passes_as
    return passed or unknown or "significant"


def fires(rule: Rule, metrics: Metrics) -> bool:
    """Whether the rule's finding is reported: its value passes the thresholds and the floors (``verdict``), and
    its predicate ``when`` holds; a rule with neither a metric nor a predicate never fires."""
    if rule.metric is not None:
        v = verdict(rule, metrics)
        if v != "significant" and v not in {x for f in rule.floors for x in (f.unknown_as, f.passes_as) if x}:
            return False
    if rule.when is not None and not rule.when(metrics):
        return False
    return rule.metric is not None or rule.when is not None


#: At most this many evidence ranges per finding (the longest ones).
MAX_RANGES = 50


def evidence_ranges(value: Any) -> list[list[int]]:
    """``[[start_ns, end_ns], ...]`` from a metric's list of ranges (pairs, or dicts with ``start_ns`` and
    ``duration_ns``/``end_ns``): well-formed ones only, the ``MAX_RANGES`` longest, in time order."""
    out = []
    for r in value if isinstance(value, (list, tuple)) else ():
        if isinstance(r, Mapping):
            s = r.get("start_ns")
            e = r.get("end_ns", s + r["duration_ns"] if finite(s) and finite(r.get("duration_ns")) else None)
        elif isinstance(r, (list, tuple)) and len(r) == 2:
            s, e = r
        else:
            continue
        if finite(s) and finite(e) and e >= s:
            out.append([int(s), int(e)])
    out = sorted(out, key=lambda x: x[0] - x[1])[:MAX_RANGES]
    return sorted(out)


def wording(rule: Rule, metrics: Metrics) -> Flavour:
    """The rule's wording for this run: its flavour (``flavour_of``), then the first variant whose predicate holds,
    unless the run's trait (inference) has its own wording for the rule."""
    flavour = flavour_of(rule, metrics)
    worded_for_trait = not run_traits(metrics).isdisjoint(k for k, _ in rule.flavours)
    variant = None if worded_for_trait else next((v for pred, v in rule.variants if pred(metrics)), None)
    if variant is None:
        return flavour
    return Flavour(
        title=variant.title or flavour.title,
        summary=variant.summary or flavour.summary,
        fix=variant.fix or flavour.fix,
        docs=variant.docs or flavour.docs,
    )


def saving_of(rule: Rule, metrics: Metrics) -> Saving | None:
    """The rule's own saving: its share, clamped to 0..1, and in ns of the mean step; None: unknown."""
    share = lookup(metrics, rule.saving)
    if not finite(share):
        return None
    share = min(max(float(share), 0.0), 1.0)
    # savings are shares of the summed step time, so in ns they are per average (mean) step
    step = lookup(metrics, "steps.mean_ns")
    return Saving(share=share, ns=int(round(share * step)) if finite(step) else None)


def fix_of(rule: Rule, fix_: Fix, metrics: Metrics) -> FindingFix:
    """The fix: its text (the one ``fixes`` gives for the value of ``fix_by``, else the fix's own) and snippets,
    with advice in the user's stack's words when the trace reveals the stack (``stack_fix``)."""
    text = dict(rule.fixes).get(str(lookup(metrics, rule.fix_by)), fix_.text) if rule.fix_by else fix_.text
    fix = FindingFix(text=text, pytorch=fix_.pytorch, hf_trainer=fix_.hf_trainer)
    stack = lookup(metrics, "annotations.stack")
    stack_text = dict(rule.stack_fix).get(stack) if stack else None
    if stack_text:
        fix.stack = str(stack)
        fix.stack_text = stack_text
    return fix


def finding(rule: Rule, metrics: Metrics) -> Finding | JobFinding:
    """The finding of a rule that fired: a run's (docs/report_schema.md Finding), worded for the run, or a
    job's (docs/jobs.md; module docstring)."""
    words = wording(rule, metrics)
    title = words.title or rule.title
    evidence = {label: lookup(metrics, path) for label, path in rule.evidence}
    template = words.summary or rule.summary
    # named values and op chains in words (metrics/labels.py): the metrics keep the trace's own names
    shown_text = {label: fmt(evidence_unit(label, path), words_of(evidence[label])) for label, path in rule.evidence}
    try:
        summary = template(metrics) if callable(template) else template.format(**shown_text)
    except (KeyError, IndexError, ValueError):
        summary = title
    summary = text_words(summary)
    fix = fix_of(rule, words.fix or rule.fix, metrics)
    if "{" in fix.text:  # a fix may name the evidence too (the activity that holds the time)
        with contextlib.suppress(KeyError, IndexError, ValueError):
            fix.text = fix.text.format(**shown_text)
    fix.text = text_words(fix.text)
    value = lookup(metrics, rule.metric)
    if rule.level == "job":
        return JobFinding(
            id=rule.id,
            title=title,
            summary=summary,
            metric=rule.metric,
            value=value,
            threshold=rule.above,
            evidence=evidence,
            fix=fix.text,
            what_if=lookup(metrics, rule.what_if),
        )
    threshold = {k: v for k, v in (("above", rule.above), ("below", rule.below)) if v is not None}
    out = Finding(
        id=rule.id,
        severity=rule.severity,  # the savings sequence decides it (findings/whatif.py ``severity_of``)
        title=title,
        summary=summary,
        # the summary may name any evidence; the finding keeps the lists that hold something (an empty list
        # means the trace does not record it: torch_xla graph hashes on a JAX run)
        evidence={k: words_of(v) for k, v in evidence.items() if not (isinstance(v, (list, tuple)) and not v)},
        source=source if isinstance(source := lookup(metrics, rule.source), str) and source else None,
        saving=saving_of(rule, metrics),
        fix=fix,
        docs=words.docs or rule.docs,
        metric=rule.metric,
        value=value,
        threshold=threshold or None,
    )
    if rule.ranges is not None:  # where the evidence is in the trace (the tab's "show in trace")
        culprit = lookup(metrics, rule.culprit)
        out.ranges = evidence_ranges(lookup(metrics, rule.ranges))
        out.culprit = culprit if isinstance(culprit, str) else None
    return out


def applicable(metrics: Metrics, rules: Sequence[Rule]) -> list[Rule]:
    """The rules that apply to the run's platform and traits (module docstring): rules of another platform
    or skipped on one of the run's traits are out, and a platform-neutral rule is out when a rule of the
    run's platform has its id (that rule owns the id)."""
    platform = run_platform(metrics)
    traits = run_traits(metrics)
    mine = [r for r in rules if r.platform in (None, platform) and traits.isdisjoint(r.skip_on)]
    owned = {r.id for r in mine if r.platform == platform}
    return [r for r in mine if r.platform == platform or r.id not in owned]


def evaluate(metrics: Metrics, rules: Sequence[Rule]) -> list[Finding | JobFinding]:
    """Findings of every applicable rule of ``rules`` (``RULES``: every rule) that fires, in table order
    (``rank`` orders them): a run's ``Finding``, a job rule's ``JobFinding``.

    Ids are unique in the result: when two applicable rules with one id fire, the later rule's finding
    replaces the earlier one, in the earlier one's place.
    """
    out: dict[str, Finding | JobFinding] = {}
    for r in applicable(metrics, rules):
        if fires(r, metrics):
            out[r.id] = finding(r, metrics)
    return list(out.values())


def run_findings(metrics: Metrics, rules: Sequence[Rule]) -> list[Finding]:
    """``evaluate`` over run rules: their findings."""
    return [f for f in evaluate(metrics, rules) if isinstance(f, Finding)]


def job_findings_of(metrics: Metrics, rules: Sequence[Rule]) -> list[JobFinding]:
    """``evaluate`` over job rules: their findings, in table order."""
    return [f for f in evaluate(metrics, rules) if isinstance(f, JobFinding)]


def rule_of(finding_id: str, metrics: Metrics, rules: Sequence[Rule]) -> Rule | None:
    """The rule of ``rules`` that reports ``finding_id`` on this run: the applicable one with that id (the run's
    platform's own when it has one; the later one when two apply, as ``evaluate`` keeps), else the first rule with
    that id (a finding read back from a report whose metrics do not say the run's kind); None: no rule has it.
    The one lookup by id: the savings sequence, the trust caveats, the trace view and the agent ask it."""
    return rules_of([finding_id], metrics, rules)[0]


def rules_of(finding_ids: Sequence[str], metrics: Metrics, rules: Sequence[Rule]) -> list[Rule | None]:
    """``rule_of`` for each of several findings of one run, deciding what applies to the run once."""
    mine = {r.id: r for r in applicable(metrics, rules)}
    return [mine.get(i) or next((r for r in rules if r.id == i), None) for i in finding_ids]


def rank(findings: list[JobFinding]) -> list[JobFinding]:
    """Job findings by their value (a share of the job step), highest first; a stable order for equal values.
    Run findings are ranked by the savings sequence alone (``findings/whatif.py``), which decides their severity."""

    def key(item: tuple[int, JobFinding]) -> tuple[float, int]:
        i, f = item
        v = f.value
        return (-float(v) if finite(v) else 0.0, i)

    return [f for _, f in sorted(enumerate(findings), key=key)]
