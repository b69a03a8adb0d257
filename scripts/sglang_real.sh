#!/usr/bin/env bash
# The SGLang adapter on SGLang 0.5.23's real Scheduler (CPU): makes a venv with SGLang (or reuses one), then runs
# tests/engines/test_sglang_real.py in it (docs/engines.md, "SGLang"). Usage:
#   scripts/sglang_real.sh [--venv DIR] [--ctest]
# --venv DIR  the venv to use or make (default $TWINSCOPE_SGLANG_VENV, else ~/.cache/twinscope/sglang-0.5.23-venv)
# --ctest     as ctest runs it (label engines-sglang-real, registered with -DTWINSCOPE_ENGINE_REAL_TESTS=ON, which
#             sets TWINSCOPE_SGLANG_REAL=1): exits 77 unless TWINSCOPE_SGLANG_REAL=1
# Needs python3.11 and PyPI. `pip install sglang==0.5.23` pins torch 2.14.1, flashinfer (CUDA) and transformers 5.19;
# its scheduler runs on the CPU with the wheel installed --no-deps beside torch, transformers and the requirements
# below (several GB: torch from PyPI is its CUDA build).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT=sglang_real.sh ENGINE=sglang ENGINE_VERSION=0.5.23 REAL=TWINSCOPE_SGLANG_REAL LABEL=engines-sglang-real
VENV="${TWINSCOPE_SGLANG_VENV:-$HOME/.cache/twinscope/sglang-$ENGINE_VERSION-venv}"
SKIP="installs SGLang and torch, several GB"
NEED_PY="" MAKING=""
engine_install() {
  # The wheel without its pins (flashinfer's CUDA build, torch 2.14.1, transformers 5.19), then what its scheduler
  # imports on the CPU; the GPU kernel libraries are left out.
  REQS="$VENV/sglang-requirements.txt"
  engine_requirements "$REQS" 1 flashinfer-python flashinfer-cubin flashinfer-jit-cache sgl-kernel nvidia-cutlass-dsl \
    cuda-python torchaudio torchcodec decord2 xgrammar llguidance outlines
  "${PIP[@]}" -r "$REQS" ipython gguf
}
# shellcheck source=scripts/engine_venv.sh
source "$HERE/scripts/engine_venv.sh"
engine_args "$@"
engine_venv
TORCH="$("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))')"
TF="$("$PY" -c 'import importlib.metadata as m; print(m.version("transformers"))')"
echo "sglang_real.sh: sglang $ENGINE_VERSION, torch $TORCH, transformers $TF in $VENV"
cd "$HERE/tests/engines"
LOG="${TMPDIR:-/tmp}/sglang_real.log"
set +e
TWINSCOPE_TEST_SOURCE="$HERE" PYTHONDONTWRITEBYTECODE=1 "$PY" -m unittest -v test_sglang_real >"$LOG" 2>&1
RC=$?
set -e
grep -E "^(test_|Ran |OK|FAILED)" "$LOG" || true
echo "sglang_real.sh: log in $LOG"
exit $RC
