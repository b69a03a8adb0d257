// Statistics of one traced launch's thread blocks (shadow traces): coverage,
// SM spread, scheduling order and the straggler. Pure functions over records;
// no I/O, no state. Thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "twinscope/records.h"

namespace twinscope::stats {

// Nearest-rank percentile of an ascending-sorted vector: the smallest value
// v[i] such that at least p% of the values are <= v[i]. p in [0, 100]. 0 for
// an empty vector.
uint64_t PercentileSorted(const std::vector<uint64_t>& sorted, double p);

// Order statistics of a sequence of ranks: `discordant` pairs i < j with
// seq[i] > seq[j] (inversions), `tied` pairs with seq[i] == seq[j], and
// Kendall's tau-b between position and value (NaN when undefined, i.e. fewer
// than two values or all values equal). O(n log n).
struct RankCorrelation {
  uint64_t pairs = 0;
  uint64_t discordant = 0;
  uint64_t tied = 0;
  double kendall_tau = 0;
};
RankCorrelation CorrelateWithPosition(std::vector<uint64_t> seq);

struct BlockRef {
  uint32_t block_linear = 0;
  uint32_t sm = 0;
  uint32_t order = 0;
  uint64_t enter_ns = 0;
  uint64_t exit_ns = 0;
};

// Everything `twinscope stats` says about one traced launch. Times are the
// block records' GPU clock (ns).
struct LaunchBlockStats {
  uint64_t seq = 0;
  uint64_t blocks_expected = 0;  // grid.x * grid.y * grid.z (0 if the launch record is missing)
  uint64_t blocks_seen = 0;      // block records, duplicates included
  uint64_t blocks_unique = 0;    // distinct block indices
  uint64_t duplicates = 0;       // blocks_seen - blocks_unique
  uint64_t out_of_grid = 0;      // block index >= blocks_expected (when known)
  uint64_t invalid_times = 0;    // enter or exit 0, or exit < enter
  uint32_t sms_used = 0;
  uint64_t blocks_per_sm_min = 0, blocks_per_sm_median = 0, blocks_per_sm_max = 0;
  // Arrival order (BlockRecord::order) against block index: inversions are
  // pairs of blocks that arrived in the opposite order of their indices;
  // tau = 1 when blocks arrived strictly in index order, -1 when reversed.
  uint64_t inversions = 0;
  double kendall_tau = 0;
  BlockRef first;               // lowest arrival order
  BlockRef last;                // highest arrival order
  BlockRef straggler;           // latest exit (valid times only)
  uint64_t first_enter_ns = 0;  // earliest valid enter
  uint64_t last_exit_ns = 0;    // latest valid exit
  uint64_t median_exit_ns = 0;
  uint64_t span_ns = 0;  // last_exit - first_enter
  uint64_t tail_ns = 0;  // last_exit - median_exit
  uint64_t block_duration_p50_ns = 0;
  uint64_t block_duration_max_ns = 0;
};

// Computes the statistics of one launch from its block records. `grid` is the
// launch's grid (all zero if unknown). Any order of `blocks` gives the same result.
LaunchBlockStats ComputeLaunchBlockStats(uint64_t seq, Dim3 grid, const std::vector<BlockRecord>& blocks);

}  // namespace twinscope::stats
