"""The ``compare`` and ``check`` subcommands (``llmdiag compare BEFORE AFTER``, ``llmdiag check CANDIDATE
--baseline BASELINE``); ``tb_llmdiag/cli/__init__.py`` adds them to its parser. docs/compare.md is their
manual; ``sides`` loads each side, ``api.compare`` compares them, ``render.compare_text`` prints the result."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tb_llmdiag import api
from tb_llmdiag.cli.sides import load, mixed_error
from tb_llmdiag.render.canonical_json import dumps
from tb_llmdiag.render.compare_markdown import render_compare_md
from tb_llmdiag.render.compare_text import render_check, render_compare


def fraction(text: str) -> float:
    """``5%`` or ``0.05`` -> 0.05 (a relative tolerance, >= 0)."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100.0 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction (5% or 0.05)") from None
    if not 0 <= v < 100:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range")
    return v


def tolerance_pair(text: str) -> tuple[str, float]:
    """``KEY=VALUE`` with KEY a metric registry key (``headline.tokens_per_s``) or a key the comparison derives."""
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. headline.tokens_per_s=3%")
    if not api.catalogue.is_compare_key(key):
        raise argparse.ArgumentTypeError(f"{key!r} is not a metric key (see docs/metrics.md)")
    return key, fraction(value)


def _compare_doc(
    before: str,
    after: str,
    before_run: str | None,
    after_run: str | None,
    roles: tuple[str, str],
    flags: tuple[str, str],
    **kw: Any,
) -> dict[str, Any]:
    """Both sides loaded (``sides.load``) and compared (``kw`` as ``api.compare``'s: ``gate`` for ``check``): two jobs
    as jobs, two runs as runs; a job against a run is a usage error naming the flag that picks one rank (``flags``:
    the --run option of each side)."""
    b = load(before, before_run, roles[0])
    a = load(after, after_run, roles[1])
    if b.level != a.level:
        raise mixed_error(b, a, roles, flags)
    return api.compare(b.side, a.side, warnings=b.warnings + a.warnings, sources=(before, after), roles=roles, **kw)


def _compare(args: argparse.Namespace) -> int:
    doc = _compare_doc(
        args.before,
        args.after,
        args.before_run or args.run,
        args.after_run or args.run,
        ("BEFORE", "AFTER"),
        ("--before-run", "--after-run"),
    )
    form = "json" if args.json else args.format
    sys.stdout.write(
        dumps(doc) + "\n" if form == "json" else render_compare_md(doc) if form == "md" else render_compare(doc)
    )
    return 0


def _check(args: argparse.Namespace) -> int:
    result = _compare_doc(
        args.baseline,
        args.candidate,
        args.baseline_run or args.run,
        args.run,
        ("BASELINE", "CANDIDATE"),
        ("--baseline-run", "--run"),
        tolerances=dict(args.tolerance or []),
        max_regression=args.max_regression,
        gate=True,
    )
    sys.stdout.write(dumps(result) + "\n" if args.json else render_check(result))
    return 0 if result["passed"] else 1


def add_commands(sub: Any) -> None:
    cmp = sub.add_parser("compare", help="compare two runs: metrics with noise bands, finding diff, a verdict")
    cmp.add_argument("before", help="trace file, run folder / logdir, or saved `llmdiag report --json`")
    cmp.add_argument("after", help="the same kinds as BEFORE")
    cmp.add_argument(
        "--run",
        help="the run or job to take from a side that holds several (run, run/span for a job, run/worker or "
        "run/worker/span for one rank)",
    )
    cmp.add_argument("--before-run", help="--run for BEFORE only")
    cmp.add_argument("--after-run", help="--run for AFTER only")
    cmp.add_argument("--json", action="store_true", help="print one JSON document (docs/compare.md)")
    cmp.add_argument(
        "--format",
        choices=("text", "json", "md"),
        default="text",
        help="text (default), json (as --json) or md: Markdown to paste into a pull request",
    )
    cmp.set_defaults(func=_compare)
    chk = sub.add_parser("check", help="exit 1 when CANDIDATE regressed against BASELINE beyond tolerance and noise")
    chk.add_argument("candidate", help="trace file, run folder / logdir, or saved `llmdiag report --json`")
    chk.add_argument("--baseline", required=True, help="the same kinds as CANDIDATE (a committed report --json)")
    chk.add_argument("--run", help="the run to take from a side that holds several")
    chk.add_argument("--baseline-run", help="--run for BASELINE only")
    chk.add_argument(
        "--max-regression",
        type=fraction,
        metavar="P",
        help="tolerance of every gated metric (5%% or 0.05) instead of the registry's",
    )
    chk.add_argument(
        "--tolerance",
        type=tolerance_pair,
        action="append",
        metavar="KEY=VALUE",
        help="tolerance of one metric (wins over --max-regression); repeatable",
    )
    chk.add_argument("--json", action="store_true", help="print one JSON document (docs/compare.md)")
    chk.set_defaults(func=_check)
