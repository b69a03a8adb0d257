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
VENV="${TWINSCOPE_VLLM_VENV:-$HOME/.cache/twinscope/vllm-0.34.0-venv}"
VLLM_VERSION=0.34.0
CTEST=0
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) VENV="$2"; shift 2 ;;
    --ctest) CTEST=1; shift ;;
    *) echo "vllm_real.sh: unknown argument $1 (usage: vllm_real.sh [--venv DIR] [--ctest])" >&2; exit 2 ;;
  esac
done
if [ "$CTEST" = 1 ] && [ "${TWINSCOPE_VLLM_REAL:-}" != 1 ]; then
  echo "vllm_real.sh: skipped (installs vLLM, ~7 GB and ~15 minutes): run TWINSCOPE_VLLM_REAL=1 ctest -L engines-vllm-real"
  exit 77
fi
PY="$VENV/bin/python"
have() { [ -x "$PY" ] && "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm') != '$VLLM_VERSION')" 2>/dev/null; }
if have; then
  echo "vllm_real.sh: reusing $VENV (vllm $VLLM_VERSION)"
else
  command -v python3.11 >/dev/null || { echo "vllm_real.sh: python3.11 is needed (vLLM $VLLM_VERSION's wheel is cp38-abi3; its pins want 3.10-3.13)" >&2; exit 2; }
  echo "vllm_real.sh: making $VENV (vllm $VLLM_VERSION; ~15 minutes)"
  python3.11 -m venv "$VENV"
  PIP=("$PY" -m pip install --no-cache-dir --disable-pip-version-check -q)
  # `pip install vllm==0.34.0` does not resolve: it pins flashinfer-python==0.7.3, which PyPI does not have. So the
  # wheel goes in without its dependencies, then its requirements but the GPU kernel libraries and media decoders
  # that its scheduler never loads (they would put the venv over 8 GB).
  "${PIP[@]}" --no-deps "vllm==$VLLM_VERSION"
  REQS="$VENV/vllm-requirements.txt"
  "$PY" - "$REQS" <<'PYEOF'
import importlib.metadata as m, re, sys
left_out = {"flashinfer-python", "nvidia-cutlass-dsl", "tilelang", "tokenspeed-mla", "quack-kernels", "humming-kernels",
            "pynvvideocodec", "torchcodec", "torchaudio"}
keep = [r for r in m.requires("vllm") if re.split(r"[\s\[<>=!~;]", r, 1)[0].lower() not in left_out]
open(sys.argv[1], "w").write("\n".join(keep) + "\n")
print("vllm_real.sh: %d requirements, left out: %s" % (len(keep), ", ".join(sorted(left_out))))
PYEOF
  "${PIP[@]}" -r "$REQS"
  have || { echo "vllm_real.sh: $VENV has no vllm $VLLM_VERSION after the install" >&2; exit 1; }
fi
TORCH="$("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))')"
echo "vllm_real.sh: vllm $VLLM_VERSION, torch $TORCH, $(du -sh "$VENV" | cut -f1) in $VENV"
cd "$HERE/tests/engines"
LOG="${TMPDIR:-/tmp}/vllm_real.log"
set +e
TWINSCOPE_TEST_SOURCE="$HERE" PYTHONDONTWRITEBYTECODE=1 "$PY" - "$LOG" <<'PYEOF'
import sys, unittest
log = open(sys.argv[1], "w")
suite = unittest.defaultTestLoader.loadTestsFromName("test_vllm_real")
def each(s):
    for t in s:
        yield from (each(t) if isinstance(t, unittest.TestSuite) else [t])
ids = [t.id() for t in each(suite)]  # before the run: a suite lets its tests go as they finish
result = unittest.TextTestRunner(stream=log, verbosity=2).run(suite)
bad = {t.id(): "FAIL" for t, _ in result.failures}
bad.update({t.id(): "ERROR" for t, _ in result.errors})
print("\nvllm_real.sh: test_vllm_real (full log: %s)" % sys.argv[1])
print("%-72s %s" % ("test", "result"))
for i in ids:
    print("%-72s %s" % (i.replace("test_vllm_real.", ""), bad.get(i, "ok")))
for t, tb in result.failures + result.errors:
    print("\n%s:\n%s" % (t.id(), tb[-2000:]))
sys.exit(0 if result.wasSuccessful() else 1)
PYEOF
rc=$?
set -e
exit $rc
