"""Fuzzing the agent server (`llmdiag mcp`) through the official MCP SDK client (#35).

    python tests/fuzz/fuzz_agent.py --minutes 10 --out /tmp/llmdiag-agent-fuzz [--workers 4] [--seed 1]

The server runs as the user runs it (`python -m tb_llmdiag.cli mcp LOGDIR`, stdio) over a logdir built here:
small real traces (tests/data: two runs and a two-rank job), the audit's zero-duration and rejected-kernel traces,
``--tiny`` three-event runs (so a run list is long), a corrupt trace re-mutated every second (tests/fuzz's
``mutate``), a trace being written while the fuzz runs (rewritten from its start in growing pieces), and, outside
the logdir, a trace whose kernel is named ``MARKER``, reached from inside by a trace-named link and a linked folder.

First every tool is called with every hostile value of each of its arguments (``HOSTILE``: traversal, NUL, 1 MB
strings, wrong types, 2^63, negative, NaN...), then ``--workers`` concurrent callers make random calls (valid names
and values mixed with hostile ones) until the time is up. Each answer is judged (``judge``):

- internal: an error that is the SDK's bare ``Error executing tool NAME`` (a bug in the server: a user mistake must
  be a one-line user error);
- over bound: an answer over its budget (8 KB, 60 KB with ``detail``), or an error over 8 KB;
- multi-line: an error of more than one line;
- bad JSON: an answer whose text is not strict JSON or differs from its structured copy;
- leak: ``MARKER`` (the outside file's content) in any answer;
- hang: a call over ``CALL_TIMEOUT_S``.

At the end the server must still answer ``list_runs``; its stderr must hold no traceback. Figures (calls, answers by
kind and by tool, max bytes, findings, elapsed) go to OUT/stats.json and stdout; exit 1 on any finding.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_readers import mutate, seeds  # noqa: E402

MARKER = "llmdiag_outside_marker_kernel_7f3a"
DEFAULT_BYTES, DETAIL_BYTES = 8_000, 60_000
CALL_TIMEOUT_S = 180
BIG = "x" * 1_000_000

#: argument kind -> values no caller should send (NaN and infinities leave the SDK's client as null)
HOSTILE: dict[str, list[Any]] = {
    "name": ["", " ", ".", "..", "../", "../../../etc/passwd", "/etc/passwd", "/", "~", "~root/.bashrc", "escape",
             "escape/secret.pt.trace.json", "linked.pt.trace.json", "gpu_seed/../..", "a\x00b", "\x00", "gpu_seed\x00", "../\x00", "/tmp/\x00x", "gpu_seed/\x00",
             BIG, "é" * 5000, "run\nname", "%s%n{}", "*", "nope", 123, -1, 2**63, 1.5, None, True, [], {}, ["gpu_seed"]],
    "finding": ["", "nope", "\x00", BIG, "host_bound\n", 5, None, [], {}],
    "int": [2**63, 2**64, 10**100, -1, -(2**63), -(2**63) - 1, 1.5, "5", "x", True, [], {}, float("nan"), float("inf")],
    "top": [0, -1, 51, 2**63, 1.5, "3", None, float("nan")],
    "bool": ["yes", 2, -1, [], {}, "x" * 10_000],
    "fraction": [float("nan"), float("inf"), -float("inf"), -1.0, 100.0, 1e308, 2**63, "0.05", "x", True, []],
}
#: each tool's arguments: name -> (kind, a valid value)
TOOLS: dict[str, dict[str, tuple[str, Any]]] = {
    "list_runs": {"detail": ("bool", False)},
    "diagnose": {"run": ("name", "gpu_seed"), "detail": ("bool", False)},
    "explain_finding": {"run": ("name", "gpu_seed"), "finding": ("finding", "host_bound"), "detail": ("bool", False)},
    "top_activities": {"run": ("name", "gpu_seed"), "step": ("int", None), "start_ns": ("int", None),
                       "end_ns": ("int", None), "top": ("top", 5), "detail": ("bool", False)},
    "anatomy": {"run": ("name", "gpu_seed"), "step": ("int", None), "start_ns": ("int", None), "end_ns": ("int", None),
                "detail": ("bool", False)},
    "compare": {"before": ("name", "gpu_seed"), "after": ("name", "gpu_fixed"), "detail": ("bool", False)},
    "check": {"candidate": ("name", "gpu_fixed"), "baseline": ("name", "gpu_seed"),
              "max_regression": ("fraction", None), "detail": ("bool", False)},
}  # fmt: skip


# ------------------------------------------------------------------------------------------------ the logdir


def tiny_trace(dur_us: float | str = 5, kernel_dur: Any = 3) -> bytes:
    """Three events: a step, a launch and its kernel (the audit's shapes: all durations 0, a kernel of 1e400)."""
    k = kernel_dur if isinstance(kernel_dur, str) else json.dumps(kernel_dur)
    return (
        '{"traceEvents":[\n'
        f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","ts":100,"dur":{dur_us},"pid":1,"tid":1}},\n'
        '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":100,"dur":0,"pid":1,"tid":1,'
        '"args":{"correlation":5}},\n'
        f'{{"ph":"X","cat":"kernel","name":"k","ts":100,"dur":{k},"pid":0,"tid":7,'
        '"args":{"device":0,"stream":7,"correlation":5}}\n]}'
    ).encode()


def _at_rest(path: Path, data: bytes) -> None:
    """Write ``data`` with its mtime an hour back (a file modified moments ago may be read as still written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    old = time.time() - 3600
    os.utime(path, (old, old))


def build_logdir(base: Path, tiny: int = 30) -> Path:
    """The fuzz's logdir under ``base`` (module docstring); ``base/outside`` holds the file nothing may read."""
    logs = base / "logs"
    for run in ("gpu_seed", "gpu_fixed", "ddp_straggler"):
        for f in (DATA / run).glob("*.pt.trace.json.gz"):
            (logs / run).mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, logs / run / f.name)
    _at_rest(logs / "zero_dur" / "z.pt.trace.json", tiny_trace(0, 0))
    _at_rest(logs / "bad_kernel" / "k.pt.trace.json", tiny_trace(50, "1e400"))
    for i in range(tiny):
        _at_rest(logs / f"tiny_{i:03d}" / "t.pt.trace.json", tiny_trace(5 + i))
    _at_rest(logs / "corrupt" / "c.pt.trace.json", seeds()[1][1])
    (logs / "growing").mkdir()
    secret = base / "outside" / "secret.pt.trace.json"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(tiny_trace().replace(b'"name":"k"', f'"name":"{MARKER}"'.encode()))
    os.symlink(secret, logs / "linked.pt.trace.json")
    os.symlink(secret.parent, logs / "escape")
    return logs


class Churn:
    """Two threads changing the logdir while the fuzz runs: the corrupt trace re-mutated every second, and a trace
    written from its start in growing pieces (then again), as a profiler writes one."""

    def __init__(self, logs: Path, seed: int) -> None:
        self.logs, self.rng, self.stop = logs, random.Random(seed), threading.Event()
        self.seeds = seeds()
        self.text = gzip.decompress(next((DATA / "gpu_compiled").glob("*.pt.trace.json.gz")).read_bytes())
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._corrupt, self._grow)]
        self.rewrites = 0

    def __enter__(self) -> Churn:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)

    def _corrupt(self) -> None:
        while not self.stop.wait(1.0):
            data = mutate(self.rng, self.rng.choice(self.seeds)[1])
            tmp = self.logs / "corrupt" / ".c.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, self.logs / "corrupt" / "c.pt.trace.json")  # whole, as a profiler's rename
            self.rewrites += 1

    def _grow(self) -> None:
        path = self.logs / "growing" / "g.pt.trace.json"
        while not self.stop.is_set():
            with open(path, "wb") as f:
                for i in range(0, len(self.text), 64 * 1024):
                    f.write(self.text[i : i + 64 * 1024])
                    f.flush()
                    if self.stop.wait(0.2):
                        return
            self.stop.wait(2.0)


# ------------------------------------------------------------------------------------------------ the calls


def hostile_calls() -> list[tuple[str, dict[str, Any]]]:
    """Every tool with each hostile value of each of its arguments, the others valid."""
    calls = []
    for tool, params in TOOLS.items():
        valid = {p: v for p, (_, v) in params.items() if v is not None}
        for p, (kind, _) in params.items():
            calls += [(tool, {**valid, p: bad}) for bad in HOSTILE[kind]]
    calls.append(("no_such_tool", {"run": BIG}))
    calls.append(("n" * 100_000, {}))
    return calls


def random_call(rng: random.Random, names: list[str], findings: list[str]) -> tuple[str, dict[str, Any]]:
    """One call: a random tool, each argument valid, left out or (one time in four) hostile."""
    tool = rng.choice(list(TOOLS))
    args: dict[str, Any] = {}
    for p, (kind, _) in TOOLS[tool].items():
        r = rng.random()
        if r < 0.25:
            args[p] = rng.choice(HOSTILE[kind])
        elif r < 0.85 or kind in ("name", "finding"):
            args[p] = _valid(rng, kind, names, findings)
    if tool in ("top_activities", "anatomy") and rng.random() < 0.8:  # mostly a step or a range, as an agent asks
        keep = ("step",) if rng.random() < 0.5 else ("start_ns", "end_ns")
        for p in {"step", "start_ns", "end_ns"} - set(keep):
            args.pop(p, None)
        if keep != ("step",) and isinstance(args.get("start_ns"), int) and isinstance(args.get("end_ns"), int):
            args["end_ns"] = args["start_ns"] + rng.choice([1, 10**6, 10**8, 10**10])
    return tool, args


def _valid(rng: random.Random, kind: str, names: list[str], findings: list[str]) -> Any:
    if kind == "name":
        return rng.choice(names)
    if kind == "finding":
        return rng.choice(findings)
    if kind == "int":
        return rng.choice([0, 1, 2, 3, 4, rng.randrange(0, 10**8), rng.randrange(0, 10**9), rng.randrange(0, 2**63)])
    if kind == "top":
        return rng.randint(1, 50)
    if kind == "bool":
        return rng.random() < 0.3
    return rng.choice([0.0, 0.05, 0.5, 99.0])


def judge(tool: str, args: dict[str, Any], is_error: bool, text: str, structured: Any) -> tuple[str, str | None]:
    """``(kind, problem)``: the answer's kind (ok, user_error, internal_error) and what is wrong with it, if anything
    (module docstring)."""
    nbytes = len(text.encode("utf-8"))
    if MARKER in text:
        return ("user_error" if is_error else "ok"), "leak: the outside file's content is in the answer"
    if is_error:
        if re.fullmatch(r"Error executing tool [^:]*", text):
            return "internal_error", f"internal error for {tool}"
        if "\n" in text:
            return "user_error", "multi-line error"
        return "user_error", (f"error of {nbytes:,} bytes" if nbytes > DEFAULT_BYTES else None)
    bound = DETAIL_BYTES if args.get("detail") is True else DEFAULT_BYTES
    if nbytes > bound:
        return "ok", f"answer of {nbytes:,} bytes over its bound {bound:,}"
    try:
        doc = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as exc:
        return "ok", f"not strict JSON: {exc}"
    return "ok", (None if doc == structured else "the text and the structured answer differ")


def shown(args: dict[str, Any]) -> dict[str, str]:
    """Arguments as a finding records them: each repr cut to 80 characters."""
    return {k: (r if len(r := repr(v)) <= 80 else f"{r[:80]}... ({len(r):,} chars)") for k, v in args.items()}


# ------------------------------------------------------------------------------------------------ the session


class Tally:
    """The figures of a fuzz run."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.by_tool: Counter[str] = Counter()
        self.max_bytes = {"ok": 0, "error": 0}
        self.findings: list[dict[str, Any]] = []
        self.problems: Counter[str] = Counter()
        self.slowest_s = 0.0
        self.answers: list[tuple[str, dict[str, Any], str, str]] | None = None  # (tool, args, kind, text) if kept

    def add(self, tool: str, args: dict[str, Any], kind: str, problem: str | None, nbytes: int, took: float) -> None:
        self.kinds[kind] += 1
        self.by_tool[f"{tool[:40]}:{kind}"] += 1
        side = "ok" if kind == "ok" else "error"
        self.max_bytes[side] = max(self.max_bytes[side], nbytes)
        self.slowest_s = max(self.slowest_s, took)
        if problem is not None:
            self.problems[problem.split(":")[0]] += 1
            if len(self.findings) < 50:
                self.findings.append({"tool": tool[:80], "args": shown(args), "problem": problem})


async def _call(s: ClientSession, tally: Tally, tool: str, args: dict[str, Any]) -> Any:
    t = time.perf_counter()
    try:
        with anyio.fail_after(CALL_TIMEOUT_S):
            res = await s.call_tool(tool, args)
    except TimeoutError:
        tally.add(tool, args, "hang", f"hang: no answer in {CALL_TIMEOUT_S} s", 0, CALL_TIMEOUT_S)
        return None
    took = time.perf_counter() - t
    text = "".join(getattr(c, "text", "") for c in res.content)
    kind, problem = judge(tool, args, bool(res.is_error), text, res.structured_content)
    tally.add(tool, args, kind, problem, len(text.encode("utf-8")), took)
    if tally.answers is not None:
        tally.answers.append((tool, args, kind, text))
    return None if res.is_error else res.structured_content


async def session(
    logs: Path, errlog: Path, body: Callable[[ClientSession, Tally], Any], keep: bool = False
) -> tuple[Tally, bool]:
    """Start ``llmdiag mcp logs`` (stderr to ``errlog``), run ``body(session, tally)``, then check the server still
    answers list_runs. Returns the tally (``keep``: with every answer) and whether it did."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tb_llmdiag.cli", "mcp", str(logs)],
        env={"PYTHONPATH": str(REPO)},
        cwd=str(REPO),
    )
    tally = Tally()
    tally.answers = [] if keep else None
    with open(errlog, "w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                await body(s, tally)
                up = await _call(s, tally, "list_runs", {}) is not None
    return tally, up


def names_of(listing: dict[str, Any]) -> list[str]:
    return [r["name"] for r in listing["runs"]] + [j["name"] for j in listing["jobs"]]


async def hostile_body(s: ClientSession, tally: Tally) -> None:
    for tool, args in hostile_calls():
        await _call(s, tally, tool, args)


def random_body(seconds: float, workers: int, seed: int) -> Callable[[ClientSession, Tally], Any]:
    """Hostile calls once, then ``workers`` concurrent random callers for ``seconds``."""

    async def body(s: ClientSession, tally: Tally) -> None:
        listing = await _call(s, tally, "list_runs", {})
        names = names_of(listing) if listing else ["gpu_seed"]
        found = {f for r in (listing or {}).get("runs", []) for f in r.get("finding_ids") or []}
        findings = sorted(found) + ["straggler", "exposed_communication", "nope"]
        await hostile_body(s, tally)
        deadline = time.monotonic() + seconds

        async def worker(i: int) -> None:
            rng = random.Random(seed * 1000 + i)
            while time.monotonic() < deadline:
                await _call(s, tally, *random_call(rng, names + ["corrupt", "growing", "zero_dur"], findings))

        async with anyio.create_task_group() as tg:
            for i in range(workers):
                tg.start_soon(worker, i)

    return body


def stderr_problems(errlog: Path) -> list[str]:
    """Lines of the server's stderr that show a bug (a traceback, an unexpected exception)."""
    text = errlog.read_text(errors="replace")
    return [ln.strip() for ln in text.splitlines() if "Traceback" in ln or "unexpected exception" in ln][:20]


def fuzz(seconds: float, workers: int, seed: int, out: Path, tiny: int = 30) -> dict[str, Any]:
    """One fuzz run (module docstring): its figures, with ``findings`` (empty when all is well)."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        logs = build_logdir(Path(d), tiny)
        t0 = time.monotonic()
        with Churn(logs, seed) as churn:
            tally, up = anyio.run(session, logs, out / "server_stderr.txt", random_body(seconds, workers, seed))
        elapsed = time.monotonic() - t0
    bad_stderr = stderr_problems(out / "server_stderr.txt")
    stats = {
        "elapsed_s": round(elapsed, 1),
        "calls": sum(tally.kinds.values()),
        "answers_by_kind": dict(tally.kinds),
        "answers_by_tool": dict(sorted(tally.by_tool.items())),
        "max_answer_bytes": tally.max_bytes,
        "slowest_call_s": round(tally.slowest_s, 2),
        "problems": dict(tally.problems),
        "corrupt_rewrites": churn.rewrites,
        "server_up_at_end": up,
        "server_stderr_problems": bad_stderr,
        "findings": tally.findings + ([] if up else [{"problem": "the server no longer answers list_runs"}])
        + [{"problem": f"server stderr: {ln}"} for ln in bad_stderr],
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=1))
    return stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tiny", type=int, default=30, help="three-event runs in the logdir")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "llmdiag-agent-fuzz")
    args = ap.parse_args()
    stats = fuzz(args.minutes * 60, args.workers, args.seed, args.out, args.tiny)
    print(json.dumps({k: v for k, v in stats.items() if k != "answers_by_tool"}, indent=1))
    return 1 if stats["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
