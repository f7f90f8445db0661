#!/usr/bin/env bash
# Set up REAL SGLang 0.5.23 on a CPU-only machine, for tests/real (pytest --run-real-sglang).
#
# Result: a venv whose `python -m sglang.launch_server` runs SGLang's own server processes (HTTP
# server, tokenizer manager, scheduler with the real radix cache, detokenizer, model runner), a
# tiny Llama-architecture model folder served with --load-format dummy (random weights, no hub), and
# a tiny Llama trained here on the generated arithmetic task (real weights, real answers) for the
# accuracy, golden and acceptance tests (train_arithmetic_model.py, ~4-5 CPU minutes, cached).
#
#   bash scripts/real-sglang/setup.sh          # idempotent; ~5 s when cached, ~7 min from scratch
#   bash scripts/real-sglang/setup.sh --fresh  # delete venv and models, rebuild
#
# Environment overrides:
#   REAL_SGLANG_HOME  cache root            (default ${XDG_CACHE_HOME:-~/.cache}/pytest-sglang/real-sglang)
#   REAL_SGLANG_VENV  venv path             (default $REAL_SGLANG_HOME/venv)
#   REAL_SGLANG_MODEL tiny model folder     (default $REAL_SGLANG_HOME/tiny-llama)
#   REAL_SGLANG_ARITH_MODEL  trained model  (default $REAL_SGLANG_HOME/arith-llama)
#   REAL_SGLANG_VLM_MODEL    tiny Qwen2-VL  (default $REAL_SGLANG_HOME/tiny-qwen2-vl; images, dummy weights)
#   SGLANG_WHEEL      a local sglang wheel  (default: sglang==0.5.23 from the package index)
#   TORCH_SPEC        torch requirement     (default torch==2.13.0; needs a CPU wheel reachable by pip,
#                                            e.g. through PIP_FIND_LINKS or a CPU index)
#   PYTHON            interpreter for the venv (default python3.11, else python3)
# Prints, last, the lines tests/real reads: REAL_SGLANG_PYTHON=... REAL_SGLANG_MODEL=... REAL_SGLANG_ARITH_MODEL=...
# REAL_SGLANG_VLM_MODEL=...
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HOME_DIR="${REAL_SGLANG_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-sglang/real-sglang}"
VENV="${REAL_SGLANG_VENV:-$HOME_DIR/venv}"
MODEL="${REAL_SGLANG_MODEL:-$HOME_DIR/tiny-llama}"
ARITH="${REAL_SGLANG_ARITH_MODEL:-$HOME_DIR/arith-llama}"
VLM="${REAL_SGLANG_VLM_MODEL:-$HOME_DIR/tiny-qwen2-vl}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
SGLANG_SPEC="${SGLANG_WHEEL:-sglang==0.5.23}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
started=$SECONDS
say() { printf '[real-sglang setup %3ds] %s\n' "$((SECONDS - started))" "$*"; }

if [[ "${1:-}" == "--fresh" ]]; then say "--fresh: removing $VENV, $MODEL, $ARITH and $VLM"; rm -rf "$VENV" "$MODEL" "$ARITH" "$VLM"; fi

# The stamp is a digest of every input of the install; equal digest + working import = nothing to do.
# That keeps a cached CI run to the import check instead of ~50 no-op pip resolutions.
digest="$(cat "$HERE/setup.sh" "$HERE/requirements-server.txt" "$HERE/requirements-nodeps.txt" \
  "$HERE/patch_torchvision.py" "$HERE/shim/sgl_kernel/__init__.py" \
  <(printf '%s\n' "$TORCH_SPEC" "$SGLANG_SPEC") | sha256sum | cut -c1-16)"
STAMP="$VENV/.pytest-sglang-setup"

smoke() {
  # The server's import chain on CPU: exactly what `python -m sglang.launch_server` needs first.
  SGLANG_USE_CPU_ENGINE=1 "$VENV/bin/python" -W ignore -c \
    "import sglang.launch_server, sglang.srt.entrypoints.http_server, sglang.srt.managers.scheduler as s; \
import sglang; print('sglang', sglang.__version__, 'imports OK')"
}

# pip on this kind of machine warns once per missing mirror folder, and sglang --no-deps leaves a
# long list of unmet (CUDA) requirements: both are expected noise. Real errors still show.
pip_install() {
  local out rc=0
  out="$(mktemp)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" >"$out" 2>&1 || rc=$?
  grep -v -e "is ignored: it is neither" -e "^sglang 0.5.23 requires" \
          -e "dependency resolver does not currently" "$out" || true
  rm -f "$out"
  return "$rc"
}

cached() {
  # Cheap on purpose (no torch import): the stamp already proves every install step ran.
  [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$digest" && -f "$MODEL/config.json" ]] \
    && "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('sglang') != '0.5.23')" \
    && cmp -s "$HERE/shim/sgl_kernel/__init__.py" \
         "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/sgl_kernel/__init__.py"
}

if cached; then
  say "cached (stamp $digest)"
else
  if [[ ! -x "$VENV/bin/python" ]]; then
    say "creating venv $VENV with $PYTHON"
    mkdir -p "$(dirname "$VENV")"; "$PYTHON" -m venv "$VENV"
  fi
  printf '*\n' > "$VENV/.gitignore"   # never committed, even if placed inside a checkout
  rm -f "$STAMP"

  # torch first, alone: everything after must resolve against this CPU build. triton is imported
  # at module load all over SGLang; the real wheel imports without a GPU.
  say "torch ($TORCH_SPEC) + triton"
  pip_install "$TORCH_SPEC" "triton==3.7.0"
  if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.version.cuda is None else 1)"; then
    echo "setup.sh: TORCH_SPEC=$TORCH_SPEC installed a CUDA build of torch; this tier needs the CPU build." >&2
    echo "Fix: make a CPU wheel reachable (PIP_FIND_LINKS=<dir with torch-*+cpu*.whl> or" >&2
    echo "     PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu), then run setup.sh --fresh." >&2
    exit 1
  fi

  say "sglang ($SGLANG_SPEC) without its CUDA dependency set"
  pip_install --no-deps "$SGLANG_SPEC"
  say "server import-chain requirements"
  pip_install -r "$HERE/requirements-server.txt"
  pip_install --no-deps -r "$HERE/requirements-nodeps.txt"

  SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$VENV/bin/python" "$HERE/patch_torchvision.py" "$SITE"
  say "sgl_kernel stand-in -> $SITE/sgl_kernel"
  rm -rf "$SITE/sgl_kernel"; cp -r "$HERE/shim/sgl_kernel" "$SITE/sgl_kernel"

  if [[ ! -f "$MODEL/config.json" ]]; then
    say "tiny model -> $MODEL"
    "$VENV/bin/python" "$HERE/make_tiny_model.py" "$MODEL"
  fi
  smoke
  printf '%s' "$digest" > "$STAMP"
  say "done; venv $(du -sh "$VENV" | cut -f1)"
fi

# Image loads: the tiny Qwen2-VL (dummy weights) and what bench_serving imports beyond the server
# (its dataset modules import Hugging Face `datasets` at load, even for --dataset-name image).
if [[ ! -f "$VLM/config.json" ]]; then
  say "tiny Qwen2-VL -> $VLM"
  "$VENV/bin/python" "$HERE/make_tiny_vlm.py" "$VLM"
fi
if ! "$VENV/bin/python" -c "import datasets" >/dev/null 2>&1; then
  say "datasets (for sglang.bench_serving)"
  pip_install "datasets"
fi

# The trained model: its stamp is a digest of what decides the weights (the training scripts, the
# task's generator and prompt format, torch, transformers and tokenizers). Equal stamp = the folder
# is that model; skip training.
REPO="$(cd "$HERE/../.." && pwd)"
arith_digest="$(cat "$HERE/train_arithmetic_model.py" "$HERE/arith_tokens.py" "$HERE/requirements-server.txt" \
  "$REPO/pytest_sglang/accuracy/arithmetic.py" "$REPO/pytest_sglang/accuracy/task.py" \
  <(printf '%s\n' "$TORCH_SPEC") | sha256sum | cut -c1-16)"
ARITH_STAMP="$ARITH/.pytest-sglang-train"
if [[ -f "$ARITH_STAMP" && "$(cat "$ARITH_STAMP")" == "$arith_digest" && -f "$ARITH/model.safetensors" ]]; then
  say "arithmetic model cached (stamp $arith_digest)"
else
  say "training the arithmetic model -> $ARITH (about 4 minutes on 2 cores)"
  "$VENV/bin/python" -W ignore "$HERE/train_arithmetic_model.py" "$ARITH"
  printf '%s' "$arith_digest" > "$ARITH_STAMP"
fi
echo "REAL_SGLANG_PYTHON=$VENV/bin/python"
echo "REAL_SGLANG_MODEL=$MODEL"
echo "REAL_SGLANG_ARITH_MODEL=$ARITH"
echo "REAL_SGLANG_VLM_MODEL=$VLM"
