#!/usr/bin/env bash
# The README's main command: builds twinscope and its demo decode server for
# this machine's GPU and runs `twinscope demo`: the server as a primary (CUPTI
# collector) behind the mirror while a built-in client sends 8 concurrent
# streaming chat requests, then a shadow of it replaying the primary's step
# schedule under the block probe (reshape_and_cache_flash_kernel), joined
# launch by launch. Prints the summary and where the report is. Needs an
# NVIDIA GPU. Usage: scripts/demo.sh [build-dir] [twinscope demo flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-demo}  # its own: the GPU scripts configure build-gpu without the mirror
shift || true

# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
require_gpu "twinscope demo"

scripts/setup-deps.sh --gpu
export PATH=/usr/local/cuda/bin:$PATH
# Compute capability of GPU 0, e.g. 9.0 -> 90.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
# Every option the demo needs is given, so a build folder configured otherwise before is set right.
opts=(-DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_TESTS=OFF -DTWINSCOPE_CUDA_ARCHITECTURES="${arch:-90}"
  -DTWINSCOPE_WITH_MIRROR=ON -DTWINSCOPE_WITH_DEMO=ON)
[[ -f /usr/include/sqlite3.h ]] || opts+=(-DTWINSCOPE_WITH_SQLITE=OFF)
if [[ ! -f /usr/include/boost/beast.hpp ]]; then
  echo "twinscope demo: the demo server and the mirror need Boost.Beast (Debian/Ubuntu: libboost-dev)" >&2
  exit 1
fi
[[ -f .gpu-carry/chart.umd.js ]] && opts+=(-DTWINSCOPE_CHARTJS="$PWD/.gpu-carry/chart.umd.js")
cmake_generator
cmake -S . -B "$BUILD" "${gen[@]}" "${opts[@]}" >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target twinscope twinscope_cupti twinscope_guard twinscope_blocks twinscope-demo-server

exec "$BUILD/bin/twinscope" demo -o "${TWINSCOPE_DEMO_OUT:-twinscope-demo}" "$@"
