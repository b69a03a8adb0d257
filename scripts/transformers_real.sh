#!/usr/bin/env bash
# The transformers adapter on transformers 5.17's real continuous-batching engine (CPU): makes a venv with
# transformers 5.17.0 and torch (or reuses one), then runs tests/engines/test_transformers_real.py in it
# (docs/engines.md, "The real engine, on the CPU"). Usage:
#   scripts/transformers_real.sh [--venv DIR] [--ctest]
# --venv DIR  the venv to use or make (default $TWINSCOPE_TRANSFORMERS_VENV, else
#             ~/.cache/twinscope/transformers-5.17.0-venv)
# --ctest     as ctest runs it (label engines-transformers-real, registered with -DTWINSCOPE_ENGINE_REAL_TESTS=ON,
#             which sets TWINSCOPE_TRANSFORMERS_REAL=1): exits 77 unless TWINSCOPE_TRANSFORMERS_REAL=1
# Needs python3.11 and PyPI. The venv is about 6 GB (torch 2.15.0 is PyPI's CUDA build); the tests take ~1-2 minutes.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT=transformers_real.sh ENGINE=transformers ENGINE_VERSION=5.17.0 REAL=TWINSCOPE_TRANSFORMERS_REAL
LABEL=engines-transformers-real
VENV="${TWINSCOPE_TRANSFORMERS_VENV:-$HOME/.cache/twinscope/transformers-$ENGINE_VERSION-venv}"
SKIP="installs torch and transformers, ~6 GB"
NEED_PY=" (the venv the tests were run in: torch 2.15.0 and transformers $ENGINE_VERSION on 3.11)" MAKING="; ~6 GB"
NEED_GB=8
engine_install() {
  # The wheel's own requirements but its extras (each an environment marker), then torch and psutil, which the
  # continuous-batching engine needs and the wheel does not require: without psutil the engine sees 0 bytes of memory
  # on the CPU and sizes no cache.
  REQS="$VENV/transformers-requirements.txt"
  engine_requirements "$REQS" 1
  "${PIP[@]}" -r "$REQS" torch==2.15.0 psutil
}
# shellcheck source=scripts/engine_venv.sh
source "$HERE/scripts/engine_venv.sh"
engine_args "$@"
engine_venv
TORCH="$("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))')"
"$PY" -c 'import psutil' 2>/dev/null || {
  echo "$SCRIPT: $VENV has no psutil (the engine would see 0 bytes of memory on the CPU): $PY -m pip install psutil" >&2
  exit 2
}
echo "transformers_real.sh: transformers $ENGINE_VERSION, torch $TORCH, $(du -sh "$VENV" | cut -f1) in $VENV"
engine_tests test_transformers_real
