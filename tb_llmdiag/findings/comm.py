"""The per-rank communication rule table: ``COMM_RULES`` (Kineto runs with collective kernels).

One rank's trace cannot tell waiting for a slower peer from the transfer itself (both are collective kernel
time), so the rule's saving is the exposed share, an upper bound that includes any waiting. In the what-if
(``findings/whatif.py``) it claims the ``communication`` pool: the time only collectives cover, which is neither
busy nor idle since report schema 3. The job level (``jobs``, a run
with several ranks) splits waiting from transfer and names a straggler or the exposed transfer with a bound.
"""

from __future__ import annotations

from typing import Any

from tb_llmdiag.findings.engine import Fix, Flavour, Metrics, Rule, lookup
from tb_llmdiag.units import fmt


def top_collective_kind(m: Metrics) -> str | None:
    """The collective kind with the most kernel time (``communication.by_kind`` is sorted by it)."""
    rows = lookup(m, "communication.by_kind") or []
    return str(rows[0]["kind"]) if rows and isinstance(rows[0], dict) else None


def per_tensor_sync(m: Metrics) -> bool:
    """Many small gradient collectives: at least 4 per DDP bucket's worth of bytes and at least 32 per sync."""
    per_bucket = lookup(m, "comm_purpose.dp_collectives_per_bucket")
    count = lookup(m, "comm_purpose.dp_count_per_round")
    return isinstance(per_bucket, (int, float)) and per_bucket >= 4 and isinstance(count, (int, float)) and count >= 32


def accumulation_saving(m: Metrics) -> float | None:
    """The data-parallel exposed share x (rounds - 1) / rounds: the syncs no_sync() removes (an upper bound)."""
    r, e = lookup(m, "comm_purpose.dp_rounds_per_step"), lookup(m, "comm_purpose.data_parallel_exposed_share")
    if not isinstance(r, (int, float)) or not isinstance(e, (int, float)) or r < 2:
        return None
    return float(e) * (r - 1) / r


def fsdp_exposed(m: Metrics) -> bool:
    """FSDP collectives leave at least 2 % of the step exposed."""
    e = lookup(m, "comm_purpose.fsdp_exposed_share")
    return isinstance(e, (int, float)) and e >= 0.02


def dp_bucket_bytes(m: Metrics) -> float | None:
    """The data-parallel bytes per sync / DDP's buckets for them: the mean bucket DDP would send."""
    b, n = lookup(m, "comm_purpose.dp_round_bytes"), lookup(m, "comm_purpose.dp_buckets_expected")
    return float(b) / n if isinstance(b, (int, float)) and isinstance(n, int) and n else None


def all_to_all_sizes(m: Metrics) -> str:
    """The all-to-alls' bytes per step and group, only where the trace states them (", 442 MiB per step, group of 2")."""
    row = _purpose_row("expert", "step_bytes")(m), _purpose_row("expert", "group_size")(m)
    known = [f"{fmt('bytes', row[0])} per step"] if row[0] is not None else []
    known += [f"group of {row[1]}"] if row[1] else []
    return "".join(", " + k for k in known)


def _purpose_row(purpose: str, key: str) -> Any:
    def get(m: Metrics) -> Any:
        rows = lookup(m, "comm_purpose.by_purpose") or []
        return next((r.get(key) for r in rows if isinstance(r, dict) and r.get("purpose") == purpose), None)

    get.__name__ = f"{purpose}_{key}"
    return get


_PURPOSE_RULES: tuple[Rule, ...] = (
    Rule(
        id="per_tensor_collectives",
        skip_on=("inference",),
        # the per-tensor loop's cost is mostly the GPU waiting for the host to launch hundreds of collectives
        claims="idle",
        platform="cuda",
        title="Gradients are synchronised one tensor at a time",
        metric="comm_purpose.dp_collectives_per_bucket",
        above=4.0,
        when=per_tensor_sync,
        saving="comm_purpose.dp_after_backward_share",
        evidence=(
            ("count_per_sync", "comm_purpose.dp_count_per_round"),
            ("median_bytes", _purpose_row("data_parallel", "median_bytes")),
            ("sync_bytes", "comm_purpose.dp_round_bytes"),
            ("ddp_buckets", "comm_purpose.dp_buckets_expected"),
            ("after_backward_share", "comm_purpose.dp_after_backward_share"),
            ("exposed_share", "comm_purpose.data_parallel_exposed_share"),
        ),
        summary="Data-parallel gradient sync: {count_per_sync} all-reduces per sync (median message "
        "{median_bytes}) carry {sync_bytes}, which DDP's 25 MiB buckets send in {ddp_buckets}: per-tensor "
        "collectives. Issued after backward, they keep the step in gradient sync for {after_backward_share} of it "
        "(device span), none of it overlapped with backward; bucketed all-reduces launched during backward hide "
        "most of that.",
        fix=Fix(
            text="Wrap the model in DistributedDataParallel (gradients bucketed, 25 MiB by default, all-reduced while "
            "backward still runs) instead of one all-reduce per parameter; if you must sync by hand, flatten the "
            "gradients into a few large buckets (torch._utils._flatten_dense_tensors) and reduce those.",
            pytorch="model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)",
            hf_trainer="TrainingArguments(..., ddp_bucket_cap_mb=25)  # the Trainer wraps the model in DDP",
        ),
        docs="https://pytorch.org/docs/stable/notes/ddp.html",
    ),
    Rule(
        id="accumulation_without_no_sync",
        skip_on=("inference",),
        claims="communication",
        platform="cuda",
        step_part="collective_ns",
        title="Gradients are all-reduced on every accumulation micro-batch",
        metric="comm_purpose.dp_rounds_per_step",
        above=2,
        saving=accumulation_saving,
        evidence=(
            ("rounds", "comm_purpose.dp_rounds_per_step"),
            ("count_per_sync", "comm_purpose.dp_count_per_round"),
            ("sync_bytes", "comm_purpose.dp_round_bytes"),
            ("exposed_share", "comm_purpose.data_parallel_exposed_share"),
        ),
        summary="Data-parallel gradient sync runs {rounds} times per step ({count_per_sync} all-reduces of "
        "{sync_bytes} each time, the same buckets repeated): an all-reduce on every gradient-accumulation "
        "micro-batch. Only the last one is needed; the data-parallel collectives leave {exposed_share} of the step "
        "exposed, of which the syncs before the last are at most the saving.",
        fix=Fix(
            text="Skip the gradient sync on all but the last micro-batch: `with model.no_sync():` around the "
            "forward and backward of micro-batches 1..m-1 (FSDP: set_requires_gradient_sync(False)).",
            pytorch="for i, mb in enumerate(micro_batches):\n"
            "    ctx = model.no_sync() if i < len(micro_batches) - 1 else contextlib.nullcontext()\n"
            "    with ctx:\n        loss = model(mb).loss / len(micro_batches)\n        loss.backward()",
            hf_trainer="TrainingArguments(..., gradient_accumulation_steps=m)  # the Trainer uses no_sync itself",
        ),
        docs="https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html",
    ),
    Rule(
        id="tensor_parallel_communication",
        claims="communication",
        platform="cuda",
        step_part="collective_ns",
        title="Tensor-parallel collectives sit on the critical path",
        metric="comm_purpose.tensor_parallel_exposed_share",
        above=0.05,
        saving="comm_purpose.tensor_parallel_exposed_share",
        evidence=(
            ("exposed_share", "comm_purpose.tensor_parallel_exposed_share"),
            ("count_per_step", _purpose_row("tensor_parallel", "count_per_step")),
            ("median_bytes", _purpose_row("tensor_parallel", "median_bytes")),
            ("forward", _purpose_row("tensor_parallel", "forward_count")),
            ("backward", _purpose_row("tensor_parallel", "backward_count")),
            ("tp_group", "comm_purpose.tp_group"),
            ("busbw", _purpose_row("tensor_parallel", "busbw_lower_bound_bytes_per_s")),
        ),
        summary="Tensor-parallel activation collectives ({count_per_step} per step, {median_bytes} each, group of "
        "{tp_group}; {forward} issued in forward and {backward} in backward over the capture) leave "
        "{exposed_share} of the step exposed: each layer waits for them.",
        fix=Fix(
            text="Keep tensor parallelism within one NVLink domain (TP degree <= GPUs per node); use sequence "
            "parallelism (reduce-scatter + all-gather, norms sharded) or async tensor parallelism (torch.compile "
            "with symmetric memory) to overlap them with the GEMMs; a smaller TP degree with more data "
            "parallelism when the model fits.",
            pytorch="parallelize_module(model, tp_mesh, {..., 'norm': SequenceParallel()})  # sequence parallel\n"
            "torch._inductor.config._micro_pipeline_tp = True  # async TP under torch.compile",
            hf_trainer="Serving (vLLM, SGLang): tensor_parallel_size no larger than the GPUs on one NVLink "
            "domain; a model's TP plan (tp_plan='auto') within a node, data parallel across nodes",
        ),
        docs="https://pytorch.org/docs/stable/distributed.tensor.parallel.html",
    ),
    Rule(
        id="fsdp_without_prefetch",
        skip_on=("inference",),
        claims="communication",
        platform="cuda",
        step_part="collective_ns",
        title="FSDP gathers parameters in backward without prefetch",
        metric="comm_purpose.fsdp_unprefetched_share",
        above=0.5,
        when=fsdp_exposed,
        saving="comm_purpose.fsdp_exposed_share",
        severity="low",
        evidence=(
            ("unprefetched_share", "comm_purpose.fsdp_unprefetched_share"),
            ("backward_all_gathers", "comm_purpose.fsdp_backward_all_gathers"),
            ("prefetched", "comm_purpose.fsdp_prefetched_all_gathers"),
            ("exposed_share", "comm_purpose.fsdp_exposed_share"),
            ("annotation", _purpose_row("fsdp", "annotation")),
        ),
        summary="FSDP all-gathers and reduce-scatters leave {exposed_share} of the step exposed; of the "
        "{backward_all_gathers} all-gathers per step issued in backward, {prefetched} came from a prefetch "
        "({unprefetched_share} were issued only when their layer's backward began). Prefetching hides at most the "
        "exposed share, and costs memory; measure it.",
        fix=Fix(
            text="Prefetch the next layers' parameters: FSDP2 set_modules_to_backward_prefetch / "
            "set_modules_to_forward_prefetch; FSDP1 backward_prefetch=BACKWARD_PRE, forward_prefetch=True.",
            pytorch="layers[i].set_modules_to_backward_prefetch([layers[i - 1]])",
            hf_trainer="TrainingArguments(..., fsdp_config={'backward_prefetch': 'backward_pre', "
            "'forward_prefetch': True})",
        ),
        docs="https://pytorch.org/docs/stable/distributed.fsdp.fully_shard.html",
    ),
    Rule(
        id="expert_all_to_all",
        claims="communication",
        platform="cuda",
        step_part="collective_ns",
        title="All-to-all exchanges sit on the critical path",
        metric="comm_purpose.expert_exposed_share",
        above=0.05,
        saving="comm_purpose.expert_exposed_share",
        severity="low",
        evidence=(
            ("exposed_share", "comm_purpose.expert_exposed_share"),
            ("count_per_step", _purpose_row("expert", "count_per_step")),
            ("sizes", all_to_all_sizes),
            ("step_bytes", _purpose_row("expert", "step_bytes")),
            ("ep_group", "comm_purpose.ep_group"),
            ("annotation", _purpose_row("expert", "annotation")),
        ),
        summary="All-to-all exchanges (MoE expert dispatch and combine, or sharded-embedding lookups; "
        "{count_per_step} per step{sizes}) leave {exposed_share} of the step exposed.",
        fix=Fix(
            text="Overlap the exchanges with compute (MoE: DeepEP's async mode, two batches in flight, "
            "shared-expert or attention work while tokens travel; embeddings: pipelined lookups); keep the group "
            "within a node; avoid reading split sizes on the host (a sync before every exchange).",
            pytorch="buffer.dispatch(x, ..., async_finish=True)  # DeepEP: dispatch while the attention runs",
            hf_trainer="Serving (vLLM, SGLang): enable_expert_parallel with the DeepEP all-to-all backend; "
            "expert parallel size within a node",
        ),
        docs="https://github.com/deepseek-ai/DeepEP",
    ),
)

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
            ("top_purpose", "comm_purpose.top_purpose"),
        ),
        summary="For {exposed_share} of step time this rank's GPU runs only collectives ({top_kind} leads, "
        "mostly {top_purpose} communication; "
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
) + _PURPOSE_RULES
