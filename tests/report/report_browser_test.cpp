// The HTML report in headless Chromium (DevTools protocol, tests/report/chromium.h): it loads from a
// file:// URL with no console error, shows its sections, draws every chart and every detailed
// launch (the page's own decoder checked against the join's blocks), keeps hostile names inert, and
// reports damaged block data on the page. Leaves report-sample.html and report-sample.png in the
// build folder. Without Chromium every test fails with how to install it: it never skips.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "chromium.h"
#include "join/join_model.h"
#include "join/join_views.h"
#include "join_fixture.h"
#include "sample_join.h"
#include "views/join_doc.h"
#include "views/report/fields.h"
#include "views/report/processes.h"
#include "views/report/report.h"

namespace twinscope {
namespace {

using nlohmann::json;
using testing_report::Browser;
using testing_report::FileUrl;
using testing_report::MakeSampleJoin;
using testing_report::SampleJoinOptions;

std::string BuildDir() {
#ifdef TWINSCOPE_BUILD_DIR
  return TWINSCOPE_BUILD_DIR;
#else
  return ::testing::TempDir();
#endif
}

// What the page shows after its first render, gathered in one evaluation.
constexpr const char* kInspect = R"JS(
(async () => {
  const timings = await window.tsReady;
  const q = (s) => document.querySelector(s);
  const attr = (s, a) => (q(s) ? q(s).getAttribute(a) : null);
  return {
    timings,
    ready: document.body.getAttribute("data-ready"),
    errors: Number(attr("#ts-errors", "data-count")),
    error_text: q("#ts-errors").innerText,
    sections: Array.from(document.querySelectorAll("main > section")).map((s) => s.id),
    steps_drawn: attr("#ts-steps", "data-drawn"),
    steps_renderer: attr("#ts-steps", "data-renderer"),
    // Pixels of the step chart's two bar colours (report.js's C.accent and C.other): a chart was drawn.
    steps_ink: (() => {
      const c = q("#ts-steps");
      if (!c || !c.width || !c.height) return null;
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      const near = (i, r, g, b) => Math.abs(d[i] - r) < 8 && Math.abs(d[i + 1] - g) < 8 && Math.abs(d[i + 2] - b) < 8;
      let target = 0, other = 0;
      for (let i = 0; i < d.length; i += 4) {
        if (d[i + 3] < 200) continue;
        if (near(i, 47, 109, 181)) target++;
        else if (near(i, 195, 202, 212)) other++;
      }
      return { target, other };
    })(),
    kernel_cells: Array.from(document.querySelectorAll("#ts-launch-table .clip, code.kernel, #summary code[title]"))
                    .map((e) => ({ text: e.textContent, title: e.title })),
    heat_drawn: attr("#ts-heatmap", "data-drawn"),
    heat_launch: attr("#ts-heatmap", "data-launch"),
    order_drawn: attr("#ts-order", "data-drawn"),
    ref_hidden: q("#ts-ref-figure").hidden,
    ref_drawn: attr("#ts-heatmap-ref", "data-drawn"),
    rows: Number(attr("#ts-launch-table", "data-rows")),
    options: document.querySelectorAll("#ts-launch-select option").length,
    no_chart: document.querySelectorAll(".no-chart").length,
    facts: q("#ts-facts").innerText,
    pwned: window.tsPwned === undefined ? null : window.tsPwned,
    text: document.body.innerText,
  };
})()
)JS";

class ReportBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(testing_report::ChromiumPath().empty()) << testing_report::InstallHint();
    ASSERT_TRUE(browser_.Start()) << browser_.error() << "\n" << browser_.LogTail();
  }

  json Load(const std::string& path) {
    EXPECT_TRUE(browser_.Navigate(FileUrl(path))) << browser_.error();
    json r = browser_.Evaluate(kInspect);
    EXPECT_TRUE(r.is_object()) << browser_.error();
    return r.is_object() ? r : json::object();
  }

  void ExpectNoConsoleErrors() {
    for (const auto& e : browser_.console_errors()) ADD_FAILURE() << "console: " << e;
  }

  Browser browser_;
};

// Sums of the join's blocks per detailed launch, to check the page's decoder against.
struct Sums {
  double block = 0, sm = 0, order = 0;
};
std::map<int64_t, Sums> BlockSums(const json& join) {
  std::map<int64_t, Sums> out;
  for (const auto& d : join["block_detail"]) {
    Sums& s = out[d["launch"].get<int64_t>()];
    for (const auto& b : d["blocks"]) {
      s.block += b[0].get<double>();
      s.sm += b[1].get<double>();
      s.order += b[4].get<double>();
    }
  }
  return out;
}

TEST_F(ReportBrowser, SampleReportLoadsDrawsAndLeavesAScreenshot) {
  SampleJoinOptions o;  // 240 launches, 12 detailed launches of 4,096 blocks, hostile names
  json join = MakeSampleJoin(o);
  std::string html = BuildDir() + "/report-sample.html";
  ReportInfo info;
  Status s = WriteReport(join, html, {}, &info);
  ASSERT_TRUE(s.ok()) << s.message();

  json r = Load(html);
  ExpectNoConsoleErrors();
  EXPECT_EQ(r["ready"], "1") << r.dump();
  EXPECT_EQ(r["errors"], 0) << r["error_text"];
  EXPECT_EQ(r["sections"], json({"summary", "why-slow", "blocks", "launches", "steps", "drift", "loss"}));
  EXPECT_EQ(r["options"], 12);
  EXPECT_EQ(r["rows"], 100);  // the first rows; the rest come as the table scrolls
  // The step chart: by Chart.js where this build inlined it, else by the page's own canvas code (the
  // test below draws that one in every build); either way its bars are on the canvas.
  EXPECT_EQ(r["steps_drawn"], std::to_string(o.steps));
  EXPECT_EQ(r["steps_renderer"], ReportHasCharts() ? "chartjs" : "canvas");
  EXPECT_GT(r["steps_ink"]["target"].get<int>(), 100) << r["steps_ink"];
  EXPECT_GT(r["steps_ink"]["other"].get<int>(), 100) << r["steps_ink"];
  // The first slow launch is shown, beside its reference.
  int64_t first_slow = join["block_detail"][1]["launch"];
  EXPECT_EQ(r["heat_launch"], std::to_string(first_slow));
  EXPECT_EQ(r["heat_drawn"], std::to_string(o.blocks));
  EXPECT_EQ(r["order_drawn"], std::to_string(o.blocks));
  EXPECT_EQ(r["ref_hidden"], false);
  EXPECT_EQ(r["ref_drawn"], std::to_string(o.blocks));
  EXPECT_NE(r["facts"].get<std::string>().find("this launch"), std::string::npos);
  // Hostile names are text, not markup or script.
  EXPECT_TRUE(r["pwned"].is_null()) << "a kernel name ran as script";
  std::string text = r["text"];
  // Long names are shown short; the full name, hostile as it is, is the title (hover).
  bool hostile_title = false;
  for (const auto& k : r["kernel_cells"])
    hostile_title |= k["title"].get<std::string>().find(
                         "evil<int>::k</script><script>window.tsPwned=1</script>&amp;"
                         "\"quoted\" 'single' <!--") != std::string::npos;
  EXPECT_TRUE(hostile_title) << r["kernel_cells"];
  EXPECT_NE(text.find("step#3 </script><b>bold</b>"), std::string::npos);

  ASSERT_TRUE(browser_.Screenshot(BuildDir() + "/report-sample.png")) << browser_.error();
  EXPECT_GT(std::filesystem::file_size(BuildDir() + "/report-sample.png"), 50000u);

  // Every detailed launch, decoded by the page, matches the join's blocks; every table row renders.
  json st = browser_.Evaluate("window.tsSelftest()");
  ASSERT_TRUE(st.is_object()) << browser_.error();
  EXPECT_EQ(st["rows"], o.launches);
  auto sums = BlockSums(join);
  ASSERT_EQ(st["launches"].size(), sums.size());
  for (const auto& l : st["launches"]) {
    int64_t id = l["launch"];
    SCOPED_TRACE("launch " + std::to_string(id));
    EXPECT_EQ(l["drawn"], o.blocks);
    EXPECT_EQ(l["order_drawn"], o.blocks);
    EXPECT_EQ(l["sum_block"].get<double>(), sums[id].block);
    EXPECT_EQ(l["sum_sm"].get<double>(), sums[id].sm);
    EXPECT_EQ(l["sum_order"].get<double>(), sums[id].order);
    const json* launch = nullptr;
    for (const auto& x : join["launches"])
      if (x["id"] == id) launch = &x;
    ASSERT_NE(launch, nullptr);
    EXPECT_EQ(l["straggler"], std::to_string((*launch)["shadow"]["straggler"]["block"].get<int64_t>()));
  }
  ExpectNoConsoleErrors();
  json after = browser_.Evaluate("Number(document.getElementById('ts-errors').getAttribute('data-count'))");
  EXPECT_EQ(after, 0);
}

TEST_F(ReportBrowser, RawBlocksAndNoChartJsStillWork) {
  SampleJoinOptions o;
  o.launches = 40;
  o.detail_launches = 3;
  o.blocks = 700;
  o.sms = 20;
  o.steps = 8;
  json join = MakeSampleJoin(o);
  ReportOptions ro;
  ro.deflate_blocks = false;
  ro.inline_chartjs = false;
  std::string html = BuildDir() + "/report-nochart.html";
  ASSERT_TRUE(WriteReport(join, html, ro).ok());
  json r = Load(html);
  ExpectNoConsoleErrors();
  EXPECT_EQ(r["ready"], "1");
  EXPECT_EQ(r["errors"], 0) << r["error_text"];
  // Without Chart.js the page draws the step chart itself (issue 21: it was a note).
  EXPECT_EQ(r["no_chart"], 0);
  EXPECT_EQ(r["steps_drawn"], "8");
  EXPECT_EQ(r["steps_renderer"], "canvas");
  EXPECT_GT(r["steps_ink"]["target"].get<int>(), 100) << r["steps_ink"];
  EXPECT_GT(r["steps_ink"]["other"].get<int>(), 100) << r["steps_ink"];
  EXPECT_NE(r["text"].get<std::string>().find("Charts drawn by the report's own code"), std::string::npos);
  EXPECT_EQ(r["heat_drawn"], "700");
  EXPECT_EQ(r["order_drawn"], "700");
  EXPECT_EQ(r["rows"], 40);
  json st = browser_.Evaluate("window.tsSelftest()");
  ASSERT_TRUE(st.is_object()) << browser_.error();
  auto sums = BlockSums(join);
  for (const auto& l : st["launches"]) EXPECT_EQ(l["sum_block"].get<double>(), sums[l["launch"]].block);
}

TEST_F(ReportBrowser, LongKernelNamesAreShortInTheTableWithTheFullNameAsTitle) {
  SampleJoinOptions o;
  o.launches = 20;
  o.detail_launches = 2;
  o.blocks = 300;
  o.sms = 10;
  o.steps = 3;
  o.hostile_names = false;
  json join = MakeSampleJoin(o);
  const std::string flash =
      "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::half_t>, true, "
      "false>(Flash_fwd_params)";
  for (auto& l : join["launches"]) l["kernel"] = flash;
  std::string html = BuildDir() + "/report-long-names.html";
  ASSERT_TRUE(WriteReport(join, html).ok());
  json r = Load(html);
  ExpectNoConsoleErrors();
  EXPECT_EQ(r["errors"], 0) << r["error_text"];
  size_t cells = 0;
  for (const auto& k : r["kernel_cells"]) {
    if (k["title"] != flash) continue;
    ++cells;
    EXPECT_EQ(k["text"], report::ShortKernelName(flash)) << k;  // the page's shortName agrees with the C++
  }
  EXPECT_GE(cells, 10u) << r["kernel_cells"];
}

TEST_F(ReportBrowser, DamagedBlockDataIsReportedOnThePage) {
  SampleJoinOptions o;
  o.launches = 30;
  o.detail_launches = 2;
  o.blocks = 600;
  o.sms = 20;
  o.steps = 5;
  std::string html = *RenderReport(MakeSampleJoin(o));
  // Cut the second launch's (the first shown) block data short.
  std::string open = "<script type=\"application/octet-stream\" id=\"ts-blocks-1\">";
  size_t at = html.find(open) + open.size();
  size_t end = html.find("</script>", at);
  ASSERT_GT(end - at, 200u);
  html.erase(at + 100, end - at - 100 - ((end - at - 100) % 4));
  std::string path = BuildDir() + "/report-damaged.html";
  std::ofstream(path) << html;
  json r = Load(path);
  EXPECT_EQ(r["ready"], "error");
  EXPECT_GE(r["errors"].get<int>(), 1);
  EXPECT_NE(r["error_text"].get<std::string>().find("launch #"), std::string::npos) << r["error_text"];
}

}  // namespace
}  // namespace twinscope

// The report of a real join (src/join) of synthetic twin traces (tests/join/join_fixture.h): one shape,
// a reference and one slow launch per verdict.
namespace twinscope {
namespace {

using testing::EvenBlocks;
using testing::FakeLaunch;

json RealJoin(const std::string& dir) {
  std::vector<FakeLaunch> v = testing::EvenSteps(12, 256, 16);
  v[3].dur_ns = 40'000;  // straggler
  v[3].blocks[200].exit_ns += 200'000;
  v[5].dur_ns = 35'000;  // fewer SMs
  v[5].blocks = EvenBlocks(256, 4, 2'000);
  v[7].dur_ns = 30'000;  // reordered
  for (auto& b : v[7].blocks) b.order = 255 - b.block;
  v[9].dur_ns = 25'000;  // fewer blocks
  for (auto& b : v[9].blocks)
    if (b.block >= 40) b.exit_ns = b.enter_ns + 50;
  auto files = testing::WriteTwin(dir, v);
  auto m = join::JoinTraces(files.primary, files.shadow, {});
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return json::object();
  auto blocks = join::ReadShadowBlocks(m->shadow_path, join::DetailSeqs(*m, 32));
  EXPECT_TRUE(blocks.ok()) << blocks.status().message();
  return views::JoinJson(*m, {}, blocks.ok() ? *blocks : std::vector<join::LaunchBlocks>{});
}

TEST_F(ReportBrowser, ReportOfARealJoin) {
  const std::string dir = BuildDir() + "/report-real-join";
  std::filesystem::create_directories(dir);
  json join = RealJoin(dir);
  ASSERT_EQ(join["format"], "twinscope-join");
  ASSERT_GE(join["block_detail"].size(), 5u);
  ReportInfo info;
  ASSERT_TRUE(WriteReport(join, dir + "/report.html", {}, &info).ok());
  EXPECT_EQ(info.detail_launches, join["block_detail"].size());
  EXPECT_EQ(info.malformed_block_rows, 0u);
  json r = Load(dir + "/report.html");
  ExpectNoConsoleErrors();
  EXPECT_EQ(r["ready"], "1");
  EXPECT_EQ(r["errors"], 0) << r["error_text"];
  std::string text = r["text"];
  for (const char* v : {"straggler", "fewer SMs", "reordered", "fewer blocks"})
    EXPECT_NE(text.find(v), std::string::npos) << v;
  ASSERT_TRUE(browser_.Screenshot(dir + "/report.png")) << browser_.error();
  json st = browser_.Evaluate("window.tsSelftest()");
  ASSERT_TRUE(st.is_object()) << browser_.error();
  auto sums = BlockSums(join);
  ASSERT_EQ(st["launches"].size(), sums.size());
  for (const auto& l : st["launches"]) {
    EXPECT_EQ(l["drawn"], 256);
    EXPECT_EQ(l["sum_block"].get<double>(), sums[l["launch"]].block);
    EXPECT_EQ(l["sum_sm"].get<double>(), sums[l["launch"]].sm);
  }
}

}  // namespace
}  // namespace twinscope

// The Requests section of a serving run's report in the browser: a real join (src/join) of synthetic
// traces whose ranges are named as the demo server's steps, with a request trace; picking a request
// shows its steps, and its block-picture links show those launches' blocks.
namespace twinscope {
namespace {

constexpr const char kHostileRequest[] = "r</script><script>window.tsPwned=2</script>";

json ServedJoin(const std::string& dir) {
  const std::vector<std::string> names = {"prefill step 0 [a:9,b:9]", "decode step 1 [a:1,b:1]",
                                          "decode step 2 [a:1,b:1]", "decode step 3 [b:1]", "decode step 4 [x:1]"};
  std::vector<FakeLaunch> v;
  for (size_t s = 0; s < names.size(); ++s) {
    for (uint32_t i = 0; i < 2; ++i) {
      FakeLaunch l;
      l.path = names[s] + "#0";
      l.ordinal = i;
      l.grid = {s == 0 ? 18u : 2u, 1, 1};
      l.cpu_ns = 1'000'000 * (2 * s + i + 1);
      l.dur_ns = 10'000 + 1'000 * s + 100 * i;
      v.push_back(l);
    }
  }
  auto files = testing::WriteTwin(dir, v);
  std::ofstream(dir + "/requests-primary.jsonl")
      << R"({"id":"a","status":200,"prompt_tokens":9,"completion_tokens":3,"prefill_step":0,"steps":[0,1,2]})"
      << "\n"
      << json({{"id", "b"}, {"status", 200}, {"prompt_tokens", 9}, {"prefill_step", 0}, {"steps", {0, 1, 2, 3}}}).dump()
      << "\n"
      << json({{"id", kHostileRequest}, {"status", 200}, {"steps", {4}}}).dump() << "\n";
  join::JoinOptions o;
  o.requests.trace = dir + "/requests-primary.jsonl";
  auto m = join::JoinTraces(files.primary, files.shadow, o);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return json::object();
  auto blocks = join::ReadShadowBlocks(m->shadow_path, join::DetailSeqs(*m, 4));  // fewer pictures than launches
  EXPECT_TRUE(blocks.ok());
  return views::JoinJson(*m, {}, blocks.ok() ? *blocks : std::vector<join::LaunchBlocks>{});
}

constexpr const char* kRequests = R"JS(
(async () => {
  await window.tsReady;
  const box = document.getElementById("ts-request-detail");
  const heat = document.getElementById("ts-heatmap");
  const state = () => ({ request: box.getAttribute("data-request"), steps: Number(box.getAttribute("data-steps")),
                         links: box.querySelectorAll("p.ts-req-pictures a.ts-show").length,
                         counted: Number(box.getAttribute("data-links")), text: box.innerText });
  const first = state();
  const sel = document.getElementById("ts-request-select");
  sel.value = "1";
  sel.dispatchEvent(new Event("change"));
  const second = state();
  const a = box.querySelector("p.ts-req-pictures a.ts-show");
  const want = a ? a.getAttribute("data-launch") : null;
  if (a) a.click();
  for (let k = 0; k < 100 && heat.getAttribute("data-launch") !== want; k++) await new Promise((r) => setTimeout(r, 50));
  const shown = heat.getAttribute("data-launch");
  document.querySelector('a.ts-req[data-request="2"]').click();
  const third = state();
  return { first, second, want, shown, third, options: sel.options.length,
           sections: Array.from(document.querySelectorAll("main > section")).map((s) => s.id),
           errors: Number(document.getElementById("ts-errors").getAttribute("data-count")),
           pwned: window.tsPwned === undefined ? null : window.tsPwned };
})()
)JS";

TEST_F(ReportBrowser, RequestsShowTheirStepsAndLinkToBlockPictures) {
  const std::string dir = BuildDir() + "/report-requests";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  json join = ServedJoin(dir);
  ASSERT_TRUE(join.contains("requests"));
  ASSERT_EQ(join["block_detail"].size(), 4u);
  ASSERT_TRUE(WriteReport(join, dir + "/report.html").ok());
  json base = Load(dir + "/report.html");
  EXPECT_EQ(base["ready"], "1");
  ASSERT_TRUE(browser_.Navigate(FileUrl(dir + "/report.html"))) << browser_.error();
  json r = browser_.Evaluate(kRequests);
  ASSERT_TRUE(r.is_object()) << browser_.error();
  ExpectNoConsoleErrors();
  EXPECT_EQ(r["errors"], 0);
  EXPECT_EQ(r["sections"], json({"summary", "requests", "why-slow", "blocks", "launches", "steps", "drift", "loss"}));
  EXPECT_EQ(r["options"], 3);
  // The first request: its three steps; its slowest launch (step 2, the second) has a picture.
  EXPECT_EQ(r["first"]["request"], "a");
  EXPECT_EQ(r["first"]["steps"], 3);
  EXPECT_GE(r["first"]["links"].get<int>(), 1);
  EXPECT_EQ(r["first"]["links"], r["first"]["counted"]);
  EXPECT_NE(r["first"]["text"].get<std::string>().find("3 steps (1 prefill, 2 decode)"), std::string::npos)
      << r["first"]["text"];
  EXPECT_EQ(r["second"]["request"], "b");
  EXPECT_EQ(r["second"]["steps"], 4);
  EXPECT_GE(r["second"]["links"].get<int>(), 1);
  // Its block-picture link shows that launch's blocks.
  ASSERT_FALSE(r["want"].is_null());
  EXPECT_EQ(r["shown"], r["want"]);
  // A click on a request in the table picks it; its hostile id stays text.
  EXPECT_EQ(r["third"]["request"], kHostileRequest);
  EXPECT_NE(r["third"]["text"].get<std::string>().find(kHostileRequest), std::string::npos);
  EXPECT_TRUE(r["pwned"].is_null()) << "a request id ran as script";
  ASSERT_TRUE(browser_.Screenshot(dir + "/report.png")) << browser_.error();
}

// Evaluates `expression` (which waits for the page it expects) on the page a navigation just started:
// again while the old page is being replaced (DevTools: "Inspected target navigated or closed").
json AfterNavigation(Browser& browser, const std::string& expression) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    json r = browser.Evaluate(expression);
    if (!r.is_null()) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return nullptr;
}

// The "Processes" section of a twin run of several processes (docs/report.md): its select and its links go
// to another pair's report from file://, and the page loads without errors.
TEST_F(ReportBrowser, ProcessPickerGoesToAnotherPairsReport) {
  const std::string dir = BuildDir() + "/report-processes";
  std::filesystem::create_directories(dir + "/pairs/rank-1");
  SampleJoinOptions o;
  o.launches = 40;
  o.detail_launches = 6;
  o.hostile_names = false;
  const json join = MakeSampleJoin(o);
  report::RunProcesses rp;
  for (int r = 0; r < 2; ++r) {
    report::ProcessPairRow row;
    row.label = "rank " + std::to_string(r);
    row.rule = "rank";
    row.folder = r == 0 ? "." : "pairs/rank-1";
    row.main = r == 0;
    row.joined = row.has_report = true;
    row.primary_pid = 100 + r;
    row.shadow_pid = 200 + r;
    rp.pairs.push_back(row);
  }
  for (size_t k = 0; k < 2; ++k) {
    rp.current = k;
    ReportOptions options;
    options.processes = &rp;
    ASSERT_TRUE(WriteReport(join, dir + "/" + (k == 0 ? "" : "pairs/rank-1/") + "report.html", options).ok());
  }
  json r = Load(dir + "/report.html");
  ExpectNoConsoleErrors();
  EXPECT_EQ(r["errors"], 0) << r["error_text"];
  // Pick rank 1 in the select: the page goes to its report.
  ASSERT_TRUE(browser_.Navigate(FileUrl(dir + "/report.html"))) << browser_.error();
  json picked = browser_.Evaluate(R"JS((() => {
    const s = document.getElementById("ts-process-picker");
    const o = Array.from(s.options).find((x) => x.textContent.startsWith("rank 1"));
    s.value = o.value;
    s.dispatchEvent(new Event("change"));
    return o.value;
  })())JS");
  EXPECT_EQ(picked, "pairs/rank-1/report.html");
  json where = AfterNavigation(browser_, R"JS(new Promise((resolve) => {
    const t0 = Date.now();
    const poll = () => location.href.endsWith("/pairs/rank-1/report.html") && document.readyState === "complete"
        ? resolve(location.href + " " + document.querySelector("tr.current").dataset.pair)
        : Date.now() - t0 > 10000 ? resolve(location.href) : setTimeout(poll, 50);
    poll();
  }))JS");
  EXPECT_TRUE(where.is_string() &&
              where.get<std::string>().find("/pairs/rank-1/report.html rank 1") != std::string::npos)
      << where.dump() << " " << browser_.error();
  // And back through the table's link.
  json back = browser_.Evaluate(R"JS((() => {
    const a = document.querySelector("a.ts-pair");
    const href = a.getAttribute("href");
    a.click();
    return href;
  })())JS");
  EXPECT_EQ(back, "../../report.html");
  json home = AfterNavigation(browser_, R"JS(new Promise((resolve) => {
    const t0 = Date.now();
    const poll = () => !location.href.includes("/pairs/") && document.readyState === "complete" &&
        document.querySelector("tr.current")
        ? resolve(document.querySelector("tr.current").dataset.pair)
        : Date.now() - t0 > 10000 ? resolve(location.href) : setTimeout(poll, 50);
    poll();
  }))JS");
  EXPECT_EQ(home, "rank 0") << browser_.error();
  ExpectNoConsoleErrors();
}

}  // namespace
}  // namespace twinscope
