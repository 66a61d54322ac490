"""Comparing two runs (``llmdiag compare``) and gating CI on regressions (``llmdiag check``); docs/compare.md.

- ``series``: values by registry key and the per-step columns of a run report (the one accessor);
- ``stats``: the noise model (seeded bootstrap band, exact rank test);
- ``table``: the declared metric rows and how each is judged;
- ``findings_diff``: resolved / new / changed findings, the bottleneck;
- ``verdict``: the one-line verdict; ``core``: ``compare_runs`` (report dicts in, the document out);
- ``gate``: ``check`` (pass / fail); ``sides``: paths and saved reports to run reports; ``text``, ``cli``.
- jobs (several ranks of one run): ``job_series`` (a ``jobs[]`` entry read by key and as ranks x steps),
  ``job_table`` (rows and statistics), ``job_findings``, ``job_verdict``, ``job_core`` (``compare_jobs``),
  ``job_sides`` (a side as a run or a job).
"""

from __future__ import annotations

from tb_llmdiag.compare.core import COMPARE_SCHEMA, compare_runs
from tb_llmdiag.compare.gate import check
from tb_llmdiag.compare.job_core import compare_jobs

__all__ = ["COMPARE_SCHEMA", "check", "compare_jobs", "compare_runs"]
