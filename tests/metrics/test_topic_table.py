"""The topic table (``metrics/topics.py``) and the one guarded loop that computes it (``metrics.compute_topics``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from minitrace import idle_scenario
from tb_llmdiag.metrics import compute_metrics, compute_topics, run_topic
from tb_llmdiag.metrics.context import Context
from tb_llmdiag.metrics.steps.gaps import step_breakdown
from tb_llmdiag.metrics.registry import METRICS
from tb_llmdiag.metrics.steps.windows import find_steps
from tb_llmdiag.metrics.topics import PLATFORMS, TOPICS, Inputs, Topic


def test_each_topic_needs_only_topics_computed_before_it_on_its_platforms() -> None:
    computed = {"run": set(PLATFORMS)}
    for topic in TOPICS:
        assert topic.name not in computed
        assert set(topic.platforms) <= set(PLATFORMS)
        for need in topic.needs:
            assert need in computed and set(topic.platforms) <= computed[need], (topic.name, need)
        computed[topic.name] = set(topic.platforms)


def test_each_topic_declares_the_registry_entries_of_its_keys() -> None:
    for topic in TOPICS:
        assert any(key.startswith(topic.name + ".") for key, *_ in topic.entries), topic.name
    topics_in_registry = [m.key.split(".")[0] for m in METRICS if m.key.split(".")[0] in {t.name for t in TOPICS}]
    assert list(dict.fromkeys(topics_in_registry)) == [t.name for t in TOPICS]  # docs/metrics.md's order


@pytest.fixture(scope="module")
def scenario() -> tuple[Context, Any, dict[str, Any]]:
    trace = idle_scenario()
    ctx = Context.build(trace, find_steps(trace))
    return ctx, step_breakdown(ctx), run_topic(trace)


def _raises(i: Inputs) -> dict[str, Any]:
    raise ValueError("odd input")


def test_a_topic_that_raises_is_unavailable_and_the_others_are_computed(
    scenario: tuple[Context, Any, dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    ctx, bd, run = scenario
    # GIVEN a topic that raises between two real ones, and a topic that needs it
    topics = (
        TOPICS[0],
        Topic("broken", _raises, ()),
        Topic("reader", lambda i: {"saw": i.topics["broken"]}, (), needs=("broken",)),
        TOPICS[1],
    )
    with caplog.at_level(logging.ERROR, logger="tb_llmdiag.metrics"):
        out = compute_topics(ctx, bd, run, topics)
    # THEN the report goes on: the broken topic says why, what needs it reads that, the real ones are whole
    assert list(out) == ["run", "steps", "broken", "reader", "idle"]
    assert out["broken"] == {"available": False, "reason": "could not be computed: ValueError: odd input"}
    assert out["reader"] == {"saw": out["broken"]}
    whole = compute_metrics(ctx.trace, ctx.steps)
    assert (out["steps"], out["idle"]) == (whole["steps"], whole["idle"])
    assert "metrics topic broken failed" in caplog.text


def test_a_topic_reads_only_the_topics_it_needs(scenario: tuple[Context, Any, dict[str, Any]]) -> None:
    ctx, bd, run = scenario
    topics = (TOPICS[0], Topic("alone", lambda i: dict(i.topics), ()), Topic("one", lambda i: dict(i.topics), (),
                                                                             needs=("steps",)))
    out = compute_topics(ctx, bd, run, topics)
    assert out["alone"] == {} and out["one"] == {"steps": out["steps"]}


def test_a_topic_runs_only_on_its_platforms(scenario: tuple[Context, Any, dict[str, Any]]) -> None:
    ctx, bd, run = scenario
    topics = (Topic("xla_only", lambda i: {"ran": True}, (), platforms=("xla",)),
              Topic("cuda_only", lambda i: {"ran": True}, (), platforms=("cuda",)),
              Topic("both", lambda i: {"ran": True}, ()))
    assert run["platform"] == "cuda"
    assert list(compute_topics(ctx, bd, run, topics)) == ["run", "cuda_only", "both"]
    assert list(compute_topics(ctx, bd, {**run, "platform": "xla"}, topics)) == ["run", "xla_only", "both"]
