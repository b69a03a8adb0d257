// Synthetic primary and shadow traces for the join tests: a small program
// model (launches with NVTX paths, shapes, durations and block layouts) that
// both traces are written from, so each test states its known answer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "twinscope/records.h"

namespace twinscope::testing {

// One block of a shadow launch, times relative to the launch's first entry.
struct FakeBlock {
  uint32_t block = 0, sm = 0, order = 0;
  uint64_t enter_ns = 0, exit_ns = 0;
};

struct FakeLaunch {
  std::string kernel = "_Z23reshape_and_cache_flashv";
  std::string path;  // key path ("" = no range)
  uint32_t ordinal = 0;
  Dim3 grid{8, 1, 1}, block{256, 1, 1};
  uint64_t cpu_ns = 0;       // launch time (both processes' own clocks; the shadow adds its offset)
  uint64_t dur_ns = 10'000;  // primary kernel duration
  uint32_t stream = 7;
  bool graph = false;
  uint32_t correlation = 0;  // 0 = own; graph nodes share their launch's
  bool in_primary = true, in_shadow = true;
  bool primary_kernel_record = true;  // false: launch record without its kernel record
  Dim3 shadow_grid{0, 0, 0};          // non-zero: the shadow saw another shape
  std::string shadow_path;            // non-empty: the shadow's key path (renumbered steps, other ids)
  std::string shadow_kernel;          // non-empty: the shadow launched another kernel here (autotuning)
  std::vector<FakeBlock> blocks;      // empty: one block per grid index, in order, 1 us each, round robin on 4 SMs
};

// Default block layout: grid size blocks, block i enters at i*100 ns, runs
// `block_ns`, on SM i % sms, arrival order i.
std::vector<FakeBlock> EvenBlocks(uint32_t n, uint32_t sms, uint64_t block_ns);

// `n` launches of one shape, one per step ("step#0".."step#<n-1>", 1 ms apart, 10 us + 10 ns per step long),
// each of `blocks` even blocks on `sms` SMs (EvenBlocks, 2 us each): the steady run a test then makes slow.
std::vector<FakeLaunch> EvenSteps(int n, uint32_t blocks, uint32_t sms);

// Twelve launches of one 64-block shape ("step#0".."step#11", 10 us each) of which four are slow, one way each:
// launch 3 a straggler block (40 us; block 50 exits 200 us late), 5 on fewer SMs (35 us; 2 SMs), 7 reordered
// (30 us; blocks in reverse order). The "why slow" scene of the report's and the join document's tests.
std::vector<FakeLaunch> SlowLaunches();

struct TwinFiles {
  std::string primary, shadow;
};

struct WriteOptions {
  uint64_t shadow_clock_offset_ns = 5'000'000'000;  // shadow cpu_ns = primary's + this (+ stretch)
  double shadow_stretch = 1.0;                      // the shadow runs slower: its times stretch
  double shadow_keep_fraction = 1.0;                // < 1: the shadow's file is cut there (killed)
  std::vector<std::string> other_kernels;           // primary-only kernels launched between targets
  uint64_t primary_clock_realtime_ns = 0;           // non-zero: the primary header's clock pair {0 -> this}
  uint32_t shadow_every = 1;                        // the sampling the shadow's header records
  std::map<std::string, uint64_t> primary_counters, shadow_counters;  // a collector's counters, set before closing
};

// Writes both traces for `launches` under `dir` (created if needed).
TwinFiles WriteTwin(const std::string& dir, const std::vector<FakeLaunch>& launches, const WriteOptions& o = {});

// A fresh folder for the running test: the temp dir / PREFIX_PID_SUITE_NAME (GoogleTest's current test).
std::string TestDir(const std::string& prefix);

}  // namespace twinscope::testing
