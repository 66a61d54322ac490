"""``llmdiag mcp [LOGDIR]``: a Model Context Protocol server over stdio, read-only, on the library's front door.

Tools (each with a JSON schema from its signature, each answer compact JSON within a few KB unless ``detail``):
``list_runs``, ``diagnose``, ``explain_finding``, ``top_activities``, ``anatomy``, ``compare``, ``check``, ``timeline``
(``answers``, ``comparison``, ``timeline``). Resources: ``llmdiag://registry`` (every number's unit and definition) and ``llmdiag://findings``
(every finding the engine can report), so an agent can cite definitions. A user error (an unknown run, a path
outside the logdir, a trace that cannot be read, an argument of the wrong type or out of its schema's range) is a
tool error of one line within the answers' bound (``fit.error_line``); a bug is the SDK's generic tool error, its
traceback on stderr. The SDK (``pip install '.[agent]'`` in a clone) is imported only here,
through ``extras.require``. docs/agents.md registers the server in agent clients.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Annotated, Any

from tb_llmdiag.extras import require

# the SDK first: without it, importing this module is the one-line MissingExtra (the CLI prints it, exit 2)
mcpserver = require("mcp.server.mcpserver", extra="agent", needs=("mcp", "pydantic"), what="llmdiag mcp")

from mcp.types import CallToolResult, TextContent, ToolAnnotations  # noqa: E402
from pydantic import Field, ValidationError  # noqa: E402

from tb_llmdiag import __version__, api  # noqa: E402
from tb_llmdiag.agent import answers, comparison  # noqa: E402
from tb_llmdiag.agent import timeline as timeline_answer  # noqa: E402
from tb_llmdiag.agent.fit import dumps, error_line  # noqa: E402
from tb_llmdiag.agent.workspace import Workspace  # noqa: E402
from tb_llmdiag.errors import LlmDiagError  # noqa: E402
from tb_llmdiag.jsonsafe import jsonable  # noqa: E402

INSTRUCTIONS = (
    "LLM Diag diagnoses why a PyTorch/JAX training or inference step is slow from profiler traces in one logdir. "
    "Start with list_runs, then diagnose(run); explain_finding(run, finding) says where a finding is in the trace "
    "and which step shows it; top_activities(run, step) lists what the host and the GPU do there; anatomy(run) splits "
    "the GPU's time by part of the model (attention, MLP, LoRA, lm_head, loss, optimizer...) with each part's "
    "efficiency. compare and check "
    "judge two runs with noise bands; timeline(run) shows a run's profiler windows over the run (step, tokens/s, GPU "
    "busy, MFU) and where the job changed. Every number's unit and definition: resource llmdiag://registry (keys as in "
    "the answers). Savings are upper bounds on the median step."
)

#: the longest name or path an argument may be (Linux's PATH_MAX)
NAME_CHARS = 4096
#: times are int64 ns since the trace start
NS = Field(ge=0, lt=2**63, strict=True)

Run = Annotated[str, Field(max_length=NAME_CHARS, description="a run name from list_runs (run, run/worker/span, or a "
                           "job's run), or a path inside the logdir to a trace file or run folder")]  # fmt: skip
Detail = Annotated[bool, Field(strict=True, description="answer with every field (up to ~60 KB) instead of a few KB")]
FindingId = Annotated[str, Field(max_length=NAME_CHARS, description="a finding id from diagnose, e.g. host_bound")]
Step = Annotated[int | None, NS, Field(description="a step index (steps.per_step[].index)")]
StartNs = Annotated[int | None, NS, Field(description="range start, ns since the trace start")]
EndNs = Annotated[int | None, NS, Field(gt=0, description="range end (exclusive)")]
Top = Annotated[int, Field(ge=1, le=50, strict=True, description="names per list")]
Fraction = Annotated[float | None, Field(ge=0, lt=100, allow_inf_nan=False, strict=True,
                                         description="tolerance of every gated metric (0.05 = 5 %)")]  # fmt: skip


def side(what: str) -> Any:
    """A run argument of ``compare`` / ``check`` (as ``run``), described as ``what``."""
    return Annotated[str, Field(max_length=NAME_CHARS, description=f"{what} (as `run`)")]


_SdkServer: Any = mcpserver.MCPServer


class Server(_SdkServer):
    """The SDK's server, each tool error (an unknown tool, arguments that fail the schema, a user error) one line
    within the answers' bound: the SDK's own words for a failed validation are several lines, quoting the value."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        errors = mcpserver.exceptions
        try:
            return await super().call_tool(name, arguments, context)
        except errors.UnexpectedToolError:
            raise  # a bug: the SDK's generic answer, the traceback on stderr
        except errors.ToolError as exc:
            cause = exc.__cause__
            problems = list(cause.errors(include_url=False)) if isinstance(cause, ValidationError) else None
            raise errors.ToolError(error_line(name, str(exc), problems)) from cause


def _tool(fn: Callable[..., dict[str, Any]], tool_error: type[Exception], lock: Any) -> Callable[..., CallToolResult]:
    """Call an answer under the server's lock (the SDK runs each call on a worker thread; the workspace's caches
    are not shared between threads); a user error (LlmDiagError) becomes a tool error with its one line."""

    def call(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            with lock:
                answer = fn(*args, **kwargs)
        except LlmDiagError as exc:
            raise tool_error(str(exc)) from None  # one line; Server.call_tool bounds it
        doc = jsonable(answer)  # the structured copy holds no NaN either
        return CallToolResult(content=[TextContent(type="text", text=dumps(doc))], structured_content=doc)

    return call


def add_timeline_tool(server: Any, ws: Workspace, ro: ToolAnnotations, tool_error: type[Exception], lock: Any) -> Any:
    """``server`` with the ``timeline`` tool (``agent/timeline.py``)."""
    timeline_ = _tool(timeline_answer.timeline, tool_error, lock)

    @server.tool(annotations=ro)
    def timeline(
        run: Annotated[
            str | None, Field(description="a run folder's name (list_runs' `run`); none: every run in the logdir")
        ] = None,
        detail: Detail = False,
    ) -> CallToolResult:
        """A run's profiler windows over the run (captured with profile_run, or a schedule with repeat): per window
        the step without the profiler, the profiled step, tokens/s, GPU busy, MFU and the top finding; the change
        points (a shift beyond the windows' noise band, or a one-off) with what changed between the windows around
        each; the triggered windows; and what the capture cost over the run."""
        return timeline_(ws, run, detail)

    del timeline
    return server


def add_anatomy_tool(server: Any, ws: Workspace, ro: ToolAnnotations, tool_error: type[Exception], lock: Any) -> Any:
    """``server`` with the ``anatomy`` tool (``answers.anatomy``)."""
    anatomy_ = _tool(answers.anatomy, tool_error, lock)

    @server.tool(annotations=ro)
    def anatomy(
        run: Run,
        step: Step = None,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        detail: Detail = False,
    ) -> CallToolResult:
        """The GPU's busy time by part of the model (embedding, attention, MLP, norms, LoRA adapters, MoE, lm_head,
        loss, optimizer, communication, data movement, each compiled graph, and `other` with its top operators):
        per part its time, share, time per step, launches and host dispatch time, achieved TFLOP/s and efficiency
        against the device's peak, and how it was identified. With a step (or a time range): each part's time
        there."""
        return anatomy_(ws, run, step, start_ns, end_ns, detail)

    del anatomy
    return server


def add_comparison_tools(
    server: Any, ws: Workspace, ro: ToolAnnotations, tool_error: type[Exception], lock: Any
) -> Any:
    """``server`` with the ``compare`` and ``check`` tools (``agent/comparison.py``)."""
    compare_ = _tool(comparison.compare, tool_error, lock)
    check_ = _tool(comparison.check, tool_error, lock)

    @server.tool(annotations=ro)
    def compare(
        before: side("the baseline run"),  # type: ignore[valid-type]
        after: side("the run to judge"),  # type: ignore[valid-type]
        detail: Detail = False,
    ) -> CallToolResult:
        """`llmdiag compare BEFORE AFTER`: the verdict, each metric's change with its noise band and judgement, and
        which findings were resolved, appeared or changed. Two runs, or two jobs."""
        return compare_(ws, before, after, detail)

    @server.tool(annotations=ro)
    def check(
        candidate: side("the run to gate"),  # type: ignore[valid-type]
        baseline: side("the baseline run"),  # type: ignore[valid-type]
        max_regression: Fraction = None,
        detail: Detail = False,
    ) -> CallToolResult:
        """`llmdiag check CANDIDATE --baseline BASELINE`: passed (exit_code 0) or failed (1), with each metric that
        regressed beyond its tolerance and beyond noise."""
        return check_(ws, candidate, baseline, max_regression, detail)

    del compare, check
    return server


def add_resources(server: Any) -> Any:
    """``server`` with the metric registry and the finding catalogue as resources."""

    @server.resource("llmdiag://registry", name="metric registry", mime_type="application/json")
    def registry() -> str:
        """Every number's key, unit, direction (better lower/higher), comparison tolerance, label and definition;
        the answers' keys are these keys (a finding's evidence units under evidence_units)."""
        return dumps(api.catalogue.metrics())

    @server.resource("llmdiag://findings", name="finding catalogue", mime_type="application/json")
    def findings() -> str:
        """Every finding the engine can report (run and job level): id, title, the metric and threshold it fires
        on, its evidence keys, fix and docs."""
        return dumps(api.catalogue.findings())

    del registry, findings
    return server


def build(logdir: str) -> Any:
    """The MCPServer of one logdir (not started). Raises NoTracesFound when it is not a directory."""
    ws = Workspace(logdir)
    server = Server(
        "llmdiag", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING", warn_on_duplicate_tools=True
    )
    ro = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    err, lock = mcpserver.exceptions.ToolError, threading.Lock()
    runs_ = _tool(answers.list_runs, err, lock)
    diagnose_ = _tool(answers.diagnose, err, lock)
    explain = _tool(answers.explain_finding, err, lock)
    activities = _tool(answers.top_activities, err, lock)

    @server.tool(annotations=ro)
    def list_runs(detail: Detail = False) -> CallToolResult:
        """Every run (trace) and job (the ranks of one distributed run) in the logdir: the name the other tools
        take, status, steps, median step time and the top finding with its saving."""
        return runs_(ws, detail)

    @server.tool(annotations=ro)
    def diagnose(run: Run, detail: Detail = False) -> CallToolResult:
        """Why this run's step is slow: headline numbers, findings ranked by what fixing each saves at most (share
        of the median step, applied in sequence) with evidence and fix, the what-if, and the capture's trust notes.
        For a job: the job's findings (stragglers, exposed communication) and each rank's top finding."""
        return diagnose_(ws, run, detail)

    @server.tool(annotations=ro)
    def explain_finding(
        run: Run,
        finding: FindingId,
        detail: Detail = False,
    ) -> CallToolResult:
        """One finding in depth: its evidence and fix, its time in each step, the step that shows it
        (focus_step), the trace ranges that show it and the operator it blames, with the Python source line when
        the trace recorded stacks."""
        return explain(ws, run, finding, detail)

    @server.tool(annotations=ro)
    def top_activities(
        run: Run,
        step: Step = None,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        top: Top = 5,
        detail: Detail = False,
    ) -> CallToolResult:
        """What the host and the GPU do in one step (or time range; the whole trace when neither is given): the
        GPU's busy and idle time by cause, the top kernels and kernel categories, and per host category (CPU ops,
        annotations, runtime calls, Python) the top names by time, each with the time the GPU waited on the host
        meanwhile. The numbers of the trace view's events."""
        return activities(ws, run, step, start_ns, end_ns, top, detail)

    del list_runs, diagnose, explain_finding, top_activities
    add_resources(add_comparison_tools(server, ws, ro, err, lock))
    return add_timeline_tool(add_anatomy_tool(server, ws, ro, err, lock), ws, ro, err, lock)


def serve(logdir: str) -> int:
    """Serve ``logdir`` over stdio until the client closes the connection."""
    build(logdir).run("stdio")
    return 0
