"""The ``llmdiag`` command. ``main(argv) -> exit code``; user errors are one line on stderr, never a traceback.

Exit codes: 0 every trace analysed in full; 2 bad command line (also: --dask without Dask installed, or a
scheduler that does not answer); 3 no traces found; 4 a trace could not be read (the others are still
reported; also a path that is a FIFO, device or symlink loop); 6 a trace was read only in part (invalid JSON
or a cut file: its report covers the events before the problem); 7 a trace is still being written (a live
file: run again once the profiler has finished it). With ``--json``, a path that cannot be reported at all
(missing, a device, no traces) still prints one JSON document on stdout: ``{"error": one line, "exit_code": N}``.
``check``: 0 no regression, 1 a metric regressed (docs/compare.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tb_llmdiag import __version__, api
from tb_llmdiag.cli import compare as compare_cli
from tb_llmdiag.cli import timeline as timeline_cli
from tb_llmdiag.errors import LlmDiagError, TraceFormatError
from tb_llmdiag.render.canonical_json import dump_json, dumps
from tb_llmdiag.render.markdown import render_report_md
from tb_llmdiag.render.text import render_report

#: A trace was read only in part: its report covers the events before an invalid byte or a cut.
PARTIAL_EXIT_CODE = 6
#: A trace is still being written (``TraceFile.writing``): nothing was analysed for it yet.
WRITING_EXIT_CODE = 7


def _report(args: argparse.Namespace) -> int:
    form = "json" if args.json else args.format
    try:
        rep = api.report(args.path, dask=args.dask, workers=args.workers)
    except LlmDiagError as exc:
        if form == "json":  # a consumer of --json reads stdout: one document, even here (#27)
            sys.stdout.write(dumps({"error": str(exc), "exit_code": exc.exit_code}) + "\n")
        raise
    sys.stdout.write(
        dump_json(rep) + "\n"
        if form == "json"
        else render_report_md(rep, all_ranks=args.all_ranks)
        if form == "md"
        else render_report(rep, all_ranks=args.all_ranks)
    )
    failed = [r for r in rep["runs"] if r["status"] == "error"]
    partial = [r for r in rep["runs"] if r["status"] == "partial"]
    for r in failed:
        print(f"llmdiag: {r['path']}: {r['error']}", file=sys.stderr)
    writing = [r for r in rep["runs"] if r["status"] == "writing"]
    for r in partial:
        print(f"llmdiag: {r['path']}: partial result: {r['error']}", file=sys.stderr)
    for r in writing:
        print(f"llmdiag: {r['path']}: {r['error']}", file=sys.stderr)
    if failed:
        return TraceFormatError.exit_code
    return PARTIAL_EXIT_CODE if partial else WRITING_EXIT_CODE if writing else 0


def _rules(args: argparse.Namespace) -> int:
    rules = api.catalogue.rules()
    if args.json:
        sys.stdout.write(dumps(rules) + "\n")
        return 0
    for level, head in (
        ("run", "Rules of one trace (run):"),
        ("job", "Rules of a job (every rank of a run together):"),
    ):
        print(head)
        for r in (x for x in rules if x["level"] == level):
            print(f"  {r['id']:<24} {r['title']}  [{', '.join(r['platforms'])}]")
            print(f"  {'':<24} fix: {r['fix']}")
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from tb_llmdiag.agent import server  # the agent layer and the mcp SDK, only for this subcommand

    return server.serve(args.logdir)


def add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=("text", "json", "md"),
        default="text",
        help="text (default), json (as --json) or md: Markdown to paste into an issue or a pull request",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmdiag", description="Why is my LLM fine-tuning step slow? Diagnose torch.profiler / XPlane traces."
    )
    parser.add_argument("--version", action="version", version=f"llmdiag {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="analyse every trace under PATH (logdir, run folder or file)")
    rep.add_argument("path")
    rep.add_argument("--json", action="store_true", help="print one JSON document (docs/report_schema.md)")
    add_format(rep)
    rep.add_argument(
        "--dask",
        metavar="ADDRESS",
        default=None,
        help="analyse the ranks on a Dask cluster: a scheduler tcp://host:8786, or local[:N] (a "
        "LocalCluster of N workers on this machine); needs the [dask] extra: pip install '.[dask]'",
    )
    rep.add_argument(
        "--workers", type=int, default=1, metavar="N", help="analyse on N local processes (default 1: this process)"
    )
    rep.add_argument(
        "--all-ranks",
        action="store_true",
        help="print every rank's report; by default a job of more than 8 ranks prints its notable ranks' reports "
        "(straggler, slowest, fastest, a typical one) and one flag row per rank",
    )
    rep.set_defaults(func=_report)
    rules = sub.add_parser("rules", help="list every finding LLM Diag can report, with its fix")
    rules.add_argument("--json", action="store_true")
    rules.set_defaults(func=_rules)
    compare_cli.add_commands(sub)
    timeline_cli.add_commands(sub)
    mcp = sub.add_parser(
        "mcp",
        help="serve LOGDIR to coding agents: a Model Context Protocol server over stdio, read-only "
        "(docs/agents.md; needs the [agent] extra: pip install '.[agent]')",
    )
    mcp.add_argument("logdir", nargs="?", default=".", help="the logdir to serve (default: the current directory)")
    mcp.set_defaults(func=_mcp)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except LlmDiagError as exc:
        print(f"llmdiag: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `llmdiag report ... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
