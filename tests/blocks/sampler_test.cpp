// The block probe's sampling decisions (every N, max launches, per second,
// budget, catch-up after an unpatched module) on a fake clock.
#include "blocks/sampler.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace twinscope::blocks {
namespace {

constexpr uint64_t kMs = 1000000;

std::vector<uint64_t> TracedIndices(Sampler& s, int n, uint64_t step_ns = 1000, bool patched = true) {
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i)
    if (s.OnLaunch(1000 + uint64_t(i) * step_ns, patched) & kSampleTaken) out.push_back(uint64_t(i));
  return out;
}

TEST(Sampler, EveryNthAndMaxLaunches) {
  Sampler s(SamplingOptions{3, 2});
  // Matching launches 0 and 3 traced; 6 and 9 would be, but max_launches = 2.
  EXPECT_EQ(TracedIndices(s, 10), (std::vector<uint64_t>{0, 3}));
  EXPECT_EQ(s.matching(), 10u);
  EXPECT_EQ(s.traced(), 2u);
  EXPECT_TRUE(s.done());
  EXPECT_FALSE(s.WantsNext(1 << 30));
}

TEST(Sampler, EveryOneTracesAllAndWantsEveryNext) {
  Sampler s(SamplingOptions{});
  EXPECT_TRUE(s.WantsNext(0));
  EXPECT_EQ(TracedIndices(s, 5).size(), 5u);
  EXPECT_TRUE(s.WantsNext(0));
  EXPECT_FALSE(s.options().any());
}

TEST(Sampler, WantsNextPredictsTheNextDecision) {
  // Toggle mode arms a module when WantsNext says so: it must agree with what
  // OnLaunch then decides, for every policy, at the same time.
  std::mt19937_64 rng(7);
  for (SamplingOptions o : {SamplingOptions{5, 0}, SamplingOptions{3, 4}, SamplingOptions{1, 0, 2000.0},
                            SamplingOptions{2, 0, 0, 10.0}, SamplingOptions{4, 0, 500.0, 5.0}}) {
    Sampler s(o);
    uint64_t now = 1000;
    for (int i = 0; i < 2000; ++i) {
      now += rng() % (2 * kMs);
      const bool want = s.WantsNext(now);
      const uint32_t why = s.OnLaunch(now, true);
      ASSERT_EQ(want, (why & kSampleTaken) != 0) << "launch " << i << " every " << o.every;
      if (why & kSampleTaken) s.AddCost(rng() % (3 * kMs), now);
    }
  }
}

TEST(Sampler, CandidateThatMeetsAnUnpatchedModuleIsTakenLaterAsCatchUp) {
  Sampler s(SamplingOptions{4});
  EXPECT_EQ(s.OnLaunch(1, true), uint32_t{kSampleTaken});  // 0
  EXPECT_EQ(s.OnLaunch(2, true), uint32_t{kSampleNone});   // 1
  EXPECT_EQ(s.OnLaunch(3, true), uint32_t{kSampleNone});   // 2
  EXPECT_FALSE(s.WantsNext(4)) << "index 3 is no candidate";
  EXPECT_EQ(s.OnLaunch(4, true), uint32_t{kSampleNone});  // 3
  EXPECT_TRUE(s.WantsNext(5));
  EXPECT_EQ(s.OnLaunch(5, false), uint32_t{kSampleNone});  // 4: candidate, module unpatched
  EXPECT_EQ(s.met_unpatched(), 1u);
  EXPECT_TRUE(s.WantsNext(6)) << "the candidate is still pending";
  EXPECT_EQ(s.OnLaunch(6, true), kSampleTaken | kSampleCatchUp);  // 5 takes it
  EXPECT_EQ(s.OnLaunch(7, true), uint32_t{kSampleNone});          // 6
  EXPECT_EQ(s.OnLaunch(8, true), uint32_t{kSampleNone});          // 7
  EXPECT_EQ(s.OnLaunch(9, true), uint32_t{kSampleTaken});         // 8: on schedule again
}

TEST(Sampler, PerSecondKeepsTheRate) {
  Sampler s(SamplingOptions{1, 0, 100.0});  // at most one per 10 ms
  // 1000 launches 1 ms apart: one second, so about 100 traced, each >= 10 ms after the last.
  std::vector<uint64_t> t = TracedIndices(s, 1000, kMs);
  EXPECT_GE(t.size(), 90u);
  EXPECT_LE(t.size(), 101u);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_GE(t[i] - t[i - 1], 10u);
}

TEST(Sampler, PerSecondAndEveryCombine) {
  Sampler s(SamplingOptions{3, 0, 100.0});
  std::vector<uint64_t> t = TracedIndices(s, 300, kMs);  // 0.3 s
  EXPECT_GE(t.size(), 25u);
  EXPECT_LE(t.size(), 31u);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_GE(t[i] - t[i - 1], 10u);
}

// The budget model: credit accrues at pct of program time and pays for each
// sample's reported cost; over a long run the spent cost stays within pct of
// the program's time, whatever the cost and the launch rate.
TEST(Sampler, BudgetKeepsTheOverheadWithinThePercentage) {
  for (double pct : {1.0, 5.0, 20.0}) {
    for (uint64_t cost : {uint64_t{50000}, uint64_t{400000}, uint64_t{3 * kMs}}) {
      Sampler s(SamplingOptions{1, 0, 0, pct});
      uint64_t now = 0;
      for (int i = 0; i < 200000; ++i) {
        now += 20000;  // a launch every 20 us of program time
        if (s.OnLaunch(now, true) & kSampleTaken) {
          now += cost;  // the probe blocked the program this long
          s.AddCost(cost, now);
        }
      }
      const double used = 100.0 * double(s.cost_ns()) / double(s.program_ns(now));
      // Within the budget but for the one sample that may overdraw it.
      EXPECT_LE(double(s.cost_ns()), pct / 100.0 * double(s.program_ns(now)) + double(s.max_cost_ns()))
          << pct << "% cost " << cost;
      EXPECT_EQ(s.max_cost_ns(), cost);
      EXPECT_GE(used, pct * 0.8) << "the budget should be used, not wasted: " << pct << "% cost " << cost;
      EXPECT_GT(s.traced(), 1u);
      EXPECT_EQ(s.estimate_ns(), cost);
    }
  }
}

TEST(Sampler, BudgetIdleTimeBuysNoBurst) {
  Sampler s(SamplingOptions{1, 0, 0, 5.0});
  EXPECT_TRUE(s.OnLaunch(0, true) & kSampleTaken);
  s.AddCost(100000, 100000);
  // 100 s without launches, then a dense stretch: the credit is capped at
  // 5% of 100 ms (5 ms), so at most ~50 samples of 100 us come at once.
  uint64_t now = 100 * 1000 * kMs;
  int burst = 0;
  for (int i = 0; i < 1000; ++i) {
    now += 1000;
    if (s.OnLaunch(now, true) & kSampleTaken) {
      ++burst;
      now += 100000;
      s.AddCost(100000, now);
    }
  }
  EXPECT_LE(burst, 60);
  EXPECT_GE(burst, 40);
}

TEST(Sampler, FirstCandidateIsTakenBeforeAnyCostIsKnown) {
  Sampler s(SamplingOptions{1, 0, 0, 5.0});
  EXPECT_TRUE(s.WantsNext(0));
  EXPECT_EQ(s.OnLaunch(0, true), kSampleTaken | kSampleBudget);
  s.AddCost(kMs, kMs);
  EXPECT_FALSE(s.WantsNext(kMs + 1)) << "in debt: 20 ms of program time (at 5%) must pay for 1 ms";
  EXPECT_FALSE(s.WantsNext(kMs + 10 * kMs));
  EXPECT_TRUE(s.WantsNext(kMs + 21 * kMs));
}

}  // namespace
}  // namespace twinscope::blocks
