#!/usr/bin/env bash
# The docker test tier, as CI runs it: engine (install + start), local image, then tests/docker.
#
#   bash scripts/docker/ci.sh [extra pytest args]
#
# Environment: PYTHON (default: the repo's .venv, else /work/venv, else python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
HERE="scripts/docker"
if [ -z "${PYTHON:-}" ]; then
  for candidate in .venv/bin/python /work/venv/bin/python; do
    if [ -x "$candidate" ]; then PYTHON="$candidate"; break; fi
  done
  PYTHON="${PYTHON:-python3}"
fi
started=$SECONDS
bash "$HERE/engine.sh"
bash "$HERE/build-image.sh"
set +e
"$PYTHON" -m pytest tests/docker --run-docker -q -p no:cacheprovider "$@"
rc=$?
set -e
echo "[docker tier] finished in $((SECONDS - started)) s (exit $rc)"
exit $rc
