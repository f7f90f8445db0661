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
# Gateways for tests/fleet: smg comes with the `gateway` extra in .venv; sglang-router 0.3.2 gets a
# venv of its own (it also installs an `smg` script). tests/fleet reads SGLANG_ROUTER_PYTHON.
SGLANG_ROUTER_PYTHON="$(bash scripts/gateway/setup.sh | tee /dev/stderr | sed -n 's/^SGLANG_ROUTER_PYTHON=//p')"
export SGLANG_ROUTER_PYTHON
tiers=()
if [[ "${PYTEST_SGLANG_SKIP_REAL:-0}" != 1 ]]; then
  setup_out="$(mktemp)"
  bash scripts/real-sglang/setup.sh | tee "$setup_out"
  REAL_SGLANG_PYTHON="$(sed -n 's/^REAL_SGLANG_PYTHON=//p' "$setup_out")"
  REAL_SGLANG_MODEL="$(sed -n 's/^REAL_SGLANG_MODEL=//p' "$setup_out")"
  REAL_SGLANG_ARITH_MODEL="$(sed -n 's/^REAL_SGLANG_ARITH_MODEL=//p' "$setup_out")"
  export REAL_SGLANG_PYTHON REAL_SGLANG_MODEL REAL_SGLANG_ARITH_MODEL
  # A real prefill/decode pair on CPU needs mooncake (TCP) and libibverbs next to the venv (not in it).
  REAL_SGLANG_PD_HOME="$(bash scripts/real-sglang/pd-setup.sh | tee /dev/stderr | sed -n 's/^REAL_SGLANG_PD_HOME=//p')"
  export REAL_SGLANG_PD_HOME
  rm -f "$setup_out"
  tiers+=(--run-real-sglang)
fi
if [[ "${PYTEST_SGLANG_SKIP_DOCKER:-0}" != 1 ]]; then
  bash scripts/docker/engine.sh
  bash scripts/docker/build-image.sh
  tiers+=(--run-docker)
fi
if ! command -v chromium >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
  echo "[chromium] installing Debian's chromium for the HTML report test"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
fi
exec .venv/bin/pytest "${tiers[@]}" "$@"
