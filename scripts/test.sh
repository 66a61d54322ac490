#!/usr/bin/env bash
# Install the test dependencies, run the lint (scripts/lint.sh) and every test: unit, real-trace goldens,
# plugin routes and the browser end-to-end tests (real TensorBoard + Debian Chromium driven by Playwright).
# Usage: bash scripts/test.sh [pytest args]     (README's test command; .ci/run calls it)
#
# Where it installs: into its own virtual environment, .venv-test/ in the repository (LLMDIAG_TEST_VENV names
# another folder), created from $PYTHON (default python3) on the first run; never into the environment it is
# started from. The package goes in editable from this checkout, with its [test] extra. So a TensorBoard started
# by README's first command (`pip install .` into .venv) keeps serving the tab while the tests run: reinstalling
# the package under it would take away the files it serves.
# LLMDIAG_TEST_VENV=current installs into the active environment instead (CI, which makes a fresh one).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${LLMDIAG_TEST_VENV:-.venv-test}
if [ "$VENV" != "current" ]; then
  if [ ! -x "$VENV/bin/python" ]; then
    echo "scripts/test.sh: creating the test environment $VENV (its own; the active environment is left alone)"
    "$PY" -m venv "$VENV"
  fi
  PY="$PWD/$VENV/bin/python"
  export PATH="$PWD/$VENV/bin:$PATH"
fi
echo "scripts/test.sh: installing the package (editable) and its test dependencies into $("$PY" -c 'import sys; print(sys.prefix)')"
"$PY" -m pip install -q -e ".[test]"
export PYTHON="$PY"
bash scripts/lint.sh  # ruff format --check, ruff check, mypy on tb_llmdiag/
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
if command -v node >/dev/null 2>&1 && compgen -G "frontend/*.test.mjs" >/dev/null; then
  node --test frontend/*.test.mjs frontend/*/*.test.mjs
fi
# -rs: every skipped test says why (no ../shared/traces, no torch, running as root...)
"$PY" -m pytest -q -rs "$@"
