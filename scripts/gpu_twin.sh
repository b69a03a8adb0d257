#!/usr/bin/env bash
# GPU runs of `twinscope twin` (issue: twin runs): the example program and a
# PyTorch workload (NVTX step ranges, eager steps and CUDA-graph replays),
# sequential, and a GPU-bound PyTorch run sequential vs --concurrent (the
# primary's slowdown and kernel-duration distortion, and how many kernels the
# join flags). Prints a table last; logs and the joined models go to $OUT.
# Usage: scripts/gpu_twin.sh [build-dir]   (default: build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
source scripts/gpu_common.sh
require_gpu "gpu_twin"
export PATH=/usr/local/cuda/bin:$PATH
OUTDIR=${OUT:-gpu-logs}
mkdir -p "$OUTDIR"
RUNS=${TWIN_RUNS:-/tmp/twin-runs}
rm -rf "$RUNS" && mkdir -p "$RUNS"
PY=/opt/torch/.venv/bin/python
[[ -x $PY ]] || PY=python3

if [[ ! -x $BUILD/bin/twinscope ]]; then
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
  opts=(-DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_TESTS=OFF -DTWINSCOPE_CUDA_ARCHITECTURES="${arch:-90}")
  [[ -f /usr/include/sqlite3.h ]] || opts+=(-DTWINSCOPE_WITH_SQLITE=OFF)
  [[ -f /usr/include/boost/beast.hpp ]] || opts+=(-DTWINSCOPE_WITH_MIRROR=OFF)
  [[ -f .gpu-carry/chart.umd.js ]] && opts+=(-DTWINSCOPE_CHARTJS="$PWD/.gpu-carry/chart.umd.js")
  cmake_generator
  cmake -S . -B "$BUILD" "${gen[@]}" "${opts[@]}" >"$RUNS/cmake.log" 2>&1 || { cat "$RUNS/cmake.log"; exit 1; }
  cmake --build "$BUILD" -j "$(nproc)" --target twinscope twinscope_cupti twinscope_guard twinscope_blocks twinscope_example \
    >"$RUNS/build.log" 2>&1 || { tail -40 "$RUNS/build.log"; exit 1; }
fi
T=$BUILD/bin/twinscope
LOG=$OUTDIR/twin.log
: >"$LOG"

run() {  # run LABEL twin-args...
  local label=$1
  shift
  echo "=== $label: twinscope twin -o $RUNS/$label $*" | tee -a "$LOG"
  local t0=$SECONDS
  if "$T" twin -o "$RUNS/$label" "$@" >>"$LOG" 2>&1; then
    echo "--- $label: ok in $((SECONDS - t0)) s" | tee -a "$LOG"
  else
    echo "--- $label: FAILED (exit $?) after $((SECONDS - t0)) s" | tee -a "$LOG"
  fi
}

BIG=(--hidden 4096 --tokens 4096 --layers 8 --eager 10 --replays 100)
run example --kernel reduce_sum -- "$BUILD/bin/twinscope_example" 200
run torch --kernel layer_norm -- "$PY" tests/gpu/twin_torch.py
run torch_big_seq --kernel layer_norm -- "$PY" tests/gpu/twin_torch.py "${BIG[@]}"
run torch_big_conc --concurrent --kernel layer_norm -- "$PY" tests/gpu/twin_torch.py "${BIG[@]}"
# The primary alone (no shadow at all) for the slowdown baseline.
echo "=== torch_big_alone" | tee -a "$LOG"
"$T" record -o "$RUNS/alone.tsc" -- "$PY" tests/gpu/twin_torch.py "${BIG[@]}" >>"$LOG" 2>&1 || true
"$T" stats "$RUNS/alone.tsc" --json >"$RUNS/alone.json" 2>>"$LOG" || true

for r in example torch torch_big_seq torch_big_conc; do
  [[ -f $RUNS/$r/join.json ]] && cp "$RUNS/$r/join.json" "$OUTDIR/join-$r.json" 2>/dev/null || true
done
[[ -f $RUNS/torch/report.html ]] && cp "$RUNS/torch/report.html" "$OUTDIR/report-torch.html"
grep -h "twin_torch:" "$LOG" || true
"$PY" tests/gpu/twin_report.py --alone "$RUNS/alone.json" layer_norm example "$RUNS/example" torch "$RUNS/torch" torch_big_seq "$RUNS/torch_big_seq" \
  torch_big_conc "$RUNS/torch_big_conc" | tee "$OUTDIR/twin-table.md"
