#!/usr/bin/env bash
# Install the test dependencies, run the lint (scripts/lint.sh) and every test: unit, real-trace goldens,
# plugin routes and the browser end-to-end tests (real TensorBoard + Debian Chromium driven by Playwright).
# Usage: bash scripts/test.sh [pytest args]     (README's test command; .ci/run calls it)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q -e ".[test]"
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
"$PY" -m pytest -q "$@"
