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
VENV="${TWINSCOPE_SGLANG_VENV:-$HOME/.cache/twinscope/sglang-0.5.23-venv}"
SGLANG_VERSION=0.5.23
CTEST=0
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) VENV="$2"; shift 2 ;;
    --ctest) CTEST=1; shift ;;
    *) echo "sglang_real.sh: unknown argument $1 (usage: sglang_real.sh [--venv DIR] [--ctest])" >&2; exit 2 ;;
  esac
done
if [ "$CTEST" = 1 ] && [ "${TWINSCOPE_SGLANG_REAL:-}" != 1 ]; then
  echo "sglang_real.sh: skipped (installs SGLang and torch, several GB): run TWINSCOPE_SGLANG_REAL=1 ctest -L engines-sglang-real"
  exit 77
fi
PY="$VENV/bin/python"
have() { [ -x "$PY" ] && "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('sglang') != '$SGLANG_VERSION')" 2>/dev/null; }
if have; then
  echo "sglang_real.sh: reusing $VENV (sglang $SGLANG_VERSION)"
else
  command -v python3.11 >/dev/null || { echo "sglang_real.sh: python3.11 is needed" >&2; exit 2; }
  echo "sglang_real.sh: making $VENV (sglang $SGLANG_VERSION)"
  python3.11 -m venv "$VENV"
  PIP=("$PY" -m pip install --no-cache-dir --disable-pip-version-check -q)
  # The wheel without its pins (flashinfer's CUDA build, torch 2.14.1, transformers 5.19), then what its scheduler
  # imports on the CPU; the GPU kernel libraries are left out.
  "${PIP[@]}" --no-deps "sglang==$SGLANG_VERSION"
  REQS="$VENV/sglang-requirements.txt"
  "$PY" - "$REQS" <<'PYEOF'
import importlib.metadata as m, re, sys
left_out = {"flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache", "sgl-kernel", "nvidia-cutlass-dsl",
            "cuda-python", "torchaudio", "torchcodec", "decord2", "xgrammar", "llguidance", "outlines"}
keep = [r for r in m.requires("sglang") if ";" not in r and re.split(r"[\s\[<>=!~;]", r, 1)[0].lower() not in left_out]
open(sys.argv[1], "w").write("\n".join(keep) + "\n")
print("sglang_real.sh: %d requirements, left out: %s" % (len(keep), ", ".join(sorted(left_out))))
PYEOF
  "${PIP[@]}" -r "$REQS" ipython gguf
  have || { echo "sglang_real.sh: $VENV has no sglang $SGLANG_VERSION after the install" >&2; exit 1; }
fi
TORCH="$("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))')"
TF="$("$PY" -c 'import importlib.metadata as m; print(m.version("transformers"))')"
echo "sglang_real.sh: sglang $SGLANG_VERSION, torch $TORCH, transformers $TF in $VENV"
cd "$HERE/tests/engines"
LOG="${TMPDIR:-/tmp}/sglang_real.log"
set +e
TWINSCOPE_TEST_SOURCE="$HERE" PYTHONDONTWRITEBYTECODE=1 "$PY" -m unittest -v test_sglang_real >"$LOG" 2>&1
RC=$?
set -e
grep -E "^(test_|Ran |OK|FAILED)" "$LOG" || true
echo "sglang_real.sh: log in $LOG"
exit $RC
