"""``llmdiag mcp [LOGDIR]``: a Model Context Protocol server over stdio, read-only, on the library's front door.

Tools (each with a JSON schema from its signature, each answer compact JSON within a few KB unless ``detail``):
``list_runs``, ``diagnose``, ``explain_finding``, ``top_activities``, ``compare``, ``check`` (``answers``,
``comparison``). Resources: ``llmdiag://registry`` (every number's unit and definition) and ``llmdiag://findings``
(every finding the engine can report), so an agent can cite definitions. A user error (an unknown run, a path
outside the logdir, a trace that cannot be read) is a tool error carrying the CLI's one-line message; a bug is the
SDK's generic tool error, its traceback on stderr. The SDK (``pip install 'tb-llmdiag[agent]'``) is imported only here,
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
from pydantic import Field  # noqa: E402

from tb_llmdiag import __version__, api  # noqa: E402
from tb_llmdiag.agent import answers, comparison  # noqa: E402
from tb_llmdiag.agent.fit import dumps  # noqa: E402
from tb_llmdiag.agent.workspace import Workspace  # noqa: E402
from tb_llmdiag.errors import LlmDiagError  # noqa: E402
from tb_llmdiag.jsonsafe import jsonable  # noqa: E402

INSTRUCTIONS = (
    "LLM Diag diagnoses why a PyTorch/JAX training or inference step is slow from profiler traces in one logdir. "
    "Start with list_runs, then diagnose(run); explain_finding(run, finding) says where a finding is in the trace "
    "and which step shows it; top_activities(run, step) lists what the host and the GPU do there. compare and check "
    "judge two runs with noise bands. Every number's unit and definition: resource llmdiag://registry (keys as in "
    "the answers). Savings are upper bounds on the median step."
)

Run = Annotated[str, Field(description="a run name from list_runs (run, run/worker/span, or a job's run), or a path "
                           "inside the logdir to a trace file or run folder")]  # fmt: skip
Detail = Annotated[bool, Field(description="answer with every field (up to ~60 KB) instead of a few KB")]


def _tool(fn: Callable[..., dict[str, Any]], tool_error: type[Exception], lock: Any) -> Callable[..., CallToolResult]:
    """Call an answer under the server's lock (the SDK runs each call on a worker thread; the workspace's caches
    are not shared between threads); a user error (LlmDiagError) becomes a tool error with its one line."""

    def call(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            with lock:
                answer = fn(*args, **kwargs)
        except LlmDiagError as exc:
            raise tool_error(str(exc)) from None
        doc = jsonable(answer)  # the structured copy holds no NaN either
        return CallToolResult(content=[TextContent(type="text", text=dumps(doc))], structured_content=doc)

    return call


def build(logdir: str) -> Any:
    """The MCPServer of one logdir (not started). Raises NoTracesFound when it is not a directory."""
    ws = Workspace(logdir)
    server = mcpserver.MCPServer(
        "llmdiag", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING", warn_on_duplicate_tools=True
    )
    ro = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    err, lock = mcpserver.exceptions.ToolError, threading.Lock()
    runs_ = _tool(answers.list_runs, err, lock)
    diagnose_ = _tool(answers.diagnose, err, lock)
    explain = _tool(answers.explain_finding, err, lock)
    activities = _tool(answers.top_activities, err, lock)
    compare_ = _tool(comparison.compare, err, lock)
    check_ = _tool(comparison.check, err, lock)

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
        finding: Annotated[str, Field(description="a finding id from diagnose, e.g. host_bound")],
        detail: Detail = False,
    ) -> CallToolResult:
        """One finding in depth: its evidence and fix, its time in each step, the step that shows it
        (focus_step), the trace ranges that show it and the operator it blames, with the Python source line when
        the trace recorded stacks."""
        return explain(ws, run, finding, detail)

    @server.tool(annotations=ro)
    def top_activities(
        run: Run,
        step: Annotated[int | None, Field(description="a step index (steps.per_step[].index)")] = None,
        start_ns: Annotated[int | None, Field(ge=0, description="range start, ns since the trace start")] = None,
        end_ns: Annotated[int | None, Field(gt=0, description="range end (exclusive)")] = None,
        top: Annotated[int, Field(ge=1, le=50, description="names per list")] = 5,
        detail: Detail = False,
    ) -> CallToolResult:
        """What the host and the GPU do in one step (or time range; the whole trace when neither is given): the
        GPU's busy and idle time by cause, the top kernels and kernel categories, and per host category (CPU ops,
        annotations, runtime calls, Python) the top names by time, each with the time the GPU waited on the host
        meanwhile. The numbers of the trace view's events."""
        return activities(ws, run, step, start_ns, end_ns, top, detail)

    @server.tool(annotations=ro)
    def compare(
        before: Annotated[str, Field(description="the baseline run (as `run`)")],
        after: Annotated[str, Field(description="the run to judge (as `run`)")],
        detail: Detail = False,
    ) -> CallToolResult:
        """`llmdiag compare BEFORE AFTER`: the verdict, each metric's change with its noise band and judgement, and
        which findings were resolved, appeared or changed. Two runs, or two jobs."""
        return compare_(ws, before, after, detail)

    @server.tool(annotations=ro)
    def check(
        candidate: Annotated[str, Field(description="the run to gate (as `run`)")],
        baseline: Annotated[str, Field(description="the baseline run (as `run`)")],
        max_regression: Annotated[
            float | None, Field(ge=0, lt=100, description="tolerance of every gated metric (0.05 = 5 %)")
        ] = None,
        detail: Detail = False,
    ) -> CallToolResult:
        """`llmdiag check CANDIDATE --baseline BASELINE`: passed (exit_code 0) or failed (1), with each metric that
        regressed beyond its tolerance and beyond noise."""
        return check_(ws, candidate, baseline, max_regression, detail)

    @server.resource("llmdiag://registry", name="metric registry", mime_type="application/json")
    def registry() -> str:
        """Every number's key, unit, direction (better lower/higher), comparison tolerance, label and definition;
        the answers' keys are these keys (a finding's evidence units under evidence_units)."""
        return dumps(api.metric_registry())

    @server.resource("llmdiag://findings", name="finding catalogue", mime_type="application/json")
    def findings() -> str:
        """Every finding the engine can report (run and job level): id, title, the metric and threshold it fires
        on, its evidence keys, fix and docs."""
        return dumps(api.finding_catalogue())

    del list_runs, diagnose, explain_finding, top_activities, compare, check, registry, findings
    return server


def serve(logdir: str) -> int:
    """Serve ``logdir`` over stdio until the client closes the connection."""
    build(logdir).run("stdio")
    return 0
