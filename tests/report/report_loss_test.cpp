// Loss in the report of a real join (tests/join's synthetic twins with a collector's counters): a lossless
// run shows no loss warning in stats, join.json or the report; each loss counter of the counter table
// (include/twinscope/counters.def), made non-zero, shows exactly one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "join/join_model.h"
#include "join/join_views.h"
#include "join_fixture.h"
#include "report_test_util.h"
#include "stats/trace_stats.h"
#include "twinscope/counters.h"
#include "views/join_doc.h"
#include "views/report/report.h"

namespace twinscope::counters {
void PrintTo(const CounterInfo& c, std::ostream* os) { *os << c.name; }
}  // namespace twinscope::counters

namespace twinscope {
namespace {

using nlohmann::json;
using testing_report::Occurrences;

constexpr uint32_t kLaunches = 4, kBlocks = 8;  // WriteTwin's default grid: 8 blocks, all recorded

// The counters a lossless run's collectors write (what the H200 runs of issue 21 held).
testing::WriteOptions Lossless() {
  testing::WriteOptions o;
  o.primary_counters = {{counters::kLaunchesSeen, kLaunches},
                        {counters::kKernelRecords, kLaunches},
                        {counters::kApiRecords, 2 * kLaunches},
                        {counters::kBuffersCompleted, 1},
                        {counters::kLaunchRingFullDrains, 0}};
  o.shadow_counters = {{counters::kLaunchesSeen, 2 * kLaunches},
                       {counters::kLaunchesMatching, 2 * kLaunches},
                       {counters::kLaunchesTraced, kLaunches},
                       {counters::kLaunchesSkipped, kLaunches},
                       {counters::kBlocksExpected, kLaunches * kBlocks},
                       {counters::kBlocksRecorded, kLaunches * kBlocks},
                       {counters::kModulesLoaded, 2},
                       {counters::kModulesPatched, 1},
                       {counters::kSanitizerCallbacks, 40},
                       {counters::kBlocksSyncDrains, 3}};
  return o;
}

struct Joined {
  join::JoinedModel model;
  json doc;  // as join.json
  std::string html;
};

Joined JoinAndRender(const testing::WriteOptions& o, const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("twinscope_report_loss_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::vector<testing::FakeLaunch> launches(kLaunches);
  for (uint32_t i = 0; i < kLaunches; ++i) {
    launches[i].path = "step#" + std::to_string(i);
    launches[i].cpu_ns = 1'000'000 * (i + 1);
  }
  auto files = testing::WriteTwin(dir.string(), launches, o);
  auto m = join::JoinTraces(files.primary, files.shadow, {});
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return {};
  Joined j{std::move(*m), json(), ""};
  j.doc = views::JoinJson(j.model, {}, {});
  auto html = RenderReport(j.doc);
  EXPECT_TRUE(html.ok()) << html.status().message();
  if (html.ok()) j.html = *html;
  return j;
}

TEST(ReportLoss, LosslessRunShowsNoLossAnywhere) {
  Joined j = JoinAndRender(Lossless(), "clean");
  ASSERT_FALSE(j.html.empty());
  // The report: no loss warning (issue 21: the probe's launches_matching was counted as a loss).
  EXPECT_EQ(j.html.find("reports losses"), std::string::npos);
  EXPECT_NE(j.html.find("No losses: every loss counter of both traces is zero."), std::string::npos);
  EXPECT_EQ(Occurrences(j.html, "class=\"num bad\""), 0u);
  // stats (text and --json take their problems from here) and join.json.
  EXPECT_TRUE(stats::StrictProblems(j.model.primary_side.stats).empty())
      << stats::StrictProblems(j.model.primary_side.stats)[0];
  EXPECT_TRUE(stats::StrictProblems(j.model.shadow_side.stats).empty())
      << stats::StrictProblems(j.model.shadow_side.stats)[0];
  EXPECT_EQ(j.doc["primary"]["loss"]["findings"], json::array());
  EXPECT_EQ(j.doc["shadow"]["loss"]["findings"], json::array());
  EXPECT_EQ(j.doc["shadow"]["probe_counters"][counters::kLaunchesMatching], 2 * kLaunches);
}

class ReportEachLossCounter : public ::testing::TestWithParam<counters::CounterInfo> {};

TEST_P(ReportEachLossCounter, ShowsExactlyOneWarning) {
  const counters::CounterInfo& c = GetParam();
  testing::WriteOptions o = Lossless();
  const bool shadow = c.collector == counters::Collector::kProbe;
  (shadow ? o.shadow_counters : o.primary_counters)[std::string(c.name)] = 3;
  Joined j = JoinAndRender(o, std::string(c.name));
  ASSERT_FALSE(j.html.empty());
  const std::string side = shadow ? "shadow" : "primary";
  EXPECT_EQ(Occurrences(j.html, "reports losses"), 1u) << c.name;
  EXPECT_NE(j.html.find("The " + side + " trace reports losses (1 counters not zero)"), std::string::npos) << c.name;
  EXPECT_NE(
      j.html.find("<td>" + side + "</td><td><code>" + std::string(c.name) + "</code></td><td class=\"num bad\">3"),
      std::string::npos)
      << c.name;
  ASSERT_EQ(j.doc[side]["loss"]["findings"].size(), 1u) << j.doc[side]["loss"]["findings"].dump();
  EXPECT_EQ(j.doc[side]["loss"]["findings"][0]["name"], std::string(c.name));
  EXPECT_EQ(stats::StrictProblems(shadow ? j.model.shadow_side.stats : j.model.primary_side.stats).size(), 1u);
}

std::vector<counters::CounterInfo> LossCounters() {
  std::vector<counters::CounterInfo> out;
  // writer_dropped_records is written by the trace writer from its own drops (set by a test it is
  // overwritten); CounterTable's tests in tests/stats cover it.
  for (const auto& c : counters::kTable)
    if (counters::IsLoss(c.severity) && c.name != counters::kWriterDropped) out.push_back(c);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Table, ReportEachLossCounter, ::testing::ValuesIn(LossCounters()),
                         [](const ::testing::TestParamInfo<counters::CounterInfo>& i) {
                           return std::string(i.param.name);
                         });

TEST(ReportLoss, UnknownCounterIsShownAsInfo) {
  testing::WriteOptions o = Lossless();
  o.shadow_counters["counter_of_a_newer_probe"] = 9;
  Joined j = JoinAndRender(o, "unknown");
  ASSERT_FALSE(j.html.empty());
  EXPECT_EQ(j.html.find("reports losses"), std::string::npos);
  EXPECT_NE(j.html.find("<tr class=\"ctx\"><td>shadow</td><td><code>counter_of_a_newer_probe</code></td>"),
            std::string::npos);
  EXPECT_NE(j.html.find("<code title=\"not known to this twinscope (a newer probe&#39;s counter): shown as "
                        "info\">counter_of_a_newer_probe</code>"),
            std::string::npos);
}

}  // namespace
}  // namespace twinscope
