// The counter table (include/twinscope/counters.def) as the one source of the loss verdict: a lossless
// trace has no finding and no strict problem, each loss counter made non-zero gives exactly one, an
// unknown counter is info, and docs/trace-format.md lists exactly the table.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "stats/trace_stats.h"
#include "twinscope/counters.h"

namespace twinscope::counters {
void PrintTo(const CounterInfo& c, std::ostream* os) { *os << c.name; }
}  // namespace twinscope::counters

namespace twinscope::stats {
namespace {

using counters::Collector;
using counters::CounterInfo;
using counters::Severity;

// A clean trace of the collector that writes `c`, with final counters holding `extra` beside the
// accounting a lossless run has (every launch seen has its kernel record; every block expected recorded).
TraceStats Trace(Collector c, const nlohmann::json& extra = nlohmann::json::object()) {
  StatsBuilder b;
  nlohmann::json counters = nlohmann::json::object();
  const bool shadow = c == Collector::kProbe;
  if (shadow) {
    counters = {{counters::kLaunchesSeen, 4},    {counters::kLaunchesMatching, 4}, {counters::kLaunchesTraced, 2},
                {counters::kLaunchesSkipped, 2}, {counters::kBlocksExpected, 0},   {counters::kBlocksRecorded, 0},
                {counters::kModulesLoaded, 1},   {counters::kModulesPatched, 1},   {counters::kSanitizerCallbacks, 9}};
  } else {
    KernelRecord k{};
    k.name = 1;
    k.start_ns = 100;
    k.end_ns = 200;
    b.OnKernel(k);
    counters = {{counters::kLaunchesSeen, 1}, {counters::kKernelRecords, 1}, {counters::kApiRecords, 3}};
  }
  for (const auto& [k, v] : extra.items()) counters[k] = v;
  b.OnStatus({{"counters", counters}}, true);
  return b.Finish({{1, "gemm"}}, {{"role", shadow ? "shadow" : "primary"}}, ReadReport{});
}

size_t Mentions(const std::vector<std::string>& lines, const std::string& name) {
  size_t n = 0;
  for (const auto& l : lines) n += l.find(name) != std::string::npos;
  return n;
}

TEST(CounterTable, NamesAreUniqueAndFound) {
  std::set<std::string_view> names;
  for (const CounterInfo& c : counters::kTable) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    EXPECT_EQ(counters::Find(c.name), &c);
    EXPECT_FALSE(c.help.empty()) << c.name;
  }
  EXPECT_EQ(counters::Find("no_such_counter"), nullptr);
  // The probe's count of matching launches is work done (issue 21: every report said it was a loss).
  EXPECT_EQ(counters::SeverityOf(counters::kLaunchesMatching), Severity::kInfo);
}

TEST(CounterTable, LosslessTracesHaveNoFindingsNoProblems) {
  for (Collector c : {Collector::kCupti, Collector::kProbe}) {
    TraceStats t = Trace(c);
    EXPECT_TRUE(LossFindings(t).empty()) << counters::CollectorName(c);
    EXPECT_TRUE(StrictProblems(t).empty()) << counters::CollectorName(c) << ": " << StrictProblems(t)[0];
    nlohmann::json j = StatsToJson(t, 0);
    EXPECT_EQ(j["loss"]["findings"], nlohmann::json::array());
    EXPECT_EQ(j["problems"], nlohmann::json::array());
  }
}

class EachCounter : public ::testing::TestWithParam<CounterInfo> {};

TEST_P(EachCounter, NonZeroGivesOneFindingIfALoss) {
  const CounterInfo& c = GetParam();
  // An accounting counter moves with its other side, as in a lossless run (else the verdict is a loss).
  nlohmann::json extra = {{std::string(c.name), 7}};
  const bool probe = c.collector == Collector::kProbe;
  if (c.name == counters::kLaunchesSeen && !probe) extra[counters::kKernelRecords] = 7;
  if (c.name == counters::kKernelRecords) extra[counters::kLaunchesSeen] = 7;
  if (c.name == counters::kBlocksExpected) extra[counters::kBlocksRecorded] = 7;
  if (c.name == counters::kBlocksRecorded) extra[counters::kBlocksExpected] = 7;
  TraceStats t = Trace(probe ? Collector::kProbe : Collector::kCupti, extra);
  const std::string name(c.name);
  std::vector<LossFinding> findings = LossFindings(t);
  nlohmann::json j = StatsToJson(t, 0);
  size_t in_json = 0;
  for (const auto& f : j["loss"]["findings"]) in_json += f["name"] == name;
  if (counters::IsLoss(c.severity)) {
    ASSERT_EQ(findings.size(), 1u) << name;
    EXPECT_EQ(findings[0].name, name);
    EXPECT_EQ(findings[0].value, 7u);
    EXPECT_EQ(findings[0].severity, c.severity);
    EXPECT_EQ(Mentions(StrictProblems(t), name), 1u) << name;
    EXPECT_EQ(StrictProblems(t).size(), 1u) << name;
    EXPECT_EQ(in_json, 1u);
    EXPECT_EQ(j["loss"]["findings"][0]["severity"], counters::SeverityName(c.severity));
  } else {
    EXPECT_TRUE(findings.empty()) << name << ": " << findings[0].text;
    EXPECT_TRUE(StrictProblems(t).empty()) << name;
    EXPECT_EQ(in_json, 0u);
  }
  // The shadow's counters carry it, whatever its severity.
  if (probe) {
    EXPECT_EQ(t.probe_counters.value(name, uint64_t{0}), 7u) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, EachCounter, ::testing::ValuesIn(counters::kTable),
                         [](const ::testing::TestParamInfo<CounterInfo>& i) { return std::string(i.param.name); });

TEST(CounterTable, UnknownCounterIsInfoNeverALoss) {
  for (Collector c : {Collector::kCupti, Collector::kProbe}) {
    TraceStats t = Trace(c, {{"counter_of_a_newer_writer", 5}});
    std::vector<LossFinding> f = LossFindings(t);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].name, "counter_of_a_newer_writer");
    EXPECT_EQ(f[0].severity, Severity::kInfo);
    EXPECT_NE(f[0].text.find("not known to this twinscope"), std::string::npos) << f[0].text;
    EXPECT_TRUE(StrictProblems(t).empty());
    EXPECT_EQ(StatsToJson(t, 0)["loss"]["findings"][0]["severity"], "info");
    if (c == Collector::kProbe) {
      EXPECT_EQ(t.probe_counters.value("counter_of_a_newer_writer", uint64_t{0}), 5u);
    }
  }
}

TEST(CounterTable, DocsMatchTheTable) {
  std::ifstream f(TWINSCOPE_SOURCE_DIR "/docs/trace-format.md");
  ASSERT_TRUE(f) << "docs/trace-format.md not found";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const size_t at = doc.find("\n### Counters\n");
  ASSERT_NE(at, std::string::npos) << "docs/trace-format.md has no \"### Counters\" section";
  std::istringstream lines(doc.substr(at));
  const std::regex row(R"(^\| `([a-z0-9_]+)` \| (info|data_loss|error) \| (both|cupti|probe) \| (.*) \|$)");
  std::vector<std::string> doc_rows, table_rows;
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (std::regex_match(l, m, row))
      doc_rows.push_back(m[1].str() + " " + m[2].str() + " " + m[3].str() + " " + m[4].str());
  }
  for (const CounterInfo& c : counters::kTable)
    table_rows.push_back(std::string(c.name) + " " + counters::SeverityName(c.severity) + " " +
                         counters::CollectorName(c.collector) + " " + std::string(c.help));
  EXPECT_EQ(doc_rows, table_rows) << "docs/trace-format.md's counter table differs from include/twinscope/counters.def";
}

}  // namespace
}  // namespace twinscope::stats
