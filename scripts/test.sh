#!/usr/bin/env bash
# The test suite from a fresh machine: install what every tier needs, then run ONE pytest session:
#   unit + simulator + engine + plugin (simulator subprocesses), real SGLang 0.5.23 on CPU,
#   a real Docker engine, and headless Chromium for the HTML report.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -x tests/unit`).
# PYTEST_SGLANG_SKIP_REAL=1 / PYTEST_SGLANG_SKIP_DOCKER=1 leave a tier out (it is then reported as skipped).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
# Gateways for tests/fleet (smg comes with the `gateway` extra in .venv; sglang-router gets a venv of
# its own), real SGLang, Docker and Chromium: the installs are independent, so setup-tiers.sh runs them
# at once and hands over the KEY=VALUE lines the tests read (SGLANG_ROUTER_PYTHON, REAL_SGLANG_*).
env_file="$(mktemp)"
bash scripts/setup-tiers.sh "$env_file"
while IFS= read -r line; do export "${line?}"; done < "$env_file"
rm -f "$env_file"
tiers=()
if [[ "${PYTEST_SGLANG_SKIP_REAL:-0}" != 1 ]]; then tiers+=(--run-real-sglang); fi
if [[ "${PYTEST_SGLANG_SKIP_DOCKER:-0}" != 1 ]]; then tiers+=(--run-docker); fi
# Three workers on two cores: most tests wait on subprocesses (simulators, pytester sessions). The real and
# Docker tiers each stay on one worker, in order (tests/conftest.py schedules them as one scope each).
exec .venv/bin/pytest -n "${PYTEST_SGLANG_WORKERS:-3}" "${tiers[@]}" "$@"
