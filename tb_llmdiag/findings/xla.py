"""The XLA rule table: ``XLA_RULES``, evaluated on the ``xla`` metrics topic of XPlane (TPU / XLA) runs.

Same mechanics as ``GPU_RULES`` (``findings/engine.py``: an observed value at a dotted path,
``above``/``below``, a named predicate ``when``, a saving share of step time). Every rule here has
``platform="xla"``: it applies only to XLA runs (``engine.run_platform``), and it owns its id there, so the
GPU rule with a shared id (``step_variance``, ``warmup_in_window``, ``copy_heavy``, ``gpu_gaps``) is not
evaluated on XPlane runs even when the XLA version does not fire.

Savings are shares of the summed step time T (the window), as on GPU runs, so findings rank on one scale.
Each step is charged to one cause, so two findings do not claim the same time; the metrics compute that
split and its savings (``tb_llmdiag/metrics/xla/split.py``: ``xla.transfer_stall_ns``,
``xla.host_transfer_saving_share``, ``xla.clean_step_cv``, ``xla.clean_step_excess_share``,
``xla.steady_device_idle_saving_share``, ``xla.movement_saving_share``): compile steps are
``recompilation`` / ``warmup_in_window``'s, the stall of steady steps with a read-back inside is
``host_transfer``'s, ``step_variance`` measures the clean steps, ``gpu_gaps`` the steady device idle time
minus the transfer stall, ``copy_heavy`` data movement in steady steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tb_llmdiag.findings.engine import Fix, Locate, Metrics, Rule, lookup
from tb_llmdiag.findings.gpu import first_step_range, outlier_step_ranges

_TORCH_XLA_RECOMPILE = "https://pytorch.org/xla/master/perf/recompilation.html"
_TORCH_XLA_TROUBLESHOOT = "https://pytorch.org/xla/master/learn/troubleshoot.html"


# ---------------------------------------------------------------------------------------------
# Named predicates (comparisons only: the numbers come from the metrics)


def enough_steady_steps(m: Metrics) -> bool:
    """At least three steps without a compile: fewer say nothing about variance."""
    return (lookup(m, "xla.steady_step_count") or 0) >= 3


def clean_steps_vary(m: Metrics) -> bool:
    """At least three steady steps, and the clean ones (no compile, no read-back) vary by >= 0.20 too."""
    return enough_steady_steps(m) and (lookup(m, "xla.clean_step_cv") or 0.0) >= 0.20


_IN_LOOP = ("in_step", "between_steps")


def recompile_ranges(m: Metrics) -> list[Any]:
    """The in-loop recompiles of ``xla.compiles`` (the compiles after the warm-up ones, in time order, whose
    position is in or between steps): where the recompilation finding's evidence is."""
    comp = sorted(
        (c for c in lookup(m, "xla.compiles") or () if isinstance(c, Mapping)), key=lambda c: c.get("start_ns") or 0
    )
    return [c for c in comp[int(lookup(m, "xla.warmup_compile_count") or 0) :] if c.get("position") in _IN_LOOP]


def recompile_culprit(m: Metrics) -> str | None:
    """The host event that recompiled (XLA's compile call, e.g. ``backend_compile_and_load``)."""
    found = recompile_ranges(m)
    return str(found[0].get("name")) if found and found[0].get("name") else None


def transfer_ranges(m: Metrics) -> list[Any]:
    """The in-loop device-to-host transfers of ``xla.transfers_from_device``."""
    return [
        r
        for r in lookup(m, "xla.transfers_from_device") or ()
        if isinstance(r, Mapping) and r.get("position") in _IN_LOOP
    ]


def recompiled_what(m: Metrics) -> str | None:
    """What the recompiles compiled (``xla.recompile_*`` lists), by what the capture records: the module (JAX
    ``jit_train_step``, torch_xla ``SyncTensorsGraph.N``), then torch_xla's graph hash, else the program ids
    (``jit_train_step (program 103869)``, ``SyncTensorsGraph.1074 (graph hash 5529...)``); None when the
    capture names nothing."""
    x = m.get("xla")
    if not isinstance(x, Mapping):
        return None
    modules = [str(v) for v in x.get("recompile_modules") or ()]
    pids = [int(v) for v in x.get("recompile_program_ids") or ()]
    hashes = [str(v) for v in x.get("recompile_graph_hashes") or ()]

    def listed(one: str, many: str, vals: list[Any], at_most: int) -> str:
        return (
            (one if len(vals) == 1 else many)
            + ", ".join(map(str, vals[:at_most]))
            + (" ..." if len(vals) > at_most else "")
        )

    parts = []
    if modules:
        parts.append(listed("", "", modules, 3))
    if hashes:  # torch_xla's identity of a traced graph
        parts.append(listed("graph hash ", "graph hashes ", hashes, 3))
    if pids and not (modules and hashes):
        parts.append(listed("program ", "programs ", pids, 5))
    if not parts:
        return None
    return parts[0] + (f" ({'; '.join(parts[1:])})" if len(parts) > 1 else "")


# ---------------------------------------------------------------------------------------------

XLA_RULES: tuple[Rule, ...] = (
    Rule(
        id="recompilation",
        claims="excess",
        platform="xla",
        title="XLA recompiles the step graph inside the training loop",
        metric="xla.recompile_in_loop_count",
        above=1,
        saving="xla.recompile_in_loop_share",
        ranges=recompile_ranges,
        culprit=recompile_culprit,
        evidence=(
            ("recompiles", "xla.recompile_in_loop_count"),
            ("recompile_ns", "xla.recompile_in_loop_time_ns"),
            ("steps", "xla.recompile_steps"),
            ("recompiled", recompiled_what),
            ("graph_hashes", "xla.recompile_graph_hashes"),
            ("modules", "xla.recompile_modules"),
            ("program_ids", "xla.recompile_program_ids"),
            ("recompile_share", "xla.recompile_in_loop_share"),
            ("steady_step_median_ns", "xla.steady_step_median_ns"),
        ),
        summary="XLA compiled {recompiled} again inside the loop (recompiles: {recompiles}; in steps: {steps}), "
        "taking {recompile_ns}, {recompile_share} of step time; a steady step takes "
        "{steady_step_median_ns}.",
        fix=Fix(
            text="Keep the traced graph identical every step: pad or bucket inputs to a few fixed shapes "
            "(drop_last=True; pad to a fixed length or a multiple of 128), pass per-step Python values "
            "(learning rate, step counters) as device tensors, call xm.mark_step() (or use MpDeviceLoader) "
            "at the same place every step, and enable the persistent compilation cache so restarts do not "
            "recompile. PT_XLA_DEBUG=1 (torch_xla) or jax_explain_cache_misses (JAX) names the cause.",
            pytorch="import torch_xla.runtime as xr\n"
            "xr.initialize_cache('/tmp/xla_cache', readonly=False)  # persistent compilation cache\n"
            "loader = DataLoader(ds, batch_size=bs, drop_last=True)\n"
            "batch = tok(texts, padding='max_length', max_length=512, return_tensors='pt')\n"
            "# JAX: jax.config.update('jax_compilation_cache_dir', '/tmp/jax_cache')",
            hf_trainer="TrainingArguments(..., dataloader_drop_last=True)\n"
            "DataCollatorWithPadding(tok, padding='max_length', max_length=512)  # or pad_to_multiple_of=128",
        ),
        docs=_TORCH_XLA_RECOMPILE,
    ),
    Rule(
        id="host_transfer",
        claims="idle",
        platform="xla",
        title="Device-to-host transfers inside the training loop",
        metric="xla.transfer_from_device_in_loop_count",
        above=1,
        saving="xla.host_transfer_saving_share",
        ranges=transfer_ranges,
        evidence=(
            ("transfers", "xla.transfer_from_device_in_loop_count"),
            ("transfer_ns", "xla.transfer_from_device_in_loop_time_ns"),
            ("after_steps", "xla.transfer_from_device_steps"),
            ("per_step", "xla.transfer_from_device_per_step"),
            ("profiled_steps", "xla.step_count"),
            ("stall_ns", "xla.transfer_stall_ns"),
            ("to_device_in_steps_ns", "xla.transfer_to_device_in_steps_time_ns"),
            ("host_transfer_share", "xla.host_transfer_share"),
        ),
        summary="Device-to-host transfers in the training loop: {transfers} in {profiled_steps} profiled steps "
        "(in or right after steps: {after_steps}), {transfer_ns} of copying and {stall_ns} of stall (how much "
        "longer the steps that read back took than a clean step). Each read waits for the device to "
        "finish and stalls the pipeline (.item(), print(tensor), float(loss), a Python branch on a tensor).",
        fix=Fix(
            text="Read device values rarely: drop per-step loss.item() / print(tensor) / `if tensor:`; "
            "accumulate metrics on the device and fetch them every N steps, or hand them to "
            "xm.add_step_closure. Feed inputs through MpDeviceLoader so host-to-device copies overlap "
            "the step.",
            pytorch="import torch_xla.distributed.parallel_loader as pl\n"
            "loader = pl.MpDeviceLoader(loader, device)\n"
            "running = torch.zeros((), device=device)\n"
            "running += loss.detach()                       # no .item() per step\n"
            "if step % 50 == 0: xm.add_step_closure(lambda r=running: print(r.item()))",
            hf_trainer="TrainingArguments(..., logging_steps=50)  # the Trainer reads the loss only when it logs\n"
            "# and no .item() in custom compute_loss / callbacks on every step",
        ),
        docs=_TORCH_XLA_TROUBLESHOOT,
    ),
    Rule(
        id="warmup_in_window",
        platform="xla",
        skip_on=("inference",),
        title="The profiled window includes XLA's first compile",
        metric="xla.warmup_compile_in_steps_time_ns",
        above=1,
        severity="low",
        ranges=first_step_range,
        evidence=(
            ("warmup_compile_ns", "xla.warmup_compile_in_steps_time_ns"),
            ("first_step_ns", "xla.step_max_ns"),
            ("steady_step_median_ns", "xla.steady_step_median_ns"),
        ),
        summary="The first profiled step compiled the step graph ({warmup_compile_ns}): the window includes "
        "warm-up and skews averages (a steady step takes {steady_step_median_ns}).",
        fix=Fix(
            text="Start the trace after a few steps so only steady steps are recorded; meanwhile read the "
            "steady_* numbers, which leave compiling steps out.",
            pytorch="import torch_xla.debug.profiler as xp\n"
            "server = xp.start_server(9012)\n"
            "if step == 5: xp.trace_detached('localhost:9012', logdir, duration_ms=20000)\n"
            "# JAX: enter jax.profiler.trace(logdir) after a few warm-up steps",
            hf_trainer="# start the capture from a TrainerCallback.on_step_begin when state.global_step == 5",
        ),
        docs=None,
    ),
    Rule(
        id="step_variance",
        claims="excess",
        symptom=True,
        platform="xla",
        skip_on=("inference",),
        title="Step time varies from step to step",
        metric="xla.steady_step_cv",
        above=0.20,
        when=clean_steps_vary,
        saving="xla.clean_step_excess_share",
        ranges=outlier_step_ranges,
        evidence=(
            ("cv", "xla.steady_step_cv"),
            ("clean_cv", "xla.clean_step_cv"),
            ("median_ns", "xla.steady_step_median_ns"),
            ("max_ns", "xla.steady_step_max_ns"),
            ("steady_steps", "xla.steady_step_count"),
        ),
        summary="Steps that do not compile still vary by {cv} (coefficient of variation over {steady_steps} "
        "steps; median {median_ns}, max {max_ns}), and by {clean_cv} without the steps that read values "
        "back to the host.",
        fix=Fix(
            text="Find what differs in the slow steps: inputs of other shapes hitting other cached graphs, "
            "host work or transfers in some steps only, periodic logging or checkpoint saves.",
            pytorch="# pad to fixed shapes; move logging/checkpoint saves out of the hot loop or make it periodic",
            hf_trainer="TrainingArguments(..., dataloader_drop_last=True, logging_steps=50, save_steps=500)",
        ),
        docs=None,
    ),
    Rule(
        id="copy_heavy",
        claims="device",
        platform="xla",
        title="Data formatting and copies take a large share of device time",
        metric="xla.movement_share",
        above=0.25,
        saving="xla.movement_saving_share",
        evidence=(
            ("movement_share", "xla.movement_share"),
            ("data_formatting_share", "xla.data_formatting_share"),
            ("copy_share", "xla.copy_share"),
            ("matmul_share", "xla.matmul_share"),
        ),
        summary="Transposes, reshapes and copies take {movement_share} of device time (data formatting "
        "{data_formatting_share}, copies {copy_share}) against {matmul_share} for matmuls.",
        fix=Fix(
            text="Keep tensors in the layout the next op wants: drop .contiguous()/.t()/permute() pairs around "
            "matmuls, avoid dtype round trips (bf16 end to end), and use dimensions the matrix units tile "
            "well (multiples of 128).",
            pytorch="model = model.to(torch.bfloat16)\n"
            "# replace x.transpose(1, 2).contiguous() @ w with torch.einsum('bji,jk->bik', x, w)",
            hf_trainer="TrainingArguments(..., bf16=True)",
        ),
        docs="https://cloud.google.com/tpu/docs/performance-guide",
    ),
    Rule(
        id="gpu_gaps",
        claims="idle",
        symptom=True,
        platform="xla",
        locate=Locate("long_gaps"),
        title="The device sits idle during steps",
        metric="xla.steady_device_duty_cycle_share",
        below=0.50,
        saving="xla.steady_device_idle_saving_share",
        evidence=(
            ("duty_cycle_share", "xla.steady_device_duty_cycle_share"),
            ("idle_in_steps_ns", "xla.device_idle_in_steps_ns"),
            ("to_device_in_steps_ns", "xla.transfer_to_device_in_steps_time_ns"),
        ),
        summary="Outside compiles the device is busy for only {duty_cycle_share} of step time: it waits for the "
        "host to trace, dispatch and feed the next graph.",
        fix=Fix(
            text="Overlap the host with the device: feed batches with MpDeviceLoader (prefetches to the device), "
            "keep host work and transfers out of the step, and give each step more work (a bigger batch).",
            pytorch="import torch_xla.distributed.parallel_loader as pl\nloader = pl.MpDeviceLoader(loader, device)",
            hf_trainer="TrainingArguments(..., per_device_train_batch_size=2 * bs, dataloader_num_workers=4)",
        ),
        docs="https://pytorch.org/xla/master/learn/pytorch-on-xla-devices.html",
    ),
)
