"""``/compare``: this run against a baseline run, or (``level=job``) this run's job against a baseline job
(``api.compare_reports`` / ``api.compare_job_reports``, docs/compare.md; docs/http_api.md).

Both sides come from the cache, named only from the discovered index (as every route): a run's cached report
(202 / 422 while it is not ready or failed, as ``/report``; 422 when it is an error RunReport), a job as
``routes.job_of`` builds it for ``/job`` (202 while a rank of either job is not analysed yet; 422 when a job
could not be analysed; 404 when a run and span is not a job).
"""

from __future__ import annotations

from collections.abc import Mapping

from tensorboard import errors as tb_errors

from tb_llmdiag import api
from tb_llmdiag.tab.catalog import Catalog
from tb_llmdiag.tab.routes import FAILED, Answer, entry_for, job_of, name_arg, not_ready, status_payload


def _base_key(args: Mapping[str, str]) -> dict[str, str]:
    """The baseline's names (``base_run``, ``base_worker``, ``base_span``) as a selection's ``run``, ``worker``, ``span``."""
    out = {}
    for arg in ("run", "worker", "span"):
        v = args.get(f"base_{arg}")
        if v is None or v == "":
            raise tb_errors.InvalidArgumentError(f"missing query parameter 'base_{arg}'")
        out[arg] = v
    return out


def run_compare_impl(cat: Catalog, args: Mapping[str, str]) -> Answer:
    """``/compare``: the run against a baseline run (``api.compare_reports``): 202 / 422 while either is not
    ready or failed (as ``/report``), 422 when either report is an error RunReport, else the comparison."""
    pairs = [entry_for(cat, _base_key(args)), entry_for(cat, args)]
    for key, e in pairs:
        early = not_ready(cat, key, e, "report")
        if early is not None:
            return early
    reports = []
    for key, e in pairs:
        rep = cat.cache.get(e.cache_key, "report", e.identity())
        if rep is None:
            cat.requeue(key)
            return Answer(202, status_payload(cat, key, e))
        if rep.get("status") == "error":
            body = status_payload(cat, key, e)
            body.update(
                status="error", error=f"{key[0]} ({key[1]}, span {key[2]}) could not be analysed: {rep.get('error')}"
            )
            return Answer(FAILED, body)
        reports.append(rep)
    return Answer(200, api.compare_reports(reports[0], reports[1]))


def job_compare_impl(cat: Catalog, args: Mapping[str, str]) -> Answer:
    """``/compare?level=job&run=&span=&base_run=&base_span=``: the baseline job as BEFORE, this job as AFTER."""
    sides = []
    for prefix in ("base_", ""):
        run, span = name_arg(args, f"{prefix}run"), name_arg(args, f"{prefix}span")
        got = job_of(cat, run, span, with_reports=True)
        if isinstance(got, Answer):
            return got
        if got[0].get("status") != "ok":
            error = f"job {run} (span {span}) could not be analysed: {got[0].get('error')}"
            return Answer(FAILED, {"run": run, "span": span, "status": "error", "error": error})
        sides.append(got)
    (bj, br), (aj, ar) = sides
    return Answer(200, api.compare_job_reports(bj, br, aj, ar))


def compare_impl(cat: Catalog, args: Mapping[str, str]) -> Answer:
    """``/compare``: ``level=job`` compares two jobs (``job_compare_impl``); ``level=run`` or none, two traces
    (``run_compare_impl``)."""
    level = args.get("level") or "run"
    if level not in ("run", "job"):
        raise tb_errors.InvalidArgumentError("'level' must be run or job")
    return job_compare_impl(cat, args) if level == "job" else run_compare_impl(cat, args)
