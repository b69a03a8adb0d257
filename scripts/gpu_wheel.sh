#!/usr/bin/env bash
# The wheel on the GPU machine (issue 23): installs the twinscope wheel carried
# in .whl/ (built on the CI image by scripts/wheel.sh: the wheel users get, not
# one rebuilt here) without network into a fresh venv that also sees PyTorch's
# packages, then runs `twinscope twin` on a PyTorch program, `twinscope demo`
# and the Python API from it. Prints a table last; logs go to $OUT.
# Carried in .whl/ (README "Install" and docs/python.md say how to make them):
#   twinscope-<version>-py3-none-manylinux_*_x86_64.whl   (BUILD/wheel/dist)
#   nvidia_cuda_cupti-13.5.25-py3-none-manylinux_2_25_x86_64.whl
#   nvidia_cuda_sanitizer_api-13.0.85-py3-none-manylinux_2_25_x86_64.whl
# The CUDA runtime and cuBLAS of the `demo` extra are PyTorch's
# (nvidia-cuda-runtime, nvidia-cublas are installed there).
# Usage: scripts/gpu_wheel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
source scripts/gpu_common.sh
require_gpu "gpu_wheel"
OUTDIR=${OUT:-gpu-logs}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/wheel.log
: >"$LOG"
BASE=/opt/torch/.venv/bin/python3
[[ -x $BASE ]] || BASE=python3
V=/tmp/twinscope-wheel-venv
WORK=/tmp/twinscope-wheel-work
rm -rf "$V" "$WORK" && mkdir -p "$WORK"
whl=$(ls .whl/twinscope-*.whl 2>/dev/null | head -1 || true)
[[ -n $whl ]] || { echo "gpu_wheel: no .whl/twinscope-*.whl: build it with scripts/wheel.sh and copy BUILD/wheel/dist/*.whl to .whl/" >&2; exit 1; }

rows=()
step() {  # step LABEL command...: runs it, logs it, adds a table row
  local label=$1
  shift
  echo "=== $label: $*" | tee -a "$LOG"
  local t0=$SECONDS rc=0
  "$@" >>"$LOG" 2>&1 || rc=$?
  rows+=("| $label | $([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)") | $((SECONDS - t0)) |")
  echo "--- $label: exit $rc after $((SECONDS - t0)) s" | tee -a "$LOG"
  return 0
}

# A venv whose Python sees PyTorch's site-packages (torch, nvidia-cublas,
# nvidia-cuda-runtime) through a .pth file: a venv made from a venv would
# otherwise see only the base interpreter's packages.
"$BASE" -m venv "$V"
torch_site=$("$BASE" -c 'import site; print(site.getsitepackages()[0])')
venv_site=$("$V/bin/python" -c 'import site; print(site.getsitepackages()[0])')
echo "$torch_site" >"$venv_site/torch-site.pth"
# With the demo extra (satisfied by PyTorch's nvidia-cuda-runtime and
# nvidia-cublas), else without it (then the toolkit's runtime serves the demo).
pipi=("$V/bin/python" -m pip install --no-index --find-links .whl --disable-pip-version-check)
if "${pipi[@]}" "$whl[demo]" >>"$LOG" 2>&1; then
  rows+=("| pip install twinscope[demo] (no network) | ok | - |")
else
  echo "gpu_wheel: the demo extra cannot be satisfied here; installing without it" | tee -a "$LOG"
  step "pip install twinscope (no network)" "${pipi[@]}" "$whl"
fi
export PATH=$V/bin:/usr/local/cuda/bin:$PATH
PKG=$("$V/bin/python" -c 'import os, twinscope; print(os.path.dirname(twinscope.__file__))' 2>/dev/null || true)
{
  echo "--- installed"
  "$V/bin/python" -m pip list 2>/dev/null | grep -iE "twinscope|nvidia-cuda-cupti|sanitizer|nvidia-cublas|nvidia-cuda-runtime|^torch " || true
  which twinscope python3
  for f in "$PKG"/lib/libtwinscope_blocks.so "$PKG"/bin/twinscope-demo-server "$PKG"/bin/twinscope_probe_child; do
    echo "ldd $f"
    ldd "$f" | grep -E "sanitizer|cupti|cudart|cublas|not found" || true
  done
} >>"$LOG" 2>&1
step "twinscope --version" twinscope --version
step "twinscope probe" twinscope probe --json "$OUTDIR/wheel-probe.json"
step "twin torch (layer_norm)" twinscope twin --kernel layer_norm -o "$WORK/w" -- python3 tests/gpu/twin_torch.py
# The demo server's CUDA runtime and cuBLAS: pip's beside the wheel (the
# `demo` extra in one venv), else the loader's. Here they are PyTorch's, in
# another site-packages than the wheel's: point the loader at them if needed.
demo_env=()
if ldd "$PKG/bin/twinscope-demo-server" | grep -q "not found"; then
  demo_env=(env "LD_LIBRARY_PATH=$torch_site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  echo "gpu_wheel: the demo server's libraries are not found beside the wheel; using $torch_site/nvidia/cu13/lib" | tee -a "$LOG"
fi
step "demo" bash -c "cd '$WORK' && ${demo_env[*]} twinscope demo"
step "python API on the twin run" python3 -c "
import twinscope
with twinscope.open('$WORK/w') as r:
    m = r.matches(); k = r.kernels()
    print('matches', len(m), dict(m['kind'].value_counts()))
    print('kernels', len(k), 'why_slow', len(r.why_slow()), 'blocks', len(r.blocks()))
    print(r.processes().to_string())
    assert len(m) > 0
"
grep -E "^twinscope: CUPTI|exact [0-9]+ \(|exact-match|shadow launches|demo:" "$LOG" | head -20 || true
[[ -f $WORK/w/join.json ]] && cp "$WORK/w/join.json" "$OUTDIR/wheel-join.json"
{
  echo
  echo "## twinscope wheel on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) ($(basename "$whl"))"
  echo
  echo "| step | result | seconds |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$OUTDIR/wheel-table.md"
