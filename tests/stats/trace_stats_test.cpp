#include "stats/trace_stats.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "format/trace_writer.h"
#include "twinscope/counters.h"

namespace twinscope::stats {
namespace {

KernelRecord Kernel(StringId name, uint64_t start, uint64_t dur, uint32_t device = 0, uint32_t stream = 7,
                    uint32_t flags = 0) {
  KernelRecord k{};
  k.name = name;
  k.start_ns = start;
  k.end_ns = start + dur;
  k.device = device;
  k.stream = stream;
  k.flags = flags;
  k.grid = {1, 1, 1};
  k.block = {32, 1, 1};
  return k;
}

nlohmann::json Counters(std::initializer_list<std::pair<const char*, uint64_t>> c) {
  nlohmann::json j = {{"counters", nlohmann::json::object()}};
  for (auto& [k, v] : c) j["counters"][k] = v;
  return j;
}

const std::unordered_map<StringId, std::string> kStrings = {
    {1, "gemm"},   {2, "_Z4gemmv"},         {3, "copy_kernel"},  {4, "step"},
    {5, "decode"}, {6, "cudaLaunchKernel"}, {7, "probe_kernel"}, {8, "step#0"}};

TEST(StatsBuilder, CountsKernelsPercentilesAndLoss) {
  StatsBuilder b;
  // 100 gemm launches of 1..100 us, one more with an invalid timestamp.
  for (uint64_t i = 1; i <= 100; ++i) {
    KernelRecord k = Kernel(2, 1'000'000 * i, 1000 * i);
    k.demangled = 1;
    b.OnKernel(k);
  }
  KernelRecord bad = Kernel(2, 0, 0, 0, 7, kFlagInvalidTimestamp);
  bad.demangled = 1;
  b.OnKernel(bad);
  // 3 copy_kernel launches on device 1, stream 9, 10 us each.
  for (int i = 0; i < 3; ++i) b.OnKernel(Kernel(3, 5'000'000 + 20'000 * i, 10'000, 1, 9));
  MemcpyRecord m{};
  m.start_ns = 10;
  m.end_ns = 20;
  m.bytes = 4096;
  m.device = 1;
  m.stream = 3;
  b.OnMemcpy(m);
  MemsetRecord s{};
  s.start_ns = 30;
  s.end_ns = 10;  // end < start: invalid
  s.bytes = 64;
  b.OnMemset(s);
  ApiRecord a{};
  a.name = 6;
  b.OnApi(a);
  b.OnStatus(Counters({{counters::kLaunchesSeen, 110},
                       {counters::kKernelRecords, 104},
                       {counters::kKernelInvalidTs, 1},
                       {counters::kCuptiDropped, 2},
                       {counters::kWriterDropped, 3}}),
             true);
  ReadReport report;
  TraceStats t = b.Finish(kStrings, {{"role", "primary"}}, report);

  EXPECT_EQ(t.role, "primary");
  EXPECT_FALSE(t.shadow);
  EXPECT_TRUE(t.have_summary);
  EXPECT_EQ(t.counts.at("kernel"), 104u);
  EXPECT_EQ(t.counts.at("memcpy"), 1u);
  EXPECT_EQ(t.counts.at("memset"), 1u);
  EXPECT_EQ(t.counts.at("api"), 1u);
  EXPECT_EQ(t.counts.at("block"), 0u);

  ASSERT_EQ(t.kernels.size(), 2u);
  const KernelSummary& g = t.kernels[0];  // largest total first
  EXPECT_EQ(g.name, "gemm");              // demangled name preferred
  EXPECT_EQ(g.count, 101u);
  EXPECT_EQ(g.invalid, 1u);
  EXPECT_EQ(g.total_ns, 1000u * 5050);
  EXPECT_EQ(g.min_ns, 1000u);
  EXPECT_EQ(g.max_ns, 100'000u);
  EXPECT_EQ(g.p50_ns, 50'000u);
  EXPECT_EQ(g.p99_ns, 99'000u);
  EXPECT_DOUBLE_EQ(g.mean_ns, 50'500.0);
  EXPECT_EQ(t.kernels[1].name, "copy_kernel");
  EXPECT_EQ(t.kernels[1].count, 3u);
  EXPECT_EQ(t.kernels[1].p50_ns, 10'000u);

  const LossAccounting& l = t.loss;
  EXPECT_TRUE(l.have_counters);
  EXPECT_EQ(l.launches_seen, 110u);
  EXPECT_EQ(l.kernel_records, 104u);
  EXPECT_EQ(l.kernel_records_in_file, 104u);
  EXPECT_EQ(l.missing, 6);
  EXPECT_EQ(l.invalid_timestamps, 1u);
  EXPECT_EQ(l.invalid_timestamps_in_file, 2u);  // the kernel and the memset
  EXPECT_EQ(l.cupti_dropped, 2u);
  EXPECT_EQ(l.writer_dropped, 3u);

  ASSERT_EQ(t.devices.size(), 2u);
  EXPECT_EQ(t.devices[0].device, 0u);
  EXPECT_EQ(t.devices[0].kernels, 101u);
  EXPECT_EQ(t.devices[0].memsets, 1u);
  EXPECT_EQ(t.devices[0].streams, 2u);  // kernels on stream 7, the memset on stream 0
  EXPECT_EQ(t.devices[0].kernel_ns, 1000u * 5050);
  EXPECT_EQ(t.devices[1].kernels, 3u);
  EXPECT_EQ(t.devices[1].memcpys, 1u);
  EXPECT_EQ(t.devices[1].memcpy_bytes, 4096u);
  EXPECT_EQ(t.devices[1].streams, 2u);
  EXPECT_EQ(t.devices[1].first_ns, 10u);
  EXPECT_EQ(t.devices[1].last_ns, 5'000'000u + 40'000 + 10'000);

  auto problems = StrictProblems(t);
  auto has = [&](const std::string& needle) {
    for (const auto& p : problems)
      if (p.find(needle) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("6 kernel launches seen without a kernel record"));
  EXPECT_TRUE(has("invalid timestamps"));
  EXPECT_TRUE(has("2 records dropped by CUPTI"));
  EXPECT_TRUE(has("3 records dropped by the writer"));
  EXPECT_FALSE(has("read not complete"));

  nlohmann::json j = StatsToJson(t, 1);
  EXPECT_EQ(j["kernels"].size(), 1u);
  EXPECT_EQ(j["kernel_names"], 2u);
  EXPECT_EQ(j["loss"]["missing"], 6);
  EXPECT_EQ(j["kernels"][0]["p99_ns"], 99'000u);
  EXPECT_EQ(j["counts"]["kernel"], 104u);
  EXPECT_FALSE(j["problems"].empty());
}

TEST(StatsBuilder, CleanTraceHasNoStrictProblems) {
  StatsBuilder b;
  b.OnKernel(Kernel(1, 100, 10));
  b.OnStatus(Counters({{counters::kLaunchesSeen, 1}, {counters::kKernelRecords, 1}}), true);
  TraceStats t = b.Finish(kStrings, {{"role", "primary"}}, ReadReport{});
  EXPECT_EQ(t.loss.missing, 0);
  EXPECT_TRUE(StrictProblems(t).empty());
}

TEST(StatsBuilder, IncompleteReadAndMissingCountersAreProblems) {
  StatsBuilder b;
  b.OnKernel(Kernel(1, 100, 10));
  ReadReport r;
  r.end = ReadEnd::kTruncated;
  r.message = "x.tsc: cut inside chunk 3";
  TraceStats t = b.Finish(kStrings, {{"role", "primary"}}, r);
  EXPECT_FALSE(t.loss.have_counters);
  auto problems = StrictProblems(t);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("truncated"), std::string::npos);
  EXPECT_NE(problems[0].find("cut inside chunk 3"), std::string::npos);
  EXPECT_NE(problems[1].find("no counters"), std::string::npos);
}

TEST(StatsBuilder, NvtxRanges) {
  StatsBuilder b;
  auto range = [](StringId name, uint64_t start, uint64_t end, NvtxKind kind, StringId domain = 0) {
    NvtxRecord r{};
    r.name = name;
    r.domain = domain;
    r.start_ns = start;
    r.end_ns = end;
    r.kind = static_cast<uint32_t>(kind);
    return r;
  };
  b.OnNvtx(range(4, 100, 300, NvtxKind::kPushPop));
  b.OnNvtx(range(4, 400, 500, NvtxKind::kPushPop));
  b.OnNvtx(range(4, 600, 0, NvtxKind::kPushPop));  // never closed
  b.OnNvtx(range(5, 0, 1000, NvtxKind::kStartEnd, 3));
  b.OnNvtx(range(5, 50, 50, NvtxKind::kMark));
  TraceStats t = b.Finish(kStrings, {}, ReadReport{});
  ASSERT_EQ(t.nvtx.size(), 3u);
  EXPECT_EQ(t.nvtx[0].name, "copy_kernel::decode");  // domain::name, 1000 ns
  EXPECT_EQ(t.nvtx[0].total_ns, 1000u);
  EXPECT_EQ(t.nvtx[1].name, "step");
  EXPECT_EQ(t.nvtx[1].count, 3u);
  EXPECT_EQ(t.nvtx[1].unclosed, 1u);
  EXPECT_EQ(t.nvtx[1].total_ns, 300u);
  EXPECT_EQ(t.nvtx[1].max_ns, 200u);
  EXPECT_EQ(t.nvtx[2].kind, static_cast<uint32_t>(NvtxKind::kMark));
  EXPECT_EQ(t.nvtx[2].count, 1u);
}

LaunchRecord Launch(uint64_t seq, StringId kernel, uint32_t grid_x) {
  LaunchRecord l{};
  l.seq = seq;
  l.kernel = kernel;
  l.grid = {grid_x, 1, 1};
  l.block = {128, 1, 1};
  l.key.path = 8;
  l.key.ordinal = static_cast<uint32_t>(seq);
  l.key.hash = 0xfeedull + seq;
  return l;
}

BlockRecord Block(uint64_t seq, uint32_t linear, uint32_t order, uint32_t sm, uint64_t enter, uint64_t exit) {
  BlockRecord b{};
  b.launch_seq = seq;
  b.block_linear = linear;
  b.x = linear;
  b.order = order;
  b.sm = sm;
  b.enter_ns = enter;
  b.exit_ns = exit;
  return b;
}

TEST(StatsBuilder, ShadowLaunchesAndKernels) {
  StatsBuilder b;
  b.set_keep_launches(true);
  b.OnLaunch(Launch(1, 7, 4));
  b.OnLaunch(Launch(2, 7, 4));
  // Launch 1: all 4 blocks, in order, block 3 is the straggler.
  for (uint32_t i = 0; i < 4; ++i) b.OnBlock(Block(1, i, i, i % 2, 1000 + i, 2000 + (i == 3 ? 500 : i)));
  // Launch 2: block 2 missing; arrival 1,0,3.
  b.OnBlock(Block(2, 1, 0, 0, 5000, 5100));
  b.OnBlock(Block(2, 0, 1, 1, 5001, 5200));
  b.OnBlock(Block(2, 3, 2, 0, 5002, 5300));
  // Blocks of a launch without a launch record.
  b.OnBlock(Block(9, 0, 0, 0, 1, 2));
  b.OnStatus(Counters({{counters::kLaunchesTraced, 2},
                       {counters::kLaunchesSeen, 5},
                       {counters::kBlocksExpected, 8},
                       {counters::kBlocksRecorded, 7},
                       {counters::kBlocksOverflow, 0}}),
             true);
  TraceStats t = b.Finish(kStrings, {{"role", "shadow"}}, ReadReport{});
  ASSERT_TRUE(t.shadow);
  ASSERT_EQ(t.shadow_launches.size(), 3u);
  const ShadowLaunch& l1 = t.shadow_launches[0];
  EXPECT_EQ(l1.kernel, "probe_kernel");
  EXPECT_EQ(l1.key_path, "step#0");
  EXPECT_EQ(l1.blocks.blocks_expected, 4u);
  EXPECT_EQ(l1.blocks.blocks_unique, 4u);
  EXPECT_EQ(l1.blocks.inversions, 0u);
  EXPECT_EQ(l1.blocks.straggler.block_linear, 3u);
  EXPECT_EQ(l1.blocks.straggler.sm, 1u);
  EXPECT_EQ(l1.blocks.tail_ns, 2500u - 2001u);
  const ShadowLaunch& l2 = t.shadow_launches[1];
  EXPECT_EQ(l2.blocks.blocks_unique, 3u);
  EXPECT_EQ(l2.blocks.inversions, 1u);
  const ShadowLaunch& l9 = t.shadow_launches[2];
  EXPECT_FALSE(l9.have_launch_record);
  EXPECT_EQ(t.blocks_without_launch, 1u);

  ASSERT_EQ(t.shadow_kernels.size(), 2u);
  const ShadowKernelSummary& k = t.shadow_kernels[0];
  EXPECT_EQ(k.name, "probe_kernel");
  EXPECT_EQ(k.launches, 2u);
  EXPECT_EQ(k.launches_incomplete, 1u);
  EXPECT_EQ(k.blocks_expected, 8u);
  EXPECT_EQ(k.blocks_seen, 7u);
  EXPECT_EQ(k.sms_used_min, 2u);
  EXPECT_EQ(k.sms_used_max, 2u);
  EXPECT_EQ(k.tail_max_ns, 499u);
  EXPECT_EQ(t.probe_counters[counters::kBlocksRecorded], 7u);

  auto problems = StrictProblems(t);
  bool incomplete = false, orphan = false;
  for (const auto& p : problems) {
    incomplete |= p.find("2 traced launches without exactly one record per block") != std::string::npos;
    orphan |= p.find("1 block records without their launch record") != std::string::npos;
  }
  EXPECT_TRUE(incomplete);
  EXPECT_TRUE(orphan);
  nlohmann::json j = StatsToJson(t, 0);
  ASSERT_EQ(j["shadow_launches"].size(), 3u);
  EXPECT_EQ(j["shadow_launches"][0]["straggler"]["block"], 3u);
  EXPECT_EQ(j["shadow_launches"][0]["kendall_tau"], 1.0);
  EXPECT_EQ(j["shadow_launches"][1]["blocks_seen"], 3u);
  // A shadow trace has no kernel records by design: its launches are not "missing" ones.
  EXPECT_EQ(j["loss"]["launches_seen"], 5u);
  EXPECT_EQ(j["loss"]["missing"], 0);
  for (const auto& p : problems) EXPECT_EQ(p.find("without a kernel record"), std::string::npos) << p;
}

// A launch's block records are let go once its blocks are all in (its run over, its launch record read): the
// builder holds only the launches still open, so memory does not grow with the blocks (docs/join.md, "Reads").
TEST(StatsBuilder, LetsGoOfTheBlocksOfEachCompleteLaunch) {
  StatsBuilder b;
  b.set_keep_launches(true);
  for (uint64_t seq = 1; seq <= 100; ++seq) {
    b.OnLaunch(Launch(seq, 7, 50));
    for (uint32_t i = 0; i < 50; ++i) b.OnBlock(Block(seq, i, i, i % 4, 1000 * seq + i, 1000 * seq + 100 + i));
  }
  // The last run is still open; every earlier one is computed and dropped.
  EXPECT_EQ(b.block_records_held(), 50u);
  // A launch record read after its blocks: they complete when it comes.
  for (uint32_t i = 0; i < 3; ++i) b.OnBlock(Block(200, i, i, 0, 5000 + i, 5100 + i));
  b.OnBlock(Block(201, 0, 0, 0, 6000, 6100));
  EXPECT_EQ(b.block_records_held(), 4u);
  b.OnLaunch(Launch(200, 7, 3));
  EXPECT_EQ(b.block_records_held(), 1u);
  TraceStats t = b.Finish(kStrings, {{"role", "shadow"}}, ReadReport{});
  ASSERT_EQ(t.shadow_launches.size(), 102u);
  EXPECT_EQ(t.shadow_launches[0].blocks.blocks_unique, 50u);
  EXPECT_EQ(t.shadow_launches[0].blocks.straggler.block_linear, 49u);
  EXPECT_EQ(t.shadow_launches[100].blocks.seq, 200u);
  EXPECT_EQ(t.shadow_launches[100].blocks.blocks_unique, 3u);
  EXPECT_EQ(t.blocks_without_launch, 1u);
  EXPECT_EQ(t.blocks_after_complete, 0u);
}

// Computed per launch as its blocks end or at the end of the read, the statistics are the same: blocks split
// over two runs, an incomplete launch, a duplicate in the first run.
TEST(StatsBuilder, BlockStatisticsDoNotDependOnWhenALaunchCompletes) {
  std::vector<BlockRecord> a, c;
  for (uint32_t i = 0; i < 8; ++i) a.push_back(Block(1, i, 7 - i, i % 3, 100 + i, 300 + 7 * i));
  c = {Block(3, 0, 0, 0, 10, 20), Block(3, 0, 1, 1, 11, 25), Block(3, 1, 2, 1, 12, 40)};  // 0 twice, 2 missing
  StatsBuilder b;
  b.set_keep_launches(true);
  b.OnLaunch(Launch(1, 7, 8));
  b.OnLaunch(Launch(3, 7, 3));
  for (size_t i = 0; i < 5; ++i) b.OnBlock(a[i]);
  for (const auto& r : c) b.OnBlock(r);  // launch 1's run ends incomplete
  for (size_t i = 5; i < 8; ++i) b.OnBlock(a[i]);
  b.OnBlock(Block(9, 0, 0, 0, 1, 2));
  EXPECT_EQ(b.block_records_held(), 4u);  // launch 3 (a duplicate: kept) and 9 (no launch record)
  TraceStats t = b.Finish(kStrings, {{"role", "shadow"}}, ReadReport{});
  ASSERT_EQ(t.shadow_launches.size(), 3u);
  const LaunchBlockStats want1 = ComputeLaunchBlockStats(1, {8, 1, 1}, a);
  const LaunchBlockStats want3 = ComputeLaunchBlockStats(3, {3, 1, 1}, c);
  const LaunchBlockStats& got1 = t.shadow_launches[0].blocks;
  const LaunchBlockStats& got3 = t.shadow_launches[1].blocks;
  EXPECT_EQ(got1.inversions, want1.inversions);
  EXPECT_EQ(got1.median_exit_ns, want1.median_exit_ns);
  EXPECT_EQ(got1.straggler.block_linear, want1.straggler.block_linear);
  EXPECT_EQ(got1.sms_used, want1.sms_used);
  EXPECT_EQ(got1.blocks_unique, 8u);
  EXPECT_EQ(got3.duplicates, want3.duplicates);
  EXPECT_EQ(got3.duplicates, 1u);
  EXPECT_EQ(got3.blocks_unique, want3.blocks_unique);
  EXPECT_EQ(got3.tail_ns, want3.tail_ns);
}

// A record read after its launch's blocks were all in is counted, never dropped: a duplicate (in the grid) or
// out of the grid, and its exit moves the straggler.
TEST(StatsBuilder, ABlockAfterItsLaunchCompletedIsCounted) {
  StatsBuilder b;
  b.set_keep_launches(true);
  b.OnLaunch(Launch(1, 7, 4));
  b.OnLaunch(Launch(2, 7, 2));
  for (uint32_t i = 0; i < 4; ++i) b.OnBlock(Block(1, i, i, 0, 100 + i, 200 + i));
  b.OnBlock(Block(2, 0, 0, 0, 10, 20));
  b.OnBlock(Block(2, 1, 1, 0, 10, 20));
  b.OnBlock(Block(1, 2, 4, 1, 150, 900));  // launch 1 again: block 2 twice, the latest exit
  b.OnBlock(Block(1, 6, 5, 1, 150, 160));  // out of its grid of 4
  TraceStats t = b.Finish(kStrings, {{"role", "shadow"}}, ReadReport{});
  ASSERT_EQ(t.shadow_launches.size(), 2u);
  const LaunchBlockStats& l1 = t.shadow_launches[0].blocks;
  EXPECT_EQ(t.blocks_after_complete, 2u);
  EXPECT_EQ(l1.blocks_seen, 6u);
  EXPECT_EQ(l1.duplicates, 1u);
  EXPECT_EQ(l1.out_of_grid, 1u);
  EXPECT_EQ(l1.straggler.exit_ns, 900u);
  EXPECT_EQ(l1.last_exit_ns, 900u);
  EXPECT_EQ(StatsToJson(t, 0)["blocks_after_complete"], 2u);
  bool incomplete = false;
  for (const auto& p : StrictProblems(t))
    incomplete |= p.find("1 traced launches without exactly one record per block") != std::string::npos;
  EXPECT_TRUE(incomplete);
}

TEST(ComputeTraceStats, ReadsAFileWrittenWithTraceWriter) {
  char path[] = "/tmp/twinscope_stats_testXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    WriterOptions o;
    o.path = path;
    std::string error;
    auto w = TraceWriter::Open(o, {{"role", "primary"}, {"host", "testhost"}}, &error);
    ASSERT_TRUE(w) << error;
    StringId name = w->Intern("my_kernel");
    for (uint64_t i = 0; i < 1000; ++i) {
      KernelRecord k = Kernel(name, 1'000'000 + i * 1000, 100 + i);
      w->Append(k);
    }
    w->SetCounter(counters::kLaunchesSeen, 1000);
    w->SetCounter(counters::kKernelRecords, 1000);
    ASSERT_TRUE(w->Close(&error)) << error;
  }
  auto s = ComputeTraceStats(path);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->report.end, ReadEnd::kComplete);
  EXPECT_TRUE(s->have_summary);
  EXPECT_EQ(s->header["host"], "testhost");
  EXPECT_EQ(s->counts.at("kernel"), 1000u);
  ASSERT_EQ(s->kernels.size(), 1u);
  EXPECT_EQ(s->kernels[0].name, "my_kernel");
  EXPECT_EQ(s->kernels[0].p50_ns, 100u + 499);
  EXPECT_EQ(s->loss.missing, 0);
  EXPECT_TRUE(StrictProblems(*s).empty());
  std::remove(path);

  auto missing = ComputeTraceStats("/nonexistent/trace.tsc");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/trace.tsc"), std::string::npos);
}

}  // namespace
}  // namespace twinscope::stats
