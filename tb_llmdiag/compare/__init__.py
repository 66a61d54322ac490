"""Comparing two runs or two jobs (``llmdiag compare``) and gating CI on regressions (``llmdiag check``);
docs/compare.md. Pure over report dicts; the CLI loads the sides (``tb_llmdiag/cli/sides.py``) and the tab
takes them from its cache, both through ``api``.

- ``side``: a side read from report dicts, the same interface for a run and a job (values by registry key,
  per-step ranks x steps columns, findings): the one place that knows where a report keeps them;
- ``stats``: the noise model (seeded bootstrap band, exact rank test);
- ``table``: the declared metric rows, the per-step statistics and how each row is judged;
- ``findings_diff``: resolved / new / changed findings, the bottleneck;
- ``verdict``: the one-line verdict and the regression lines; ``core``: ``compare`` (two sides in, the
  document out: two run reports, or two jobs as ``(job, runs)``); ``gate``: ``check`` (pass / fail).
"""

from __future__ import annotations

from tb_llmdiag.compare.core import COMPARE_SCHEMA, compare
from tb_llmdiag.compare.gate import check
from tb_llmdiag.compare.table import entry


def is_compare_key(key: str) -> bool:
    """Whether ``key`` names a number the comparison reads: a registry key, or one it derives (``table.DERIVED``)."""
    return entry(key) is not None


__all__ = ["COMPARE_SCHEMA", "check", "compare", "is_compare_key"]
