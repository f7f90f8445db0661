#!/usr/bin/env bash
# Make sure a Docker engine answers: install Debian's docker.io if missing, start dockerd with the
# vfs storage driver (works inside containers, no overlay support needed) if nothing answers, then
# wait for the socket. Idempotent; a few seconds when the engine already runs.
#
#   bash scripts/docker/engine.sh
#
# Environment: DOCKERD_LOG (default /tmp/pytest-sglang-dockerd.log), ENGINE_WAIT_S (default 60).
set -euo pipefail
LOG="${DOCKERD_LOG:-/tmp/pytest-sglang-dockerd.log}"
WAIT_S="${ENGINE_WAIT_S:-60}"
say() { printf '[docker engine] %s\n' "$*"; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if ! command -v dockerd >/dev/null 2>&1; then
  say "installing docker.io (Debian's engine)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq docker.io >/dev/null
fi

if docker info >/dev/null 2>&1; then
  say "engine already running: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
  exit 0
fi

if [ -n "${DOCKER_HOST:-}" ]; then
  say "DOCKER_HOST=$DOCKER_HOST does not answer; not starting a local engine in its place" >&2
  exit 1
fi

say "starting dockerd --storage-driver=vfs (log: $LOG)"
# setsid: the engine must outlive this script and the CI step's process group.
$SUDO setsid dockerd --storage-driver=vfs >"$LOG" 2>&1 < /dev/null &
for _ in $(seq 1 $((WAIT_S * 4))); do
  if docker info >/dev/null 2>&1; then
    say "engine up: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
    exit 0
  fi
  sleep 0.25
done
say "dockerd did not answer within ${WAIT_S}s; last lines of $LOG:" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
