#!/usr/bin/env bash
# The vLLM adapter on vLLM's real V1 scheduler (CPU): makes a venv with vLLM 0.34.0 (or reuses one), then runs
# tests/engines/test_vllm_real.py in it (docs/engines.md, "vLLM"). Usage:
#   scripts/vllm_real.sh [--venv DIR] [--ctest]
# --venv DIR  the venv to use or make (default $TWINSCOPE_VLLM_VENV, else ~/.cache/twinscope/vllm-0.34.0-venv)
# --ctest     as ctest runs it (label engines-vllm-real, registered with -DTWINSCOPE_ENGINE_REAL_TESTS=ON, which
#             sets TWINSCOPE_VLLM_REAL=1): exits 77 unless TWINSCOPE_VLLM_REAL=1
# Needs python3.11 and PyPI. The venv is about 7 GB (torch 2.14.0 is PyPI's CUDA build) and takes ~15 minutes.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT=vllm_real.sh ENGINE=vllm ENGINE_VERSION=0.34.0 REAL=TWINSCOPE_VLLM_REAL LABEL=engines-vllm-real
VENV="${TWINSCOPE_VLLM_VENV:-$HOME/.cache/twinscope/vllm-$ENGINE_VERSION-venv}"
SKIP="installs vLLM, ~7 GB and ~15 minutes"
NEED_PY=" (vLLM $ENGINE_VERSION's wheel is cp38-abi3; its pins want 3.10-3.13)" MAKING="; ~15 minutes"
engine_install() {
  # `pip install vllm==0.34.0` does not resolve: it pins flashinfer-python==0.7.3, which PyPI does not have. So the
  # wheel goes in without its dependencies, then its requirements but the GPU kernel libraries and media decoders
  # that its scheduler never loads (they would put the venv over 8 GB).
  REQS="$VENV/vllm-requirements.txt"
  engine_requirements "$REQS" 0 flashinfer-python nvidia-cutlass-dsl tilelang tokenspeed-mla quack-kernels humming-kernels \
    pynvvideocodec torchcodec torchaudio
  "${PIP[@]}" -r "$REQS"
}
# shellcheck source=scripts/engine_venv.sh
source "$HERE/scripts/engine_venv.sh"
engine_args "$@"
engine_venv
TORCH="$("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))')"
echo "vllm_real.sh: vllm $ENGINE_VERSION, torch $TORCH, $(du -sh "$VENV" | cut -f1) in $VENV"
engine_tests test_vllm_real
