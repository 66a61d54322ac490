#!/usr/bin/env bash
# The formatter, the linter, the type checker and the import contracts CI runs on tb_llmdiag/: the single source
# of truth for those commands (configs: ruff.toml, mypy.ini, .importlinter: the layers of docs/DESIGN.md). scripts/test.sh runs it before the tests.
# Usage: bash scripts/lint.sh          (check only; exits non-zero on any finding)
#        bash scripts/lint.sh --fix    (format and apply ruff's safe fixes first, then check)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ "${1:-}" = "--fix" ]; then
  "$PY" -m ruff check --fix tb_llmdiag
  "$PY" -m ruff format tb_llmdiag
fi
"$PY" -m ruff format --check tb_llmdiag
"$PY" -m ruff check tb_llmdiag
"$PY" -m mypy
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" lint-imports --no-cache
