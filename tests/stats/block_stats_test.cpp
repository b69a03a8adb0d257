#include "stats/block_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace twinscope::stats {
namespace {

TEST(PercentileSorted, NearestRank) {
  std::vector<uint64_t> v(100);
  std::iota(v.begin(), v.end(), 1);  // 1..100
  EXPECT_EQ(PercentileSorted(v, 50), 50u);
  EXPECT_EQ(PercentileSorted(v, 99), 99u);
  EXPECT_EQ(PercentileSorted(v, 100), 100u);
  EXPECT_EQ(PercentileSorted(v, 0), 1u);
  EXPECT_EQ(PercentileSorted({1, 2, 3, 4}, 50), 2u);
  EXPECT_EQ(PercentileSorted({10, 20, 30}, 50), 20u);
  EXPECT_EQ(PercentileSorted({7}, 99), 7u);
  EXPECT_EQ(PercentileSorted({}, 50), 0u);
  // p99 of 1000 values picks the 990th.
  std::vector<uint64_t> w(1000);
  std::iota(w.begin(), w.end(), 0);
  EXPECT_EQ(PercentileSorted(w, 99), 989u);
}

// O(n^2) reference: tau-b between position and value.
double BruteTau(const std::vector<uint64_t>& v, uint64_t* discordant) {
  int64_t c = 0, d = 0, ties = 0;
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t j = i + 1; j < v.size(); ++j) {
      if (v[i] < v[j])
        ++c;
      else if (v[i] > v[j])
        ++d;
      else
        ++ties;
    }
  *discordant = d;
  double n0 = static_cast<double>(v.size()) * (v.size() - 1) / 2;
  return (c - d) / std::sqrt(n0 * (n0 - ties));
}

TEST(CorrelateWithPosition, OrderedReversedAndOneSwap) {
  auto in_order = CorrelateWithPosition({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(in_order.discordant, 0u);
  EXPECT_EQ(in_order.pairs, 45u);
  EXPECT_DOUBLE_EQ(in_order.kendall_tau, 1.0);

  auto reversed = CorrelateWithPosition({9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  EXPECT_EQ(reversed.discordant, 45u);
  EXPECT_DOUBLE_EQ(reversed.kendall_tau, -1.0);

  auto one_swap = CorrelateWithPosition({1, 0, 2, 3});
  EXPECT_EQ(one_swap.discordant, 1u);
  EXPECT_NEAR(one_swap.kendall_tau, (5.0 - 1.0) / 6.0, 1e-12);
}

TEST(CorrelateWithPosition, TiesUseTauB) {
  auto r = CorrelateWithPosition({0, 0, 1});
  EXPECT_EQ(r.tied, 1u);
  EXPECT_EQ(r.discordant, 0u);
  EXPECT_NEAR(r.kendall_tau, 2.0 / std::sqrt(3.0 * 2.0), 1e-12);
}

TEST(CorrelateWithPosition, UndefinedForFewOrEqualValues) {
  EXPECT_TRUE(std::isnan(CorrelateWithPosition({}).kendall_tau));
  EXPECT_TRUE(std::isnan(CorrelateWithPosition({5}).kendall_tau));
  EXPECT_TRUE(std::isnan(CorrelateWithPosition({3, 3, 3}).kendall_tau));
}

TEST(CorrelateWithPosition, MatchesBruteForceOnRandomSequences) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    size_t n = 2 + rng() % 300;
    std::vector<uint64_t> v(n);
    for (auto& x : v) x = rng() % (trial % 2 ? n : 20);  // odd trials: mostly distinct; even: many ties
    uint64_t d = 0;
    double tau = BruteTau(v, &d);
    auto r = CorrelateWithPosition(v);
    EXPECT_EQ(r.discordant, d) << "trial " << trial;
    if (std::isnan(tau)) {
      EXPECT_TRUE(std::isnan(r.kendall_tau));
    } else {
      EXPECT_NEAR(r.kendall_tau, tau, 1e-9) << "trial " << trial;
    }
  }
}

BlockRecord Block(uint32_t linear, uint32_t order, uint32_t sm, uint64_t enter, uint64_t exit) {
  BlockRecord b{};
  b.launch_seq = 7;
  b.block_linear = linear;
  b.x = linear;
  b.order = order;
  b.sm = sm;
  b.enter_ns = enter;
  b.exit_ns = exit;
  return b;
}

TEST(ComputeLaunchBlockStats, FullLaunch) {
  // 6 blocks on 3 SMs. Arrival order by block index: 0,1,3,2,4,5 (one inversion).
  // SM 10 gets 3 blocks, SM 11 two, SM 12 one. Block 4 exits last (straggler, SM 11).
  std::vector<BlockRecord> blocks = {
      Block(0, 0, 10, 1000, 1100), Block(1, 1, 11, 1001, 1150), Block(3, 2, 12, 1002, 1120),
      Block(2, 3, 10, 1003, 1130), Block(4, 4, 11, 1004, 1900), Block(5, 5, 10, 1005, 1140),
  };
  // Any input order gives the same result.
  std::reverse(blocks.begin(), blocks.end());
  LaunchBlockStats s = ComputeLaunchBlockStats(7, Dim3{3, 2, 1}, blocks);
  EXPECT_EQ(s.seq, 7u);
  EXPECT_EQ(s.blocks_expected, 6u);
  EXPECT_EQ(s.blocks_seen, 6u);
  EXPECT_EQ(s.blocks_unique, 6u);
  EXPECT_EQ(s.duplicates, 0u);
  EXPECT_EQ(s.out_of_grid, 0u);
  EXPECT_EQ(s.sms_used, 3u);
  EXPECT_EQ(s.blocks_per_sm_min, 1u);
  EXPECT_EQ(s.blocks_per_sm_median, 2u);
  EXPECT_EQ(s.blocks_per_sm_max, 3u);
  EXPECT_EQ(s.inversions, 1u);
  EXPECT_NEAR(s.kendall_tau, (14.0 - 1.0) / 15.0, 1e-12);
  EXPECT_EQ(s.first.block_linear, 0u);
  EXPECT_EQ(s.first.sm, 10u);
  EXPECT_EQ(s.last.block_linear, 5u);
  EXPECT_EQ(s.straggler.block_linear, 4u);
  EXPECT_EQ(s.straggler.sm, 11u);
  EXPECT_EQ(s.straggler.exit_ns, 1900u);
  EXPECT_EQ(s.first_enter_ns, 1000u);
  EXPECT_EQ(s.last_exit_ns, 1900u);
  // Exits sorted: 1100 1120 1130 1140 1150 1900 -> nearest-rank median = 1130.
  EXPECT_EQ(s.median_exit_ns, 1130u);
  EXPECT_EQ(s.tail_ns, 1900u - 1130u);
  EXPECT_EQ(s.span_ns, 900u);
  EXPECT_EQ(s.block_duration_max_ns, 896u);
  EXPECT_EQ(s.invalid_times, 0u);
}

TEST(ComputeLaunchBlockStats, MissingDuplicateOutOfGridAndInvalid) {
  std::vector<BlockRecord> blocks = {
      Block(0, 0, 1, 100, 200), Block(0, 1, 1, 100, 200),  // duplicate of block 0
      Block(2, 2, 2, 110, 0),                              // never exited: invalid time
      Block(9, 3, 2, 120, 130),                            // outside a 4-block grid
  };
  LaunchBlockStats s = ComputeLaunchBlockStats(1, Dim3{4, 1, 1}, blocks);
  EXPECT_EQ(s.blocks_expected, 4u);
  EXPECT_EQ(s.blocks_seen, 4u);
  EXPECT_EQ(s.blocks_unique, 3u);
  EXPECT_EQ(s.duplicates, 1u);
  EXPECT_EQ(s.out_of_grid, 1u);
  EXPECT_EQ(s.invalid_times, 1u);
  EXPECT_EQ(s.sms_used, 2u);
  EXPECT_EQ(s.straggler.exit_ns, 200u);
  EXPECT_EQ(s.straggler.block_linear, 0u);
  EXPECT_EQ(s.last_exit_ns, 200u);
  EXPECT_EQ(s.first_enter_ns, 100u);
}

TEST(ComputeLaunchBlockStats, NoBlocksAndUnknownGrid) {
  LaunchBlockStats s = ComputeLaunchBlockStats(3, Dim3{5, 1, 1}, {});
  EXPECT_EQ(s.blocks_expected, 5u);
  EXPECT_EQ(s.blocks_seen, 0u);
  EXPECT_EQ(s.sms_used, 0u);
  EXPECT_TRUE(std::isnan(s.kendall_tau));

  LaunchBlockStats u = ComputeLaunchBlockStats(4, Dim3{0, 0, 0}, {Block(3, 0, 0, 5, 6)});
  EXPECT_EQ(u.blocks_expected, 0u);
  EXPECT_EQ(u.out_of_grid, 0u);  // unknown grid: not judged
  EXPECT_EQ(u.blocks_seen, 1u);
}

TEST(ComputeLaunchBlockStats, ReverseOrderLaunch) {
  std::vector<BlockRecord> blocks;
  for (uint32_t i = 0; i < 100; ++i) blocks.push_back(Block(i, 99 - i, i % 8, 1000 + (99 - i), 2000 + i));
  LaunchBlockStats s = ComputeLaunchBlockStats(0, Dim3{100, 1, 1}, blocks);
  EXPECT_EQ(s.inversions, 4950u);
  EXPECT_DOUBLE_EQ(s.kendall_tau, -1.0);
  EXPECT_EQ(s.first.block_linear, 99u);
  EXPECT_EQ(s.last.block_linear, 0u);
  EXPECT_EQ(s.straggler.block_linear, 99u);
  EXPECT_EQ(s.sms_used, 8u);
  EXPECT_EQ(s.blocks_per_sm_min, 12u);
  EXPECT_EQ(s.blocks_per_sm_max, 13u);
}

}  // namespace
}  // namespace twinscope::stats
