"""``slow_host_op``'s likely cause (metrics/steps/idle.py ``CULPRIT_HINTS``, issue #23 point 2): each hint is given only
when the events it names are in the trace, and the finding then says them; the same operator without those events
gets no hint, and the finding says that no event inside it tells why (never a guess from the operator's name).

Every trace here is four 10 ms steps in which the GPU runs a 1 ms kernel and then waits while the host is inside one
4 ms call of the operator under test (so the operator holds 40 % of step time: ``slow_host_op`` fires)."""

from __future__ import annotations

import pytest
from minitrace import GEMM, US, E, kernel, launch, make_trace, op, step

from tb_llmdiag.findings.engine import evaluate
from tb_llmdiag.findings.table import RULES
from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.steps.idle import CUDNN_ATTENTION_HINT, CUDNN_CONVOLUTION_HINT, HOST_COPY_HINT, RECOMPILE_HINT
from tb_llmdiag.metrics.labels import chain_words
from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.model import Kind

MS = 1_000 * US
HTOD = "Memcpy HtoD (Pageable -> Device)"
DTOD = "Memcpy DtoD (Device -> Device)"


def steps_with(culprit: str, inside: str | None = None, tokens: tuple[int, ...] | None = None, copy: str = HTOD):
    """Four steps; in each the host spends 4 ms in ``culprit`` (starting at 2 ms) while the GPU waits. ``inside``:
    what its calls hold besides: ``"compile"`` (a ``compile_fx_inner`` range), ``"copy"`` (a cudaMemcpyAsync whose
    ``copy`` runs on the GPU); ``tokens``: the token slots of each step's ``aten::embedding`` (recorded shapes)."""
    rows: list[E] = []
    for i in range(4):
        t = i * 10 * MS
        c = 100 + 10 * i
        rows += [step(i + 1, t, 10 * MS), launch(t + 100 * US, 10 * US, corr=c), kernel(GEMM, t + 200 * US, MS, corr=c),
                 op(culprit, t + 2 * MS, 4 * MS),
                 launch(t + 7 * MS, 10 * US, corr=c + 1), kernel(GEMM, t + 7 * MS + 50 * US, 2 * MS, corr=c + 1)]
        if inside == "compile":
            rows.append(op("compile_fx_inner", t + 2 * MS + 10 * US, 3 * MS))
        if inside == "copy":
            rows += [E(Kind.RUNTIME, "cudaMemcpyAsync", t + 5 * MS, 100 * US, corr=c + 2),
                     E(Kind.MEMCPY, copy, t + 5 * MS + 10 * US, 50 * US, corr=c + 2)]
        if tokens is not None:
            rows.append(op("aten::embedding", t + 50 * US, 10 * US, f"[[1000, 64], [1, {tokens[i]}]]"))
    return make_trace(rows)


def slow_host_op(trace) -> tuple[dict, dict]:
    m = compute_metrics(trace, find_steps(trace))
    found = [f for f in jsonable(evaluate(m, RULES)) if f["id"] == "slow_host_op"]
    assert len(found) == 1, [f["id"] for f in jsonable(evaluate(m, RULES))]
    return m["idle"], found[0]


def assert_no_hint(idle: dict, f: dict) -> None:
    assert idle["host_wait_culprit_hint"] is None and idle["host_wait_culprit_hint_events"] is None
    assert "Likely cause" not in f["summary"]
    assert "No event inside its calls says why it is slow" in f["summary"]
    # the fix is how to see more, not a remedy for a cause the trace does not show
    assert f["fix"]["text"].startswith(f"Find out what {chain_words(idle['host_wait_culprit'])} does on the host: ")
    for word in ("plan", "autotun", "compil", "pin"):
        assert word not in f["fix"]["text"], word


@pytest.mark.parametrize("culprit", ["CompiledFunction", "Torch-Compiled Region: 0/1", "TorchDynamo Cache Lookup"])
def test_the_recompile_hint_needs_compile_ranges_inside_the_calls(culprit: str) -> None:
    # GIVEN the compiled region with a compile_fx_inner range inside each call
    idle, f = slow_host_op(steps_with(culprit, inside="compile"))
    # THEN the hint says it recompiles, backed by the four compile ranges, and the fix is about recompiling
    assert idle["host_wait_culprit"] == culprit
    assert idle["host_wait_culprit_hint"] == RECOMPILE_HINT
    assert idle["host_wait_culprit_hint_events"] == "4 compile ranges start inside its calls"
    assert f"Likely cause, from the events inside it (4 compile ranges start inside its calls): {RECOMPILE_HINT}." in f["summary"]
    assert f["fix"]["text"].startswith(f"Stop torch.compile recompiling inside {culprit}")
    # AND the same calls with no compile inside (a compiled graph running: torch.compile's steady state) get none
    assert_no_hint(*slow_host_op(steps_with(culprit)))


@pytest.mark.parametrize("culprit", ["aten::to", "aten::copy_"])
def test_the_copy_hint_needs_host_to_device_copies_launched_inside_the_calls(culprit: str) -> None:
    idle, f = slow_host_op(steps_with(culprit, inside="copy"))
    assert idle["host_wait_culprit_hint"] == HOST_COPY_HINT
    assert idle["host_wait_culprit_hint_events"] == "4 host-to-device copies are launched inside its calls"
    assert f["fix"]["text"].startswith(f"Copy to the GPU from pinned host memory, asynchronously, so {culprit}")
    # a device-to-device copy inside it, or none, is not a host-to-device copy
    assert_no_hint(*slow_host_op(steps_with(culprit, inside="copy", copy=DTOD)))
    assert_no_hint(*slow_host_op(steps_with(culprit)))


@pytest.mark.parametrize(
    ("culprit", "hint"),
    [("aten::_cudnn_attention_backward", CUDNN_ATTENTION_HINT), ("aten::cudnn_convolution", CUDNN_CONVOLUTION_HINT)],
)
def test_the_plan_build_hint_needs_new_input_shapes_at_the_slow_calls(culprit: str, hint: str) -> None:
    # GIVEN token slots 512, 640, 512, 768: steps 1, 2 and 4 have a shape no earlier step had (3 of the 4 steps)
    idle, f = slow_host_op(steps_with(culprit, tokens=(512, 640, 512, 768)))
    assert idle["host_wait_culprit_hint"] == hint
    assert idle["host_wait_culprit_hint_events"] == (
        "3 of the 4 steps holding its slow calls have an input shape no earlier step had "
        "(token slots per step: 3 distinct values over 4 steps)")
    assert f["fix"]["text"].startswith(f"Give {chain_words(culprit)} fixed input shapes")  # the op in words (#36)
    # AND its per-shape work is counted (variable_shapes reads it)
    assert idle["host_wait_per_shape_op"] == culprit and idle["host_wait_per_shape_share"] == pytest.approx(0.4)
    # THEN the same slow calls with one shape all along, with shapes new in only 1 of 4 steps, or without
    # recorded shapes, get no hint and count no per-shape work
    for tokens in ((512, 512, 512, 512), (512, 512, 512, 640), None):
        idle, f = slow_host_op(steps_with(culprit, tokens=tokens))
        assert_no_hint(idle, f)
        assert idle["host_wait_per_shape_op"] is None and idle["host_wait_per_shape_share"] == 0.0


def test_an_operator_no_hint_names_gets_none() -> None:
    assert_no_hint(*slow_host_op(steps_with("aten::add_", inside="copy")))
