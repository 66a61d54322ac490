"""The demo numbers in README.md, demo_logs/README.md and docs/demo_numbers.md, generated from the tool's own report.

    python scripts/demo_tables.py            # rewrites the generated parts from `llmdiag report demo_logs --json`
    python scripts/demo_tables.py --check    # exits 1 when a file's generated part differs (tests/test_demo_tables.py)

Each generated part sits between ``<!-- demo:NAME -->`` and ``<!-- /demo:NAME -->`` in its file and is written only
from the report (``--json``): every value formatted by its registry unit and labelled by its registry label, as the
CLI and the tab show it, each saving in the words the CLI and the tab use (``saving_text`` / ``what_if_text``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tb_llmdiag.findings.table import EVIDENCE_LABELS, EVIDENCE_UNITS, label_from_key
from tb_llmdiag.findings.whatif_text import saving_text, what_if_text
from tb_llmdiag.registry import metric, unit_of
from tb_llmdiag.units import fmt, fmt_ns

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "demo_logs"


def report() -> dict[str, Any]:
    """``llmdiag report demo_logs --json``, as a user runs it."""
    out = subprocess.run([sys.executable, "-m", "tb_llmdiag", "report", str(DEMO), "--json"], capture_output=True,
                         text=True, cwd=REPO, check=False)
    return json.loads(out.stdout)


def _label(path: str) -> str:
    m = metric(path)
    return m.label if m is not None else label_from_key(path.rsplit(".", 1)[-1])


def _v(path: str, value: Any) -> str:
    return fmt(unit_of(path), value)


def _name(run: dict[str, Any], rep: dict[str, Any]) -> str:
    """The run's folder; with its worker where the folder holds several traces (the ranks of a job)."""
    several = sum(r["run"] == run["run"] for r in rep["runs"]) > 1
    return f"{run['run']} ({run['worker']})" if several else run["run"]


def _device(run: dict[str, Any]) -> str:
    dev = (run.get("summary") or {}).get("device")
    return f"{dev['name']} x{dev['count']}" if dev else "not listed"


def _top(run: dict[str, Any]) -> str:
    fs = run.get("findings") or []
    if not fs:
        return "no finding"
    f = fs[0]
    return f"{f['title']} (`{f['id']}`, {f['severity']}): {saving_text(f.get('saving'))}"


def runs_table(rep: dict[str, Any]) -> str:
    """README: one row per demo trace, the top finding as every surface words it."""
    head = ["run", "device", "median step", "GPU busy", "tokens/s", "top finding and its saving", "if it were fixed"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted(rep["runs"], key=lambda r: (r["run"], r["worker"])):
        hl = r.get("headline") or {}
        top = (r.get("findings") or [{}])[0]
        rows.append("| " + " | ".join([
            _name(r, rep), _device(r), _v("headline.step_median_ns", hl.get("step_median_ns")),
            _v("headline.gpu_busy_share", hl.get("gpu_busy_share")), _v("headline.tokens_per_s", hl.get("tokens_per_s")),
            _top(r), what_if_text(top.get("saving")) or "-",
        ]) + " |")
    for j in rep.get("jobs") or []:
        f = (j.get("findings") or [{}])[0]
        wi = f.get("what_if") or {}
        fixed = f"job step {fmt_ns(wi.get('step_ns'))} → at most {fmt_ns(wi.get('step_after_ns'))}" if wi else "-"
        top = f"{f['title']} (`{f['id']}`): {_v('job.findings[].value', f.get('value'))} of the job step" if f else "none"
        rows.append(f"| {j['run']} (job, {len(j['files'])} ranks) | - | "
                    f"{_v('job.job_step_ns', (j.get('metrics') or {}).get('job_step_ns'))} (job step) | - | - | {top} | {fixed} |")
    return "\n".join(rows)


def captures_table(rep: dict[str, Any]) -> str:
    """demo_logs/README.md: where each capture ran, as its trace says (device name and count, rank)."""
    rows = ["| folder | trace | device (from the trace) | rank | steps | median step |", "|---|---|---|---|---|---|"]
    for r in sorted(rep["runs"], key=lambda r: (r["run"], r["worker"])):
        s = r.get("summary") or {}
        dist = s.get("distributed") or {}
        rank = f"{dist['rank']} of {dist.get('world_size')}" if dist.get("rank") is not None else "-"
        n = len(((r.get("metrics") or {}).get("steps") or {}).get("per_step") or [])
        rows.append(f"| `{r['run']}/` | {r['worker']} | {_device(r)} | {rank} | {n} | "
                    f"{_v('headline.step_median_ns', (r.get('headline') or {}).get('step_median_ns'))} |")
    return "\n".join(rows)


def straggler_text(rep: dict[str, Any]) -> str:
    """demo_logs/README.md: what the job's straggler finding measures (its wait, of the job step), in one sentence."""
    out = []
    for j in rep.get("jobs") or []:
        m = j.get("metrics") or {}
        if not any(f["id"] == "straggler" for f in j.get("findings") or []):
            continue
        tok = m.get("straggler_tokens") or {}
        out.append(
            f"`{j['run']}/`: the other ranks wait for rank {m.get('straggler_rank')} "
            f"{_v('job.straggler_others_wait_ns_per_step', m.get('straggler_others_wait_ns_per_step'))} per step in "
            f"their collectives, {_v('job.straggler_others_wait_share', m.get('straggler_others_wait_share'))} of the "
            f"{_v('job.job_step_ns', m.get('job_step_ns'))} job step (its tokens per step "
            f"{fmt('count', tok.get('straggler_tokens_per_step'))} against "
            f"{fmt('count', tok.get('median_rank_tokens_per_step'))} for the median rank)."
        )
    return "\n".join(out) or "No job has a straggler finding."


def _evidence(f: dict[str, Any]) -> str:
    units, labels = EVIDENCE_UNITS.get(f["id"], {}), EVIDENCE_LABELS.get(f["id"], {})
    return "; ".join(f"{labels.get(k) or label_from_key(k)} {fmt(units.get(k) or 'ratio', v)}"
                     for k, v in (f.get("evidence") or {}).items())


def numbers_doc(rep: dict[str, Any]) -> str:
    """docs/demo_numbers.md: every run's headline, findings (saving, evidence) and what-if; the jobs."""
    out = []
    for r in sorted(rep["runs"], key=lambda r: (r["run"], r["worker"])):
        out += [f"## `{_name(r, rep)}`", "", f"{_device(r)}; phase {r.get('phase') or 'unknown'}.", "",
                "| headline | value |", "|---|---|"]
        out += [f"| {_label('headline.' + k)} | {_v('headline.' + k, v)} |" for k, v in (r.get("headline") or {}).items()
                if v is not None]
        out += ["", "| # | finding | severity | saving | evidence |", "|---|---|---|---|---|"]
        out += [f"| {i} | {f['title']} (`{f['id']}`) | {f['severity']} | {saving_text(f.get('saving'))} | "
                f"{_evidence(f).replace('|', '/')} |" for i, f in enumerate(r.get("findings") or [], 1)]
        wi = r.get("what_if")
        out += ["", f"What if: {wi['statement']}" if wi else "What if: no steps.", ""]
    for j in rep.get("jobs") or []:
        m = j.get("metrics") or {}
        out += [f"## Job `{j['run']}` ({len(j['files'])} ranks)", "", "| job metric | value |", "|---|---|"]
        out += [f"| {_label('job.' + k)} | {_v('job.' + k, m[k])} |" for k in (
            "job_step_ns", "exposed_share", "overlap_share", "matched_collective_count") if k in m]
        out += [""] + [f"- {f['title']} (`{f['id']}`): {f['summary']}" for f in j.get("findings") or []] + [""]
    return "\n".join(out).rstrip() + "\n"


#: file -> generated part name -> its generator
PARTS = {
    REPO / "README.md": {"runs": runs_table},
    DEMO / "README.md": {"captures": captures_table, "straggler": straggler_text},
    REPO / "docs" / "demo_numbers.md": {"numbers": numbers_doc},
}


def rewrite(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- demo:{name} -->", f"<!-- /demo:{name} -->"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), flags=re.S)
    if not pattern.search(text):
        raise SystemExit(f"no {begin} ... {end} block")
    return pattern.sub(lambda _m: f"{begin}\n{body.rstrip()}\n{end}", text)


def generated(rep: dict[str, Any]) -> dict[Path, str]:
    """Each file's text with its generated parts rewritten from ``rep``."""
    out = {}
    for path, parts in PARTS.items():
        text = path.read_text()
        for name, fn in parts.items():
            text = rewrite(text, name, fn(rep))
        out[path] = text
    return out


def main(argv: list[str]) -> int:
    new = generated(report())
    stale = [p for p, t in new.items() if p.read_text() != t]
    if "--check" in argv:
        for p in stale:
            print(f"{p.relative_to(REPO)}: its demo numbers differ from `llmdiag report demo_logs --json`; run "
                  "python scripts/demo_tables.py")
        return 1 if stale else 0
    for p in stale:
        p.write_text(new[p])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
