"""Every rule: ``RULES = GPU_RULES + XLA_RULES``, a static table (docs/findings.md lists each one;
``llmdiag rules`` prints it; tests iterate it)."""

from __future__ import annotations

from tb_llmdiag.findings.engine import Rule
from tb_llmdiag.findings.gpu import GPU_RULES
from tb_llmdiag.findings.xla import XLA_RULES

RULES: tuple[Rule, ...] = GPU_RULES + XLA_RULES
