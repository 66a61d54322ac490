"""``top_activities`` (issue #26): what the host and the GPU do in a step or range, on a hand-made step whose
answer is computed by hand below; and ``source_of``, the Python frames around a range."""

from __future__ import annotations

from minitrace import ADD, GEMM, US, E, kernel, launch, make_trace, op, step
from tb_llmdiag.metrics import analyze
from tb_llmdiag.registry import matches
from tb_llmdiag.model import Kind
from tb_llmdiag.traceview.activities import top_activities
from tb_llmdiag.traceview.source import source_of


def scenario():  # type: ignore[no-untyped-def]
    # GIVEN one 100 us step: aten::mm 0-20 us with a nested aten::mm 10-15 us, aten::add 30-40 us; two launches
    # (3-5 us, 31-33 us) of a GEMM at 20-30 us and an add kernel at 45-50 us. The GPU idles 0-20, 30-45 and
    # 50-100 us, each gap ended by work launched after it began (or by nothing): all host_wait.
    return make_trace([
        step(0, 0, 100 * US),
        op("aten::mm", 0, 20 * US), op("aten::mm", 10 * US, 5 * US), op("aten::add", 30 * US, 10 * US),
        launch(3 * US, 2 * US, corr=1), kernel(GEMM, 20 * US, 10 * US, corr=1),
        launch(31 * US, 2 * US, corr=2), kernel(ADD, 45 * US, 5 * US, corr=2),
        E(Kind.PYTHON, "train.py(42): train_step", 0, 50 * US),
        E(Kind.PYTHON, "torch/nn/modules/linear.py(116): forward", 0, 25 * US),
    ])


def test_a_whole_step() -> None:
    trace = scenario()
    got = top_activities(trace, analyze(trace), 0, 100 * US, step=0)
    assert (got["start_ns"], got["end_ns"], got["duration_ns"], got["step"]) == (0, 100 * US, 100 * US, 0)
    g = got["gpu"]
    assert (g["busy_ns"], g["collective_ns"], g["host_wait_ns"], g["sync_ns"], g["data_loader_ns"], g["other_ns"]) == (
        15 * US, 0, 85 * US, 0, 0, 0)
    assert g["busy_share"] == 0.15
    assert g["by_category"] == {"gemm": {"time_ns": 10 * US, "share": 0.1},
                                "elementwise": {"time_ns": 5 * US, "share": 0.05}}
    assert g["top"] == [{"name": GEMM, "category": "gemm", "time_ns": 10 * US, "share": 0.1, "count": 1},
                        {"name": ADD, "category": "elementwise", "time_ns": 5 * US, "share": 0.05, "count": 1}]
    # nested calls of one name count once; all of it while the GPU waited for the host
    assert got["host"]["cpu_op"] == [
        {"name": "aten::mm", "time_ns": 20 * US, "share": 0.2, "count": 2, "gpu_host_wait_ns": 20 * US},
        {"name": "aten::add", "time_ns": 10 * US, "share": 0.1, "count": 1, "gpu_host_wait_ns": 10 * US}]
    assert got["host"]["runtime"] == [
        {"name": "cudaLaunchKernel", "time_ns": 4 * US, "share": 0.04, "count": 2, "gpu_host_wait_ns": 4 * US}]
    assert [a["name"] for a in got["host"]["python"]] == ["train.py(42): train_step",
                                                          "torch/nn/modules/linear.py(116): forward"]
    assert "step" not in got["host"]  # the step marker is the range itself


def test_a_range_counts_the_part_inside_it() -> None:
    # WHEN the range is 10-35 us, THEN every event counts with its part inside the range
    trace = scenario()
    got = top_activities(trace, analyze(trace), 10 * US, 35 * US, top=1)
    assert got["step"] is None and got["duration_ns"] == 25 * US
    assert (got["gpu"]["busy_ns"], got["gpu"]["host_wait_ns"]) == (10 * US, 15 * US)
    assert got["gpu"]["top"] == [{"name": GEMM, "category": "gemm", "time_ns": 10 * US, "share": 0.4, "count": 1}]
    assert got["host"]["cpu_op"] == [  # top=1: the longest name only
        {"name": "aten::mm", "time_ns": 10 * US, "share": 0.4, "count": 2, "gpu_host_wait_ns": 10 * US}]
    assert got["host"]["runtime"] == [
        {"name": "cudaLaunchKernel", "time_ns": 2 * US, "share": 0.08, "count": 1, "gpu_host_wait_ns": 2 * US}]


def leaves(doc: object, path: str = "activities"):  # type: ignore[no-untyped-def]
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from leaves(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for v in doc:
            yield from leaves(v, path + "[]")
    else:
        yield path, doc


def test_every_number_of_the_answer_is_in_the_registry() -> None:
    trace = scenario()
    got = top_activities(trace, analyze(trace), 0, 100 * US, step=0)
    assert {p: len(matches(p)) for p, _ in leaves(got) if len(matches(p)) != 1} == {}


def test_the_source_line_is_the_innermost_frame_of_the_users_code() -> None:
    trace = scenario()
    assert source_of(trace, "aten::mm", (0, 20 * US)) == {
        "line": "train.py(42): train_step",
        "frames": ["torch/nn/modules/linear.py(116): forward", "train.py(42): train_step"]}
    # aten::add (30-40 us) is past linear.py's frame (0-25 us), inside train.py's only
    assert source_of(trace, "aten::add", (30 * US, 40 * US)) == {
        "line": "train.py(42): train_step", "frames": ["train.py(42): train_step"]}
    assert source_of(trace, "aten::mm", (1, 2)) is None  # no event there
    no_python = make_trace([step(0, 0, 10 * US), op("aten::mm", 0, 5 * US)])
    assert source_of(no_python, "aten::mm", (0, 5 * US)) is None


def test_a_range_refuses_times_beyond_int64_and_lists_steps_cut() -> None:
    # GIVEN the scenario's trace and a report of 45 steps (as the front door's activities read it) (#35)
    import pytest

    from tb_llmdiag.errors import BadRange
    from tb_llmdiag.traceview.activities import asked_range

    trace = scenario()
    rows = [{"index": i, "start_ns": 0, "end_ns": 100 * US} for i in range(45)]
    report = {"run": "r", "summary": {"window_ns": 100 * US}, "metrics": {"steps": {"per_step": rows}}}
    # WHEN a time is beyond int64 ns (it overflowed numpy before), top is below 1, or the step is unknown
    # THEN each is one line, BadRange (a bad argument: exit code 2)
    with pytest.raises(BadRange, match=r"^end_ns 9223372036854775808 is beyond int64 ns \(times are ns since "
                                       r"the trace start, < 2\^63\)$"):
        asked_range(report, None, 0, 2**63)
    with pytest.raises(BadRange, match=r"^start_ns -9223372036854775809 is beyond int64 ns"):
        asked_range(report, None, -(2**63) - 1, None)
    with pytest.raises(BadRange, match=r"^top must be 1 or more, not 0$"):
        top_activities(trace, analyze(trace), 0, 100 * US, top=0)
    steps = ", ".join(str(i) for i in range(20))
    with pytest.raises(BadRange) as exc:
        asked_range(report, 99, None, None)
    assert str(exc.value) == f"no step 99 in run r (steps: {steps} and 25 more)" and exc.value.exit_code == 2
    # a range ending at the last int64 ns is a range, answered over the part the trace has
    lo, hi = asked_range(report, None, 0, 2**63 - 1)
    got = top_activities(trace, analyze(trace), lo, hi)
    assert (got["start_ns"], got["end_ns"], got["gpu"]["busy_ns"]) == (0, 2**63 - 1, 15 * US)
