#!/usr/bin/env bash
# The test suite, from a fresh machine: installs what every tier needs, then runs ONE pytest session.
#   tiers: unit + plugin (simulator subprocesses), real SGLang 0.5.23 on CPU, Docker engine, headless Chromium.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -x tests/unit`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
tiers=()
if [[ "${PYTEST_SGLANG_SKIP_REAL:-0}" != 1 ]]; then
  bash scripts/real-sglang/setup.sh && tiers+=(--run-real-sglang)
fi
if [[ "${PYTEST_SGLANG_SKIP_DOCKER:-0}" != 1 ]]; then
  bash scripts/docker/setup.sh && tiers+=(--run-docker)
fi
if ! command -v chromium >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 || echo "chromium could not be installed"
fi
exec .venv/bin/pytest "${tiers[@]}" "$@"
