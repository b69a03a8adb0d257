#!/usr/bin/env bash
# Where the CUPTI collector's time goes on a real GPU: `perf record` of
# bench_kernels --eager (1-block kernels, eager launches) under
# libtwinscope_cupti.so, then the top symbols. Prints a short table last.
# Usage: scripts/gpu_profile_cupti.sh [launches]   (default 300000)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD_DIR:-build-gpu}
LOG=${OUT:-$ROOT/gpu-logs}/cupti-profile
N=${1:-300000}
mkdir -p "$LOG"
export PATH=/usr/local/cuda/bin:$PATH
# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
require_gpu "gpu_profile_cupti.sh"
command -v perf >/dev/null || {
  echo "gpu_profile_cupti.sh: no perf on this machine" >&2
  exit 1
}
cmake_generator
if ! {
  cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWINSCOPE_BUILD_GPU_TESTS=ON \
    -DTWINSCOPE_BUILD_BENCH=ON -DTWINSCOPE_WITH_SQLITE=OFF -DTWINSCOPE_WITH_MIRROR=OFF \
    -DTWINSCOPE_CUDA_ARCHITECTURES=90 -DCMAKE_CXX_FLAGS="-fno-omit-frame-pointer" &&
    cmake --build "$BUILD" -j "$(nproc)" --target twinscope_cupti bench_kernels
} >"$LOG/build.log" 2>&1; then
  tail -30 "$LOG/build.log"
  exit 1
fi
LIB=$ROOT/$BUILD/lib/libtwinscope_cupti.so
"$ROOT/$BUILD/bin/bench_kernels" --eager "$N" --graph-kernels 1 --graph-replays 1 2>&1 | grep eager
perf record -F 2000 -g -o "$LOG/perf.data" env CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" \
  TWINSCOPE_OUTPUT="$LOG/p.tsc" TWINSCOPE_QUIET=1 "$ROOT/$BUILD/bin/bench_kernels" --eager "$N" --graph-kernels 1 \
  --graph-replays 1 2>&1 | grep eager
echo "== self time by DSO"
perf report -i "$LOG/perf.data" --no-children --sort dso 2>/dev/null | grep -E "^ +[0-9]" | head -12
echo "== self time by symbol (top 45)"
perf report -i "$LOG/perf.data" --no-children --sort dso,symbol 2>/dev/null | grep -E "^ +[0-9]" | head -45 | cut -c1-150
echo "== time under twinscope's callbacks (children)"
perf report -i "$LOG/perf.data" --children --sort symbol 2>/dev/null | grep -E "^ +[0-9]" |
  grep -E "twinscope|Collector|Pending|RangeStack|Capturing|cuStreamIsCapturing|GetStreamId" | head -30 | cut -c1-150
