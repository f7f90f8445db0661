#!/usr/bin/env bash
# CI entry of the real-SGLang tier: set up real SGLang 0.5.23 on CPU (cached), then run tests/real.
#   bash scripts/real-sglang/ci.sh [extra pytest args]
# Uses the project's .venv (scripts/bootstrap.sh) when present, else $PYTHON (default python3), for
# pytest; the SGLang server itself runs from the separate venv that setup.sh builds.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
started=$SECONDS
# setup.sh ends with REAL_SGLANG_PYTHON=, REAL_SGLANG_MODEL=, REAL_SGLANG_ARITH_MODEL= and REAL_SGLANG_VLM_MODEL= lines: hand
# exactly those to the tests.
setup_out="$(mktemp)"
pd_out="$(mktemp)"
trap 'rm -f "$setup_out" "$pd_out"' EXIT
bash scripts/real-sglang/setup.sh | tee "$setup_out"   # pipefail: a failed setup stops here
export REAL_SGLANG_PYTHON="$(sed -n 's/^REAL_SGLANG_PYTHON=//p' "$setup_out")"
export REAL_SGLANG_MODEL="$(sed -n 's/^REAL_SGLANG_MODEL=//p' "$setup_out")"
export REAL_SGLANG_ARITH_MODEL="$(sed -n 's/^REAL_SGLANG_ARITH_MODEL=//p' "$setup_out")"
export REAL_SGLANG_VLM_MODEL="$(sed -n 's/^REAL_SGLANG_VLM_MODEL=//p' "$setup_out")"
# Through a file, never tee into /dev/stderr: that reopens a log that stdout and stderr are redirected
# to with truncation, and everything logged before becomes NUL bytes.
bash scripts/real-sglang/pd-setup.sh | tee "$pd_out"
export REAL_SGLANG_PD_HOME="$(sed -n 's/^REAL_SGLANG_PD_HOME=//p' "$pd_out")"
PY="${PYTHON:-python3}"
if [[ -x "$ROOT/.venv/bin/python" ]]; then PY="$ROOT/.venv/bin/python"; fi
rc=0
"$PY" -m pytest tests/real --run-real-sglang -p no:cacheprovider -q -rA "$@" || rc=$?
echo "real-SGLang tier finished in $((SECONDS - started)) s (rc=$rc)"
exit "$rc"
