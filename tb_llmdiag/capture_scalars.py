"""The per-window summary of an over-the-run capture as TensorBoard scalars (`llm_diag/...`), beside the loss.

Pure Python but for TensorBoard's own event writer (imported when a writer is made). `window_scalars` turns a window's
metadata (`tb_llmdiag.capture_series`) and, once the window's report is known, its summary
(`tb_llmdiag.capture_summary.summary_of`) into `{tag: value}`; `ScalarSink` writes them at the window's global step,
through the user's own writer (anything with `add_scalar(tag, value, global_step)`: the run's event file) or through
an event file of its own in `scalars_dir`.

Tags (units in the names, as everywhere in the project):

| tag | value |
|---|---|
| `llm_diag/step_ms` | median of the unprofiled steps before the window (host clock): the job as it runs |
| `llm_diag/tokens_per_s` | tokens a step (the user's count, else the trace's token slots) over `step_ms` |
| `llm_diag/capture_cost_share` | the capture's cost so far over the run's wall time so far |
| `llm_diag/trigger_step_ms` | triggered windows only: the slow step that opened the window |
| `llm_diag/profiled_step_ms` | the report's median step (the profiled steps) |
| `llm_diag/gpu_busy_share` | the report's GPU-busy share |
| `llm_diag/mfu_share` | the report's MFU (model FLOPs over the device's peak) |
| `llm_diag/finding/<id>_saving_share` | each finding's estimated saving, a share of the step |
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, TypeGuard

PREFIX = "llm_diag/"


def _finite(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def helper_scalars(window: dict[str, Any]) -> dict[str, float]:
    """The tags known when the window is written (no report needed)."""
    out: dict[str, float] = {}
    step_ns = window.get("step_ns")
    if _finite(step_ns) and step_ns > 0:
        out[PREFIX + "step_ms"] = step_ns / 1e6
        tokens = window.get("tokens_per_step")
        if _finite(tokens) and tokens > 0:
            out[PREFIX + "tokens_per_s"] = tokens / (step_ns / 1e9)
    share = (window.get("cost") or {}).get("spent_share")
    if _finite(share):
        out[PREFIX + "capture_cost_share"] = float(share)
    trigger = window.get("trigger") or {}
    if _finite(trigger.get("step_ns")):
        out[PREFIX + "trigger_step_ms"] = trigger["step_ns"] / 1e6
    return out


def report_scalars(window: dict[str, Any], summary: dict[str, Any]) -> dict[str, float]:
    """The tags from the window's report summary (`capture_summary.summary_of`)."""
    out: dict[str, float] = {}
    if _finite(summary.get("profiled_step_ns")):
        out[PREFIX + "profiled_step_ms"] = summary["profiled_step_ns"] / 1e6
    if _finite(summary.get("gpu_busy_share")):
        out[PREFIX + "gpu_busy_share"] = float(summary["gpu_busy_share"])
    if _finite(summary.get("mfu_share")):
        out[PREFIX + "mfu_share"] = float(summary["mfu_share"])
    step_ns = window.get("step_ns")
    tokens = summary.get("tokens_per_step")
    if not _finite(window.get("tokens_per_step")) and _finite(tokens) and _finite(step_ns) and step_ns > 0:
        out[PREFIX + "tokens_per_s"] = tokens / (step_ns / 1e9)
    for fid, saving in sorted((summary.get("savings_share") or {}).items()):
        if _finite(saving):
            out[f"{PREFIX}finding/{fid}_saving_share"] = float(saving)
    return out


class ScalarSink:
    """Writes `{tag: value}` at a step: through `writer.add_scalar` when given, else into an event file of its own in
    `scalars_dir` (made on the first write; TensorBoard's `EventFileWriter`, `simple_value` scalars as
    `torch.utils.tensorboard` writes them)."""

    def __init__(self, scalars_dir: str | None, writer: Any = None) -> None:
        self.scalars_dir = scalars_dir
        self.writer = writer
        self._own: Any = None
        self.written: list[tuple[int, str, float]] = []

    def prepare(self) -> None:
        """Import TensorBoard's event writer now (a fraction of a second the first time), so that the first scalars
        written from inside a training step do not pay for it."""
        if self.writer is None and self.scalars_dir is not None:
            from tensorboard.compat.proto import event_pb2, summary_pb2  # noqa: F401
            from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: F401

    def write(self, step: int, values: dict[str, float]) -> None:
        if not values:
            return
        if self.writer is not None:
            for tag, value in values.items():
                self.writer.add_scalar(tag, value, step)
        elif self.scalars_dir is not None:
            self._write_own(step, values)
        else:
            return
        self.written.extend((step, tag, value) for tag, value in values.items())

    def _write_own(self, step: int, values: dict[str, float]) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        if self._own is None:
            os.makedirs(self.scalars_dir or ".", exist_ok=True)
            self._own = EventFileWriter(self.scalars_dir, filename_suffix=".llmdiag")
        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(v)) for tag, v in values.items()]
        )
        self._own.add_event(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))

    def flush(self) -> None:
        if self._own is not None:
            self._own.flush()
        elif self.writer is not None and hasattr(self.writer, "flush"):
            self.writer.flush()

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
            self._own = None
        elif self.writer is not None and hasattr(self.writer, "flush"):
            self.writer.flush()
