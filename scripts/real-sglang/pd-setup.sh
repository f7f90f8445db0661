#!/usr/bin/env bash
# Extras for a REAL SGLang 0.5.23 prefill/decode pair on a CPU-only machine (tests/real/test_real_pd.py).
#
# Run after scripts/real-sglang/setup.sh. The real venv is not touched: everything lands in
# $REAL_SGLANG_PD_HOME (default $REAL_SGLANG_HOME/pd-extras):
#   site/  mooncake-transfer-engine-non-cuda 0.3.13.post1 (pip --target): the `mooncake` module that
#          --disaggregation-transfer-backend mooncake_tcp imports (mooncake with MC_FORCE_TCP=1, no RDMA)
#   lib/   libibverbs1, librdmacm1, libnl-3-200, libnl-route-3-200 from the Debian archive (apt-get
#          download + dpkg -x, no root install): mooncake's engine.so links libibverbs even for TCP
#
# A pair that works on CPU (measured 2026-12-03, see docs/limitations.md):
#   both:    PYTHONPATH=$PD_HOME/site LD_LIBRARY_PATH=$PD_HOME/lib SGLANG_USE_CPU_ENGINE=1
#            --disaggregation-transfer-backend mooncake_tcp (plus tests/real/realsgl.py CPU_ARGS)
#   prefill: SGLANG_DISAGGREGATION_ALL_CP_RANKS_TRANSFER=1 (else the KV send pins memory through CUDA:
#            "pin_memory=True requires a CUDA or other accelerator backend") --disaggregation-mode prefill
#   decode:  --disaggregation-decode-retraction-backup cpu_tensor (the default host_pool registers host
#            memory through CUDA: "Torch not compiled with CUDA enabled") --disaggregation-mode decode
#
#   bash scripts/real-sglang/pd-setup.sh     # idempotent; prints REAL_SGLANG_PD_HOME=... last
set -euo pipefail
HOME_DIR="${REAL_SGLANG_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-sglang/real-sglang}"
VENV="${REAL_SGLANG_VENV:-$HOME_DIR/venv}"
PD_HOME="${REAL_SGLANG_PD_HOME:-$HOME_DIR/pd-extras}"
MOONCAKE_SPEC="${MOONCAKE_SPEC:-mooncake-transfer-engine-non-cuda==0.3.13.post1}"
DEBS=(libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200)
say() { printf '[real-sglang pd-setup] %s\n' "$*"; }

[[ -x "$VENV/bin/python" ]] || { say "no real SGLang venv at $VENV: run scripts/real-sglang/setup.sh first"; exit 1; }
mkdir -p "$PD_HOME/site" "$PD_HOME/lib" "$PD_HOME/debs"

check() {
  LD_LIBRARY_PATH="$PD_HOME/lib" PYTHONPATH="$PD_HOME/site" "$VENV/bin/python" -c \
    "from mooncake.engine import TransferEngine; print('mooncake engine imports OK')"
}

if check >/dev/null 2>&1; then
  say "cached ($PD_HOME)"
else
  if [[ ! -d "$PD_HOME/site/mooncake" ]]; then
    say "pip install --target $PD_HOME/site $MOONCAKE_SPEC (the real venv is not modified)"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --target "$PD_HOME/site" \
      "$MOONCAKE_SPEC"
  fi
  say "fetching ${DEBS[*]} (apt-get download, unpacked into $PD_HOME/lib)"
  (cd "$PD_HOME/debs" && apt-get download "${DEBS[@]}" >/dev/null 2>&1) || {
    say "apt-get download failed: run 'apt-get update' (or install ${DEBS[*]} system-wide) and retry"; exit 1; }
  root="$PD_HOME/debs/root"
  rm -rf "$root"; mkdir -p "$root"
  for deb in "$PD_HOME"/debs/*.deb; do dpkg -x "$deb" "$root"; done
  find "$root" -name '*.so*' -path '*x86_64-linux-gnu*' -not -path '*/rsocket/*' -exec cp -a {} "$PD_HOME/lib/" \;
  check
fi
printf 'REAL_SGLANG_PD_HOME=%s\n' "$PD_HOME"
