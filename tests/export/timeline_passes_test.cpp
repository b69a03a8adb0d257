// The timeline exports' two passes (src/views/export/timeline_passes.h): from a file or from kept records,
// the whole string table after pass 1, and a pass 2 that cannot read says which output is left incomplete.
#include "views/export/timeline_passes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "sample_trace.h"

namespace twinscope::exporters {
namespace {

struct Counter : RecordSink {
  uint64_t kernels = 0;
  void OnKernel(const KernelRecord&) override { ++kernels; }
};

// Kept records that replay once and then fail, as a log over its bound whose trace went away.
struct OnceRecords : KeptRecords {
  nlohmann::json header = {{"role", "primary"}};
  std::unordered_map<StringId, std::string> strings = {{1, "k"}};
  mutable int replays = 0;
  const nlohmann::json& Header() const override { return header; }
  const std::unordered_map<StringId, std::string>& Strings() const override { return strings; }
  Status Replay(RecordSink& sink, ReadReport* report) const override {
    if (replays++ > 0) return Status::Error("the trace is gone");
    sink.OnKernel(KernelRecord{});
    report->records = 1;
    return Status::Ok();
  }
};

TEST(TimelinePasses, FromAFileReadsItTwiceAndKeepsTheStringsOfPassOne) {
  const std::string trace = testing::TempPath("passes.tsc");
  testing::WritePrimaryTrace(trace);
  auto p = TimelinePasses::Open(trace, nullptr);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)->Header().value("role", std::string()), "primary");
  Counter scan, events;
  ASSERT_TRUE((*p)->Scan(scan).ok());
  EXPECT_FALSE((*p)->Strings().empty());
  ReadReport report;
  ASSERT_TRUE((*p)->Events(events, &report, "out.json").ok());
  EXPECT_GT(scan.kernels, 0u);
  EXPECT_EQ(events.kernels, scan.kernels);
  EXPECT_EQ(report.end, ReadEnd::kComplete);

  // The trace gone between the passes: pass 2 says so, and names the output left incomplete.
  auto again = TimelinePasses::Open(trace, nullptr);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->Scan(scan).ok());
  unlink(trace.c_str());
  Status s = (*again)->Events(events, &report, "out.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("out.json is incomplete"), std::string::npos) << s.message();
  EXPECT_FALSE(TimelinePasses::Open(trace, nullptr).ok()) << "a missing trace cannot be opened";
}

TEST(TimelinePasses, FromKeptRecordsReplaysThemAndSaysWhenTheyCannotBeReadAgain) {
  OnceRecords kept;
  auto p = TimelinePasses::Open("/run/primary.tsc", &kept);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(&(*p)->Strings(), &kept.strings) << "the kept table, not a copy";
  Counter scan, events;
  ASSERT_TRUE((*p)->Scan(scan).ok());
  EXPECT_EQ(scan.kernels, 1u);
  ReadReport report;
  Status s = (*p)->Events(events, &report, "join.perfetto-trace");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "/run/primary.tsc: the trace is gone; join.perfetto-trace is incomplete");
}

}  // namespace
}  // namespace twinscope::exporters
