"""Predicted vs measured: the what-if of a *before* trace against the median step of its *after* trace.

    python scripts/whatif_check.py            # prints docs/whatif.md's three markdown tables

For each pair the prediction removes the named findings' causes from the before trace's median step, in sequence
(``findings/whatif.py``), and converts to tokens/s with the before trace's median tokens per step; the measured
value is the after trace's median step and tokens/s (on the median step: its median tokens per step / its median
step, as the before's). Error = (predicted - measured) / measured, of tokens/s when
both traces record shapes (the batch may differ between the runs), else of the step time.

Where both runs were timed without the profiler, the pair is also checked against those timings: the before trace's
what-if is restated on its unprofiled median step (``findings/trust.py``: the profiler's cost taken out of the idle
time the fixes leave) and compared with the after run's unprofiled median step and tokens/s. The timings come from
the capture's truth.json (``reference``: the same run's steps after the profiler stopped, ``--ref-steps``), else from
tests/data/unprofiled_refs.json (a separate unprofiled run of the same switches, ``examples/captures/refs.sh``).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tb_llmdiag.findings.diagnosis import diagnose
from tb_llmdiag.findings.engine import applicable, lookup
from tb_llmdiag.findings.structs import Saving, replace
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.findings.trust import with_unprofiled
from tb_llmdiag.findings.whatif import apply_in_sequence
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.jsonsafe import json_object, jsonable
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.steps.windows import find_steps

REPO = Path(__file__).resolve().parents[1]
#: unprofiled runs of the captures without a truth.json reference (examples/captures/refs_json.py says how they are taken)
REFS = REPO / "tests" / "data" / "unprofiled_refs.json"

#: (label, before dir, after dir, finding ids fixed between them: None = every finding, what changed)
PAIRS: tuple[tuple[str, str, str, Sequence[str] | None, str], ...] = (
    ("per-step `.item()` logging removed", "tests/data/gpu_item_sync", "tests/data/gpu_fixed", ("host_sync",),
     "--log-item dropped, nothing else"),
    ("seed -> fixed (2 layers)", "tests/data/gpu_seed", "tests/data/gpu_fixed", None,
     "pinned, packing, batch 4 -> 8, 2 workers"),
    ("seed -> fixed (28 layers, demo)", "demo_logs/seed_lora_qwen1.5b", "demo_logs/fixed_lora_qwen1.5b", None,
     "pinned, packing, batch 4 -> 8, 2 workers"),
    ("slow collate -> fixed", "tests/data/gpu_dataloader_slow", "tests/data/gpu_fixed", ("dataloader_stall",),
     "no slow collate, 2 workers, batch 4 -> 8"),
    ("eager -> torch.compile", "tests/data/gpu_fixed", "tests/data/gpu_compiled", None, "torch.compile"),
    ("eager -> torch.compile (pageable)", "tests/data/compile_off", "tests/data/compile_on", None, "torch.compile"),
    ("per-parameter `.item()` loop removed", "tests/data/item_loop", "tests/data/noise_a", ("host_sync",),
     "--item-loop dropped, nothing else"),
    ("fp32 -> bf16", "tests/data/fp32_math", "tests/data/noise_a", ("fp32_math",), "bf16 weights and math"),
)


def _truth(folder: str) -> dict[str, Any]:
    return json.loads((REPO / folder / "truth.json").read_text())["ranks"][0]


def _median_step_tokens_per_s(tokens: Sequence[float], median_ms: float) -> float | None:
    """Tokens/s on the median step, as the product counts it (``flops.median_step_tokens_per_s``): the median tokens
    per step over the median step."""
    return float(statistics.median(tokens)) / (median_ms / 1e3) if tokens and median_ms > 0 else None


def unprofiled(folder: str) -> dict[str, Any] | None:
    """The run's unprofiled median step and tokens/s on it (``median_ms``, ``tokens_per_s``, ``source``), or None
    without one: its truth.json ``reference`` (``median_wall_ms``; the tokens of its steps in ``tokens_per_step``),
    else its entry in tests/data/unprofiled_refs.json (``median_step_ms``; ``token_slots`` of its ``steps``: padded
    slots, as the traces' shapes count them)."""
    if (REPO / folder / "truth.json").is_file() and (ref := _truth(folder).get("reference")):
        tokens = [_truth(folder)["tokens_per_step"][s] for s in ref["steps"]]
        return {"median_ms": ref["median_wall_ms"], "tokens_per_s": _median_step_tokens_per_s(tokens, ref["median_wall_ms"]),
                "source": "truth.json"}
    refs = json.loads(REFS.read_text())["captures"] if REFS.is_file() else {}
    if folder not in refs:
        return None
    r = refs[folder]
    tokens = [r["token_slots"][s] for s in r["steps"]]
    return {"median_ms": r["median_step_ms"], "tokens_per_s": _median_step_tokens_per_s(tokens, r["median_step_ms"]),
            "source": "unprofiled_refs.json"}


def _ckpt(t: dict[str, Any]) -> float:
    return 1 - t["no_grad_ckpt"]["median_wall_ms"] / t["reference"]["median_wall_ms"]


def _optim(t: dict[str, Any]) -> float:
    o = t["optimizer_step_alone_median_ms"]
    return (o["for_loop"] - o["fused"]) / t["reference"]["median_wall_ms"]


def _save(t: dict[str, Any]) -> float:
    return float(t["save_checkpoint"]["host_s"] * 1e9)


#: (capture, finding, what the measurement is, measured share of the unprofiled step (truth.json))
TRUTH_ROWS = (
    ("tests/data/grad_ckpt", "activation_checkpointing", "the same steps with checkpointing off (unprofiled)", _ckpt),
    ("tests/data/unfused_adamw", "unfused_optimizer", "AdamW step alone: for-loop minus fused (unprofiled)", _optim),
)


def truth_table() -> str:
    rows = ["| capture | finding | measured how | predicted saving (bound, share of the profiled step) | "
            "predicted on the unprofiled step | measured saving (share of the unprofiled step) | error (profiled) | "
            "error (unprofiled) |", "|---|---|---|---|---|---|---|---|"]
    for folder, fid, how, fn in TRUTH_ROWS:
        if not (REPO / folder).is_dir():
            continue
        before = analysed(folder)
        pred, meas = own_share(before, fid), fn(_truth(folder))
        up = _what_if(before, (fid,), _truth(folder)["reference"]["median_wall_ms"])["unprofiled"]
        rows.append(f"| {Path(folder).name} | `{fid}` | {how} | {100 * pred:.1f} % | {100 * up['all_saving_share']:.1f} % | "
                    f"{100 * meas:.1f} % | {100 * (pred - meas) / meas:+.0f} % | "
                    f"{100 * (up['all_saving_share'] - meas) / meas:+.0f} % |")
    save = "tests/data/torch_save"
    if (REPO / save).is_dir():
        o = next(x for x in analysed(save)["metrics"]["outliers"]["steps"] if x["holder"])
        meas = _save(_truth(save))
        rows.append(f"| torch_save | `step_variance` (outlier step #{o['index']}) | `torch.save` timed around the call | "
                    f"{o['holder_ns'] / 1e9:.3f} s inside `{o['holder']}` | | {meas / 1e9:.3f} s | "
                    f"{100 * (o['holder_ns'] - meas) / meas:+.1f} % | |")
    return "\n".join(rows)


def own_share(a: dict[str, Any], finding_id: str) -> float:
    """The share of the summed step time a finding's rule itself estimates (its ``saving`` metric), before the
    what-if's pools and floors."""
    (rule,) = [r for r in applicable(a["metrics"], RULES) if r.id == finding_id]
    return float(rule.saving(a["metrics"]) if callable(rule.saving) else lookup(a["metrics"], rule.saving))


def _one(folder: str) -> Path:
    (path,) = sorted((REPO / folder).glob("*.json.gz"))
    return path


def analysed(folder: str) -> dict[str, Any]:
    tr = load_trace(str(_one(folder)))
    m = compute_metrics(tr, find_steps(tr))
    findings, what_if = diagnose(m)
    # the typed findings (re-applied below), the what-if as the report's JSON
    return {"metrics": m, "findings": findings, "what_if": jsonable(what_if)}


def _what_if(before: dict[str, Any], ids: Sequence[str] | None, unprofiled_ms: float | None = None) -> dict[str, Any]:
    fs = [f for f in before["findings"] if ids is None or f.id in ids]
    # the chosen findings with their rules' own shares, re-applied in sequence
    fs = [replace(f, saving=Saving(share=own_share(before, f.id), ns=None)) if f.saving is not None else f for f in fs]
    metrics = before["metrics"]
    if unprofiled_ms is not None:  # as if the capture helper had written the unprofiled step into the trace
        u = int(unprofiled_ms * 1e6)
        over = max(0, int(metrics["steps"]["median_ns"]) - u)  # the capture topic's measured cost
        metrics = {**metrics, "capture": {**metrics.get("capture", {}), "unprofiled_step_ns": u,
                                          "profiler_overhead_ns": over}}
    _, wi = apply_in_sequence(fs, metrics, RULES)
    assert wi is not None
    return json_object(with_unprofiled(wi, metrics) if unprofiled_ms is not None else wi)


def on_profiled_step(wi: dict[str, Any], tokens_per_s: float | None) -> tuple[int, int, float | None]:
    """A what-if on the profiled step, whichever its basis (``what_if.profiled`` beside one without the profiler's
    cost): the median step, it with every finding's cause removed, and tokens/s there (``tokens_per_s``: the
    run's, on the profiled median step)."""
    p = wi.get("profiled")
    step, fixed = (p["step_ns"], p["all_step_ns_if_fixed"]) if p else (wi["all"]["step_ns"], wi["all"]["step_ns_if_fixed"])
    return step, fixed, (tokens_per_s * step / fixed if tokens_per_s and fixed else None)


def predicted(before: dict[str, Any], ids: Sequence[str] | None) -> tuple[int, float | None, list[str]]:
    """The before trace's profiled median step with the named findings' causes removed (all when None), and tokens/s."""
    wi = _what_if(before, ids)
    _, fixed, tps = on_profiled_step(wi, before["metrics"]["flops"].get("median_step_tokens_per_s"))
    return fixed, tps, wi["all"]["finding_ids"]


def predicted_unprofiled(before: dict[str, Any], ids: Sequence[str] | None, unprofiled_ms: float) -> tuple[int, float | None]:
    """The same restated on the before run's unprofiled median step: step and tokens/s."""
    wi = _what_if(before, ids, unprofiled_ms)
    step = wi["unprofiled"]["all_step_ns_if_fixed"]
    # the median step's tokens, as the profiled what-if counts them (its tokens/s x its median step)
    tokens = wi["tokens_per_s"] * wi["step_ns"] / 1e9 if wi.get("tokens_per_s") else None
    return step, (tokens / (step / 1e9) if tokens and step else None)


def unprofiled_table() -> str:
    """The pairs whose both runs were timed unprofiled: predicted on the unprofiled step vs the unprofiled after run."""
    rows = ["| pair | findings removed | before: unprofiled step (profiled) | predicted on the unprofiled step (bound) | "
            "measured after, unprofiled | error | unprofiled timings |", "|---|---|---|---|---|---|---|"]
    for label, b, a, ids, _ in PAIRS:
        ub, ua = unprofiled(b), unprofiled(a)
        if ub is None or ua is None:
            rows.append(f"| {label} | | no unprofiled timing of {'the before' if ub is None else 'the after'} run | | | | |")
            continue
        before = analysed(b)
        step, tps = predicted_unprofiled(before, ids, ub["median_ms"])
        used = _what_if(before, ids)["all"]["finding_ids"]
        if tps and ua["tokens_per_s"]:
            err = (tps - ua["tokens_per_s"]) / ua["tokens_per_s"]
            pred = f"{step / 1e6:.1f} ms, {tps:,.0f} tok/s"
            meas = f"{ua['median_ms']:.1f} ms, {ua['tokens_per_s']:,.0f} tok/s"
        else:
            err = (ua["median_ms"] * 1e6 - step) / (ua["median_ms"] * 1e6)
            pred, meas = f"{step / 1e6:.1f} ms", f"{ua['median_ms']:.1f} ms"
        prof = before["metrics"]["steps"]["median_ns"] / 1e6
        src = "same runs (truth.json)" if ub["source"] == ua["source"] == "truth.json" else "separate runs (unprofiled_refs.json)"
        rows.append(f"| {label} | {', '.join(f'`{i}`' for i in used) or 'none'} | {ub['median_ms']:.1f} ms ({prof:.1f} ms) | "
                    f"{pred} | {meas} | {100 * err:+.0f} % | {src} |")
    return "\n".join(rows)


def table() -> str:
    rows = ["| pair | what changed | findings removed | before: median step, tokens/s | predicted (bound) | "
            "measured after | error |", "|---|---|---|---|---|---|---|"]
    for label, b, a, ids, what in PAIRS:
        if not (REPO / b).is_dir() or not (REPO / a).is_dir():
            continue
        before, after = analysed(b), analysed(a)
        step, tps, used = predicted(before, ids)
        # both sides on the profiled step: the median step and tokens/s the trace shows
        wb = {"step_ns": before["metrics"]["steps"]["median_ns"],
              "tokens_per_s": before["metrics"]["flops"].get("median_step_tokens_per_s")}
        wa = {"step_ns": after["metrics"]["steps"]["median_ns"],
              "tokens_per_s": after["metrics"]["flops"].get("median_step_tokens_per_s")}
        if tps and wa.get("tokens_per_s"):
            err = (tps - wa["tokens_per_s"]) / wa["tokens_per_s"]
            pred = f"{step / 1e6:.1f} ms, {tps:,.0f} tok/s"
            meas = f"{wa['step_ns'] / 1e6:.1f} ms, {wa['tokens_per_s']:,.0f} tok/s"
        else:
            err = (wa["step_ns"] - step) / wa["step_ns"]
            pred, meas = f"{step / 1e6:.1f} ms", f"{wa['step_ns'] / 1e6:.1f} ms"
        base = f"{wb['step_ns'] / 1e6:.1f} ms" + (f", {wb['tokens_per_s']:,.0f} tok/s" if wb.get("tokens_per_s") else "")
        rows.append(f"| {label} | {what} | {', '.join(f'`{i}`' for i in used) or 'none'} | {base} | {pred} | {meas} | "
                    f"{100 * err:+.0f} % |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n\n" + unprofiled_table() + "\n\n" + truth_table() + "\n")
