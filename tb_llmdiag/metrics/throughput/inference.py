"""Inference throughput as serving users count it: generated tokens per second and time per output token, beside
the time of the prefill and decode forward passes (the ``inference`` topic; inference runs only).

Definitions (Kineto traces with ``record_shapes=True``; ``run.workload`` is ``inference``):
- A forward pass is one call of the token embedding (``shapes.token_embedding_calls``: ``aten::embedding`` on
  the largest vocabulary) with indices ``[B, L]``; it lasts until the next such call starts, the last one until
  the trace's last event ends.
- ``prefill``: a forward with L > 1 (the prompt: B x L prompt tokens); ``decode``: a forward with L = 1 (the
  KV cache holds the rest: B tokens, one per sequence).
- ``generated_tokens``: B of every decode forward plus B of every prefill forward (a prefill yields each
  sequence's first token); only when the trace has a decode forward (else null: one forward pass generates
  nothing to count, e.g. a classifier).
- ``generated_tokens_per_s`` = generated_tokens / (prefill_ns + decode_ns); ``time_per_output_token_ns`` =
  decode_ns / decode forwards (each decode forward emits one token per sequence).
Unavailable on training runs, without shapes, or when the embedding's indices are not ``[B, L]`` (vLLM and
SGLang flatten the batch to ``[tokens]``: prefill and decode are mixed in one call).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_llmdiag.metrics.entry import COUNT, HIGHER, LOWER, NEITHER, NS, PER_S, Entry
from tb_llmdiag.metrics.throughput.shapes import per_call_batch_length, token_embedding_calls
from tb_llmdiag.model import Trace


def _unavailable(reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason}


def inference_metrics(trace: Trace, run: dict[str, Any]) -> dict[str, Any]:
    """The ``inference`` topic (module docstring)."""
    if run.get("workload") != "inference":
        return _unavailable("not an inference run (run.workload)")
    ev = trace.events
    calls = token_embedding_calls(ev)
    if calls is None:
        return _unavailable("no input shapes of the token embedding (capture with input shapes recorded)")
    rows = calls[0]
    batch, length = per_call_batch_length(ev, rows)
    if rows.size == 0 or (length <= 0).any():
        return _unavailable("the token embedding's indices are not [batch, length] (a flattened serving batch)")
    order = np.argsort(ev.ts_ns[rows], kind="stable")
    rows, batch, length = rows[order], batch[order], length[order]
    end = int((ev.ts_ns + ev.dur_ns).max())
    starts = ev.ts_ns[rows].astype(np.int64)
    dur = np.diff(np.append(starts, max(end, int(starts[-1])))).astype(np.int64)
    pre, dec = length > 1, length == 1
    prefill_ns, decode_ns = int(dur[pre].sum()), int(dur[dec].sum())
    n_dec = int(dec.sum())
    generated = int(batch[dec].sum() + batch[pre].sum()) if n_dec else None
    total = prefill_ns + decode_ns
    return {
        "available": True,
        "prefill_forward_count": int(pre.sum()),
        "decode_forward_count": n_dec,
        "prompt_tokens": int((batch[pre] * length[pre]).sum()),
        "generated_tokens": generated,
        "prefill_ns": prefill_ns,
        "decode_ns": decode_ns,
        "generated_tokens_per_s": generated / (total / 1e9) if generated and total > 0 else None,
        "time_per_output_token_ns": int(round(decode_ns / n_dec)) if n_dec else None,
    }


# The registry's entries of the `inference` topic: one row per key (metrics/entry.py); metrics/registry.py collects
# them through the topic table (metrics/topics.py), docs/metrics.md is generated from them.
ENTRIES: tuple[Entry, ...] = (
    (
        "inference.prefill_forward_count",
        COUNT,
        NEITHER,
        0,
        "prefill forwards",
        "forward passes whose token embedding reads [B, L] indices with L > 1 (the prompt)",
    ),
    (
        "inference.decode_forward_count",
        COUNT,
        NEITHER,
        0,
        "decode forwards",
        "forward passes whose token embedding reads [B, 1] indices (one new token per sequence)",
    ),
    ("inference.prompt_tokens", COUNT, NEITHER, 0, "prompt tokens", "B x L summed over the prefill forwards"),
    (
        "inference.generated_tokens",
        COUNT,
        NEITHER,
        0,
        "generated tokens",
        "B summed over the decode and prefill forwards; null without a decode forward",
    ),
    (
        "inference.prefill_ns",
        NS,
        LOWER,
        0.05,
        "prefill time",
        "the prefill forwards' time: each from its embedding call to the next forward's (docs: metrics/throughput/inference.py)",
    ),
    ("inference.decode_ns", NS, LOWER, 0.05, "decode time", "the decode forwards' time, measured the same way"),
    (
        "inference.generated_tokens_per_s",
        PER_S,
        HIGHER,
        0.05,
        "generated tokens/s",
        "generated_tokens / (prefill_ns + decode_ns): the throughput serving users count (prompt tokens excluded)",
    ),
    (
        "inference.time_per_output_token_ns",
        NS,
        LOWER,
        0.05,
        "time per output token",
        "decode_ns / decode forwards: the time between two tokens of one sequence",
    ),
)
