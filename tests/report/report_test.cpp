// The HTML report as text: sections present, trace strings escaped in the markup and in the embedded
// JSON, the embedded copy of the join faithful and bounded, bad input refused with a clear message.
// How it behaves in a browser: report_browser_test.cpp.
#include "views/report/report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "report_test_util.h"
#include "sample_join.h"
#include "views/report/fields.h"
#include "views/report/html.h"

namespace twinscope {
namespace {

using nlohmann::json;
using testing_report::EmbeddedData;
using testing_report::MakeSampleJoin;
using testing_report::Occurrences;
using testing_report::Render;
using testing_report::SampleJoinOptions;
using testing_report::ScriptText;
using testing_report::SmallSampleJoin;

TEST(Report, RefusesWhatIsNotAJoin) {
  StatusOr<std::string> r = RenderReport(json::object({{"format", "twinscope-trace"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("twinscope join"), std::string::npos) << r.status().message();
  EXPECT_FALSE(RenderReport(json::array()).ok());
  r = RenderReport({{"format", "twinscope-join"}, {"version", 2}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("version 2"), std::string::npos) << r.status().message();
}

TEST(Report, HasEverySectionAndItsScripts) {
  ReportInfo info;
  std::string html = Render(MakeSampleJoin(SmallSampleJoin()), {}, &info);
  for (const char* id : {"summary", "why-slow", "blocks", "launches", "steps", "drift", "loss"})
    EXPECT_NE(html.find(std::string("<section id=\"") + id + "\">"), std::string::npos) << id;
  for (const char* id : {"ts-errors", "ts-launch-select", "ts-heatmap", "ts-order", "ts-heatmap-ref", "ts-steps",
                         "ts-launch-table", "ts-facts"})
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_EQ(info.bytes, html.size());
  EXPECT_EQ(info.detail_launches, 6u);
  EXPECT_EQ(info.detail_blocks, 6u * 512);
  // Self-contained: nothing is fetched.
  EXPECT_EQ(html.find("src=\""), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_EQ(info.charts, ReportHasCharts());
  EXPECT_EQ(html.find("Chart.js v") != std::string::npos, ReportHasCharts());
  // The stretch note goes wherever shadow times are shown.
  EXPECT_GE(Occurrences(html, "stretched by the block probe"), 3u);
}

TEST(Report, WithoutChartJsSaysSo) {
  ReportOptions o;
  o.inline_chartjs = false;
  ReportInfo info;
  std::string html = Render(MakeSampleJoin(SmallSampleJoin()), o, &info);
  EXPECT_FALSE(info.charts);
  EXPECT_EQ(html.find("Chart.js v"), std::string::npos);
  EXPECT_NE(html.find("Charts drawn by the report's own code (built without Chart.js)"), std::string::npos);
  EXPECT_EQ(EmbeddedData(html)["report"]["chartjs"], "");
}

TEST(Report, TraceStringsCannotBreakOutOfTheMarkup) {
  json join = MakeSampleJoin(SmallSampleJoin());
  std::string html = Render(join);
  // The hostile kernel name is nowhere raw: not in the markup, not in the embedded JSON.
  EXPECT_EQ(html.find("</script><script>window.tsPwned"), std::string::npos);
  EXPECT_EQ(html.find("<b>bold</b>"), std::string::npos);
  EXPECT_EQ(html.find("<b>hi</b>"), std::string::npos);
  // Escaped in the markup (summary, why slow, the selector), with invalid UTF-8 replaced.
  EXPECT_NE(html.find("evil&lt;int&gt;::k&lt;/script&gt;&lt;script&gt;window.tsPwned=1&lt;/script&gt;&amp;amp;"
                      "&quot;quoted&quot; &#39;single&#39; &lt;!-- \xEF\xBF\xBD\xEF\xBF\xBD end"),
            std::string::npos);
  EXPECT_NE(html.find("step#3 &lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;"), std::string::npos);
  // Exactly the script elements the report writes: guard, data, one per detailed launch, Chart.js, report.
  size_t scripts = 3 + 6 + (ReportHasCharts() ? 1 : 0);
  EXPECT_EQ(Occurrences(html, "<script"), scripts);
  EXPECT_EQ(Occurrences(html, "</script>"), scripts);
  std::string data = ScriptText(html, "<script type=\"application/json\" id=\"ts-data\">");
  for (const char* bad : {"<", ">", "&"}) EXPECT_EQ(data.find(bad), std::string::npos) << bad;
  // The embedded JSON gives back the same strings (invalid UTF-8 replaced by U+FFFD).
  json back = EmbeddedData(html);
  std::string expected = std::string(testing_report::kHostileKernel);
  expected.replace(expected.find("\xff\xfe"), 2, "\xEF\xBF\xBD\xEF\xBF\xBD");
  bool found = false;
  for (const auto& l : back["launches"]) found |= l["kernel"] == expected;
  EXPECT_TRUE(found) << "the hostile kernel name did not survive the round trip";
  EXPECT_EQ(back["primary"]["command_line"], join["primary"]["command_line"]);
  EXPECT_NE(html.find("<code>python3 serve.py --prompt &#39;&lt;b&gt;hi&lt;/b&gt; &amp; bye&#39;</code>"),
            std::string::npos);
}

TEST(Report, EscapingHelpers) {
  using report::Esc;
  EXPECT_EQ(Esc("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
  EXPECT_EQ(Esc("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");  // valid UTF-8 kept
  EXPECT_EQ(Esc("\xC3"), "\xEF\xBF\xBD");                                                          // truncated sequence
  EXPECT_EQ(Esc("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");                          // surrogate
  EXPECT_EQ(Esc(std::string("a\0b\x01", 4)),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  std::string j = report::JsonForScript(json{{"k", "</script><!--&\xE2\x80\xA8"}});
  EXPECT_EQ(j, R"({"k":"\u003c/script\u003e\u003c!--\u0026\u2028"})");
  EXPECT_EQ(json::parse(j)["k"], "</script><!--&\xE2\x80\xA8");
  EXPECT_EQ(report::Count(1234567), "1,234,567");
  EXPECT_EQ(report::Count(-1000), "-1,000");
  EXPECT_EQ(report::Count(INT64_MIN), "-9,223,372,036,854,775,808");
  EXPECT_EQ(report::Duration(850), "850 ns");
  EXPECT_EQ(report::Duration(12345), "12.3 \xC2\xB5s");
  EXPECT_EQ(report::Duration(1.234e6), "1.23 ms");
  EXPECT_EQ(report::Percent(1, 3), "33.3%");
  EXPECT_EQ(report::Percent(9999, 10000), ">99.9%");
  EXPECT_EQ(report::Percent(1, 1e6), "<0.1%");
  EXPECT_EQ(report::Percent(1, 0), "-");
}

TEST(Report, SummaryShowsTheCounts) {
  json join = MakeSampleJoin(SmallSampleJoin());
  join["summary"]["exact"] = 1234;
  join["summary"]["shadow_launches"] = 1240;
  join["summary"]["time_only"] = 4;
  join["summary"]["unmatched_shadow"] = 2;
  join["summary"]["time_only_accuracy"] = {{"evaluated", 1234}, {"agree", 1000}};
  join["options"]["concurrent"] = true;
  join["summary"]["overlapped_primary_kernels"] = 77;
  std::string html = Render(join);
  EXPECT_NE(html.find("<div class=\"value\">1,234</div><div class=\"sub\">99.5% of 1,240 shadow launches"),
            std::string::npos);
  EXPECT_NE(html.find("81.0%"), std::string::npos);  // time-only accuracy 1000 / 1234
  EXPECT_NE(html.find("picks the same kernel for 1,000 of 1,234 exact matches"), std::string::npos);
  EXPECT_NE(html.find("77 primary kernels ran while the shadow had GPU work"), std::string::npos);
  EXPECT_NE(html.find("sampling every=2"), std::string::npos);
}

TEST(Report, JoinWarningsAndProbeLossesAreShown) {
  json join = MakeSampleJoin(SmallSampleJoin());
  join["warnings"] = {"shadow trace is damaged: chunk 3 has a bad checksum; joined what could be read"};
  join["summary"]["shadow_without_blocks"] = 4;
  join["shadow"]["probe_counters"]["blocks_overflow"] = 12;
  join["shadow"]["loss"]["findings"].push_back(
      {{"name", "blocks_overflow"}, {"value", 12}, {"severity", "data_loss"}, {"text", "12 blocks that did not fit"}});
  std::string html = Render(join);
  EXPECT_NE(html.find("<li class=\"warn\">The join: shadow trace is damaged: chunk 3 has a bad checksum; joined what "
                      "could be read.</li>"),
            std::string::npos);
  EXPECT_NE(html.find("4 traced shadow launches have no block records"), std::string::npos);
  EXPECT_NE(html.find("<td><code title=\"blocks that did not fit in a device buffer\">blocks_overflow</code></td>"
                      "<td class=\"num bad\">12</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td>shadow</td><td><code>blocks_overflow</code></td><td class=\"num bad\">12</td>"),
            std::string::npos);
  EXPECT_NE(html.find("The shadow trace reports losses (1 counters not zero)"), std::string::npos);
  // Sampling is not loss, nor are the launches that matched (info in the counter table).
  EXPECT_NE(html.find("<tr class=\"ctx\"><td><code title=\"launches left out by "
                      "sampling\">launches_skipped_by_sampling</code></td><td class=\"num\">"),
            std::string::npos);
  EXPECT_NE(html.find("\">launches_matching</code></td><td class=\"num\">"), std::string::npos);
}

TEST(Report, CommandLineFromItsArguments) {
  json join = MakeSampleJoin(SmallSampleJoin());
  join["primary"]["command_line"] = {"python3", "app.py", "--name", "a b", "it's"};
  EXPECT_NE(Render(join).find("<code>python3 app.py --name &#39;a b&#39; &#39;it&#39;\\&#39;&#39;s&#39;</code>"),
            std::string::npos);
  join["primary"]["command_line"] = "python3 app.py";
  EXPECT_NE(Render(join).find("<code>python3 app.py</code>"), std::string::npos);
}

TEST(Report, LossAndDriftAreHighlighted) {
  json join = MakeSampleJoin(SmallSampleJoin());
  join["shadow"]["loss"]["writer_dropped"] = 5;
  join["shadow"]["loss"]["findings"].push_back({{"name", "writer_dropped_records"},
                                                {"value", 5},
                                                {"severity", "data_loss"},
                                                {"text", "5 records dropped by the writer's memory cap"}});
  std::string html = Render(join);
  EXPECT_NE(html.find("<td><code>writer_dropped</code></td><td class=\"num\">0</td><td class=\"num\">5</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td>shadow</td><td><code>writer_dropped_records</code></td><td class=\"num bad\">5</td>"),
            std::string::npos);
  EXPECT_NE(html.find("The shadow trace reports losses (1 counters not zero)"), std::string::npos);
  // Losses in trace order: the primary's, then the shadow's.
  EXPECT_LT(html.find("<td>primary</td><td><code>kernel_records_invalid_timestamp</code>"),
            html.find("<td>shadow</td><td><code>writer_dropped_records</code>"));
  // An info finding (a counter this build does not know) is listed, never counted.
  join["shadow"]["loss"]["findings"] = json::array(
      {{{"name", "newer_counter"}, {"value", 1}, {"severity", "info"}, {"text", "counter newer_counter = 1"}}});
  html = Render(join);
  EXPECT_EQ(html.find("The shadow trace reports losses"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"ctx\"><td>shadow</td><td><code>newer_counter</code></td><td class=\"num\">1"),
            std::string::npos);
  // Drifting ranges come first, right after the total.
  join["drift"] =
      json::array({{{"range", "step#0"}, {"exact", 5}, {"time_only", 0}, {"unmatched", 0}, {"shape_differs", 0}},
                   {{"range", "step#1"}, {"exact", 4}, {"time_only", 1}, {"unmatched", 0}, {"shape_differs", 0}},
                   {{"range", "step#2"}, {"exact", 2}, {"time_only", 0}, {"unmatched", 3}, {"shape_differs", 0}}});
  html = Render(join);
  size_t s0 = html.find("<td>step#0</td>"), s1 = html.find("<td>step#1</td>"), s2 = html.find("<td>step#2</td>");
  ASSERT_NE(s0, std::string::npos);
  EXPECT_LT(s2, s1);  // most drift first
  EXPECT_LT(s1, s0);
  EXPECT_NE(html.find("2 ranges drifted"), std::string::npos);
}

TEST(Report, BoundsTheLaunchTableAndKeepsReferencedLaunches) {
  SampleJoinOptions so = SmallSampleJoin();
  so.launches = 3000;
  so.launches_total = 1000000;
  json join = MakeSampleJoin(so);
  ReportOptions o;
  o.max_launch_rows = 500;
  ReportInfo info;
  std::string html = Render(join, o, &info);
  EXPECT_EQ(info.launch_rows, 500u);
  EXPECT_EQ(info.launches_total, 1000000u);
  EXPECT_NE(html.find("The 500 slowest of 1,000,000 matched launches"), std::string::npos);
  json d = EmbeddedData(html);
  EXPECT_EQ(d["report"]["launch_rows"], 500);
  const json& launches = d["launches"];
  ASSERT_GE(launches.size(), 500u);
  EXPECT_LE(launches.size(), 500u + 6);
  // The table's rows are the slowest, slowest first.
  std::vector<int64_t> all;
  for (const auto& l : join["launches"]) all.push_back(l["primary"]["dur_ns"]);
  std::sort(all.rbegin(), all.rend());
  for (size_t r = 0; r < 500; ++r) ASSERT_EQ(launches[r]["primary"]["dur_ns"], all[r]) << "row " << r;
  // Every launch that why-slow or the block detail names is in the copy.
  std::set<int64_t> ids;
  for (const auto& l : launches) ids.insert(l["id"].get<int64_t>());
  for (const auto& g : d["why_slow"]) {
    EXPECT_TRUE(ids.count(g["reference"].get<int64_t>()));
    for (const auto& s : g["slow"]) EXPECT_TRUE(ids.count(s["launch"].get<int64_t>()));
  }
  for (const auto& m : d["report"]["detail"]) EXPECT_TRUE(ids.count(m["launch"].get<int64_t>()));
  EXPECT_FALSE(d.contains("block_detail"));
  EXPECT_LT(html.size(), 3u << 20);
}

TEST(Report, BoundsTheBlockDetail) {
  SampleJoinOptions so = SmallSampleJoin();
  so.detail_launches = 12;
  json join = MakeSampleJoin(so);
  ReportOptions o;
  o.max_detail_launches = 8;
  ReportInfo info;
  std::string html = Render(join, o, &info);
  EXPECT_EQ(info.detail_launches, 8u);
  EXPECT_EQ(info.detail_launches_left_out, 4u);
  EXPECT_NE(html.find("4 more launches have block detail in the join"), std::string::npos);
  EXPECT_EQ(Occurrences(html, "type=\"application/octet-stream\""), 8u);
  // A block budget: launches that would pass it are left out whole.
  o.max_detail_launches = 32;
  o.max_detail_blocks = 512 * 3 + 100;
  html = Render(join, o, &info);
  EXPECT_EQ(info.detail_launches, 3u);
  EXPECT_EQ(info.detail_blocks, 512u * 3);
  EXPECT_EQ(info.detail_launches_left_out, 9u);
  json d = EmbeddedData(html);
  ASSERT_EQ(d["report"]["detail"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d["report"]["detail"][i]["launch"], join["block_detail"][i]["launch"]);
    EXPECT_EQ(d["report"]["detail"][i]["count"], 512);
  }
}

TEST(Report, MergesStepsPastTheBoundAndKeepsTheirSums) {
  SampleJoinOptions so = SmallSampleJoin();
  so.steps = 5003;
  so.launches = 200;
  json join = MakeSampleJoin(so);
  ReportOptions o;
  o.max_steps = 1000;
  json d = EmbeddedData(Render(join, o));
  ASSERT_EQ(d["steps"].size(), 1000u);
  double want = 0, got = 0, want_target = 0, got_target = 0;
  for (const auto& s : join["steps"]) {
    want += s["kernel_ns"].get<double>();
    want_target += s["target_ns"].get<double>();
  }
  size_t merged = 0;
  for (const auto& s : d["steps"]) {
    got += s["kernel_ns"].get<double>();
    got_target += s["target_ns"].get<double>();
    merged += s.value("steps", 1);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(got_target, want_target);
  EXPECT_EQ(merged, 5003u);
  EXPECT_NE(d["steps"][0]["range"].get<std::string>().find("step#0 \xE2\x80\xA6 step#"), std::string::npos);
}

TEST(Report, BoundsDriftRowsAndSumsTheRest) {
  SampleJoinOptions so = SmallSampleJoin();
  so.steps = 300;
  json join = MakeSampleJoin(so);
  ReportOptions o;
  o.max_drift_rows = 100;
  std::string html = Render(join, o);
  json d = EmbeddedData(html);
  ASSERT_EQ(d["drift"].size(), 101u);
  const json& rest = d["drift"][100];
  EXPECT_EQ(rest["range"], "200 more ranges");
  int64_t want = 0, got = 0;
  for (const auto& r : join["drift"]) want += r["exact"].get<int64_t>();
  for (const auto& r : d["drift"]) got += r["exact"].get<int64_t>();
  EXPECT_EQ(got, want);
  EXPECT_NE(html.find("<td>200 more ranges</td>"), std::string::npos);
}

TEST(Report, WhySlowShowsVerdictsAndSentences) {
  json join = MakeSampleJoin(SmallSampleJoin());
  std::string html = Render(join);
  for (const char* v : {"v-straggler", "v-fewer_sms", "v-reordered", "v-fewer_blocks", "v-none"})
    EXPECT_NE(html.find(v), std::string::npos) << v;
  for (const auto& s : join["why_slow"][0]["slow"])
    EXPECT_NE(html.find(report::Esc(s["text"].get<std::string>())), std::string::npos) << s["text"];
  // A slow launch with block detail links to it.
  int64_t id = join["why_slow"][0]["slow"][0]["launch"];
  EXPECT_NE(html.find("class=\"ts-show\" data-launch=\"" + std::to_string(id) + "\""), std::string::npos);
}

TEST(Report, MissingPartsAreSaidNotFatal) {
  ReportInfo info;
  std::string html = Render({{"format", "twinscope-join"}, {"version", 1}}, {}, &info);
  EXPECT_NE(html.find("The join holds no summary."), std::string::npos);
  EXPECT_NE(html.find("The join holds no &ldquo;why slow&rdquo; answer."), std::string::npos);
  EXPECT_NE(html.find("No launch has block detail in this join."), std::string::npos);
  EXPECT_NE(html.find("The join holds no matched launches."), std::string::npos);
  EXPECT_NE(html.find("The join holds no loss counters."), std::string::npos);
  EXPECT_EQ(info.launch_rows, 0u);
  // Wrong types where numbers and objects belong do not throw either.
  json bad = MakeSampleJoin(SmallSampleJoin());
  bad["summary"]["exact"] = "many";
  bad["launches"][0]["primary"] = 7;
  bad["launches"][1] = "x";
  bad["why_slow"][0]["slow"][0]["verdicts"] = "straggler";
  bad["block_detail"][0]["blocks"][0] = {1, 2};
  bad["steps"][0] = nullptr;
  Render(bad, {}, &info);
  EXPECT_EQ(info.malformed_block_rows, 1u);
}

TEST(Report, WriteReportWritesTheFileOrSaysWhy) {
  std::string dir = ::testing::TempDir() + "/report_write_test";
  std::filesystem::create_directories(dir);
  std::string path = dir + "/report.html";
  ReportInfo info;
  Status s = WriteReport(MakeSampleJoin(SmallSampleJoin()), path, {}, &info);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(std::filesystem::file_size(path), info.bytes);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  s = WriteReport(MakeSampleJoin(SmallSampleJoin()), dir + "/no/such/dir/report.html");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no/such/dir/report.html: cannot write the report"), std::string::npos) << s.message();
  s = WriteReport(json::object(), path);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(std::filesystem::file_size(path), info.bytes);  // a refused join leaves the old report alone
}

}  // namespace
}  // namespace twinscope

namespace twinscope {
namespace {

TEST(Report, LongKernelNamesAreShortWithTheFullNameOnHover) {
  using report::ShortKernelName;
  const std::string flash =
      "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::half_t>, true, "
      "false>(Flash_fwd_params)";
  EXPECT_EQ(ShortKernelName(flash), "void flash_fwd_kernel<...>(...)");
  EXPECT_EQ(ShortKernelName("void gemm<float>(float*)"), "void gemm<float>(float*)");  // short: whole
  EXPECT_EQ(ShortKernelName("void ns::Functor<int, std::allocator<int> >::operator()<float>(float*, long long, "
                            "std::vector<int, std::allocator<int> >)"),
            "void ns::Functor<...>::operator()<...>(...)");
  EXPECT_EQ(ShortKernelName("void (anonymous namespace)::elementwise_kernel<int, float, double, long, short, char, "
                            "bool>()"),
            "void (anonymous namespace)::elementwise_kernel<...>()");
  // Still too long, or no brackets to elide (a mangled name): cut in the middle.
  const std::string mangled(100, 'a');
  const std::string cut = ShortKernelName(mangled + "_Z" + mangled);
  EXPECT_EQ(cut, std::string(31, 'a') + "\xE2\x80\xA6" + std::string(31, 'a'));
  // Unbalanced brackets: nothing elided, only the middle cut.
  EXPECT_EQ(ShortKernelName(std::string(70, 'x') + "<int"),
            std::string(31, 'x') + "\xE2\x80\xA6" + std::string(27, 'x') + "<int");

  // In the page: why slow's heading and the selector show the short name, the full one in a title.
  json join = MakeSampleJoin(SmallSampleJoin());
  join["why_slow"][0]["kernel"] = flash;
  for (auto& l : join["launches"]) l["kernel"] = flash;
  std::string html = Render(join);
  EXPECT_NE(html.find("<code class=\"kernel\" title=\"" + report::Esc(flash) +
                      "\">void flash_fwd_kernel&lt;...&gt;(...)</code>"),
            std::string::npos);
  EXPECT_NE(html.find("blocks \xC2\xB7 void flash_fwd_kernel&lt;...&gt;(...)</option>"), std::string::npos);
  join["summary"]["target_kernels"] = json::array({flash});
  html = Render(join);
  EXPECT_NE(html.find("<li>Target kernels: <code title=\"" + report::Esc(flash) +
                      "\">void flash_fwd_kernel&lt;...&gt;(...)</code></li>"),
            std::string::npos);
}

// "Why slow" lists the shapes with findings only (docs/join.md): a shape without one is counted in the
// section's last line; past five launches with another block structure a shape says how many more there are.
TEST(Report, WhySlowListsFindingsAndCountsTheRest) {
  json j = MakeSampleJoin(SmallSampleJoin());
  ASSERT_GE(j["why_slow"].size(), 1u);
  json quiet = j["why_slow"][0];  // a shape without a finding
  quiet["grid"] = {7, 1, 1};
  quiet["slow"] = json::array();
  j["why_slow"].push_back(quiet);
  const size_t groups = j["why_slow"].size();
  json& slow = j["why_slow"][0]["slow"];
  size_t differ = 0;
  json one;
  for (const json& s : slow)
    if (s["verdicts"] != json::array({"none"})) ++differ, one = s;
  ASSERT_FALSE(one.is_null());
  for (; differ < 8; ++differ) slow.push_back(one);
  const std::string html = Render(j);
  const size_t a = html.find("<section id=\"why-slow\">"), b = html.find("</section>", a);
  ASSERT_NE(a, std::string::npos);
  const std::string section = html.substr(a, b - a);
  EXPECT_EQ(Occurrences(section, "<div class=\"group\">"), groups - 1) << section;
  EXPECT_NE(section.find("3 more with another block structure than the median launch&rsquo;s: " +
                         [&] {
                           std::string k;
                           for (const auto& v : one["verdicts"]) k += (k.empty() ? "" : "+") + v.get<std::string>();
                           return k;
                         }() +
                         " 3 ("),
            std::string::npos)
      << section;
  EXPECT_EQ(section.find("grid (7,1,1)"), std::string::npos) << "the shape without a finding is not listed";
  EXPECT_NE(section.find(">1 of " + std::to_string(groups) + " shapes had no finding"), std::string::npos) << section;
}

}  // namespace
}  // namespace twinscope
