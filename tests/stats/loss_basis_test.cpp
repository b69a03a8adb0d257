// The loss verdict's basis: final counters when the trace has a summary; for a
// trace without one (a killed process), what the records in the file prove,
// beside the last counters, with the reason; counters again when the records
// cannot prove it.
#include <gtest/gtest.h>

#include "stats/trace_stats.h"
#include "twinscope/counters.h"

namespace twinscope::stats {
namespace {

nlohmann::json Status(std::initializer_list<std::pair<const char*, uint64_t>> c, uint64_t monotonic_ns = 0) {
  nlohmann::json j = {{"counters", nlohmann::json::object()}};
  for (auto& [k, v] : c) j["counters"][k] = v;
  if (monotonic_ns) j["monotonic_ns"] = monotonic_ns;
  return j;
}

LaunchRecord BlockLaunch(uint64_t seq, uint32_t grid = 1, uint32_t blocks_recorded = 0) {
  LaunchRecord r{};
  r.seq = seq;
  r.grid = {grid, 1, 1};
  r.block = {32, 1, 1};
  r.blocks_recorded = blocks_recorded;
  return r;
}

KernelRecord Kernel() {
  KernelRecord k{};
  k.start_ns = 100;
  k.end_ns = 200;
  return k;
}

BlockRecord Block(uint64_t seq, uint32_t linear) {
  BlockRecord b{};
  b.launch_seq = seq;
  b.block_linear = linear;
  b.order = linear;
  b.enter_ns = 1000 + linear;
  b.exit_ns = 2000 + linear;
  return b;
}

const nlohmann::json kPrimary = {{"role", "primary"}, {"start_monotonic_ns", 1'000'000'000}};
const nlohmann::json kShadow = {{"role", "shadow"}, {"start_monotonic_ns", 1'000'000'000}};
ReadReport NoSummary() {
  ReadReport r;
  r.end = ReadEnd::kNoSummary;
  return r;
}

// 6 launches and 4 kernel records, a STATUS, then 4 launches and 3 kernels.
void FeedKilledPrimary(StatsBuilder& b, bool final_status) {
  for (uint64_t i = 0; i < 6; ++i) b.OnLaunch(BlockLaunch(i));
  for (int i = 0; i < 4; ++i) b.OnKernel(Kernel());
  b.OnStatus(Status({{counters::kLaunchesSeen, 5}, {counters::kKernelRecords, 4}}, 3'500'000'000), final_status);
  for (uint64_t i = 6; i < 10; ++i) b.OnLaunch(BlockLaunch(i));
  for (int i = 0; i < 3; ++i) b.OnKernel(Kernel());
}

TEST(LossBasis, WithoutSummaryTheRecordsInTheFileDecideBesideTheLastCounters) {
  StatsBuilder b;
  FeedKilledPrimary(b, /*final_status=*/false);
  TraceStats s = b.Finish({}, kPrimary, NoSummary());
  const LossAccounting& l = s.loss;
  EXPECT_EQ(l.basis, LossBasis::kFile);
  EXPECT_TRUE(l.have_counters);
  EXPECT_FALSE(l.counters_final);
  EXPECT_EQ(l.status_after_start_ns, 2'500'000'000);
  EXPECT_EQ(l.missing_counters, 1);  // 5 seen, 4 delivered
  EXPECT_EQ(l.file.launch_records, 10u);
  EXPECT_EQ(l.file.kernel_records, 7u);
  EXPECT_EQ(l.missing_file, 3);
  EXPECT_EQ(l.missing, 3);  // the verdict: the file's
  EXPECT_EQ(l.file.launch_records_after_status, 4u);
  EXPECT_EQ(l.file.kernel_records_after_status, 3u);
  EXPECT_NE(l.basis_reason.find("no summary"), std::string::npos) << l.basis_reason;
  EXPECT_NE(l.basis_reason.find("2.50 s after the start"), std::string::npos) << l.basis_reason;
  EXPECT_NE(l.basis_reason.find("older than 4 launch and 3 kernel records"), std::string::npos) << l.basis_reason;

  bool found = false;
  for (const auto& p : StrictProblems(s))
    found |= p.find("3 launch records in the file without a kernel record in the file") != std::string::npos;
  EXPECT_TRUE(found);

  nlohmann::json j = StatsToJson(s, 0);
  EXPECT_EQ(j["loss"]["basis"], "file");
  EXPECT_EQ(j["loss"]["missing"], 3);
  EXPECT_EQ(j["loss"]["counters"]["present"], true);
  EXPECT_EQ(j["loss"]["counters"]["final"], false);
  EXPECT_EQ(j["loss"]["counters"]["launches_seen"], 5);
  EXPECT_EQ(j["loss"]["counters"]["kernel_records"], 4);
  EXPECT_EQ(j["loss"]["counters"]["missing"], 1);
  EXPECT_EQ(j["loss"]["counters"]["taken_after_start_ns"], 2'500'000'000);
  EXPECT_EQ(j["loss"]["file"]["launch_records"], 10);
  EXPECT_EQ(j["loss"]["file"]["kernel_records"], 7);
  EXPECT_EQ(j["loss"]["file"]["missing"], 3);
  EXPECT_EQ(j["loss"]["file"]["after_last_status"]["launch_records"], 4);
}

TEST(LossBasis, WithASummaryTheFinalCountersDecide) {
  StatsBuilder b;
  FeedKilledPrimary(b, /*final_status=*/true);
  TraceStats s = b.Finish({}, kPrimary, ReadReport{});
  EXPECT_EQ(s.loss.basis, LossBasis::kCounters);
  EXPECT_TRUE(s.loss.counters_final);
  EXPECT_EQ(s.loss.missing, 1);
  EXPECT_EQ(s.loss.missing_file, 3);  // still shown
  EXPECT_NE(s.loss.basis_reason.find("final"), std::string::npos) << s.loss.basis_reason;
}

TEST(LossBasis, RecordsThatCannotProveItLeaveTheVerdictToTheLastCounters) {
  {  // no launch records (kernels only)
    StatsBuilder b;
    for (int i = 0; i < 3; ++i) b.OnKernel(Kernel());
    b.OnStatus(Status({{counters::kLaunchesSeen, 5}, {counters::kKernelRecords, 3}}), false);
    TraceStats s = b.Finish({}, kPrimary, NoSummary());
    EXPECT_EQ(s.loss.basis, LossBasis::kCounters);
    EXPECT_EQ(s.loss.missing, 2);
    EXPECT_NE(s.loss.basis_reason.find("no launch records"), std::string::npos) << s.loss.basis_reason;
  }
  {  // kernel records not written (--kinds without kernel): launch records alone prove nothing
    StatsBuilder b;
    for (uint64_t i = 0; i < 4; ++i) b.OnLaunch(BlockLaunch(i));
    b.OnStatus(Status({{counters::kLaunchesSeen, 4}, {counters::kKernelRecords, 4}}), false);
    nlohmann::json header = kPrimary;
    header["config"] = {{"written_kinds", {"api", "nvtx"}}};
    TraceStats s = b.Finish({}, header, NoSummary());
    EXPECT_EQ(s.loss.basis, LossBasis::kCounters);
    EXPECT_EQ(s.loss.missing, 0);
    EXPECT_NE(s.loss.basis_reason.find("kernel records were not written"), std::string::npos) << s.loss.basis_reason;
  }
  {  // neither counters nor launch records
    StatsBuilder b;
    b.OnKernel(Kernel());
    TraceStats s = b.Finish({}, kPrimary, NoSummary());
    EXPECT_EQ(s.loss.basis, LossBasis::kNone);
    EXPECT_EQ(s.loss.missing, 0);
  }
  {  // launch records but no STATUS at all: the file alone
    StatsBuilder b;
    b.OnLaunch(BlockLaunch(0));
    b.OnLaunch(BlockLaunch(1));
    b.OnKernel(Kernel());
    TraceStats s = b.Finish({}, kPrimary, NoSummary());
    EXPECT_EQ(s.loss.basis, LossBasis::kFile);
    EXPECT_EQ(s.loss.missing, 1);
    EXPECT_EQ(s.loss.file.launch_records_after_status, 2u);  // no STATUS: every record is "after" it
  }
}

TEST(LossBasis, ShadowWithoutSummaryCountsBlocksOfTheLaunchRecordsInTheFile) {
  StatsBuilder b;
  b.set_keep_launches(true);
  // Launch 0: 4 blocks, all recorded. Launch 1: 3 blocks, the probe wrote 3 but
  // only 1 reached the file. Then a STATUS, and launch 2: 2 blocks, both there.
  b.OnLaunch(BlockLaunch(0, 4, 4));
  for (uint32_t i = 0; i < 4; ++i) b.OnBlock(Block(0, i));
  b.OnLaunch(BlockLaunch(1, 3, 3));
  b.OnBlock(Block(1, 0));
  b.OnStatus(Status({{counters::kLaunchesTraced, 5}, {counters::kBlocksExpected, 14}, {counters::kBlocksRecorded, 5}}),
             false);
  b.OnLaunch(BlockLaunch(2, 2, 2));
  b.OnBlock(Block(2, 0));
  b.OnBlock(Block(2, 1));
  TraceStats s = b.Finish({}, kShadow, NoSummary());
  const LossAccounting& l = s.loss;
  ASSERT_TRUE(s.shadow);
  EXPECT_EQ(l.basis, LossBasis::kFile);
  EXPECT_EQ(l.missing, 0);  // no kernel records by design
  EXPECT_EQ(l.file.launch_records, 3u);
  EXPECT_EQ(l.file.block_records, 7u);
  EXPECT_EQ(l.file.blocks_expected, 9u);
  EXPECT_EQ(l.file.blocks_claimed, 9u);
  EXPECT_EQ(l.file.blocks_matched, 7u);
  EXPECT_EQ(l.blocks_missing_file, 2);
  EXPECT_EQ(l.blocks_missing_counters, 9);
  EXPECT_EQ(l.blocks_missing, 2);
  EXPECT_EQ(l.file.launch_records_after_status, 1u);
  EXPECT_EQ(l.file.block_records_after_status, 2u);
  // 5 traced launches counted, 3 in the file: 2 were in flight at the end.
  EXPECT_NE(l.basis_reason.find("at least 2 traced launches that have no record in the file"), std::string::npos)
      << l.basis_reason;

  nlohmann::json j = StatsToJson(s, 0);
  EXPECT_EQ(j["loss"]["blocks_missing"], 2);
  EXPECT_EQ(j["loss"]["counters"]["launches_traced"], 5);
  EXPECT_EQ(j["loss"]["counters"]["blocks_missing"], 9);
  EXPECT_EQ(j["loss"]["file"]["block_records"], 7);
  EXPECT_EQ(j["loss"]["file"]["blocks_expected"], 9);
  EXPECT_EQ(j["loss"]["file"]["blocks_missing"], 2);
  EXPECT_EQ(j["loss"]["file"]["after_last_status"]["block_records"], 2);
}

}  // namespace
}  // namespace twinscope::stats
