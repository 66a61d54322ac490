"""Predicted vs measured: the what-if of a *before* trace against the median step of its *after* trace.

    python scripts/whatif_check.py            # prints the README's markdown table

For each pair the prediction removes the named findings' causes from the before trace's median step, in sequence
(``findings/whatif.py``), and converts to tokens/s with the before trace's median tokens per step; the measured
value is the after trace's median step and tokens/s. Error = (predicted - measured) / measured, of tokens/s when
both traces record shapes (the batch may differ between the runs), else of the step time.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from tb_llmdiag.findings import diagnose, lookup
from tb_llmdiag.findings.engine import applicable
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.findings.whatif import apply_in_sequence
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.steps import find_steps

REPO = Path(__file__).resolve().parents[1]

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
    import json

    return json.loads((REPO / folder / "truth.json").read_text())["ranks"][0]


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
            "measured saving (share of the unprofiled step) | error |", "|---|---|---|---|---|---|"]
    for folder, fid, how, fn in TRUTH_ROWS:
        if not (REPO / folder).is_dir():
            continue
        f = next(x for x in analysed(folder)["findings"] if x["id"] == fid)
        pred, meas = own_share(analysed(folder), fid), fn(_truth(folder))
        rows.append(f"| {Path(folder).name} | `{fid}` | {how} | {100 * pred:.1f} % | {100 * meas:.1f} % | "
                    f"{100 * (pred - meas) / meas:+.0f} % |")
    save = "tests/data/torch_save"
    if (REPO / save).is_dir():
        o = next(x for x in analysed(save)["metrics"]["outliers"]["steps"] if x["holder"])
        meas = _save(_truth(save))
        rows.append(f"| torch_save | `step_variance` (outlier step #{o['index']}) | `torch.save` timed around the call | "
                    f"{o['holder_ns'] / 1e9:.3f} s inside `{o['holder']}` | {meas / 1e9:.3f} s | "
                    f"{100 * (o['holder_ns'] - meas) / meas:+.1f} % |")
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
    return {"metrics": m, "findings": findings, "what_if": what_if}


def predicted(before: dict[str, Any], ids: Sequence[str] | None) -> tuple[int, float | None, list[str]]:
    """The before trace's median step with the named findings' causes removed (all when None), and tokens/s."""
    fs = [f for f in before["findings"] if ids is None or f["id"] in ids]
    # the chosen findings with their rules' own shares, re-applied in sequence
    fs = [{**f, "saving": {"share": own_share(before, f["id"]), "ns": None}} if f.get("saving") else f for f in fs]
    _, wi = apply_in_sequence(fs, before["metrics"], RULES)
    assert wi is not None
    return wi["all"]["step_ns_if_fixed"], wi["all"]["tokens_per_s_if_fixed"], wi["all"]["finding_ids"]


def table() -> str:
    rows = ["| pair | what changed | findings removed | before: median step, tokens/s | predicted (bound) | "
            "measured after | error |", "|---|---|---|---|---|---|---|"]
    for label, b, a, ids, what in PAIRS:
        if not (REPO / b).is_dir() or not (REPO / a).is_dir():
            continue
        before, after = analysed(b), analysed(a)
        step, tps, used = predicted(before, ids)
        wb, wa = before["what_if"], after["what_if"]
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
    sys.stdout.write(table() + "\n\n" + truth_table() + "\n")
