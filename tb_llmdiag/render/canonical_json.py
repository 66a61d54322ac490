"""Report dicts -> JSON text. No NaN/Inf ever (null instead); numpy scalars become Python numbers."""

from __future__ import annotations

import json
from typing import Any

from tb_llmdiag.jsonsafe import jsonable


def dumps(report: Any, *, canonical: bool = False) -> str:
    """JSON text of a report. ``canonical``: sorted keys and floats rounded to 6 digits (goldens)."""
    data = jsonable(report, float_digits=6 if canonical else None)
    if canonical:
        return json.dumps(data, sort_keys=True, indent=1, allow_nan=False) + "\n"
    return json.dumps(data, allow_nan=False)


def dump_json(doc: dict[str, Any]) -> str:
    """JSON text of a document the front door already made JSON (``api.report``: each run's report converted once,
    where it left it): no second walk over it; a NaN that slipped through still raises (``allow_nan=False``)."""
    return json.dumps(doc, allow_nan=False)
