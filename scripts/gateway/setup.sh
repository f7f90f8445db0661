#!/usr/bin/env bash
# Install sglang-router 0.3.2 (SGLang's older gateway) in a venv of its own, for tests/fleet.
#
# smg (the current gateway) comes with the project's `gateway` extra in .venv. sglang-router cannot
# share that venv: its wheel also installs an `smg` script, which would shadow the real one.
#
#   bash scripts/gateway/setup.sh           # idempotent; ~1 s when cached
#   bash scripts/gateway/setup.sh --fresh   # delete the venv and reinstall
#
# Environment overrides:
#   SGLANG_ROUTER_HOME  venv path              (default ${XDG_CACHE_HOME:-~/.cache}/pytest-sglang/sglang-router)
#   SGLANG_ROUTER_SPEC  requirement to install (default sglang-router==0.3.2)
#   PYTHON              interpreter for the venv (default python3)
# Prints, last, the line scripts/test.sh reads:  SGLANG_ROUTER_PYTHON=...
set -euo pipefail
VENV="${SGLANG_ROUTER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-sglang/sglang-router}"
SPEC="${SGLANG_ROUTER_SPEC:-sglang-router==0.3.2}"
PYTHON="${PYTHON:-python3}"
started=$SECONDS
say() { printf '[gateway setup %3ds] %s\n' "$((SECONDS - started))" "$*"; }

if [[ "${1:-}" == "--fresh" ]]; then say "--fresh: removing $VENV"; rm -rf "$VENV"; fi

want="${SPEC#*==}"
installed() {
  # The router's own module and the pinned version: an interrupted install fails one of the two.
  [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c \
    "import importlib.metadata as m, importlib.util as u, sys; \
sys.exit(u.find_spec('sglang_router.launch_router') is None or m.version('sglang-router') != '$want')" 2>/dev/null
}

if installed; then
  say "cached: $SPEC in $VENV"
else
  if [[ ! -x "$VENV/bin/python" ]]; then
    say "creating venv $VENV with $PYTHON"
    mkdir -p "$(dirname "$VENV")"; "$PYTHON" -m venv "$VENV"
  fi
  printf '*\n' > "$VENV/.gitignore"   # never committed, even if placed inside a checkout
  say "installing $SPEC"
  # pip on this kind of machine warns once per missing mirror folder: harmless noise.
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$SPEC" 2>&1 \
    | grep -v "is ignored: it is neither" || true
  installed || { say "ERROR: $SPEC did not install into $VENV"; exit 1; }
fi
"$VENV/bin/python" -c "import importlib.metadata as m; print('sglang-router', m.version('sglang-router'), 'OK')"
echo "SGLANG_ROUTER_PYTHON=$VENV/bin/python"
