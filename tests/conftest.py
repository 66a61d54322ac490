"""Shared test fixtures and options.

Real traces come from ``../shared/traces`` beside the repository (CI has it there too).
Options: ``--update-golden`` rewrites tests/golden/*.json instead of comparing (review the diff).
Markers: ``e2e`` (real TensorBoard + Chromium; slower, still run in CI).
"""

from __future__ import annotations


import pytest

from tracepaths import GOLDEN, REPO, SHARED_TRACES, TEST_DATA, shared_trace  # noqa: F401 (re-exported)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden JSON files from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))
