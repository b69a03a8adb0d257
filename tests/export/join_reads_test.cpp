// How often a join reads its traces (docs/join.md, "Reads"): every view of a
// join written (join.json, Perfetto, SQLite, the HTML report) reads the
// primary once and the shadow at most twice (once for the model, once for
// the block detail every view shares); the views take what was read.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "format/read_passes.h"
#include "join/join_views.h"
#include "join/joined_run.h"
#include "join_scene.h"
#include "stats/trace_stats.h"
#include "views/export/join/join_export.h"
#include "views/join_doc.h"
#include "views/join_writer.h"

namespace twinscope::exporters {
namespace {

class JoinReads : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::SceneDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    testing::WriteOptions o;
    o.other_kernels = {"_Z4gemmv"};
    files_ = testing::WriteTwin(dir_, testing::SceneLaunches(), o);
    ResetTraceReadPasses();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  bool Exists(const std::string& name) const { return std::filesystem::exists(dir_ + "/" + name); }
  std::string dir_;
  testing::TwinFiles files_;
};

TEST_F(JoinReads, EveryViewFromOnePassOverThePrimaryAndTwoOverTheShadow) {
  auto run = join::JoinForViews(files_.primary, files_.shadow);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(TraceReadPasses(files_.primary), 1u);
  EXPECT_EQ(TraceReadPasses(files_.shadow), 1u);
  FILE* out = std::fopen("/dev/null", "w");
  ASSERT_NE(out, nullptr);
  const bool ok = views::WriteJoinViews(&*run, dir_, out);
  std::fclose(out);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(Exists("join.json"));
  EXPECT_TRUE(Exists("report.html"));
  EXPECT_EQ(Exists("join.perfetto-trace"), PerfettoAvailable());
  EXPECT_EQ(Exists("join.sqlite"), SqliteAvailable());
  {  // join.json is written launch by launch, never whole: byte for byte what JoinJson makes
    std::ifstream f(dir_ + "/join.json", std::ios::binary);
    const std::string written((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto detail = join::DetailOf(run->detail, join::DetailSeqs(run->model, views::kDetailLaunches));
    EXPECT_EQ(written, views::JoinJson(run->model, {}, detail).dump());
    EXPECT_NE(written.find("\"launches\":[{"), std::string::npos);
  }
  EXPECT_EQ(TraceReadPasses(files_.primary), 1u);
  EXPECT_EQ(TraceReadPasses(files_.shadow), 2u);
  // The detail pass brought the blocks every view draws: join.json's pictures and the timeline's.
  EXPECT_EQ(run->detail.size(), 5u);
  EXPECT_TRUE(run->detail_error.empty());

  // The Chrome view takes the same run: the primary's records from the join's pass, the block detail from the
  // detail pass. It reads neither trace, and writes what a Chrome export that reads the trace itself writes.
  auto chrome = ExportJoinChrome(*run, dir_ + "/join.chrome.json");
  ASSERT_TRUE(chrome.ok()) << chrome.status().message();
  EXPECT_EQ(chrome->blocks.launches_drawn, 5u);
  EXPECT_EQ(chrome->records, run->primary.report.records);
  EXPECT_EQ(TraceReadPasses(files_.primary), 1u);
  EXPECT_EQ(TraceReadPasses(files_.shadow), 2u);
  auto alone = ExportChrome(files_.primary, dir_ + "/primary.chrome.json");
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_EQ(TraceReadPasses(files_.primary), 3u);  // a trace alone: the scan, then the events
  EXPECT_EQ(alone->records, chrome->records);
}

// A primary over the bound the join keeps in memory is not cut: the log lets
// its records go, and the timeline and the kernels table read the trace again,
// whole. Their content equals that of a join that kept everything.
TEST_F(JoinReads, APrimaryOverTheBoundIsReadAgainNotCut) {
  auto whole = join::JoinForViews(files_.primary, files_.shadow);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  ASSERT_FALSE(whole->primary.streamed());
  auto run = join::JoinForViews(files_.primary, files_.shadow, {}, 10);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_TRUE(run->primary.streamed());
  EXPECT_EQ(run->primary.kept(), 0u);        // nothing held: the records were let go at the bound
  EXPECT_EQ(run->model.matches.size(), 5u);  // the model is whole: it comes from the pass, not the log
  ASSERT_GT(run->primary.report.records, 10u);
  if (PerfettoAvailable()) {
    const std::vector<uint64_t> seqs = PlanBlocks(run->model, kPerfettoBlockBounds).drawn_seqs;
    join::ReadDetail(&*run, seqs);
    join::ReadDetail(&*whole, seqs);
    ResetTraceReadPasses();
    auto r = ExportJoinPerfetto(*run, dir_ + "/streamed.perfetto-trace");
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_GE(TraceReadPasses(files_.primary), 1u);  // read again (the log holds nothing)
    auto w = ExportJoinPerfetto(*whole, dir_ + "/whole.perfetto-trace");
    ASSERT_TRUE(w.ok()) << w.status().message();
    EXPECT_EQ(r->records, w->records);
    EXPECT_EQ(r->records, run->primary.report.records);
    EXPECT_EQ(std::filesystem::file_size(dir_ + "/streamed.perfetto-trace"),
              std::filesystem::file_size(dir_ + "/whole.perfetto-trace"));
  }
  if (SqliteAvailable()) {
    auto r = ExportJoinSqlite(&*run, dir_ + "/streamed.sqlite");
    ASSERT_TRUE(r.ok()) << r.status().message();
    for (const auto& w : r->warnings) EXPECT_EQ(w.find("the kernels table is empty"), std::string::npos) << w;
  }
  // The trace gone between the join and its views: said, not an empty timeline called whole.
  std::filesystem::remove(files_.primary);
  if (PerfettoAvailable()) {
    auto r = ExportJoinPerfetto(*run, dir_ + "/gone.perfetto-trace");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("could not be read again"), std::string::npos) << r.status().message();
  }
  if (SqliteAvailable()) {
    auto r = ExportJoinSqlite(&*run, dir_ + "/gone.sqlite");
    ASSERT_TRUE(r.ok()) << r.status().message();
    bool said = false;
    for (const auto& w : r->warnings) said |= w.find("the kernels table is empty") != std::string::npos;
    EXPECT_TRUE(said);
  }
}

// The join's pass over the primary keeps no per-record state: its trace
// statistics count, total and bound every kernel's time without keeping each
// duration (no view of a join shows their percentiles), the same figures as
// `twinscope stats` gives, whose p50/p99 it leaves at 0.
TEST_F(JoinReads, ThePrimarysKernelTimesAreSummedNotKept) {
  auto run = join::JoinForViews(files_.primary, files_.shadow);
  ASSERT_TRUE(run.ok()) << run.status().message();
  std::string error;
  auto reader = TraceReader::Open(files_.primary, &error);
  ASSERT_NE(reader, nullptr) << error;
  stats::StatsBuilder sb;
  const ReadReport rep = reader->Read(sb);
  const stats::TraceStats full = sb.Finish(reader->strings(), reader->header(), rep);
  const auto& joined = run->model.primary_side.stats.kernels;
  ASSERT_EQ(joined.size(), full.kernels.size());
  ASSERT_EQ(joined.size(), 2u);
  for (size_t i = 0; i < joined.size(); ++i) {
    EXPECT_EQ(joined[i].name, full.kernels[i].name);
    EXPECT_EQ(joined[i].count, full.kernels[i].count);
    EXPECT_EQ(joined[i].total_ns, full.kernels[i].total_ns);
    EXPECT_EQ(joined[i].min_ns, full.kernels[i].min_ns);
    EXPECT_EQ(joined[i].max_ns, full.kernels[i].max_ns);
    EXPECT_DOUBLE_EQ(joined[i].mean_ns, full.kernels[i].mean_ns);
    EXPECT_GT(full.kernels[i].p50_ns, 0u);
    EXPECT_EQ(joined[i].p50_ns, 0u);
    EXPECT_EQ(joined[i].p99_ns, 0u);
  }
}

// A shadow that cannot be read again (gone after the join): the views are
// still written, drawn without blocks, and say why.
TEST_F(JoinReads, ADetailPassThatFailsIsSaidAndTheViewsStillWritten) {
  auto run = join::JoinForViews(files_.primary, files_.shadow);
  ASSERT_TRUE(run.ok()) << run.status().message();
  std::filesystem::remove(files_.shadow);
  join::ReadDetail(&*run, PlanBlocks(run->model, kChromeBlockBounds).drawn_seqs);
  EXPECT_NE(run->detail_error, "");
  auto chrome = ExportJoinChrome(*run, dir_ + "/join.chrome.json");
  ASSERT_TRUE(chrome.ok()) << chrome.status().message();
  EXPECT_EQ(chrome->blocks.launches_drawn, 0u);
  EXPECT_EQ(chrome->blocks.launches_over_bounds, 5u);
  ASSERT_FALSE(chrome->warnings.empty());
  EXPECT_EQ(chrome->warnings.front().find("the shadow's blocks could not be read"), 0u);
}

}  // namespace
}  // namespace twinscope::exporters
