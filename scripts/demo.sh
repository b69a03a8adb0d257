#!/usr/bin/env bash
# The README's main command: builds twinscope for this machine's GPU, records
# the bundled example CUDA program (CUDA Graphs, NVTX ranges, copies, memsets)
# with the CUPTI collector, and prints its stats. Needs an NVIDIA GPU.
# Usage: scripts/demo.sh [build-dir]   (default: build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "twinscope demo: no NVIDIA GPU found on this machine (nvidia-smi is missing or lists no GPU)." >&2
  echo "The demo records a CUDA program and needs a GPU and its driver. Without one, run the tests: scripts/test.sh" >&2
  exit 1
fi

scripts/setup-deps.sh --gpu
export PATH=/usr/local/cuda/bin:$PATH
# Compute capability of GPU 0, e.g. 9.0 -> 90.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
opts=(-DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_TESTS=OFF -DTWINSCOPE_CUDA_ARCHITECTURES="${arch:-90}")
[[ -f /usr/include/sqlite3.h ]] || opts+=(-DTWINSCOPE_WITH_SQLITE=OFF)
[[ -f /usr/include/boost/beast.hpp ]] || opts+=(-DTWINSCOPE_WITH_MIRROR=OFF)
gen=()
if command -v ninja >/dev/null; then gen=(-G Ninja); elif [[ -x /opt/torch/.venv/bin/ninja ]]; then
  gen=(-G Ninja -DCMAKE_MAKE_PROGRAM=/opt/torch/.venv/bin/ninja); fi
cmake -S . -B "$BUILD" "${gen[@]}" "${opts[@]}" >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target twinscope twinscope_cupti twinscope_example

out=${TWINSCOPE_DEMO_OUT:-example.tsc}
"$BUILD/bin/twinscope" record -o "$out" -- "$BUILD/bin/twinscope_example"
"$BUILD/bin/twinscope" stats "$out"
echo
echo "Open it in Perfetto (https://ui.perfetto.dev): $BUILD/bin/twinscope export $out --format chrome -o example.json"
