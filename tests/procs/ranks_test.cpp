// The rank comparison on hand-built ranks: the slowest rank per step and the cause named.
#include "procs/ranks.h"

#include <gtest/gtest.h>

namespace twinscope::procs {
namespace {

// A step whose kernels take half its span unless `kernel_ns` says otherwise.
RankStep Step(const std::string& range, uint64_t start, uint64_t span, uint64_t kernels, uint64_t kernel_ns = 0) {
  return RankStep{range, start, start + span, kernels, kernel_ns ? kernel_ns : span / 2};
}

RankTargetLaunch Target(const std::string& range, uint32_t ordinal, uint32_t sms, uint64_t blocks,
                        uint64_t tail_ns = 10, uint64_t span_ns = 100) {
  RankTargetLaunch t;
  t.range = range;
  t.kernel = "K";
  t.key = range + "|K|" + std::to_string(ordinal);
  t.dur_ns = 1000;
  t.have_blocks = true;
  t.blocks.sms_used = sms;
  t.blocks.blocks_unique = blocks;
  t.blocks.tail_ns = tail_ns;
  t.blocks.span_ns = span_ns;
  t.blocks.straggler.block_linear = 7;
  t.blocks.straggler.sm = 3;
  return t;
}

TEST(Ranks, NothingStandsOutWhenRanksAreEven) {
  std::vector<RankInput> in(3);
  for (int r = 0; r < 3; ++r) {
    in[r].rank = r;
    for (int s = 0; s < 5; ++s) in[r].steps.push_back(Step("step " + std::to_string(s) + "#0", s * 1000, 100 + r, 4));
  }
  RankComparison c = CompareRanks(in);
  ASSERT_EQ(c.steps.size(), 5u);
  EXPECT_EQ(c.steps_standing_out, 0u);
  EXPECT_TRUE(c.findings.empty());
  EXPECT_EQ(c.slowest_in[2], 5u);  // always slowest by a hair, never standing out
  // The others' median is the lower middle value (100 of 100, 101).
  EXPECT_NEAR(c.steps[0].ratio, 102.0 / 100.0, 1e-9);
}

TEST(Ranks, ExtraWorkIsNamed) {
  std::vector<RankInput> in(2);
  for (int r = 0; r < 2; ++r) {
    in[r].rank = r;
    in[r].steps.push_back(Step("step 0#0", 0, 1000, 4));
    in[r].targets.push_back(Target("step 0#0", 0, 132, 1000));
  }
  in[1].steps[0] = Step("step 0#0", 0, 4000, 16);
  for (uint32_t k = 1; k < 4; ++k) in[1].targets.push_back(Target("step 0#0", k, 132, 1000));
  RankComparison c = CompareRanks(in);
  ASSERT_EQ(c.findings.size(), 1u);
  const std::string& f = c.findings[0];
  EXPECT_NE(f.find("rank 1 was slowest in step 0: its kernels took 0.002 ms against 0.001 ms (4.00x the other ranks' "
                   "median; span 0.004 ms against 0.001 ms)"),
            std::string::npos)
      << f;
  EXPECT_NE(f.find("it ran 16 kernels there, the others 4"), std::string::npos) << f;
  EXPECT_NE(f.find("it launched K 4 times, the others 1"), std::string::npos) << f;
  EXPECT_EQ(c.stands_out_in[1], 1u);
}

TEST(Ranks, FewerSmsOnTheSlowRankAreNamed) {
  std::vector<RankInput> in(3);
  for (int r = 0; r < 3; ++r) {
    in[r].rank = r;
    in[r].steps.push_back(Step("step 17#0", 0, r == 2 ? 2000 : 1000, 4));
    in[r].targets.push_back(Target("step 17#0", 0, r == 2 ? 60 : 132, 1000));
  }
  RankComparison c = CompareRanks(in);
  ASSERT_EQ(c.findings.size(), 1u);
  EXPECT_NE(c.findings[0].find("rank 2 was slowest in step 17"), std::string::npos) << c.findings[0];
  EXPECT_NE(c.findings[0].find("its launch of K used 60 SMs; the others used 132"), std::string::npos) << c.findings[0];
}

TEST(Ranks, AStragglerBlockOnTheSlowRankIsNamed) {
  std::vector<RankInput> in(2);
  for (int r = 0; r < 2; ++r) {
    in[r].rank = r;
    in[r].steps.push_back(Step("decode#3", 0, r == 0 ? 3000 : 1000, 4));
    in[r].targets.push_back(r == 0 ? Target("decode#3", 0, 132, 1000, 80, 100) : Target("decode#3", 0, 132, 1000));
  }
  RankComparison c = CompareRanks(in);
  ASSERT_EQ(c.findings.size(), 1u);
  EXPECT_NE(c.findings[0].find("rank 0 was slowest in decode#3"), std::string::npos) << c.findings[0];
  EXPECT_NE(c.findings[0].find("one block held its launch of K up: block 7 on SM 3 (tail 80%"), std::string::npos)
      << c.findings[0];
}

TEST(Ranks, StepsOnOneRankOnlyAreNotCompared) {
  std::vector<RankInput> in(2);
  in[0].rank = 0;
  in[1].rank = 1;
  in[0].steps.push_back(Step("warmup#0", 0, 5000, 9));
  in[0].steps.push_back(Step("step 0#0", 0, 100, 1));
  in[1].steps.push_back(Step("step 0#0", 0, 100, 1));
  RankComparison c = CompareRanks(in);
  ASSERT_EQ(c.steps.size(), 1u);
  EXPECT_EQ(c.steps[0].range, "step 0#0");
}

TEST(Ranks, SameKernelsEachSlowerIsSaid) {
  std::vector<RankInput> in(2);
  for (int r = 0; r < 2; ++r) {
    in[r].rank = r;
    in[r].steps.push_back(Step("s#0", 0, r ? 3000 : 1000, 4));
  }
  RankComparison c = CompareRanks(in);
  ASSERT_EQ(c.findings.size(), 1u);
  EXPECT_NE(c.findings[0].find("the same kernels, each slower"), std::string::npos) << c.findings[0];
}

// Ranks sharing a GPU: a rank's span holds the other's time slices. A longer span with the same kernel
// time is counted as a wait, never listed as the slow rank's finding.
TEST(Ranks, ALongerSpanWithTheSameKernelTimeIsAWaitNotAFinding) {
  std::vector<RankInput> in(2);
  for (int r = 0; r < 2; ++r) {
    in[r].rank = r;
    in[r].steps.push_back(Step("s#0", 0, r ? 3300 : 1000, 4, 220));
  }
  RankComparison c = CompareRanks(in);
  EXPECT_TRUE(c.findings.empty());
  EXPECT_EQ(c.steps_standing_out, 0u);
  ASSERT_EQ(c.steps.size(), 1u);
  EXPECT_TRUE(c.steps[0].waited);
  EXPECT_EQ(c.waited_in[1], 1u);
  EXPECT_NEAR(c.steps[0].span_ratio, 3.3, 1e-9);
}

}  // namespace
}  // namespace twinscope::procs
