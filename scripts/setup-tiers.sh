#!/usr/bin/env bash
# Install what the test tiers need, the independent installs at once. Each job runs in the background
# with its output in a log of its own; every log is printed when its job ends, and a failed job fails
# this script (after all jobs ended, with its log shown):
#   gateway      sglang-router 0.3.2 in a venv of its own        (scripts/gateway/setup.sh)
#   real-sglang  real SGLang 0.5.23 on CPU, the tiny models and the trained arithmetic model
#                (scripts/real-sglang/setup.sh), then the PD extras (pd-setup.sh: needs that venv)
#   docker       Docker engine, then the local test image         (scripts/docker/engine.sh, build-image.sh)
#   chromium     Debian's chromium for the HTML report test        (scripts/chromium.sh)
# apt cannot run twice at once: the apt steps (engine install, chromium, pd-setup's apt-get download)
# take one lock ($PYTEST_SGLANG_APT_LOCK).
#
#   bash scripts/setup-tiers.sh ENV_FILE   # writes the KEY=VALUE lines the tests read to ENV_FILE
#
# PYTEST_SGLANG_SKIP_REAL=1 / PYTEST_SGLANG_SKIP_DOCKER=1 leave a tier out.
# PYTEST_SGLANG_SCRIPTS (default: this folder) is where the step scripts are (tests use stand-ins).
set -euo pipefail
out="${1:?usage: bash scripts/setup-tiers.sh ENV_FILE}"
SCRIPTS="${PYTEST_SGLANG_SCRIPTS:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
export PYTEST_SGLANG_APT_LOCK="${PYTEST_SGLANG_APT_LOCK:-${TMPDIR:-/tmp}/pytest-sglang-apt.lock}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
started=$SECONDS
say() { printf '[setup %3ds] %s\n' "$((SECONDS - started))" "$*"; }

names=()
pids=()
run() {  # run NAME COMMAND...: start a job in the background, its stdout and stderr to its log
  local name="$1"; shift
  # A session (and process group) of its own: a stop reaches every process of the job (pip, apt, ...).
  setsid --wait "$@" >"$logs/$name.log" 2>&1 < /dev/null &
  names+=("$name"); pids+=("$!")
  say "started $name"
}
# Background jobs of a script ignore Ctrl-C: pass a stop on to each job's whole group.
stop_jobs() { for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done; }
trap 'say "stopped: stopping ${names[*]}" >&2; stop_jobs; exit 130' INT TERM

run gateway bash "$SCRIPTS/gateway/setup.sh"
if [[ "${PYTEST_SGLANG_SKIP_REAL:-0}" != 1 ]]; then
  run real-sglang bash -c 'set -e; bash "$1/real-sglang/setup.sh"; flock -o "$PYTEST_SGLANG_APT_LOCK" bash "$1/real-sglang/pd-setup.sh"' \
    real-sglang "$SCRIPTS"
fi
if [[ "${PYTEST_SGLANG_SKIP_DOCKER:-0}" != 1 ]]; then
  run docker bash -c 'set -e; flock -o "$PYTEST_SGLANG_APT_LOCK" bash "$1/docker/engine.sh"; bash "$1/docker/build-image.sh"' \
    docker "$SCRIPTS"
fi
run chromium flock -o "$PYTEST_SGLANG_APT_LOCK" bash "$SCRIPTS/chromium.sh"

failed=()
for i in "${!names[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  echo "----- ${names[$i]} (exit $rc) -----"
  cat "$logs/${names[$i]}.log"
  if (( rc != 0 )); then failed+=("${names[$i]}"); fi
done
if (( ${#failed[@]} )); then
  say "FAILED: ${failed[*]} (their logs are above)" >&2
  exit 1
fi
# The lines the tests read (KEY=VALUE, printed last by each setup script).
cat "$logs"/*.log | grep -E '^(SGLANG_ROUTER_PYTHON|REAL_SGLANG_[A-Z_]+)=' > "$out" || true
say "done"
