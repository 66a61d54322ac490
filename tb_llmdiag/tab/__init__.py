"""The TensorBoard tab: routes over a catalog of discovered traces, an analysis queue and a result cache.

Modules: ``plugin`` (the TBPlugin, composition root and thin routes), ``routes`` (the pure
``*_impl`` functions), ``catalog`` (the discovered index + each trace's analysis status), ``analysis_queue``
(priority queue over an injected executor), ``cache`` + ``schema`` + ``arrays`` (validated on-disk results),
``traceviews`` (the loaded trace-view indexes), ``assets`` (the frontend's files). The tab uses the
library through ``tb_llmdiag.api`` only.
"""

from __future__ import annotations

from tb_llmdiag.tab.plugin import PLUGIN_NAME, LlmDiagPlugin

__all__ = ["PLUGIN_NAME", "LlmDiagPlugin"]
