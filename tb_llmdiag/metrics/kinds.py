"""Row masks by event kind, shared by the step finder, the summary and ``metrics.context``."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def kind_mask(kind: NDArray[np.uint8], kinds: tuple[int, ...]) -> NDArray[np.bool_]:
    """``np.isin(kind, kinds)`` as one vectorised uint8 comparison per kind: several times faster on big
    tables than ``np.isin`` or a lookup table (indexing by the kind column first widens it to intp)."""
    out = np.zeros(kind.shape, dtype=bool)
    for k in kinds:
        out |= kind == int(k)
    return out
