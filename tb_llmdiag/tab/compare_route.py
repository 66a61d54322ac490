"""``/compare?level=job``: this run's job against a baseline job (``api.compare_job_reports``, docs/compare.md).

A job is the traces of one run and span in the discovered index (two or more; names only from the index, as every
route). The comparison needs each rank's cached report and RankSummary: 202 while a rank of either job is not
analysed yet (it moves to the front of the queue), 422 when a rank or a job could not be analysed, 404 when a
run and span is not a job. ``routes.compare_impl`` answers the other levels and sends ``level=job`` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tensorboard import errors as tb_errors

from tb_llmdiag import api
from tb_llmdiag.tab.registry import Registry
from tb_llmdiag.tab.routes import FAILED, Answer, _not_ready, status_payload
from tb_llmdiag.tab.routes import compare_impl as routes_compare


def _name(args: Mapping[str, str], arg: str) -> str:
    v = args.get(arg)
    if v is None or v == "" or len(v) > 1024 or "\x00" in v:
        raise tb_errors.InvalidArgumentError(f"missing or bad query parameter '{arg}'")
    return v


def job_parts(reg: Registry, run: str, span: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | Answer:
    """The ``jobs[]`` entry of one job and its ranks' run reports from the cache, or the answer to give instead."""
    members = [(k, e) for k, e in reg.snapshot() if k[0] == run and k[2] == span]
    if len(members) < 2:
        raise tb_errors.NotFoundError(f"run {run!r} span {span!r} is not a job (fewer than two ranks)")
    for k, e in members:
        early = _not_ready(reg, k, e, "report")
        if early is not None:
            return early
    summaries, reports = [], []
    for k, e in members:
        rep = reg.cache.get(e.cache_key, "report", e.identity())
        found = reg.cache.get(e.cache_key, "rank_summary")
        if rep is None or found is None:  # the cache entry vanished or predates rank summaries
            reg.requeue(k)
            return Answer(202, status_payload(reg, k, e))
        summaries.append((e.tf, found.get("summary")))
        reports.append(rep)
    job = api.job_for_summaries(run, span, summaries)
    if job.get("status") != "ok":
        k, e = members[0]
        body = status_payload(reg, k, e)
        body.update(status="error", error=f"job {run} (span {span}) could not be analysed: {job.get('error')}")
        return Answer(FAILED, body)
    return job, reports


def job_compare_impl(reg: Registry, args: Mapping[str, str]) -> Answer:
    """``/compare?level=job&run=&span=&base_run=&base_span=``: the baseline job as BEFORE, this job as AFTER."""
    sides = []
    for prefix in ("base_", ""):
        got = job_parts(reg, _name(args, f"{prefix}run"), _name(args, f"{prefix}span"))
        if isinstance(got, Answer):
            return got
        sides.append(got)
    (bj, br), (aj, ar) = sides
    return Answer(200, api.compare_job_reports(bj, br, aj, ar))


def compare_impl(reg: Registry, args: Mapping[str, str]) -> Answer:
    """``/compare``: ``level=job`` compares two jobs (``job_compare_impl``); ``level=run`` or none, two traces
    (``routes.compare_impl``)."""
    level = args.get("level") or "run"
    if level not in ("run", "job"):
        raise tb_errors.InvalidArgumentError("'level' must be run or job")
    return job_compare_impl(reg, args) if level == "job" else routes_compare(reg, args)
