#!/usr/bin/env bash
# Build the local test image without any registry: `docker import` of an almost empty root folder.
# Containers of this image run the HOST's Python: the tests bind-mount /usr, /etc (and /bin, /lib,
# /lib64 where they are real folders), the Python prefix, the virtualenv and the source tree
# read-only at the same paths (see tests/docker/conftest.py).
#
#   bash scripts/docker/build-image.sh [IMAGE]      # default pytest-sglang/hostpython:local
#   FORCE=1 bash scripts/docker/build-image.sh      # rebuild even if the image exists
set -euo pipefail
IMAGE="${1:-${PYTEST_SGLANG_TEST_IMAGE:-pytest-sglang/hostpython:local}}"
say() { printf '[docker image] %s\n' "$*"; }

if [ -z "${FORCE:-}" ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "$IMAGE already present"
  exit 0
fi

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{tmp,var/tmp,proc,sys,dev,root,etc,usr,run}
chmod 1777 "$root/tmp" "$root/var/tmp"
# Merged-/usr hosts (Debian 12): /bin, /lib, ... are symlinks into /usr; copy the links, so mounting
# /usr alone is enough. On other hosts they are folders and get mounted. /sbin stays a real folder:
# the engine mounts docker-init at /sbin/docker-init, which must not resolve into the read-only /usr.
mkdir -p "$root/sbin"
for d in bin lib lib64; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$root/$d"; else mkdir -p "$root/$d"; fi
done
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --message "pytest-sglang test image: empty root, host Python bind-mounted" - "$IMAGE" >/dev/null
say "built $IMAGE ($(docker image inspect --format '{{.Id}}' "$IMAGE" | cut -c8-19))"
