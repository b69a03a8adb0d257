// The rank comparison of a run with launcher ranks (docs/join.md, "Ranks"): per top-level NVTX range
// (a step), each rank's time in it and the slowest rank; for a step where one rank stands out, what
// that rank did differently (more kernels, more launches of the target, fewer SMs, fewer blocks, a
// straggler block). Pure logic over per-rank inputs; CUDA-free, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stats/block_stats.h"
#include "twinscope/records.h"

namespace twinscope::procs {

// One rank's time in one top-level range instance (the primary's kernels there).
struct RankStep {
  std::string range;                             // "step 17#0"
  uint64_t first_start_ns = 0, last_end_ns = 0;  // GPU span of its kernels (CUPTI clock)
  uint64_t kernels = 0, kernel_ns = 0;
};

// One launch of a target kernel on one rank, with the shadow's block structure where it was joined.
struct RankTargetLaunch {
  std::string range;  // top-level range instance
  std::string key;    // the rest of the launch's identity: path, kernel, ordinal
  std::string kernel;
  uint64_t dur_ns = 0;  // primary's duration
  Dim3 grid{0, 0, 0};
  bool have_blocks = false;  // an exact match with the shadow's blocks
  stats::LaunchBlockStats blocks;
};

struct RankInput {
  int64_t rank = 0;
  std::vector<RankStep> steps;
  std::vector<RankTargetLaunch> targets;
};

// A rank's work in a step is its kernels' time there (sum of durations): ranks sharing a GPU time-slice
// it, so a step's span (first kernel start to last kernel end) holds the other ranks' work too and is
// compared only as a second figure.
struct RankStepRow {
  std::string range;
  std::vector<uint64_t> span_ns;    // per rank, in RankComparison::ranks order (0: rank had no kernel there)
  std::vector<uint64_t> kernel_ns;  // per rank: its kernels' time in the step
  std::vector<uint64_t> kernels;    // per rank: its kernels in the step (0: the rank was not in it)
  size_t slowest = 0;               // index into ranks: the most kernel time
  double ratio = 0;                 // slowest kernel time / median kernel time of the other ranks
  bool stands_out = false;          // ratio >= options.min_ratio
  size_t span_slowest = 0;          // index into ranks: the longest span
  double span_ratio = 0;            // its span / median span of the others
  bool waited = false;              // span_ratio >= min_ratio while no rank's kernel time stood out
  std::string text;                 // for a step that stands out: who, how much, why
};

struct RankComparison {
  std::vector<int64_t> ranks;
  std::vector<RankStepRow> steps;       // steps present on at least two ranks, in the first rank's order
  std::vector<uint64_t> slowest_in;     // per rank: steps where it was the slowest
  std::vector<uint64_t> stands_out_in;  // per rank: steps where it stood out
  std::vector<uint64_t> waited_in;      // per rank: steps where only its span stood out (waits, time-slicing)
  std::vector<std::string> findings;    // the texts of the steps that stand out, at most max_findings
  uint64_t steps_standing_out = 0;
  double min_ratio = 1.2;  // the RankOptions::min_ratio it was made with
};

struct RankOptions {
  double min_ratio = 1.2;  // a rank stands out when its kernel time is this many times the others' median
  size_t max_findings = 20;
};

RankComparison CompareRanks(const std::vector<RankInput>& ranks, const RankOptions& options = {});

}  // namespace twinscope::procs
