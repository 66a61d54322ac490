"""The TensorBoard tab: routes over a registry of discovered traces, a job queue and a result cache.

Modules: ``plugin`` (the TBPlugin, composition root and thin routes), ``routes`` (the pure ``*_impl``
functions), ``registry`` (index + per-run status), ``jobs`` (priority queue over an injected executor),
``cache`` + ``schema`` (validated on-disk results), ``assets`` (the frontend's files). The tab uses the
library through ``tb_llmdiag.api`` only.
"""

from __future__ import annotations

from tb_llmdiag.tab.plugin import PLUGIN_NAME, LlmDiagPlugin

__all__ = ["PLUGIN_NAME", "LlmDiagPlugin"]
