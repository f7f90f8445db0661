#!/usr/bin/env bash
# Create .venv with pytest-sglang, its dev tools and the docs tools (idempotent). Used by the README and CI.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then "$PYTHON" -m venv .venv; fi
# pip prints a warning per missing local mirror directory on this kind of machine; they are harmless.
.venv/bin/pip install -q --disable-pip-version-check -e ".[dev,docs]" 2>&1 | grep -v "is ignored: it is neither" || true
.venv/bin/python -c "import pytest_sglang, sys; print('pytest-sglang', pytest_sglang.__version__, 'in', sys.prefix)"
