#!/usr/bin/env bash
# The SGLang adapter on SGLang 0.5.23's real Scheduler (CPU): makes a venv with SGLang (or reuses one), then runs
# tests/engines/test_sglang_real.py in it (docs/engines.md, "SGLang"). Usage:
#   scripts/sglang_real.sh [--venv DIR] [--ctest]
# --venv DIR  the venv to use or make (default $TWINSCOPE_SGLANG_VENV, else ~/.cache/twinscope/sglang-0.5.23-venv)
# --ctest     as ctest runs it (label engines-sglang-real, registered with -DTWINSCOPE_ENGINE_REAL_TESTS=ON, which
#             sets TWINSCOPE_SGLANG_REAL=1): exits 77 unless TWINSCOPE_SGLANG_REAL=1
# Needs python3.11 and PyPI. `pip install sglang==0.5.23` pins torch 2.14.1, flashinfer, sglang-kernel and other CUDA
# kernel libraries and transformers 5.19; its scheduler and HTTP server run on the CPU with the wheel installed
# --no-deps beside its other requirements (torch from PyPI is its CUDA build: the venv is about 8 GB, made in about
# 10 minutes) and vllm 0.34.0 --no-deps, whose vllm._custom_ops SGLang's rotary embedding imports on a machine that is
# neither CUDA nor SGLang's CPU engine (SGLANG_USE_CPU_ENGINE=1, which needs sglang-kernel's CPU build).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT=sglang_real.sh ENGINE=sglang ENGINE_VERSION=0.5.23 REAL=TWINSCOPE_SGLANG_REAL LABEL=engines-sglang-real
VENV="${TWINSCOPE_SGLANG_VENV:-$HOME/.cache/twinscope/sglang-$ENGINE_VERSION-venv}"
SKIP="installs SGLang and torch, about 8 GB"
NEED_PY="" MAKING="" NEED_GB=10
engine_install() {
  # The wheel without its pins, then what its scheduler and HTTP server import on the CPU; the GPU kernel libraries
  # are left out (about 3 GB more, and sgl-deep-ep and the like are CUDA builds).
  REQS="$VENV/sglang-requirements.txt"
  engine_requirements "$REQS" 1 flashinfer-python flashinfer-cubin flashinfer-jit-cache sgl-kernel sglang-kernel \
    sgl-deep-ep sgl-deep-gemm sgl-flash-mla flash-attn-4 humming-kernels quack-kernels tilelang kernels nvidia-mathdx \
    nvshmem4py-cu13 nvidia-cutlass-dsl torch-memory-saver cuda-python torchaudio torchcodec decord2 llguidance outlines
  "${PIP[@]}" -r "$REQS" ipython gguf
  echo "sglang_real.sh: pip's \"sglang 0.5.23 requires ..., which is not installed\" lines above (if any) are the" \
    "packages left out on purpose, not a failure"
  "${PIP[@]}" --no-deps vllm==0.34.0
}
# What the tests import beyond the wheel (a reused venv may lack them: say which, and how to add them).
NEEDED="soundfile xgrammar vllm._custom_ops fastapi uvicorn torch transformers tokenizers"
# shellcheck source=scripts/engine_venv.sh
source "$HERE/scripts/engine_venv.sh"
engine_args "$@"
engine_venv
if ! MISSING="$("$PY" - $NEEDED 2>/dev/null <<'PYEOF'
import importlib, sys
missing = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as e:
        missing.append("%s (%s: %s)" % (name, type(e).__name__, e))
print("; ".join(missing))
sys.exit(1 if missing else 0)
PYEOF
)"; then
  echo "sglang_real.sh: $VENV lacks what the tests import: ${MISSING:-python does not start}. Install them there" \
    "($PY -m pip install ...; vllm as vllm==0.34.0 --no-deps) or remove $VENV to make a new one" >&2
  exit 2
fi
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
