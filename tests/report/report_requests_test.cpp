// The report's Requests section (a serving run's join, docs/report.md) as text: listed requests with their
// figures and block-picture counts, the embedded steps, its bounds, hostile request ids kept inert, and no
// section at all for a join without requests. In a browser: report_browser_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "join/join_views.h"
#include "report_test_util.h"
#include "sample_join.h"
#include "served_scene.h"
#include "views/join_doc.h"
#include "views/report/report.h"

namespace twinscope {
namespace {

using nlohmann::json;
using testing_report::EmbeddedData;
using testing_report::MakeSampleJoin;
using testing_report::Render;
using testing_report::SampleJoinOptions;

json SmallJoin() {
  SampleJoinOptions o;
  o.launches = 60;
  o.detail_launches = 6;
  o.blocks = 256;
  o.sms = 16;
  o.steps = 12;
  return MakeSampleJoin(o);
}

// `requests` requests; request i was in steps i .. i + steps_each - 1, and every step has two target
// launches: one with block detail in the join (the detailed launches in turn), one matched without.
json WithRequests(json join, size_t requests, size_t steps_each, const std::string& first_id = "req-0") {
  std::vector<int64_t> detailed;
  for (const auto& d : join["block_detail"]) detailed.push_back(d["launch"]);
  int64_t plain = -1;
  for (const auto& l : join["launches"]) {
    int64_t id = l["id"];
    if (std::find(detailed.begin(), detailed.end(), id) == detailed.end()) plain = id;
  }
  json rows = json::array(), steps = json::array();
  for (size_t i = 0; i < requests; ++i) {
    json st = json::array();
    for (size_t k = 0; k < steps_each; ++k) st.push_back(i + k);
    rows.push_back({{"id", i == 0 ? first_id : "req-" + std::to_string(i)},
                    {"status", i == 1 ? 500 : 200},
                    {"finish_reason", "length"},
                    {"prompt_tokens", 14},
                    {"completion_tokens", steps_each},
                    {"first_token_us", 1500},
                    {"done_us", 9000},
                    {"steps", st},
                    {"prefill_steps", 1},
                    {"decode_steps", steps_each - 1},
                    {"kernel_ns", 1'000'000},
                    {"kernel_share_ns", 250'000},
                    {"target_ns", 40'000},
                    {"target_launches", 2 * steps_each},
                    {"shadow_exact", 2 * steps_each - (i == 2 ? 1 : 0)},
                    {"shadow_time_only", 0},
                    {"gpu_start_ns", 100},
                    {"gpu_end_ns", 900'000}});
  }
  for (size_t s = 0; s < requests + steps_each; ++s) {
    steps.push_back(
        {{"step", s},
         {"kind", s == 0 ? "prefill" : "decode"},
         {"batch", 2},
         {"padded", 2},
         {"kernel_ns", 500'000},
         {"target_ns", 20'000},
         {"start_ns", s * 1'000'000},
         {"target_launches",
          {{s * 1'000'000, 10'000, detailed[s % detailed.size()]}, {s * 1'000'000 + 20'000, 10'000, plain}}}});
  }
  join["requests"] = {{"source", {{"trace", "/run/requests-primary.jsonl"}, {"schedule", "/run/schedule.jsonl"}}},
                      {"total", requests},
                      {"warnings", {"3 steps that requests name have no kernel in the primary"}},
                      {"rows", rows},
                      {"steps", steps}};
  return join;
}

TEST(ReportRequests, ListsRequestsWithTheirFiguresAndEmbedsTheirSteps) {
  ReportInfo info;
  std::string html = Render(WithRequests(SmallJoin(), 5, 4), {}, &info);
  ASSERT_NE(html.find("<section id=\"requests\">"), std::string::npos);
  EXPECT_LT(html.find("<section id=\"summary\">"), html.find("<section id=\"requests\">"));
  EXPECT_LT(html.find("<section id=\"requests\">"), html.find("<section id=\"why-slow\">"));
  EXPECT_NE(html.find("<a href=\"#requests\">Requests</a>"), std::string::npos);
  EXPECT_NE(html.find("<code>/run/requests-primary.jsonl</code>"), std::string::npos);
  EXPECT_NE(html.find("3 steps that requests name have no kernel in the primary."), std::string::npos);
  for (int i = 0; i < 5; ++i)
    EXPECT_NE(html.find("data-request=\"" + std::to_string(i) + "\">req-" + std::to_string(i) + "</a>"),
              std::string::npos)
        << i;
  // Request 0: 4 steps (1 + 3), 8 target launches, all matched, 4 with block detail (one per step).
  size_t row = html.find(">req-0</a>");
  std::string r0 = html.substr(row, html.find("</tr>", row) - row);
  EXPECT_NE(r0.find("1 + 3"), std::string::npos) << r0;
  EXPECT_NE(r0.find("1.00 ms"), std::string::npos) << r0;  // kernel time
  EXPECT_NE(r0.find("250 "), std::string::npos) << r0;     // share (250 us)
  EXPECT_NE(r0.find("8 (100.0%)"), std::string::npos) << r0;
  EXPECT_EQ(r0.substr(r0.rfind("<td")), "<td class=\"num\">4</td>") << r0;  // block pictures
  size_t row2 = html.find(">req-2</a>");
  EXPECT_NE(html.substr(row2, html.find("</tr>", row2) - row2).find("num warn\">7 (87.5%)"), std::string::npos);
  size_t row1 = html.find(">req-1</a>");
  EXPECT_NE(html.substr(row1, html.find("</tr>", row1) - row1).find("num bad\">500"), std::string::npos);
  EXPECT_NE(html.find("id=\"ts-request-select\""), std::string::npos);
  EXPECT_NE(html.find("id=\"ts-request-detail\""), std::string::npos);
  EXPECT_EQ(info.request_rows, 5u);
  EXPECT_EQ(info.request_steps, 8u);  // steps 0..7 are named by the five requests
  json d = EmbeddedData(html);
  ASSERT_TRUE(d.contains("requests"));
  EXPECT_EQ(d["requests"]["rows"].size(), 5u);
  EXPECT_EQ(d["requests"]["steps"].size(), 8u);
  EXPECT_EQ(d["requests"]["steps"][3]["target_launches"].size(), 2u);
  EXPECT_EQ(d["requests"]["source"]["trace"], "/run/requests-primary.jsonl");
}

// The cells of the Requests table's row of request `id` (its text, tags left out).
std::vector<std::string> RowCells(const std::string& html, const std::string& id) {
  std::vector<std::string> cells;
  const size_t row = html.rfind("<tr>", html.find(">" + id + "</a>"));
  const std::string tr = html.substr(row, html.find("</tr>", row) - row);
  for (size_t at = tr.find("<td"); at != std::string::npos; at = tr.find("<td", at + 1)) {
    std::string cell = tr.substr(tr.find('>', at) + 1, tr.find("</td>", at) - tr.find('>', at) - 1);
    for (size_t lt; (lt = cell.find('<')) != std::string::npos;) cell.erase(lt, cell.find('>', lt) - lt + 1);
    cells.push_back(cell);
  }
  return cells;
}

// The "arrival" column: milliseconds after the first arrival among all the
// join's rows (not the first row's: the trace is in order of completion, and a
// row past the report's own bound may have come first), a dash where the row
// has no arrival time, as in a join written before arrival times were kept.
TEST(ReportRequests, ArrivalIsMillisecondsAfterTheFirstRequestsArrival) {
  json join = WithRequests(SmallJoin(), 5, 2);
  json& rows = join["requests"]["rows"];
  const int64_t base = 1'796'113'162'000'000;
  rows[0]["arrival_unix_us"] = base + 2'345'678;
  rows[1]["arrival_unix_us"] = base + 1'000;
  rows[2]["arrival_unix_us"] = nullptr;  // unknown, as join.json writes it
  rows[4]["arrival_unix_us"] = base;     // the first to arrive, past the bound below
  // rows[3]: no key at all
  ReportOptions o;
  o.max_request_rows = 4;
  const std::string html = Render(join, o);
  size_t th = html.find("<table class=\"requests\">");
  const std::string head = html.substr(th, html.find("</thead>", th) - th);
  EXPECT_NE(head.find("<th class=\"num\">tokens</th><th class=\"num\" title=\"after the first request's arrival "
                      "(the server's clock)\">arrival</th><th class=\"num\">first token</th>"),
            std::string::npos)
      << head;
  const size_t arrival = 4;  // request, status, prompt, tokens, arrival
  std::vector<std::string> want = {"2,345.678 ms", "1.000 ms", "&ndash;", "&ndash;"};
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<std::string> cells = RowCells(html, "req-" + std::to_string(i));
    ASSERT_EQ(cells.size(), 13u) << i;
    EXPECT_EQ(cells[arrival], want[i]) << i;
    EXPECT_EQ(cells[arrival + 1], "1.50 ms") << i;  // first token, the column after
  }
  EXPECT_EQ(html.find(">req-4</a>"), std::string::npos);

  // A join without any arrival time: the column is there, every cell a dash.
  const std::string none = Render(WithRequests(SmallJoin(), 3, 2));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(RowCells(none, "req-" + std::to_string(i))[arrival], "&ndash;") << i;
}

// A joined serving run's report (tests/join/served_scene.h, ArrivalRequestTrace):
// each request's arrival is the model's, after r0's (the first to arrive); the
// odd id and "lost" have none.
TEST(ReportRequests, ArrivalOfAJoinedServingRunIsTheModels) {
  const auto dir = std::filesystem::temp_directory_path() / ("twinscope_report_arrival_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const join::JoinedModel m = testing::JoinServedWithArrivals(dir.string(), 1'796'113'162'000'000);
  const auto& rq = m.requests.requests;
  ASSERT_EQ(rq.size(), 6u);
  const std::string html = Render(views::JoinJson(m, {}, {}));
  std::filesystem::remove_all(dir);
  int64_t first = -1;
  for (const auto& r : rq)
    if (r.arrival_unix_us >= 0 && (first < 0 || r.arrival_unix_us < first)) first = r.arrival_unix_us;
  std::vector<std::string> got, want;
  for (const auto& r : rq) {
    std::vector<std::string> cells = RowCells(html, r.id);
    ASSERT_EQ(cells.size(), 13u) << r.id;
    got.push_back(cells[4]);
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f ms", static_cast<double>(r.arrival_unix_us - first) / 1000.0);
    want.push_back(r.arrival_unix_us < 0 ? "&ndash;" : ms);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(got, (std::vector<std::string>{"0.000 ms", "&ndash;", "0.099 ms", "0.499 ms", "&ndash;", "1.199 ms"}));
}

TEST(ReportRequests, BoundsRowsAndStepsAndSaysSo) {
  ReportOptions o;
  o.max_request_rows = 2;
  o.max_request_steps = 3;
  ReportInfo info;
  std::string html = Render(WithRequests(SmallJoin(), 5, 4), o, &info);
  EXPECT_EQ(info.request_rows, 2u);
  EXPECT_EQ(info.request_steps, 3u);
  EXPECT_NE(html.find("The first 2 of 5 requests"), std::string::npos);
  EXPECT_NE(html.find("kept up to 3"), std::string::npos);
  EXPECT_EQ(html.find(">req-2</a>"), std::string::npos);
  json d = EmbeddedData(html);
  EXPECT_EQ(d["requests"]["rows"].size(), 2u);
  EXPECT_EQ(d["requests"]["steps"].size(), 3u);
  EXPECT_EQ(d["requests"]["rows_in_report"], 2);
  // Request 0's pictures count only the steps kept (0-2).
  size_t row = html.find(">req-0</a>");
  std::string r0 = html.substr(row, html.find("</tr>", row) - row);
  EXPECT_EQ(r0.substr(r0.rfind("<td")), "<td class=\"num\">3</td>") << r0;
}

TEST(ReportRequests, HostileRequestIdsStayText) {
  const std::string id = testing_report::kHostileKernel;
  std::string html = Render(WithRequests(SmallJoin(), 2, 2, id));
  size_t sec = html.find("<section id=\"requests\">");
  std::string section = html.substr(sec, html.find("</section>", sec) - sec);
  EXPECT_EQ(section.find("</script><script>"), std::string::npos);
  EXPECT_NE(section.find("evil&lt;int&gt;::k&lt;/script&gt;&lt;script&gt;window.tsPwned=1&lt;/script&gt;"),
            std::string::npos);
  std::string data = html.substr(html.find("id=\"ts-data\">"));
  data = data.substr(0, data.find("</script>"));
  EXPECT_EQ(data.find("<"), std::string::npos);
  EXPECT_EQ(EmbeddedData(html)["requests"]["rows"][0]["id"].get<std::string>().substr(0, 9), "evil<int>");
}

TEST(ReportRequests, NoRequestsNoSection) {
  ReportInfo info;
  std::string html = Render(SmallJoin(), {}, &info);
  EXPECT_EQ(html.find("<section id=\"requests\">"), std::string::npos);
  EXPECT_EQ(html.find("href=\"#requests\""), std::string::npos);
  EXPECT_FALSE(EmbeddedData(html).contains("requests"));
  EXPECT_EQ(info.request_rows, 0u);
  // A trace that held none: the section says so.
  json j = SmallJoin();
  j["requests"] = {{"total", 0}, {"rows", json::array()}, {"steps", json::array()}};
  EXPECT_NE(Render(j).find("The request trace holds no request."), std::string::npos);
}

}  // namespace
}  // namespace twinscope
