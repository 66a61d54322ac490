"""Where test traces live. Import as ``from tracepaths import shared_trace`` (pytest.ini puts tests/ on the path)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO.parent / "shared" / "traces"
TEST_DATA = REPO / "tests" / "data"
GOLDEN = REPO / "tests" / "golden"


def shared_trace(rel: str) -> Path:
    """A file under ../shared/traces; skipped with a clear reason only if ../shared is absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not beside the repository")
    path = SHARED_TRACES / rel
    assert path.exists(), f"missing shared trace {rel}"
    return path
