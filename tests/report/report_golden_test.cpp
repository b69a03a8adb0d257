// The report's pages byte for byte: every sample the report's tests render (tests/report/sample_join.cpp
// with its option variants and the tests' edits, joins of the join tests' synthetic twins with loss
// counters, requests and block detail) is rendered and its SHA-256 compared with
// tests/report/golden/report_pages.sha256. A change to what the report writes fails here; when the change
// is intended, rewrite the file with
//   TWINSCOPE_UPDATE_GOLDEN=1 build/bin/twinscope_report_test --gtest_filter='ReportGolden.*'
// and say why in the commit. TWINSCOPE_REPORT_PAGES=DIR also writes each page there (diff two builds' pages).
// Pages are rendered without Chart.js and without deflate, and the embedded CSS/JS are left out of the
// hash, so the hashes hold for every build configuration and do not move when only the assets change.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "join/join_model.h"
#include "join/join_views.h"
#include "join_fixture.h"
#include "sample_join.h"
#include "served_scene.h"
#include "sha256.h"
#include "twinscope/counters.h"
#include "views/join_doc.h"
#include "views/report/report.h"
#include "views/report/report_assets.h"

namespace twinscope {
namespace {

using nlohmann::json;
using testing_report::MakeSampleJoin;
using testing_report::SampleJoinOptions;
using testing_report::SmallSampleJoin;

struct Page {
  std::string name;
  json join;
  ReportOptions options;
};

ReportOptions Stable() {
  ReportOptions o;
  o.inline_chartjs = false;
  o.deflate_blocks = false;
  return o;
}

// A join of the synthetic twins under `dir`, with the folder's name replaced by "DIR" so the page does not
// depend on where the test ran.
json Portable(const json& j, const std::string& dir) {
  std::string text = j.dump();
  for (size_t at = text.find(dir); at != std::string::npos; at = text.find(dir, at + 3))
    text.replace(at, dir.size(), "DIR");
  return json::parse(text);
}

// Per process: ctest runs this file's tests side by side, each building the same joins.
std::string FreshDir(const std::string& name) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("twinscope_report_golden_" + std::to_string(getpid()) + "_" + name))
          .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The fixture's twelve slow launches (testing::SlowLaunches: a straggler, fewer SMs, reordered), joined with
// their block detail; `counters` set on both collectors.
json TwinJoin(const std::string& name, const std::map<std::string, uint64_t>& primary_counters,
              const std::map<std::string, uint64_t>& shadow_counters) {
  const std::string dir = FreshDir(name);
  const std::vector<testing::FakeLaunch> v = testing::SlowLaunches();
  testing::WriteOptions o;
  o.other_kernels = {"rms_norm_kernel"};
  o.primary_counters = primary_counters;
  o.shadow_counters = shadow_counters;
  auto files = testing::WriteTwin(dir, v, o);
  auto m = join::JoinTraces(files.primary, files.shadow, {});
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return json::object();
  auto blocks = join::ReadShadowBlocks(m->shadow_path, join::DetailSeqs(*m, 32));
  EXPECT_TRUE(blocks.ok());
  json j = Portable(views::JoinJson(*m, {}, blocks.ok() ? *blocks : std::vector<join::LaunchBlocks>{}), dir);
  std::filesystem::remove_all(dir);
  return j;
}

json ServedJoin(bool arrivals) {
  const std::string dir = FreshDir(arrivals ? "arrivals" : "served");
  const join::JoinedModel m =
      arrivals ? testing::JoinServedWithArrivals(dir, 1'796'113'162'000'000) : testing::JoinServed(dir, true);
  json j = Portable(views::JoinJson(m, {}, {}), dir);
  std::filesystem::remove_all(dir);
  return j;
}

std::vector<Page> Pages() {
  std::vector<Page> p;
  auto add = [&](std::string name, json join, ReportOptions o = Stable()) {
    p.push_back({std::move(name), std::move(join), o});
  };
  add("sample_default", MakeSampleJoin());
  add("small", MakeSampleJoin(SmallSampleJoin()));
  {
    SampleJoinOptions so = SmallSampleJoin();
    so.concurrent = true;
    so.hostile_names = false;
    so.seed = 7;
    add("small_concurrent_plain", MakeSampleJoin(so));
  }
  {
    SampleJoinOptions so = SmallSampleJoin();
    so.launches = 3000;
    so.launches_total = 1000000;
    ReportOptions o = Stable();
    o.max_launch_rows = 500;
    add("bounded_launches", MakeSampleJoin(so), o);
  }
  {
    SampleJoinOptions so = SmallSampleJoin();
    so.detail_launches = 12;
    ReportOptions o = Stable();
    o.max_detail_launches = 8;
    add("bounded_detail", MakeSampleJoin(so), o);
    o.max_detail_launches = 32;
    o.max_detail_blocks = 512 * 3 + 100;
    add("bounded_detail_blocks", MakeSampleJoin(so), o);
  }
  {
    SampleJoinOptions so = SmallSampleJoin();
    so.steps = 5003;
    so.launches = 200;
    ReportOptions o = Stable();
    o.max_steps = 1000;
    add("merged_steps", MakeSampleJoin(so), o);
  }
  {
    SampleJoinOptions so = SmallSampleJoin();
    so.steps = 300;
    ReportOptions o = Stable();
    o.max_drift_rows = 100;
    add("bounded_drift", MakeSampleJoin(so), o);
  }
  {  // report_test's edits of the sample (SummaryShowsTheCounts, JoinWarnings..., LossAndDrift..., names)
    json j = MakeSampleJoin(SmallSampleJoin());
    j["summary"]["exact"] = 1234;
    j["summary"]["shadow_launches"] = 1240;
    j["summary"]["time_only"] = 4;
    j["summary"]["unmatched_shadow"] = 2;
    j["summary"]["time_only_accuracy"] = {{"evaluated", 1234}, {"agree", 1000}};
    j["options"]["concurrent"] = true;
    j["summary"]["overlapped_primary_kernels"] = 77;
    j["warnings"] = {"shadow trace is damaged: chunk 3 has a bad checksum; joined what could be read"};
    j["summary"]["shadow_without_blocks"] = 4;
    j["shadow"]["probe_counters"]["blocks_overflow"] = 12;
    j["shadow"]["loss"]["findings"].push_back({{"name", "blocks_overflow"},
                                               {"value", 12},
                                               {"severity", "data_loss"},
                                               {"text", "12 blocks that did not fit"}});
    j["shadow"]["loss"]["writer_dropped"] = 5;
    j["shadow"]["loss"]["findings"].push_back(
        {{"name", "newer_counter"}, {"value", 1}, {"severity", "info"}, {"text", "counter newer_counter = 1"}});
    j["primary"]["command_line"] = {"python3", "app.py", "--name", "a b", "it's"};
    add("edited_counts_warnings_loss", j);
    j["primary"]["command_line"] = "python3 app.py";
    j["drift"] = json::array(
        {{{"range", "step#0"}, {"exact", 5}, {"diverged", 0}, {"time_only", 0}, {"unmatched", 0}, {"shape_differs", 0}},
         {{"range", "step#1"}, {"exact", 4}, {"diverged", 0}, {"time_only", 1}, {"unmatched", 0}, {"shape_differs", 0}},
         {{"range", "step#2"},
          {"exact", 2},
          {"diverged", 0},
          {"time_only", 0},
          {"unmatched", 3},
          {"shape_differs", 0}}});
    const std::string flash =
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::half_t>, true, "
        "false>(Flash_fwd_params)";
    j["why_slow"][0]["kernel"] = flash;
    for (auto& l : j["launches"]) l["kernel"] = flash;
    j["summary"]["target_kernels"] = json::array({flash});
    add("edited_command_drift_names", j);
  }
  add("minimal", {{"format", "twinscope-join"}, {"version", 1}});
  // Joins of synthetic twins (the loss, requests and browser tests' kind).
  add("twins_lossless", TwinJoin("lossless",
                                 {{counters::kLaunchesSeen, 24},
                                  {counters::kKernelRecords, 24},
                                  {counters::kApiRecords, 48},
                                  {counters::kBuffersCompleted, 1}},
                                 {{counters::kLaunchesSeen, 24},
                                  {counters::kLaunchesMatching, 12},
                                  {counters::kLaunchesTraced, 12},
                                  {counters::kBlocksExpected, 12 * 64},
                                  {counters::kBlocksRecorded, 12 * 64}}));
  add("twins_lossy", TwinJoin("lossy", {{counters::kLaunchesSeen, 24}, {counters::kCuptiDropped, 3}},
                              {{counters::kLaunchesSeen, 24}, {counters::kBlocksOverflow, 5}}));
  add("served", ServedJoin(false));
  add("served_arrivals", ServedJoin(true));
  {
    ReportOptions o = Stable();
    o.max_request_rows = 2;
    o.max_request_steps = 3;
    add("served_arrivals_bounded", ServedJoin(true), o);
  }
  return p;
}

// The page without its embedded assets (the CSS and scripts of src/views/report/assets).
std::string WithoutAssets(std::string html) {
  for (std::string_view asset : {report_assets::Css(), report_assets::GuardJs(), report_assets::ReportJs()}) {
    if (asset.empty()) continue;
    const size_t at = html.find(asset);
    if (at != std::string::npos) html.replace(at, asset.size(), "(asset)");
  }
  return html;
}

// The embedded JSON copy of the join (what the page's script draws from).
std::string DataOf(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"ts-data\">";
  const size_t at = html.find(open);
  if (at == std::string::npos) return "";
  const size_t from = at + open.size();
  return html.substr(from, html.find("</script>", from) - from);
}

TEST(ReportGolden, PagesAreByteIdentical) {
  std::ostringstream got;
  got << "# SHA-256 of each page of tests/report/report_golden_test.cpp: name, page (assets left out), embedded data.\n"
         "# Rewrite: TWINSCOPE_UPDATE_GOLDEN=1 build/bin/twinscope_report_test "
         "--gtest_filter='ReportGolden.*'\n";
  const char* pages_dir = std::getenv("TWINSCOPE_REPORT_PAGES");
  for (const Page& p : Pages()) {
    StatusOr<std::string> html = RenderReport(p.join, p.options);
    ASSERT_TRUE(html.ok()) << p.name << ": " << html.status().message();
    const std::string page = WithoutAssets(*html);
    got << p.name << " " << testing_report::Sha256Hex(page) << " " << testing_report::Sha256Hex(DataOf(page)) << "\n";
    if (pages_dir) std::ofstream(std::string(pages_dir) + "/" + p.name + ".html", std::ios::binary) << page;
  }
  const std::string path = std::string(TWINSCOPE_REPORT_GOLDEN_DIR) + "/report_pages.sha256";
  if (std::getenv("TWINSCOPE_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << got.str();
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream f(path, std::ios::binary);
  std::stringstream want;
  want << f.rdbuf();
  ASSERT_FALSE(want.str().empty()) << path << " is missing (TWINSCOPE_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(got.str(), want.str())
      << "the report's pages changed. If the change is intended, rewrite " << path
      << " with TWINSCOPE_UPDATE_GOLDEN=1 (TWINSCOPE_REPORT_PAGES=DIR writes the pages to compare two builds)";
}

// The pages' joins are join.json as the join writes it: read into the typed document and written again,
// each is the same JSON (so the pages' embedded copies can stay byte-identical when the report renders from
// the document).
TEST(ReportGolden, SampleJoinsAreWhatJoinJsonHolds) {
  for (const Page& p : Pages()) {
    StatusOr<views::JoinDoc> doc = views::JoinDocFromJson(p.join);
    ASSERT_TRUE(doc.ok()) << p.name << ": " << doc.status().message();
    auto text = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
    const json back = views::ToJson(*doc);
    EXPECT_EQ(text(back), text(p.join)) << p.name << ": " << text(json::diff(p.join, back)).substr(0, 2000);
  }
}

TEST(ReportGolden, HashIsSha256) {
  EXPECT_EQ(testing_report::Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(testing_report::Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(testing_report::Sha256Hex(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

}  // namespace
}  // namespace twinscope
