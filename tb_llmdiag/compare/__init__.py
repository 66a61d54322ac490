"""Comparing two runs (``llmdiag compare``) and gating CI on regressions (``llmdiag check``); docs/compare.md.

- ``series``: values by registry key and the per-step columns of a run report (the one accessor);
- ``stats``: the noise model (seeded bootstrap band, exact rank test);
- ``table``: the declared metric rows and how each is judged;
- ``findings_diff``: resolved / new / changed findings, the bottleneck;
- ``verdict``: the one-line verdict; ``core``: ``compare_runs`` (report dicts in, the document out);
- ``gate``: ``check`` (pass / fail); ``sides``: paths and saved reports to run reports; ``text``, ``cli``.
"""

from __future__ import annotations

from tb_llmdiag.compare.core import COMPARE_SCHEMA, compare_runs
from tb_llmdiag.compare.gate import check

__all__ = ["COMPARE_SCHEMA", "check", "compare_runs"]
