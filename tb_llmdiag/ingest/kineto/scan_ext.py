"""The compiled reader helpers (_scan.c), or None where they were not built.

Read as ``scan_ext.ext`` at call time (never imported by value), so that the readers and the tests can
switch to the pure-Python paths by setting this one attribute.
"""

from __future__ import annotations

import logging
from types import ModuleType

ABI = 7  # the version of _scan.c's interface the readers call

ext: ModuleType | None
try:  # the compiled one-pass scanner (_scan.c), built by setup.py where a C compiler is available
    from tb_llmdiag.ingest.kineto import _scan as ext  # type: ignore[attr-defined,no-redef]
except ImportError:  # pragma: no cover - depends on the build
    ext = None
if ext is not None and getattr(ext, "ABI", None) != ABI:  # pragma: no cover - a stale build
    logging.getLogger(__name__).warning(
        "ignoring %s: built from another version (reinstall to rebuild it)", ext.__file__
    )
    ext = None

__all__ = ["ABI", "ext"]
