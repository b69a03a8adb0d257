#!/usr/bin/env bash
# The README's main command: builds twinscope for this machine's GPU and runs
# `twinscope twin` on the bundled example CUDA program (CUDA Graphs, NVTX
# step ranges, copies, memsets): a primary under the CUPTI collector, then a
# shadow under the block probe tracing the example's reduce_sum kernel, joined
# launch by launch. Prints the joined summary and where the report is.
# Needs an NVIDIA GPU.
# Usage: scripts/demo.sh [build-dir]   (default: build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}

# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
require_gpu "twinscope demo"

scripts/setup-deps.sh --gpu
export PATH=/usr/local/cuda/bin:$PATH
# Compute capability of GPU 0, e.g. 9.0 -> 90.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
opts=(-DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_TESTS=OFF -DTWINSCOPE_CUDA_ARCHITECTURES="${arch:-90}")
[[ -f /usr/include/sqlite3.h ]] || opts+=(-DTWINSCOPE_WITH_SQLITE=OFF)
[[ -f /usr/include/boost/beast.hpp ]] || opts+=(-DTWINSCOPE_WITH_MIRROR=OFF)
cmake_generator
cmake -S . -B "$BUILD" "${gen[@]}" "${opts[@]}" >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target twinscope twinscope_cupti twinscope_blocks twinscope_example

out=${TWINSCOPE_DEMO_OUT:-example-twin}
"$BUILD/bin/twinscope" twin --kernel reduce_sum -o "$out" -- "$BUILD/bin/twinscope_example" 50
echo
echo "Joined model: $out/join.json   (twinscope stats $out   shows it again)"
[[ -f $out/report.html ]] && echo "Report: $out/report.html (one self-contained file: open it in a browser)"
exit 0
