# Shared by the GPU scripts (demo.sh, gpu_cupti.sh, gpu_blocks.sh); source it.

# require_gpu NAME: exits 1 with a clear message unless an NVIDIA GPU is visible.
require_gpu() {
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "$1: no NVIDIA GPU found (nvidia-smi is missing or lists no GPU); this needs a GPU and its driver." >&2
    echo "Without one, run the tests: scripts/test.sh" >&2
    exit 1
  fi
}

# demo_run_start NAME LOGNAME BUILD WORK: the start of the demo GPU scripts (gpu_demo.sh,
# gpu_demo_seed.sh), run from the repository root. Sets ROOT, BUILD ($BUILD_DIR, else BUILD),
# LOG ($OUT, else ROOT/gpu-logs, then /LOGNAME), WORK ($WORK, else WORK) and the demo's defaults
# MODEL (1b), REQUESTS (8), MAX_TOKENS (48), ENGINE (gpu); empties $WORK, makes it and $LOG, puts
# CUDA's bin first on PATH, sets T0 (the start, date +%s), requires a GPU unless ENGINE=cpu (a dry
# run; NAME in the message) and makes LOGS=$LOG/logs.txt empty: every log, concatenated there
# (only 8 files come back).
demo_run_start() {
  ROOT=$PWD
  BUILD=${BUILD_DIR:-$3}
  LOG=${OUT:-$ROOT/gpu-logs}/$2
  WORK=${WORK:-$4}
  MODEL=${MODEL:-1b}
  REQUESTS=${REQUESTS:-8}
  MAX_TOKENS=${MAX_TOKENS:-48}
  ENGINE=${ENGINE:-gpu}
  rm -rf "$WORK"
  mkdir -p "$LOG" "$WORK"
  export PATH=/usr/local/cuda/bin:$PATH
  T0=$(date +%s)
  [[ $ENGINE == cpu ]] || require_gpu "$1"
  LOGS=$LOG/logs.txt
  : >"$LOGS"
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

# gpu_build_cli BUILD RUNS [TARGET...]: configures BUILD unless it is configured (Release, no tests, this GPU's
# architecture, SQLite and the mirror where their headers are) and builds the targets (default: the CLI, both
# collectors, the guard, and the demo server and its client where Boost.Beast is), which is quick when they are
# built already: scripts sharing one folder each get what they need. Logs go to RUNS/cmake.log and
# RUNS/build.log, printed on failure, which exits 1.
gpu_build_cli() {
  local build=$1 runs=$2
  shift 2
  local arch targets=("$@")
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  local opts=(-DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_TESTS=OFF -DTWINSCOPE_CUDA_ARCHITECTURES="${arch:-90}")
  local libsqlite
  libsqlite=$(ls /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 /usr/lib64/libsqlite3.so.0 2>/dev/null | head -1)
  if [[ ! -f /usr/include/sqlite3.h && -f .gpu-carry/sqlite/sqlite3.h && -n $libsqlite ]]; then
    # The carried header on the machine's library (scripts/carry-chartjs.sh).
    opts+=(-DSQLite3_INCLUDE_DIR="$PWD/.gpu-carry/sqlite" -DSQLite3_LIBRARY="$libsqlite")
  elif [[ ! -f /usr/include/sqlite3.h ]]; then
    opts+=(-DTWINSCOPE_WITH_SQLITE=OFF)
  fi
  [[ -f /usr/include/boost/beast.hpp ]] || opts+=(-DTWINSCOPE_WITH_MIRROR=OFF)
  if ((${#targets[@]} == 0)); then
    targets=(twinscope twinscope_cupti twinscope_guard twinscope_blocks)
    [[ -f /usr/include/boost/beast.hpp ]] && targets+=(twinscope-demo-server twinscope-demo-client)
  fi
  cmake_generator
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S . -B "$build" "${gen[@]}" "${opts[@]}" >"$runs/cmake.log" 2>&1 || { cat "$runs/cmake.log"; exit 1; }
  fi
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$runs/build.log" 2>&1 ||
    { tail -40 "$runs/build.log"; exit 1; }
}
