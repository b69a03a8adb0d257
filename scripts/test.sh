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

scripts/setup-deps.sh
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWINSCOPE_BUILD_TESTS=ON
cmake --build "$BUILD" -j "$JOBS"
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS" --timeout 600)
# The launch path's instruction and allocation budget on the application
# thread (deterministic, callgrind; ~40 s): fails if a plain launch costs more
# than 600 instructions above the floor or allocates in steady state.
CHECK=1 scripts/bench_launch_path.sh "$BUILD"

# The Python wheel, built from this build folder (nothing compiled twice),
# checked, installed in a fresh venv, with the CLI end-to-end tests and the
# Python API test run against the installed copy (docs/python.md).
scripts/wheel.sh "$BUILD"

# Bounded fuzzing with libFuzzer (needs clang with its fuzzer runtime), in a
# build where all code runs under AddressSanitizer and UBSan. The reader's fuzz
# replay test (its entry point on mutated real traces) runs there too. (The
# mirror's replay drives the same entry point as mirror_input_fuzzer, which
# runs here from the same corpus.)
if command -v clang++ >/dev/null && [[ $FUZZ_SECONDS -gt 0 ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD-fuzz" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWINSCOPE_FUZZ=ON \
    -DTWINSCOPE_WITH_CUPTI=OFF -DTWINSCOPE_WITH_SANITIZER=OFF -DTWINSCOPE_BUILD_TESTS=ON >/dev/null
  cmake --build "$BUILD-fuzz" -j "$JOBS" --target reader_fuzz_replay_test
  echo "fuzz replay reader_fuzz_replay_test (ASan, UBSan)"
  "$BUILD-fuzz/bin/reader_fuzz_replay_test" --gtest_brief=1
  targets=$(cmake --build "$BUILD-fuzz" --target help | grep -oE '^[a-z_]+_fuzzer' | sort -u || true)
  for t in $targets; do
    cmake --build "$BUILD-fuzz" -j "$JOBS" --target "$t"
    mkdir -p "$BUILD-fuzz/corpus-$t"
    if [[ $t == mirror_input_fuzzer && -d tests/fuzz/mirror_corpus ]]; then
      cp tests/fuzz/mirror_corpus/* "$BUILD-fuzz/corpus-$t/"
    fi
    if [[ $t == reader_fuzzer ]]; then
      cmake --build "$BUILD-fuzz" -j "$JOBS" --target write_sample_trace
      "$BUILD-fuzz/bin/write_sample_trace" "$BUILD-fuzz/corpus-$t/seed.tsc"
    fi
    echo "fuzzing $t for ${FUZZ_SECONDS}s"
    "$BUILD-fuzz/bin/$t" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 "$BUILD-fuzz/corpus-$t" 2>&1 | tail -3
  done
fi
echo "twinscope: all tests passed"
