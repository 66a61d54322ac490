#!/usr/bin/env python3
"""refs.sh's SUMMARY lines -> tests/data/unprofiled_refs.json (what scripts/whatif_check.py reads).

    python examples/captures/refs_json.py WORK_DIR/refs.jsonl DATE > tests/data/unprofiled_refs.json

Each run keeps its raw per-step times and tokens; ``steps`` says which steps its median and tokens/s are taken over:

- packed runs (every batch the same 512-token rows): steps 4-11, the steady state. Steps 0-3 are dropped as warm-up
  (CUDA and cuBLAS start-up, the allocator growing, the workers starting, torch.compile compiling at step 0): the
  profiled captures skip the same steps (window from step 4);
- seed runs (padded to the longest sample in the batch): steps 0-3, the very steps their profiled traces hold
  (``--profile-from-step0 --active-steps 4``). Every run sees the same batches (seeded), and a seed step's time follows
  its batch: its padded length, and whether cuDNN has planned that length before (a new length costs 0.1-2.7 s on
  the host). There is no steady state to take; the what-if restates the trace's median step (of steps 0-3) on the
  unprofiled median step, so that must be the median of the same four batches: the mean of the middle two.

The step time is ``gpu_event_ms``: CUDA-event time between step boundaries (the loop has no sync; when the host runs
ahead of the GPU, as the compiled run does, host times between boundaries are shorter than the steps the GPU runs).
Tokens/s is the chosen steps' tokens summed over their times summed, as the product's ``flops.tokens_per_s``:
``token_slots_per_s`` counts padded slots (what the traces' shapes give and the what-if uses), ``tokens_real_per_s``
real tokens; they differ only in the seed runs, each step's tokens taken with that step's time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: refs.sh run name -> (capture folder, steps taken)
CAPTURES = {
    "gpu_seed": ("tests/data/gpu_seed", range(0, 4)),
    "gpu_fixed": ("tests/data/gpu_fixed", range(4, 12)),
    "gpu_dataloader_slow": ("tests/data/gpu_dataloader_slow", range(4, 12)),
    "gpu_item_sync": ("tests/data/gpu_item_sync", range(4, 12)),
    "gpu_compiled": ("tests/data/gpu_compiled", range(4, 12)),
    "seed_lora_qwen1.5b": ("demo_logs/seed_lora_qwen1.5b", range(0, 4)),
    "fixed_lora_qwen1.5b": ("demo_logs/fixed_lora_qwen1.5b", range(4, 12)),
}


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def entry(s: dict[str, Any], steps: range) -> dict[str, Any]:
    ms = [s["gpu_ms"][i] for i in steps]
    total_s = sum(ms) / 1e3
    return {
        "run": s["run"],
        "switches": s["argv"][4:],
        "layers": s["layers"],
        "host_ms": s["host_ms"],
        "gpu_event_ms": s["gpu_ms"],
        "tokens_real": s["tokens_real"],
        "token_slots": s["tokens_slots"],
        "steps": list(steps),
        "median_step_ms": round(median(ms), 3),
        "token_slots_per_s": round(sum(s["tokens_slots"][i] for i in steps) / total_s, 1),
        "tokens_real_per_s": round(sum(s["tokens_real"][i] for i in steps) / total_s, 1),
        "final_loss": s["final_loss"],
        "peak_allocated_bytes": s["peak_mem_bytes"],
    }


def main(path: str, date: str) -> int:
    runs = [json.loads(line)["s"] for line in Path(path).read_text().splitlines() if line.strip()]
    first = runs[0]
    out = {
        "what": "unprofiled references for the what-if pairs of docs/whatif.md whose captures (docs/captures.md, "
        "2026-11-22) hold no unprofiled steps: the same lora_finetune.py switches with --no-profile --steps 12",
        "made": {
            "date": date,
            "device": first["gpu"],
            "torch": first["torch"],
            "transformers": first["transformers"],
            "command": "bash examples/captures/refs.sh /tmp/refs; python examples/captures/refs_json.py "
            "/tmp/refs/refs.jsonl DATE > tests/data/unprofiled_refs.json",
        },
        "how": " ".join((__doc__ or "").split("\n\n", 2)[2].split()),
        "captures": {CAPTURES[s["run"]][0]: entry(s, CAPTURES[s["run"]][1]) for s in runs},
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
