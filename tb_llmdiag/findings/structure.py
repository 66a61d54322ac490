"""The structure rules of #37 (Kineto runs): ``STRUCTURE_RULES`` = moe_imbalance, full_logits_loss, graph_breaks,
decode_launch_bound, with their named predicates. ``findings/table.py`` adds them to ``RULES``.

Each names the part of the model that holds its time and the cause there, from the anatomy's structure figures
(``metrics/anatomy/structure.py``: ``anatomy.moe``, ``anatomy.logits``, ``anatomy.graphs``) or, for a decode loop,
the launch and idle topics. Their savings join the sequence of savings (``findings/whatif.py``): the MoE's padding
and the loss's vocabulary-wide passes are device time (``device`` pool), a graph break's and a decode loop's cost is
the GPU waiting for the host (``idle`` pool, before the ``host_bound`` symptom, which keeps what they leave).
docs/findings.md lists them.
"""

from __future__ import annotations

from tb_llmdiag.findings.engine import Fix, Flavour, Locate, Metrics, ProfilerCost, Rule, lookup

#: experts padded at least this much above the mean load: a capacity factor well above what balancing gives (1.25)
IMBALANCE_MIN = 1.5
#: a decode step launching at least this many kernels one by one is launch-bound when the GPU is mostly idle
DECODE_LAUNCHES_MIN = 100


def moe_padded(m: Metrics) -> bool:
    """The experts' padding above the mean load is worth at least 2 % of the window."""
    return (lookup(m, "anatomy.moe.saving_share") or 0.0) >= 0.02


def breaks_between_graphs(m: Metrics) -> bool:
    """More than one compiled region a step, with a device-value read between graphs or resumed regions."""
    return bool(lookup(m, "anatomy.graphs.break_op")) or (lookup(m, "anatomy.graphs.breaks_per_step") or 0) >= 2


def eager_decode(m: Metrics) -> bool:
    """Decode forward passes only (no prefill in the window), launched kernel by kernel (not replayed by a graph)."""
    launches = lookup(m, "launch.launches_per_step") or 0
    graph_kernels = lookup(m, "launch.graph_kernels") or 0
    kernels = lookup(m, "launch.kernels") or 0
    return (
        lookup(m, "run.workload") == "inference"
        and (lookup(m, "inference.decode_forward_count") or 0) >= 1
        and (lookup(m, "inference.prefill_forward_count") or 0) == 0
        and launches >= DECODE_LAUNCHES_MIN
        and graph_kernels <= 0.1 * kernels
    )


#: graph_breaks on a serving run: the same fix, the serving engine's words (no Trainer)
_GRAPH_BREAKS_INFERENCE = Flavour(
    fix=Fix(
        text="Remove the graph break: keep the data-dependent read ({break_op}) out of the compiled model (check "
        "values after the forward, or on a tensor without .item(): torch._check, torch.cond), or let dynamo trace "
        "scalar reads (torch._dynamo.config.capture_scalar_outputs = True). List every break with "
        "TORCH_LOGS=graph_breaks or torch._dynamo.explain.",
        pytorch="explanation = torch._dynamo.explain(model)(**inputs)\nprint(explanation.break_reasons)\n"
        "# e.g. a NaN watchdog: flag = torch.isnan(h).any()  (a tensor, no .item()); check flag after the forward",
        hf_trainer="TORCH_LOGS=graph_breaks python serve.py  # lists each break and its source line\n"
        "model = torch.compile(model)  # with no .item() in forward hooks or the model",
    ),
)


STRUCTURE_RULES: tuple[Rule, ...] = (
    Rule(
        id="moe_imbalance",
        platform="cuda",
        claims="device",
        skip_on=("partial",),
        title="MoE experts are padded to the busiest expert's load (uneven routing)",
        metric="anatomy.moe.imbalance_ratio",
        above=IMBALANCE_MIN,
        when=moe_padded,
        saving="anatomy.moe.saving_share",
        evidence=(
            ("experts", "anatomy.moe.experts"),
            ("top_k", "anatomy.moe.top_k"),
            ("max_tokens_per_expert", "anatomy.moe.max_tokens_per_expert"),
            ("mean_tokens_per_expert", "anatomy.moe.mean_tokens_per_expert"),
            ("imbalance_ratio", "anatomy.moe.imbalance_ratio"),
            ("expert_per_step_ns", "anatomy.moe.expert_per_step_ns"),
            ("padded_per_step_ns", "anatomy.moe.padded_per_step_ns"),
            ("router_per_step_ns", "anatomy.moe.router_per_step_ns"),
            ("dispatch_per_step_ns", "anatomy.moe.dispatch_per_step_ns"),
            ("saving_share", "anatomy.moe.saving_share"),
        ),
        summary="The MoE routes unevenly: of {experts} experts (top-{top_k}), the busiest gets {max_tokens_per_expert} "
        "tokens against a mean of {mean_tokens_per_expert} ({imbalance_ratio}x), and every expert's batched GEMM "
        "is padded to that load: {padded_per_step_ns} of the experts' {expert_per_step_ns} per step is work above "
        "the mean load (router {router_per_step_ns}, token permutation {dispatch_per_step_ns} per step). Balanced "
        "load could save up to {saving_share} of step time.",
        fix=Fix(
            text="Balance the router: train with an auxiliary load-balancing loss (or a router z-loss / bias-based "
            "balancing), and cap each expert's capacity (a capacity factor near 1.25, dropping the overflow) or run "
            "the experts dropless with a grouped GEMM over the real per-expert token counts, so no expert is padded "
            "to the busiest one's load.",
            pytorch="# aux loss (Switch/Mixtral): E * sum_e(f_e * P_e), f_e = share of tokens routed to e,\n"
            "# P_e = mean router probability of e\n"
            "loss = loss + 0.01 * num_experts * (tokens_per_expert_share * router_prob_mean).sum()\n"
            "# dropless: torch._grouped_mm(x_sorted, w, offs=counts.cumsum(0).int())  # no padding",
            hf_trainer="config.output_router_logits = True\nconfig.router_aux_loss_coef = 0.02  # Mixtral/Qwen-MoE: the "
            "aux loss is added to outputs.loss",
        ),
        docs="https://huggingface.co/docs/transformers/model_doc/mixtral",
    ),
    Rule(
        id="full_logits_loss",
        platform="cuda",
        claims="device",
        skip_on=("inference", "partial"),
        title="The loss runs over the full logits of a large vocabulary",
        metric="anatomy.logits.saving_share",
        above=0.05,
        saving="anatomy.logits.saving_share",
        evidence=(
            ("vocab", "anatomy.logits.vocab"),
            ("logits_elements", "anatomy.logits.logits_elements"),
            ("logits_dtype", "anatomy.logits.logits_dtype"),
            ("logits_bytes", "anatomy.logits.logits_bytes"),
            ("vocab_work_per_step_ns", "anatomy.logits.vocab_work_per_step_ns"),
            ("casts_per_step_ns", "anatomy.logits.casts_per_step_ns"),
            ("softmax_pass_per_step_ns", "anatomy.logits.softmax_pass_per_step_ns"),
            ("lm_head_per_step_ns", "anatomy.parts.lm_head.per_step_time_ns"),
            ("loss_per_step_ns", "anatomy.parts.loss.per_step_time_ns"),
            ("saving_share", "anatomy.logits.saving_share"),
        ),
        summary="The loss is computed over the full logits of a {vocab}-token vocabulary: {logits_elements} logits in "
        "{logits_dtype} ({logits_bytes} a copy). Outside the LM head's GEMM ({lm_head_per_step_ns} per step), the "
        "passes over them (log-softmax forward and backward, NLL, {casts_per_step_ns} of casts and copies) take "
        "{vocab_work_per_step_ns} per step (the loss part: {loss_per_step_ns}). A fused chunked linear + "
        "cross-entropy keeps one pass ({softmax_pass_per_step_ns}) and never materialises them: up to "
        "{saving_share} of step time.",
        fix=Fix(
            text="Fuse the LM head (the output projection) and the cross-entropy and compute them in chunks of tokens (Liger Kernel's fused linear "
            "cross-entropy, or a chunked loss under torch.compile): the full logits and their fp32 copy are never "
            "materialised and the gradient is computed in the forward pass.",
            pytorch="from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss\n"
            "hidden = model.model(input_ids).last_hidden_state\n"
            "loss = LigerFusedLinearCrossEntropyLoss()(model.lm_head.weight, hidden[:, :-1].reshape(-1, H),\n"
            "                                          labels[:, 1:].reshape(-1))",
            hf_trainer="TrainingArguments(..., use_liger_kernel=True)  # fused linear cross-entropy for supported "
            "models",
        ),
        docs="https://github.com/linkedin/Liger-Kernel",
    ),
    Rule(
        id="graph_breaks",
        platform="cuda",
        claims="idle",
        skip_on=("partial",),
        profiler=ProfilerCost(host_time=True),
        title="torch.compile graph breaks split the model into many graphs",
        metric="anatomy.graphs.breaks_per_step",
        above=1.0,
        when=breaks_between_graphs,
        saving="anatomy.graphs.broken_share",
        source="anatomy.graphs.break_source",
        locate=Locate("op", "anatomy.graphs.break_op"),
        evidence=(
            ("graph_calls_per_step", "anatomy.graphs.graph_calls_per_step"),
            ("regions_per_step", "anatomy.graphs.regions_per_step"),
            ("breaks_per_step", "anatomy.graphs.breaks_per_step"),
            ("autograd_graphs_per_step", "anatomy.graphs.autograd_graphs_per_step"),
            ("break_op", "anatomy.graphs.break_op"),
            ("break_ops_per_step", "anatomy.graphs.break_ops_per_step"),
            ("break_source", "anatomy.graphs.break_source"),
            ("between_graphs_idle_per_step_ns", "anatomy.graphs.between_graphs_idle_per_step_ns"),
            ("between_graphs_share", "anatomy.graphs.between_graphs_share"),
        ),
        summary="torch.compile runs {graph_calls_per_step} compiled graphs per step in {regions_per_step} compiled "
        "regions: {breaks_per_step} graph breaks per step (dynamo resumes in a new region after each; "
        "{autograd_graphs_per_step} forward graphs, each with its own backward). Between graphs, {break_op} is "
        "called {break_ops_per_step} times per step (at {break_source}): a data-dependent read of a device value "
        "that breaks the graph and syncs. The GPU idles {between_graphs_idle_per_step_ns} per step between one "
        "graph's work and the next ({between_graphs_share} of step time).",
        fix=Fix(
            text="Remove the graph break: keep the data-dependent read ({break_op}) out of the compiled model (check "
            "values after the step, or on a tensor without .item(): torch._check, torch.cond), or let dynamo trace "
            "scalar reads (torch._dynamo.config.capture_scalar_outputs = True). List every break with "
            "TORCH_LOGS=graph_breaks or torch._dynamo.explain.",
            pytorch="explanation = torch._dynamo.explain(model)(**batch)\nprint(explanation.break_reasons)\n"
            "# e.g. a NaN watchdog: flag = torch.isnan(h).any()  (a tensor, no .item()); check flag after the step",
            hf_trainer="TORCH_LOGS=graph_breaks python train.py  # lists each break and its source line\n"
            "TrainingArguments(..., torch_compile=True)  # with no .item() in forward hooks or the model",
        ),
        docs="https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html#graph-breaks",
        flavours=(("inference", _GRAPH_BREAKS_INFERENCE),),
    ),
    Rule(
        id="decode_launch_bound",
        platform="cuda",
        claims="idle",
        host_floor="fraction",
        skip_on=("training", "partial"),
        profiler=ProfilerCost(host_time=True),
        title="The decode loop is launch-bound: every token launches its kernels one by one",
        metric="idle.host_wait_share",
        above=0.5,
        when=eager_decode,
        saving="idle.host_wait_share",
        step_part="host_wait_ns",
        evidence=(
            ("launches_per_step", "launch.launches_per_step"),
            ("kernel_median_ns", "launch.kernel_median_ns"),
            ("launch_api_median_ns", "launch.launch_api_median_ns"),
            ("busy_share", "idle.busy_share"),
            ("host_wait_share", "idle.host_wait_share"),
            ("time_per_output_token_ns", "inference.time_per_output_token_ns"),
        ),
        summary="Each decode step (one token per sequence) launches {launches_per_step} kernels one by one (median "
        "kernel {kernel_median_ns}, median launch call {launch_api_median_ns}): the GPU is busy {busy_share} of "
        "the time and waits for the host's launches {host_wait_share} ({time_per_output_token_ns} per output "
        "token). Replaying the step as a CUDA graph (static KV cache) or decoding more sequences per step removes "
        "most of that wait.",
        fix=Fix(
            text="Capture the decode step in a CUDA graph: a static KV cache (fixed shapes) and "
            "torch.compile(mode='reduce-overhead'), or a serving engine that does (vLLM, SGLang, TensorRT-LLM); and "
            "decode more sequences per step (batching) so each launch carries more work.",
            pytorch="model.generation_config.cache_implementation = 'static'\n"
            "model.forward = torch.compile(model.forward, mode='reduce-overhead', fullgraph=True)\n"
            "out = model.generate(**inputs, max_new_tokens=256)",
            hf_trainer="model.generate(**inputs, cache_implementation='static', max_new_tokens=256)\n"
            "# with model.forward = torch.compile(model.forward, mode='reduce-overhead')",
        ),
        docs="https://huggingface.co/docs/transformers/llm_optims#static-kv-cache-and-torchcompile",
    ),
)
