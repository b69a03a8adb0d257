#!/usr/bin/env bash
# The test command of the README: installs dependencies, builds everything
# (CPU side, GPU examples compiled with nvcc but not run), runs every CPU test
# through ctest and the launch-path benchmark's budget check, then runs each
# libFuzzer target for a bounded time.
# Usage: scripts/test.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
FUZZ_SECONDS=${TWINSCOPE_FUZZ_SECONDS:-20}
JOBS=${JOBS:-$(nproc)}

# ---- Where the time goes (issue 21, part 7): each phase's wall and CPU seconds (this script's children,
# from bash's `times`), printed when the script ends and kept in $BUILD-timing.txt with the build's slowest
# steps (bench/RESULTS.md, "The test command's time").
_timing=() _phase= _phase_t=$SECONDS _phase_cpu=0 _times_file=$(mktemp)
_cpu_now() {
  times >"$_times_file"
  _cpu=$(awk 'NR==2{split($1,u,/[ms]/); split($2,s,/[ms]/); printf "%d", u[1]*60+u[2]+s[1]*60+s[2]}' "$_times_file")
}
phase() {
  _cpu_now
  [[ -n $_phase ]] && _timing+=("$(printf '%-24s %6d s wall %7d s cpu' "$_phase" $((SECONDS - _phase_t)) $((_cpu - _phase_cpu)))")
  _phase=$1 _phase_t=$SECONDS _phase_cpu=$_cpu
}
_kill_tree() {
  local c
  command -v pgrep >/dev/null && for c in $(pgrep -P "$1"); do _kill_tree "$c"; done
  kill "$1" 2>/dev/null
}
_timing_report() {
  # Runs at exit: keeps the script's own exit status, and nothing here may change it (under `set -e` and
  # pipefail, `sort | head` failing with SIGPIPE once made a passing run exit 141).
  local rc=$?
  set +e +o pipefail
  [[ -n ${fuzz_pid:-} ]] && _kill_tree "$fuzz_pid"  # the background fuzz build of a run that stopped early
  phase ""
  {
    echo "scripts/test.sh time by phase ($(nproc) cores, JOBS=$JOBS; $(date -u +%FT%TZ)):"
    printf '  %s\n' "${_timing[@]}"
    if [[ -f $BUILD/.ninja_log ]]; then
      echo "slowest build steps of $BUILD (s, wall while sharing $JOBS jobs):"
      awk 'NR>1{printf "%8.1f %s\n", ($2-$1)/1000, $4}' "$BUILD/.ninja_log" | sort -rn | head -15
    fi
  } | tee "$BUILD-timing.txt" >&2
  rm -f "$_times_file"
  exit "$rc"
}
trap _timing_report EXIT
phase setup-deps

scripts/setup-deps.sh
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
phase configure
# TWINSCOPE_FAST_BUILD: unity builds, line tables only, -O1 (tests' own files -O0) but the collector the launch-path
# budget measures, which keeps -O2 (cmake/TwinscopeFastBuild.cmake; bench/RESULTS.md, "The test command's time").
cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWINSCOPE_BUILD_TESTS=ON -DTWINSCOPE_FAST_BUILD=ON
# The fuzz build (clang, ASan and UBSan) runs beside everything below at the lowest priority (nice 19): it takes
# only the CPU the main build and the tests leave idle (the main build's serial tail of links and its longest
# units, the tests' waits on child processes), so the cores stay busy without slowing the phases in front.
fuzz_pid=
if command -v clang++ >/dev/null && [[ $FUZZ_SECONDS -gt 0 ]]; then
  (
    # No CUDA in this build (TWINSCOPE_BUILD_EXAMPLES=OFF: nvcc is not even probed): only the fuzz targets, the
    # sample trace writer and the reader's replay test are built, each with just what it links.
    # -O1 under the sanitizers, as libFuzzer's documentation suggests; unity builds as above.
    CC=clang CXX=clang++ nice -n 19 cmake -S . -B "$BUILD-fuzz" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DTWINSCOPE_FUZZ=ON "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g -DNDEBUG" \
      -DTWINSCOPE_FAST_BUILD=ON -DTWINSCOPE_WITH_CUPTI=OFF -DTWINSCOPE_WITH_SANITIZER=OFF -DTWINSCOPE_BUILD_TESTS=ON \
      -DTWINSCOPE_BUILD_EXAMPLES=OFF
    help=$(cmake --build "$BUILD-fuzz" --target help)
    targets=$(grep -oE '^[a-z_]+_fuzzer' <<<"$help" | sort -u || true)
    sample=$(grep -oE '^write_sample_trace' <<<"$help" | head -1 || true)
    echo "$targets" >"$BUILD-fuzz-targets.txt"
    nice -n 19 cmake --build "$BUILD-fuzz" -j "$JOBS" --target reader_fuzz_replay_test $sample $targets
  ) >"$BUILD-fuzz-build.log" 2>&1 &
  fuzz_pid=$!
fi

phase build
cmake --build "$BUILD" -j "$JOBS"
phase ctest
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS" --timeout 600)
phase bench_launch_path
# The launch path's instruction and allocation budget on the application
# thread (deterministic, callgrind; ~40 s): fails if a plain launch costs more
# than 600 instructions above the floor or allocates in steady state.
CHECK=1 scripts/bench_launch_path.sh "$BUILD"

# The Python wheel, built from this build folder (nothing compiled twice),
# checked, installed in a fresh venv, with the CLI end-to-end tests and the
# Python API test run against the installed copy (docs/python.md).
phase wheel
scripts/wheel.sh "$BUILD"

# Bounded fuzzing with libFuzzer (needs clang with its fuzzer runtime), in a
# build where all code runs under AddressSanitizer and UBSan. The reader's fuzz
# replay test (its entry point on mutated real traces) runs there too. (The
# mirror's replay drives the same entry point as mirror_input_fuzzer, which
# runs here from the same corpus.) The fuzz targets run side by side, JOBS at a time.
if [[ -n $fuzz_pid ]]; then
  phase fuzz-build-wait
  if ! wait "$fuzz_pid"; then
    fuzz_pid=
    tail -40 "$BUILD-fuzz-build.log" >&2
    echo "twinscope: the fuzz build failed (log: $BUILD-fuzz-build.log)" >&2
    exit 1
  fi
  fuzz_pid=
  echo "fuzz build: done ($(grep -c '^\[' "$BUILD-fuzz-build.log" || true) steps; log: $BUILD-fuzz-build.log)"
  phase fuzzing
  echo "fuzz replay reader_fuzz_replay_test (ASan, UBSan)"
  "$BUILD-fuzz/bin/reader_fuzz_replay_test" --gtest_brief=1
  fuzz_one() {
    local t=$1
    mkdir -p "$BUILD-fuzz/corpus-$t"
    if [[ $t == mirror_input_fuzzer && -d tests/fuzz/mirror_corpus ]]; then
      cp tests/fuzz/mirror_corpus/* "$BUILD-fuzz/corpus-$t/"
    fi
    if [[ $t == reader_fuzzer ]]; then
      "$BUILD-fuzz/bin/write_sample_trace" "$BUILD-fuzz/corpus-$t/seed.tsc"
    fi
    # A crashing input goes to $BUILD-fuzz/ (crash-*), not into the checkout; add it to the target's seed corpus.
    "$BUILD-fuzz/bin/$t" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -artifact_prefix="$BUILD-fuzz/" \
      "$BUILD-fuzz/corpus-$t" \
      >"$BUILD-fuzz/$t.log" 2>&1
  }
  pids=() names=()
  for t in $(cat "$BUILD-fuzz-targets.txt"); do
    while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
    echo "fuzzing $t for ${FUZZ_SECONDS}s"
    fuzz_one "$t" &
    pids+=($!) names+=("$t")
  done
  failed=0
  for i in "${!pids[@]}"; do
    if wait "${pids[$i]}"; then
      tail -2 "$BUILD-fuzz/${names[$i]}.log"
    else
      echo "twinscope: fuzzing ${names[$i]} failed (log: $BUILD-fuzz/${names[$i]}.log):" >&2
      tail -40 "$BUILD-fuzz/${names[$i]}.log" >&2
      failed=1
    fi
  done
  ((failed == 0)) || exit 1
fi
# Test parts this configuration could not build (configure lists them; under CI=true it fails instead).
if [[ -s $BUILD/skipped-tests.txt ]]; then
  echo "twinscope: all built tests passed; NOT built here, so NOT run (missing prerequisites):"
  sed 's/^/  /' "$BUILD/skipped-tests.txt"
  exit 0
fi
echo "twinscope: all tests passed"
