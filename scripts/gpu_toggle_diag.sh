#!/usr/bin/env bash
# Diagnosis of the toggle-mode correctness workload (issue 12): runs
# tests/gpu/blocks_toggle_workload without the probe, under the probe in
# always mode and in toggle mode (every 5th), each cut at DIAG_TIMEOUT s, and
# prints each run's exit code and the last lines of its stderr (the workload
# prints its phases). Needs scripts/gpu_blocks_toggle.sh's build (BUILD_DIR,
# default build-gpu). Logs in $OUT/toggle_diag.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD_DIR:-build-gpu}
DEST=${OUT:-$PWD/gpu-logs}/toggle_diag
T=${DIAG_TIMEOUT:-40}
mkdir -p "$DEST"
BIN=$PWD/$BUILD/bin
PROBE=$PWD/$BUILD/lib/libtwinscope_blocks.so
SAN=${SANITIZER_ROOT:-/usr/local/cuda/compute-sanitizer}
export LD_LIBRARY_PATH=$SAN:${LD_LIBRARY_PATH:-}
variant() {
  local name=$1
  shift
  env "$@" "$BIN/blocks_toggle_workload" "/tmp/$name.expect.json" 5 40 >"$DEST/$name.log" 2>&1 &
  local pid=$! waited=0 rc
  while kill -0 "$pid" 2>/dev/null && ((waited < T)); do sleep 1; ((waited++)); done
  if kill -0 "$pid" 2>/dev/null; then  # hung: where are its threads?
    if command -v gdb >/dev/null; then
      gdb -batch -p "$pid" -ex "thread apply all bt 25" >"$DEST/$name.stacks.txt" 2>&1
    elif command -v eu-stack >/dev/null; then
      eu-stack -p "$pid" >"$DEST/$name.stacks.txt" 2>&1
    else  # no debugger: what each thread waits in
      for t in /proc/"$pid"/task/*; do echo "TID ${t##*/} $(cat "$t/comm") wchan $(cat "$t/wchan" 2>/dev/null) syscall $(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"; done >"$DEST/$name.stacks.txt"
    fi
    grep -E "^#|^Thread|^TID" "$DEST/$name.stacks.txt" | grep -v -E "libc.so|pthread" | head -60 | sed 's/^/   stack| /'
    kill -9 "$pid"
  fi
  wait "$pid"
  rc=$?
  echo "== $name: rc $rc"
  tail -${DIAG_LINES:-8} "$DEST/$name.log" | sed 's/^/   | /'
}
probe=(CUDA_INJECTION64_PATH="$PROBE" NVTX_INJECTION64_PATH="$PROBE" TWINSCOPE_KERNELS=reshape_and_cache_flash)
[[ ${DIAG_BASELINES:-0} == 1 ]] && variant plain X=1
[[ ${DIAG_BASELINES:-0} == 1 ]] && variant always "${probe[@]}" TWINSCOPE_OUTPUT=/tmp/d.always.tsc TWINSCOPE_BLOCKS_PATCH=always TWINSCOPE_EVERY=5
DIAG_LINES=${DIAG_LINES:-12} variant toggle "${probe[@]}" TWINSCOPE_OUTPUT=/tmp/d.toggle.tsc TWINSCOPE_EVERY=5 TWINSCOPE_BLOCKS_GRAPH_DIAG=calls
variant nonblocking "${probe[@]}" TWINSCOPE_OUTPUT=/tmp/d.nb.tsc TWINSCOPE_EVERY=5 TOGGLE_WL_NONBLOCKING=1 TWINSCOPE_BLOCKS_GRAPH_DIAG=calls
variant at_default "${probe[@]}" TWINSCOPE_OUTPUT=/tmp/d.at_default.tsc TWINSCOPE_EVERY=5 TWINSCOPE_BLOCKS_TOGGLE_AT=default TWINSCOPE_BLOCKS_GRAPH_DIAG=calls
variant at_sync "${probe[@]}" TWINSCOPE_OUTPUT=/tmp/d.at_sync.tsc TWINSCOPE_EVERY=5 TWINSCOPE_BLOCKS_TOGGLE_AT=sync TWINSCOPE_BLOCKS_GRAPH_DIAG=calls
for v in at_default at_sync; do
  echo "== $v counters"
  "$BIN/twinscope" stats "/tmp/d.$v.tsc" 2>&1 | grep -i -E "toggle|patch|sync|deferred|traced|matching|error|pinned" | head -20 | sed 's/^/   /'
  echo "== $v check"
  "$BIN/blocks_toggle_check" "/tmp/d.$v.tsc" "/tmp/$v.expect.json" 2>&1 | head -c 2000
  echo
done
