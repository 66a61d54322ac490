"""Every cause a finding names from the host attribution is an activity of the trace's attribution evidence
(issue #23): over every fixture under tests/data and every trace of ../shared/traces the goldens read.

For each finding whose cause comes from the attribution (``host_bound``'s ``host_is``, the ``where`` of
``allocator_churn``, ``unrecorded_host_time`` and ``host_activity``), the chain it names is the attribution's own
(``attribution.top_chain``, ``allocator_chain``, ``unrecorded_chain``) and every activity in that chain is the name
of an event in the trace, read here from the trace's name table. ``host_bound`` names no operator outside the
attribution's chain (it used to name the host operator busiest during the waits, whatever held the time).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_external_traces import NOT_JSON
from test_real_traces import GOLDENS, SHARED

from tb_llmdiag.findings.diagnosis import diagnose
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.jsonsafe import jsonable
from tb_llmdiag.metrics import compute_metrics
from tb_llmdiag.metrics.labels import text_words
from tb_llmdiag.metrics.steps.windows import find_steps

REPO = Path(__file__).resolve().parents[1]
ITEM = re.compile(r"(?:^|, )(.+?) \([\d.]+ % of step time\)")
FIXTURES = sorted(p for p in (REPO / "tests" / "data").glob("*/*") if p.name != "truth.json" and p.is_file())
#: every external trace of the goldens (../shared/traces: other stacks, HTA's, the Kineto ResNet-50 ones, XPlane)
EXTERNAL_PATHS = {name: SHARED / rel for name, rel in GOLDENS.items() if name not in NOT_JSON}

#: finding id -> (evidence label naming the cause, the attribution key holding the chain it must name)
CAUSE_OF: dict[str, tuple[str, str]] = {
    "host_bound": ("host_is", "top_chain"),
    "allocator_churn": ("where", "allocator_chain"),
    "unrecorded_host_time": ("where", "unrecorded_chain"),
    "host_activity": ("where", "top_chain"),
}


def check(path: Path) -> int:
    """Checks one trace; returns how many findings named a cause from the attribution."""
    trace = load_trace(str(path))
    metrics = compute_metrics(trace, find_steps(trace))
    findings, _ = jsonable(diagnose(metrics))
    att = metrics.get("attribution") or {}
    names = set(trace.events.names)
    checked = 0
    for f in findings:
        if f["id"] not in CAUSE_OF:
            continue
        label, key = CAUSE_OF[f["id"]]
        text, chain = f["evidence"].get(label), att.get(key)
        assert isinstance(text, str), (f["id"], f["evidence"])
        if chain is None:  # a pause with nothing recorded: it says so and names nothing
            assert f["id"] == "unrecorded_host_time" and text == "no recorded event (between operators)"
            continue
        # the text names each chain in words (#36: metrics/labels.py); each words back to the chains it stands for
        raw = {text_words(n["chain_text"]): n["chain_text"] for n in att["nodes"]} | {text_words(chain): chain}
        named = [text_words(chain)]
        if f["id"] == "host_bound" and "the largest: " in text:  # spread: the largest subtrees of the nodes
            named = ITEM.findall(text.split("the largest: ", 1)[1])
            assert named and set(named) <= set(raw), (text, att["nodes"])
            if f"the most in its own time: {text_words(chain)}" in text:  # and the top chain, by its own time
                named.append(text_words(chain))
        assert all(c in text for c in named), (f["id"], named, text)
        for activity in (a for c in named for a in raw[c].split(" > ")):
            assert activity in names, (f["id"], activity)
        source = att.get(key.replace("chain", "source"))
        if source is not None:  # a source line comes from a recorded frame of the chain's activity
            assert any(n.startswith(source.rsplit(":", 1)[0]) or f"/{source.rsplit(':', 1)[0]}" in n for n in names)
        if f["id"] == "host_bound":
            culprit = (metrics.get("idle") or {}).get("host_wait_culprit")
            if culprit and not any(culprit in raw[c] for c in named):  # not named as an activity of its own
                assert text_words(culprit) not in named and culprit not in f["summary"], (culprit, f["summary"])
        checked += 1
    return checked


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name[:20]}")
def test_fixture_causes_are_in_the_attribution(path: Path) -> None:
    check(path)


@pytest.mark.parametrize("name", sorted(EXTERNAL_PATHS))
def test_external_causes_are_in_the_attribution(name: str) -> None:
    if not SHARED.is_dir():
        pytest.skip("../shared/traces is not beside the repository")
    check(EXTERNAL_PATHS[name])


def test_the_check_sees_causes() -> None:
    # the check is not vacuous: the host-bound LoRA fixture names a cause from the attribution
    assert check(next((REPO / "tests" / "data" / "gpu_seed").glob("*.json.gz"))) >= 1
