"""Shared test fixtures and options.

Real traces come from ``../shared/traces`` beside the repository (CI has it there too).
Options: ``--update-golden`` rewrites tests/golden/*.json instead of comparing (review the diff).
Markers: ``e2e`` (real TensorBoard + Chromium; slower, still run in CI).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO.parent / "shared" / "traces"
TEST_DATA = REPO / "tests" / "data"
GOLDEN = REPO / "tests" / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden JSON files from the current output")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end test with a real TensorBoard process and Chromium")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def shared_trace(rel: str) -> Path:
    """A file under ../shared/traces; the test is skipped with a clear reason only if ../shared is absent."""
    path = SHARED_TRACES / rel
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not beside the repository")
    assert path.exists(), f"missing shared trace {rel}"
    return path
