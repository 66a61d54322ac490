"""Plain-JSON values: numpy scalars and arrays become Python numbers and lists, NaN and Inf become None.

Below every layer that emits JSON (metrics, api, render), so all of them clean values the same way.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import numpy as np


def jsonable(obj: Any, *, float_digits: int | None = None) -> Any:
    """A copy of ``obj`` made of dict/list/str/int/float/bool/None only; NaN and Inf become None."""
    if isinstance(obj, msgspec.Struct):  # a typed report part: its fields in order, the UNSET ones left out
        return {
            k: jsonable(v, float_digits=float_digits)
            for k in obj.__struct_fields__
            if (v := getattr(obj, k)) is not msgspec.UNSET
        }
    if isinstance(obj, dict):
        return {str(k): jsonable(v, float_digits=float_digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, float_digits=float_digits) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        if not math.isfinite(f):
            return None
        return round(f, float_digits) if float_digits is not None else f
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist(), float_digits=float_digits)
    return obj


def json_object(obj: Any, *, float_digits: int | None = None) -> dict[str, Any]:
    """``jsonable`` of a mapping or a Struct: a JSON object."""
    out = jsonable(obj, float_digits=float_digits)
    if not isinstance(out, dict):
        raise TypeError(f"not a JSON object: {type(obj).__name__}")
    return out


def json_array(obj: Any, *, float_digits: int | None = None) -> list[Any]:
    """``jsonable`` of a list or tuple: a JSON array."""
    out = jsonable(obj, float_digits=float_digits)
    if not isinstance(out, list):
        raise TypeError(f"not a JSON array: {type(obj).__name__}")
    return out
