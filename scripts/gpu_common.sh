# Shared by the GPU scripts (demo.sh, gpu_cupti.sh, gpu_blocks.sh); source it.

# require_gpu NAME: exits 1 with a clear message unless an NVIDIA GPU is visible.
require_gpu() {
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "$1: no NVIDIA GPU found (nvidia-smi is missing or lists no GPU); this needs a GPU and its driver." >&2
    echo "Without one, run the tests: scripts/test.sh" >&2
    exit 1
  fi
}

# Sets the array `gen` to CMake generator arguments: Ninja where one is found
# (the GPU machine has it only in PyTorch's venv), else CMake's default.
# gpu_name: the GPU's name for a table's title ($ENGINE == cpu: a dry run without one).
gpu_name() {
  if [[ ${ENGINE:-gpu} == cpu ]]; then echo "no GPU (dry run, --engine cpu)"; else nvidia-smi --query-gpu=name --format=csv,noheader | head -1; fi
}

cmake_generator() {
  gen=()
  if command -v ninja >/dev/null; then
    gen=(-G Ninja)
  elif [[ -x /opt/torch/.venv/bin/ninja ]]; then
    gen=(-G Ninja -DCMAKE_MAKE_PROGRAM=/opt/torch/.venv/bin/ninja)
  fi
}

# gpu_build_blocks NAME BUILD LOG SAN TARGET...: configures BUILD (Release, GPU tests and benchmarks,
# without SQLite and the mirror, sm_90, the Sanitizer at SAN) and builds the targets; on failure prints
# the end of LOG/build.log and exits 1 naming NAME. Used by the block-probe scripts.
gpu_build_blocks() {
  local name=$1 build=$2 log=$3 san=$4
  shift 4
  cmake_generator
  echo "== build ($build, log $log/build.log)"
  if ! {
    cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_GPU_TESTS=ON \
      -DTWINSCOPE_BUILD_BENCH=ON -DTWINSCOPE_WITH_SQLITE=OFF -DTWINSCOPE_WITH_MIRROR=OFF \
      -DTWINSCOPE_CUDA_ARCHITECTURES=90 -DTWINSCOPE_SANITIZER_ROOT="$san" &&
      cmake --build "$build" -j "$(nproc)" --target "$@"
  } >"$log/build.log" 2>&1; then
    tail -40 "$log/build.log"
    echo "$name: build failed (full log: $log/build.log)" >&2
    exit 1
  fi
}

# Sets the array `chartjs` to the CMake argument that inlines Chart.js into HTML reports. The GPU
# machine has no libjs-chart.js: run scripts/carry-chartjs.sh on the development machine and carry
# .gpu-carry; without it reports are built with a note in place of the step chart.
chartjs_arg() {
  chartjs=()
  if [[ -f .gpu-carry/chart.umd.js ]]; then
    chartjs=(-DTWINSCOPE_CHARTJS="$PWD/.gpu-carry/chart.umd.js")
  fi
}
