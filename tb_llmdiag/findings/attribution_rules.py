"""Rules whose cause is the activity the ``attribution`` topic finds holding the GPU's idle time (issue #23):
``allocator_churn``, ``unrecorded_host_time``, ``host_activity`` (the honest finding when no rule of the catalogue
explains the time), and the named functions ``host_bound`` uses to say what the host does while the GPU waits.

Every cause they name is an activity of the attribution's evidence (``attribution.top_chain``,
``allocator_chain``, ``unrecorded_chain``): names of events in the trace, never a guess from a pattern. Where
the trace cannot tell why the time goes there, the finding says so and how to see more (``record_function``,
``with_stack=True``). docs/findings.md lists them.
"""

from __future__ import annotations

from tb_llmdiag.findings.engine import Fix, Flavour, Locate, Metrics, ProfilerCost, Rule, lookup
from tb_llmdiag.metrics.capture.overhead import PYTHON_RECORD_NS
from tb_llmdiag.units import fmt, fmt_ns

#: top_kind -> the catalogue rule that explains such an activity (``host_activity`` is for the others)
EXPLAINED_BY: dict[str, str] = {
    "allocator": "allocator_churn",
    "sync": "host_sync",
    "dataloader": "dataloader_stall",
    "compile": "recompilation",
    "outside": "unrecorded_host_time",
    "launch": "host_bound",
}


#: from this many activities holding half the idle time on, it is spread over many operators
SPREAD_MANY = 10


def _with_source(chain: object, source: object) -> str:
    if not isinstance(chain, str) or not chain:
        return "no recorded event (between operators)"
    return f"{chain} ({source})" if isinstance(source, str) and source else chain


def top_where(m: Metrics) -> str:
    """The top activity's chain, with the user's source line when frames were recorded."""
    return _with_source(lookup(m, "attribution.top_chain"), lookup(m, "attribution.top_source"))


def allocator_where(m: Metrics) -> str:
    return _with_source(lookup(m, "attribution.allocator_chain"), lookup(m, "attribution.allocator_source"))


def sync_where(m: Metrics) -> str:
    return _with_source(lookup(m, "attribution.sync_chain"), lookup(m, "attribution.sync_source"))


#: operators whose output shape depends on the data: the host must read a count back before it can go on
DATA_DEPENDENT = (
    "aten::nonzero",
    "aten::masked_select",
    "aten::unique",
    "aten::_unique",
    "aten::index",
    "aten::masked_scatter",
    "aten::repeat_interleave",
)


def data_dependent_sync(m: Metrics) -> bool:
    """The sync holding the most idle time is inside an operator with a data-dependent output shape."""
    chain = lookup(m, "attribution.sync_chain")
    return isinstance(chain, str) and any(op in chain.split(" > ") for op in DATA_DEPENDENT)


def unrecorded_where(m: Metrics) -> str:
    return _with_source(lookup(m, "attribution.unrecorded_chain"), lookup(m, "attribution.unrecorded_source"))


def profiler_inside(m: Metrics) -> bool:
    """The profiler records inside the activity holding the unrecorded time (the Python tracer's frames and calls in a
    pure-Python function): part of its time is the profiler's own (``attribution.unrecorded_profiler_ns``)."""
    cost = lookup(m, "attribution.unrecorded_profiler_ns")
    return isinstance(cost, (int, float)) and cost > 0


def how_to_see_more(m: Metrics) -> str:
    """What the trace cannot tell and how to see more: frames name the line when they are missing."""
    if lookup(m, "attribution.frames") is True:
        return "the Python frames name the code; add record_function ranges inside it to split its time further"
    return (
        "record Python stacks in the capture (the profiler's stack option) so the trace names the file:line, or "
        "wrap the suspect code in torch.profiler.record_function ranges"
    )


def host_spread(m: Metrics) -> str:
    """What the host does while the GPU waits: one activity that dominates, a few, or launch cost spread over many."""
    where = top_where(m)
    share = fmt("share", lookup(m, "attribution.top_share"))
    if lookup(m, "attribution.dominant") is True:
        kind = lookup(m, "attribution.top_kind")
        what = {
            "launch": "launching its operators one by one",
            "allocator": "in allocator calls",
            "sync": "blocked in syncs",
            "dataloader": "fetching batches",
            "compile": "compiling",
            "outside": "running code no operator records",
            "cpu_work": "running operators that launch no GPU work",
        }.get(str(kind), "busy")
        return f"mostly in {where} ({share} of step time), {what}"
    n = lookup(m, "attribution.spread_nodes") or 0
    if n < SPREAD_MANY:
        return f"split between {n} activities, none holding half; the largest is {where} ({share} of step time)"
    many = " (launch and dispatch cost of many operators)" if lookup(m, "attribution.top_kind") == "launch" else ""
    return f"spread over {n} activities{many}; the most in its own time: {where}; the largest: {largest_subtrees(m)}"


def largest_subtrees(m: Metrics, k: int = 4) -> str:
    """The ``k`` activities of ``attribution.nodes`` holding the most idle time, none inside another."""
    picked: list[tuple[str, float]] = []
    for n in lookup(m, "attribution.nodes") or ():
        chain, share = n.get("chain_text"), n.get("idle_share")
        if not isinstance(chain, str) or not isinstance(share, float):
            continue
        if any(chain.startswith(c + " > ") or c.startswith(chain + " > ") for c, _ in picked):
            continue
        picked.append((chain, share))
        if len(picked) == k:
            break
    return ", ".join(f"{c} ({fmt('share', s)} of step time)" for c, s in picked)


def allocator_churns(m: Metrics) -> bool:
    return (lookup(m, "attribution.allocator_calls_per_step") or 0) >= 2


def unexplained(m: Metrics) -> bool:
    """The top activity is of a kind no catalogue rule explains (operators or frames that launch nothing)."""
    kind = lookup(m, "attribution.top_kind")
    return isinstance(kind, str) and kind not in EXPLAINED_BY


def top_is_launch(m: Metrics) -> bool:
    return lookup(m, "attribution.top_kind") in (None, "launch")


_SEE = "https://pytorch.org/docs/stable/profiler.html#torch.profiler.record_function"
_UNRECORDED = (
    "The GPU waits {unrecorded_share} of step time ({unrecorded_ns}) while the host is in {where} with no operator, "
    "runtime call or frame of its own open: host code the profiler does not record (Python work, garbage collection, "
    "I/O, sleeps). The trace cannot tell which: {see_more}."
)
#: where the profiler records inside it: its own cost there, on its stated basis, and what the trace cannot tell
_PROFILER_INSIDE = (
    " About {profiler_ns} of that time is the profiler recording the frames and calls inside it ("
    + fmt_ns(PYTHON_RECORD_NS)
    + " a Python-tracer record as measured on captures with and without Python stacks, less where the trace shows its "
    "records closer together), which an unprofiled run does not spend; the rest is the code's own time as the "
    "profiled steps ran it, which the trace does not time without the profiler."
)

# a declared table, one entry per row: left as laid out
# fmt: off
ATTRIBUTION_RULES: tuple[Rule, ...] = (
    Rule(
        id="allocator_churn", claims="idle", platform="cuda", source="attribution.allocator_source",
        locate=Locate("chain", "attribution.allocator_chain"),
        title="The host frees and re-allocates GPU memory every step",
        metric="attribution.allocator_idle_share", above=0.05, when=allocator_churns,
        saving="attribution.allocator_idle_share",
        evidence=(("allocator_share", "attribution.allocator_idle_share"),
                  ("allocator_ns", "attribution.allocator_idle_ns"),
                  ("calls_per_step", "attribution.allocator_calls_per_step"),
                  ("where", allocator_where), ("top_activity", top_where)),
        summary="The GPU waits {allocator_share} of step time ({allocator_ns}) while the host is inside allocator "
                "calls: {calls_per_step} cudaMalloc / cudaFree (or empty_cache) calls per step, in {where}.",
        fix=Fix(text="Stop handing memory back to the driver inside the loop: remove torch.cuda.empty_cache() (and "
                     "gc.collect()) from {where}; the caching allocator then reuses its blocks instead of calling "
                     "cudaFree and cudaMalloc every step. If fragmentation is why it is there, use expandable "
                     "segments instead.",
                pytorch="# remove from the step:\n#   gc.collect(); torch.cuda.empty_cache()\n"
                        "# if memory fragments: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py",
                hf_trainer="# no empty_cache() in callbacks' on_step_end; if memory fragments:\n"
                           "# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True accelerate launch train.py"),
        docs="https://pytorch.org/docs/stable/notes/cuda.html#memory-management",
    ),
    Rule(
        id="unrecorded_host_time", claims="idle", platform="cuda", source="attribution.unrecorded_source",
        locate=Locate("chain", "attribution.unrecorded_chain"),
        profiler=ProfilerCost(records_inside=("attribution.unrecorded_ns", "attribution.unrecorded_profiler_ns")),
        title="The GPU waits while the host runs code the trace does not record",
        metric="attribution.unrecorded_share", above=0.05,
        saving="attribution.unrecorded_share",
        evidence=(("unrecorded_share", "attribution.unrecorded_share"), ("unrecorded_ns", "attribution.unrecorded_ns"),
                  ("where", unrecorded_where), ("see_more", how_to_see_more),
                  ("profiler_ns", "attribution.unrecorded_profiler_ns")),
        summary=_UNRECORDED,
        variants=((profiler_inside, Flavour(summary=_UNRECORDED + _PROFILER_INSIDE)),),
        fix=Fix(text="Find what {where} does on the host ({see_more}), then take it off the step's critical path: "
                     "run it every N steps, in a background thread, or before the loop.",
                pytorch="from torch.profiler import record_function\n"
                        "with record_function('suspect_block'):\n    ...  # the code between the operators\n"
                        "# or: torch.profiler.profile(..., with_stack=True)",
                hf_trainer="# in your profiling callback: torch.profiler.profile(..., with_stack=True)\n"
                           "# and wrap suspect callback code in record_function('...')"),
        docs=_SEE,
    ),
    Rule(
        id="host_activity", claims="idle", platform="cuda", source="attribution.top_source",
        locate=Locate("chain", "attribution.top_chain"),
        title="The GPU waits while the host is in one activity",
        metric="attribution.top_share", above=0.10, when=unexplained,
        saving="attribution.top_share",
        evidence=(("top_share", "attribution.top_share"), ("top_ns", "attribution.top_ns"),
                  ("where", top_where), ("calls_per_step", "attribution.top_calls_per_step"),
                  ("mean_call_ns", "attribution.top_mean_call_ns"), ("steps_hit", "attribution.top_steps_hit"),
                  ("launches_per_step", "attribution.top_launches_per_step"), ("see_more", how_to_see_more)),
        summary="The GPU waits {top_share} of step time ({top_ns}) while the host is in {where} ({calls_per_step} "
                "calls per step, mean {mean_call_ns}, in {steps_hit} steps; {launches_per_step} kernel launches "
                "per step inside it). No rule of the catalogue explains this activity: the trace shows where the "
                "time goes, not why it is slow there.",
        fix=Fix(text="Look at {where}: the host spends this time there while the GPU has nothing queued. To see "
                     "more, {see_more}.",
                pytorch="# torch.profiler.profile(..., with_stack=True, record_shapes=True)\n"
                        "# with torch.profiler.record_function('part_a'): ...",
                hf_trainer="# in your profiling callback: torch.profiler.profile(..., with_stack=True)"),
        docs=_SEE,
    ),
)
# fmt: on

#: ``host_sync``'s wording when the sync comes from an operator whose output shape depends on the data
HOST_SYNC_DATA_DEPENDENT = Flavour(
    title="A data-dependent shape syncs the host every step",
    summary="{syncs_per_step} host syncs per step block the host for {blocked_share} of step time (longest "
    "{longest_ns}); the blocking calls are in {where}, an operator whose output size depends on the data, so "
    "the host reads a count back before it can launch more; removing the syncs could save up to {saving_share}.",
    fix=Fix(
        text="Keep shapes static in {where}: instead of boolean-mask indexing (x[mask], masked_select, "
        "nonzero), compute on the whole tensor and mask the result (torch.where, a multiplied mask, "
        "cross_entropy(ignore_index=-100) instead of logits[labels != -100]).",
        pytorch="# instead of: loss = F.cross_entropy(logits[labels != -100], labels[labels != -100])\n"
        "loss = F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)",
        hf_trainer="# the model's own loss already uses ignore_index=-100: drop custom masked indexing in compute_loss",
    ),
    docs="https://pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html",
)

#: ``host_bound``'s wording when what holds the time is not launch cost: the fix addresses that activity
HOST_BOUND_NOT_LAUNCH = Flavour(
    fix=Fix(
        text="The host is not slow at launching here: it is {host_is}. Fix that activity (see the finding that "
        "names it); fusing kernels or CUDA graphs would not give this time back.",
        pytorch="# see the finding naming the activity (allocator churn, unrecorded host time, ...)",
        hf_trainer="# see the finding naming the activity",
    ),
)
