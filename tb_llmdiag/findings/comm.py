"""The per-rank communication rule table: ``COMM_RULES`` (Kineto runs with collective kernels).

One rank's trace cannot tell waiting for a slower peer from the transfer itself (both are collective kernel
time), so the rule's saving is the exposed share, an upper bound that includes any waiting. In the what-if
(``findings/whatif.py``) it claims the ``communication`` pool: the time only collectives cover, which is neither
busy nor idle since report schema 3. The job level (``jobs``, a run
with several ranks) splits waiting from transfer and names a straggler or the exposed transfer with a bound.
"""

from __future__ import annotations

from tb_llmdiag.findings.engine import Fix, Flavour, Metrics, Rule, lookup


def top_collective_kind(m: Metrics) -> str | None:
    """The collective kind with the most kernel time (``communication.by_kind`` is sorted by it)."""
    rows = lookup(m, "communication.by_kind") or []
    return str(rows[0]["kind"]) if rows and isinstance(rows[0], dict) else None


# its wording on inference runs (a flavour keyed ``"inference"``): tensor-parallel serving
_EXPOSED_COMMUNICATION_INFERENCE = Flavour(
    fix=Fix(
        text="Load every rank's trace of this run together (one folder: the job view) to see whether a "
        "straggler or the transfer costs the time; to hide it: overlap the tensor-parallel all-reduce "
        "with compute (fused all-reduce + norm kernels, custom all-reduce), or use fewer "
        "tensor-parallel ranks when the model fits.",
        pytorch="# vLLM: LLM(model, tensor_parallel_size=N)  (fewer ranks if the model fits)\n"
        "# SGLang: --tp N --enable-custom-all-reduce",
        hf_trainer="# serve with vLLM/SGLang: HF generate() has no tensor-parallel overlap",
    )
)


COMM_RULES: tuple[Rule, ...] = (
    Rule(
        id="exposed_communication",
        claims="communication",
        platform="cuda",
        step_part="collective_ns",
        flavours=(("inference", _EXPOSED_COMMUNICATION_INFERENCE),),
        title="The GPU sits in collectives no compute hides",
        metric="communication.exposed_share",
        above=0.10,
        saving="communication.exposed_share",
        evidence=(
            ("exposed_share", "communication.exposed_share"),
            ("collective_share", "communication.collective_share"),
            ("overlap_share", "communication.overlap_share"),
            ("top_kind", top_collective_kind),
            ("collective_count", "communication.collective_count"),
        ),
        summary="For {exposed_share} of step time this rank's GPU runs only collectives ({top_kind} leads; "
        "collectives take {collective_share} of step time, {overlap_share} of it hidden under compute). "
        "Hiding it saves at most that; part of it may be waiting for a slower rank: analyse all ranks together "
        "to split waiting from transfer.",
        fix=Fix(
            text="Load every rank's trace of this run together (one folder: the job view) to see whether a "
            "straggler or the transfer itself costs the time. To hide transfers: DDP bucket_cap_mb and no_sync() "
            "under gradient accumulation; FSDP forward/backward prefetch; gradient compression hooks.",
            pytorch="model = DDP(model, bucket_cap_mb=50, gradient_as_bucket_view=True)\n"
            "with model.no_sync():  # gradient-accumulation micro-steps\n"
            "    loss.backward()",
            hf_trainer="TrainingArguments(..., ddp_bucket_cap_mb=50, gradient_accumulation_steps=4)",
        ),
        docs="https://pytorch.org/docs/stable/notes/ddp.html",
    ),
)
