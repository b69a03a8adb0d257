#!/usr/bin/env bash
# Instructions and allocations per launch on the application thread, CPU only
# and deterministic: bench/launch_path/launch_path_driver drives the fake CUPTI
# under callgrind (counting only inside its measured functions, on the
# application thread) with twinscope's collector and with two floors built from
# bench/gpu/bare_cupti.cpp: "floor" enables kernel/memcpy/memset activity and
# discards buffers (the GPU benchmark's floor), "floor_cb" also subscribes empty
# API callbacks (what the fake's callback dispatch costs). Prints one table:
# per workload unit (a launch; a graph node for graph100; an API call for
# memcpy) twinscope's instructions above each floor and its allocations above
# the floor's.
#   scripts/bench_launch_path.sh [build-dir]      (default: build; builds bench_launch_path_deps)
# Environment: UNITS (measured launches per workload, default 2000; graph launches: UNITS/40),
# CHECK=1: exit 1 if a plain launch costs more than MAX_PLAIN_IR (default 600) instructions above the
# floor or any workload allocates in steady state. Logs in $LOG_DIR (default <build>/bench-launch-path).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
UNITS=${UNITS:-2000}
MAX_PLAIN_IR=${MAX_PLAIN_IR:-600}
LOG_DIR=${LOG_DIR:-$BUILD/bench-launch-path}
command -v valgrind >/dev/null || {
  echo "bench_launch_path.sh: valgrind is missing (scripts/setup-deps.sh installs it)" >&2
  exit 1
}
[[ -f $BUILD/build.ninja || -f $BUILD/Makefile ]] || {
  echo "bench_launch_path.sh: no configured build in $BUILD (configure with -DTWINSCOPE_BUILD_TESTS=ON)" >&2
  exit 1
}
cmake --build "$BUILD" --target bench_launch_path_deps >/dev/null
DRIVER=$BUILD/bin/launch_path_driver
COLLECTOR=$BUILD/lib/libtwinscope_cupti.so
FLOOR=$BUILD/lib/libbare_cupti_fake.so
FAKE_DIR=$BUILD/tests/fakes/cupti/lib
for f in "$DRIVER" "$COLLECTOR" "$FLOOR" "$FAKE_DIR/libcupti.so.13"; do
  [[ -e $f ]] || {
    echo "bench_launch_path.sh: $f was not built" >&2
    exit 1
  }
done
mkdir -p "$LOG_DIR"
rm -f "$LOG_DIR"/cg.* "$LOG_DIR"/*.out

# measure <variant> <workload> <units>: prints "<instructions> <allocations> <kernels per unit>".
measure() {
  local variant=$1 workload=$2 units=$3 lib env=() run=$2
  [[ $workload == cudart_flat ]] && run=cudart
  case $variant in
    twinscope)
      lib=$COLLECTOR
      env=(NVTX_INJECTION64_PATH="$COLLECTOR" TWINSCOPE_OUTPUT="$LOG_DIR/$workload.tsc" TWINSCOPE_QUIET=1)
      [[ $workload == cudart_flat ]] && env+=(TWINSCOPE_API_NESTED=0)
      ;;
    floor) lib=$FLOOR ;;
    floor_cb) lib=$FLOOR env=(BARE_CUPTI_CALLBACKS=1) ;;
  esac
  local out=$LOG_DIR/cg.$variant.$workload
  if ! env LD_LIBRARY_PATH="$FAKE_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "${env[@]}" \
    valgrind --tool=callgrind --separate-threads=yes --collect-atstart=no '--toggle-collect=bench_measured_*' \
    --callgrind-out-file="$out" "$DRIVER" "$lib" "$run" "$units" >"$LOG_DIR/$variant.$workload.out" 2>&1; then
    echo "bench_launch_path.sh: $variant $workload failed:" >&2
    tail -20 "$LOG_DIR/$variant.$workload.out" >&2
    exit 1
  fi
  # Thread 1 is the application thread (the driver's main thread).
  local ir allocs kpu
  ir=$(awk '/^summary:/ {print $2}' "$out-01")
  read -r allocs kpu < <(awk '/^UNITS/ {print $4, $6}' "$LOG_DIR/$variant.$workload.out")
  [[ -n $ir && -n $allocs ]] || {
    echo "bench_launch_path.sh: no counts from $variant $workload (see $LOG_DIR)" >&2
    exit 1
  }
  echo "$ir $allocs $kpu"
}

printf '%-9s %-7s %10s %10s %10s %12s %12s %10s\n' workload per twinscope floor floor_cb "+vs floor" "+vs floor_cb" "+allocs"
fail=0
# cudart: a launch as the CUDA runtime makes it (the driver's launch inside), four callbacks; cudart_flat:
# the same under TWINSCOPE_API_NESTED=0 (no API record for the inner call).
for workload in plain cudart cudart_flat nested8 capture graph100 memcpy; do
  units=$UNITS
  [[ $workload == graph100 ]] && units=$((UNITS / 40 > 0 ? UNITS / 40 : 1))
  declare -A ir=() al=()
  kpu=1
  for v in twinscope floor floor_cb; do
    read -r i a k < <(measure "$v" "$workload" "$units")
    ir[$v]=$i al[$v]=$a kpu=$k
  done
  per=launch div=$units
  [[ $workload == graph100 ]] && per=node div=$((units * kpu))
  [[ $workload == memcpy ]] && per=call
  read -r t f fc dt dtc da < <(awk -v t="${ir[twinscope]}" -v f="${ir[floor]}" -v fc="${ir[floor_cb]}" \
    -v at="${al[twinscope]}" -v af="${al[floor]}" -v d="$div" \
    'BEGIN {printf "%.0f %.0f %.0f %+.0f %+.0f %+.2f\n", t/d, f/d, fc/d, (t-f)/d, (t-fc)/d, (at-af)/d}')
  printf '%-9s %-7s %10s %10s %10s %12s %12s %10s\n' "$workload" "$per" "$t" "$f" "$fc" "$dt" "$dtc" "$da"
  if [[ ${CHECK:-0} == 1 ]]; then
    if [[ $workload == plain ]] && ((${dt#+} > MAX_PLAIN_IR)); then
      echo "bench_launch_path.sh: a plain launch costs $dt instructions above the floor (budget $MAX_PLAIN_IR)" >&2
      fail=1
    fi
    if ((al[twinscope] > al[floor])); then
      echo "bench_launch_path.sh: $workload allocates on the application thread ($da per $per)" >&2
      fail=1
    fi
  fi
done
echo "(per unit on the application thread, callgrind Ir; $UNITS measured units after as many warm-up, graph100: $((UNITS / 40)) launches; logs: $LOG_DIR)"
exit $fail
