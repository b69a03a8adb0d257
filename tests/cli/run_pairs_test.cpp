// A twin run of several processes joined pair by pair (src/cli/run_pairs.cpp) on the join fixture's
// synthetic traces, each given a process (pid, rank, command) as a run folder's header would: every pair's
// report shows the run's processes (rows, links between the reports, the current pair marked, unpaired
// processes, those without GPU work) and the rank comparison; the main pair's join.sqlite holds the
// comparison's numbers; a run of one process pair gives the same report as a lone join.
#include "cli/run_pairs.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../testutil/sqlite_rows.h"
#include "cli/join_outputs.h"
#include "join_fixture.h"

namespace twinscope::cli {
namespace {

namespace fs = std::filesystem;
using testing::FakeLaunch;

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> Query(const std::string& db, const std::string& sql) { return testing::SqliteRows(db, sql); }

// Four steps, one target launch each, 10 us; `slow_step` (if >= 0) takes 50 us.
std::vector<FakeLaunch> Launches(int slow_step) {
  std::vector<FakeLaunch> v;
  for (int i = 0; i < 4; ++i) {
    FakeLaunch l;
    l.path = "step " + std::to_string(i);
    l.cpu_ns = 1'000'000 * static_cast<uint64_t>(i + 1);
    l.dur_ns = i == slow_step ? 50'000 : 10'000;
    v.push_back(l);
  }
  return v;
}

RunTrace Traced(const std::string& path, int pid, std::optional<int64_t> rank, uint64_t start) {
  RunTrace t = ScanTrace(path);
  EXPECT_TRUE(t.error.empty()) << t.error;
  t.process.pid = pid;
  t.process.ppid = 1;
  t.process.rank = rank;
  t.process.command_line = {"python3", "train.py"};
  t.process.start_realtime_ns = start;
  return t;
}

// The <section id="processes"> of a report ("" if none).
std::string ProcessesSection(const std::string& html) {
  const size_t a = html.find("<section id=\"processes\">");
  if (a == std::string::npos) return "";
  return html.substr(a, html.find("</section>", a) + 10 - a);
}

class RunPairsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::TestDir("run_pairs"); }
  void TearDown() override { fs::remove_all(dir_); }

  // Ranks 0, 1, 2 paired by rank (rank 1 slow in step 2), a primary rank 3 without a shadow twin
  // (unpaired), and the primary's launcher (no GPU work).
  int JoinThreeRanks() {
    RunSide p{"primary", dir_, {}}, s{"shadow", dir_, {}};
    RunTrace launcher;
    launcher.path = dir_ + "/torchrun-900.tsc";
    launcher.role = "primary";
    launcher.process.pid = 900;
    launcher.process.top = true;
    launcher.process.command_line = {"torchrun", "--nproc-per-node", "3", "train.py"};
    p.traces.push_back(launcher);
    for (int r = 0; r < 3; ++r) {
      const auto f = testing::WriteTwin(dir_ + "/rank" + std::to_string(r), Launches(r == 1 ? 2 : -1));
      p.traces.push_back(Traced(f.primary, 1000 + r, r, 10 + r));
      s.traces.push_back(Traced(f.shadow, 2000 + r, r, 10 + r));
      primary_trace_[r] = f.primary;
    }
    p.traces.push_back(Traced(primary_trace_[0], 1003, 3, 13));
    RunJoinRequest req;
    req.out_dir = dir_ + "/out";
    fs::create_directories(req.out_dir);
    return JoinRunPairs(p, s, req);
  }

  std::string dir_;
  std::string primary_trace_[3];
};

TEST_F(RunPairsTest, EveryPairsReportListsTheProcessesAndLinksTheOthers) {
  ASSERT_EQ(JoinThreeRanks(), 0);
  const std::string out = dir_ + "/out";
  const std::string top = ProcessesSection(Slurp(out + "/report.html"));
  const std::string r1 = ProcessesSection(Slurp(out + "/pairs/rank-1/report.html"));
  const std::string r2 = ProcessesSection(Slurp(out + "/pairs/rank-2/report.html"));
  ASSERT_FALSE(top.empty());
  ASSERT_FALSE(r1.empty());
  ASSERT_FALSE(r2.empty());
  EXPECT_NE(Slurp(out + "/report.html").find("<a href=\"#processes\">Processes</a>"), std::string::npos);
  // Three pair rows, paired by rank, each with its pids and counts.
  for (const std::string* sec : {&top, &r1, &r2}) {
    for (int r = 0; r < 3; ++r) {
      const std::string row = "data-pair=\"rank " + std::to_string(r) + "\"";
      const size_t at = sec->find(row);
      ASSERT_NE(at, std::string::npos) << row << "\n" << *sec;
      const std::string tr = sec->substr(at, sec->find("</tr>", at) - at);
      EXPECT_NE(tr.find("<td>rank</td><td class=\"num\">" + std::to_string(1000 + r) + "</td>"), std::string::npos)
          << tr;
      EXPECT_NE(tr.find("<td class=\"num\">" + std::to_string(2000 + r) + "</td>"), std::string::npos) << tr;
      EXPECT_NE(tr.find("4 / 4 (100.0%)"), std::string::npos) << tr;  // exact / shadow launches
      EXPECT_NE(tr.find("class=\"ok\">yes"), std::string::npos) << tr;
    }
    // The unpaired rank 3 and the launcher without GPU work.
    EXPECT_NE(sec->find("<td>primary</td><td class=\"num\">1003</td>"), std::string::npos) << *sec;
    EXPECT_NE(sec->find("without GPU work (left out, not paired): 1 primary, 0 shadow"), std::string::npos);
  }
  // Links: relative to each report's folder; the current pair marked, not linked.
  EXPECT_NE(top.find("href=\"pairs/rank-1/report.html\""), std::string::npos);
  EXPECT_NE(top.find("href=\"pairs/rank-2/report.html\""), std::string::npos);
  EXPECT_EQ(top.find("href=\"report.html\""), std::string::npos);
  EXPECT_NE(top.find("<tr class=\"hl current\" data-pair=\"rank 0\">"), std::string::npos);
  EXPECT_NE(r1.find("href=\"../../report.html\""), std::string::npos);
  EXPECT_NE(r1.find("href=\"../rank-2/report.html\""), std::string::npos);
  EXPECT_EQ(r1.find("href=\"../rank-1/report.html\""), std::string::npos);
  EXPECT_NE(r1.find("<tr class=\"hl current\" data-pair=\"rank 1\">"), std::string::npos);
  EXPECT_NE(r2.find("<tr class=\"hl current\" data-pair=\"rank 2\">"), std::string::npos);
  // Every link points at a report that is there.
  for (const auto& [sec, folder] : {std::pair{&top, out}, std::pair{&r1, out + "/pairs/rank-1"}}) {
    std::regex href("href=\"([^\"#]+)\"");
    int n = 0;
    for (auto it = std::sregex_iterator(sec->begin(), sec->end(), href); it != std::sregex_iterator(); ++it, ++n)
      EXPECT_TRUE(fs::exists(folder + "/" + (*it)[1].str())) << folder << ": " << (*it)[1];
    EXPECT_GE(n, 2);
  }
}

TEST_F(RunPairsTest, ReportShowsTheSlowestRankAndItsFinding) {
  ASSERT_EQ(JoinThreeRanks(), 0);
  const std::string sec = ProcessesSection(Slurp(dir_ + "/out/report.html"));
  ASSERT_NE(sec.find("<h3 id=\"ranks\">Ranks</h3>"), std::string::npos) << sec;
  // Rank 1 had the most kernel time in step 2 and stood out there: its row and its finding.
  const size_t row = sec.find("<tr data-rank=\"1\">");
  ASSERT_NE(row, std::string::npos);
  const std::string tr = sec.substr(row, sec.find("</tr>", row) - row);
  EXPECT_NE(tr.find("href=\"pairs/rank-1/report.html\""), std::string::npos) << tr;
  EXPECT_NE(tr.find("<td class=\"num\">1 steps</td><td class=\"num\">1 steps</td>"), std::string::npos) << tr;
  EXPECT_NE(sec.find("<li class=\"finding\">rank 1 was slowest in step 2: its kernels took 0.050 ms against 0.010 ms "
                     "(5.00x the other ranks&#39; median"),
            std::string::npos)
      << sec;
  // The table of steps where one rank stood out: step 2, each rank's kernel time, rank 1, 5.00x.
  const size_t t = sec.find("<table class=\"rank-steps\">");
  ASSERT_NE(t, std::string::npos);
  const std::string table = sec.substr(t, sec.find("</table>", t) - t);
  const std::string us = "\xC2\xB5s";  // the report's microseconds
  EXPECT_NE(table.find("<td><code>step 2</code></td><td class=\"num\">10.0 " + us + "</td><td class=\"num bad\">50.0 " +
                       us + "</td><td class=\"num\">10.0 " + us + "</td><td>rank 1</td><td class=\"num\">5.00x</td>"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("step 0"), std::string::npos);  // only the steps where a rank stood out
}

TEST_F(RunPairsTest, MainPairsDatabaseHoldsTheRankComparison) {
  ASSERT_EQ(JoinThreeRanks(), 0);
  const std::string db = dir_ + "/out/join.sqlite";
  const auto ranks = Query(db, "SELECT rank, pid, pair, steps, stands_out_in FROM ranks ORDER BY rank");
  EXPECT_EQ(ranks, (std::vector<std::string>{"0|1000|rank 0|4|0", "1|1001|rank 1|4|1", "2|1002|rank 2|4|0"}));
  // Each rank's kernel time in each step, as the fixture gave it (one 10 us kernel; rank 1's step 2: 50 us).
  const auto steps = Query(db, "SELECT step, rank, kernels, kernel_ns FROM rank_step ORDER BY step_index, rank");
  ASSERT_EQ(steps.size(), 12u);
  for (int i = 0; i < 4; ++i)
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(steps[i * 3 + r],
                "step " + std::to_string(i) + "|" + std::to_string(r) + "|1|" + (i == 2 && r == 1 ? "50000" : "10000"));
  // docs/sqlite-schema.md's example: which rank was slowest in each step (and whether it stood out).
  const auto slowest =
      Query(db, "SELECT step, rank, ratio, stands_out FROM rank_step WHERE slowest = 1 ORDER BY step_index");
  ASSERT_EQ(slowest.size(), 4u);
  EXPECT_EQ(slowest[2], "step 2|1|5.0|1");
  for (int i : {0, 1, 3}) EXPECT_EQ(slowest[i].substr(slowest[i].size() - 2), "|0") << slowest[i];
  const auto findings = Query(db, "SELECT step, rank, text FROM rank_finding");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rfind("step 2|1|rank 1 was slowest in step 2", 0), 0u) << findings[0];
  // Only the main pair's database holds it; the others have the tables, empty.
  EXPECT_EQ(Query(dir_ + "/out/pairs/rank-1/join.sqlite", "SELECT count(*) FROM rank_step"),
            (std::vector<std::string>{"0"}));
}

// `twinscope export DIR --format sqlite` exports the main pair's join: the run's rank comparison comes from
// processes.json, whole, so its tables equal those the join wrote into join.sqlite.
TEST_F(RunPairsTest, RankTablesFromProcessesJsonEqualTheJoins) {
  ASSERT_EQ(JoinThreeRanks(), 0);
  const std::string out = dir_ + "/out", db = out + "/join.sqlite", copy = dir_ + "/export.sqlite";
  fs::copy_file(db, copy);
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(copy.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h,
                         "DELETE FROM ranks; DELETE FROM rank_step; DELETE FROM rank_finding; "
                         "DELETE FROM meta WHERE key = 'ranks';",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(h);
  ASSERT_EQ(Query(copy, "SELECT count(*) FROM rank_step"), (std::vector<std::string>{"0"}));
  const Status added = AddRunRanksToDatabase(out, copy);
  ASSERT_TRUE(added.ok()) << added.message();
  for (const char* sql : {"SELECT * FROM ranks ORDER BY rank", "SELECT * FROM rank_step ORDER BY step_index, rank",
                          "SELECT * FROM rank_finding ORDER BY step_index"})
    EXPECT_EQ(Query(copy, sql), Query(db, sql)) << sql;
  EXPECT_EQ(Query(copy, "SELECT count(*) FROM rank_step"), (std::vector<std::string>{"12"}));
  const auto source = Query(copy, "SELECT value FROM meta WHERE key = 'ranks'");
  ASSERT_EQ(source.size(), 1u);
  EXPECT_NE(source[0].find("processes.json"), std::string::npos) << source[0];

  // A processes.json whose comparison is not whole (an older twinscope's) is said, the tables left as they are.
  nlohmann::json j;
  {
    std::ifstream f(out + "/processes.json");
    f >> j;
  }
  for (auto& step : j["ranks"]["steps"]) step.erase("kernels");
  std::ofstream(out + "/processes.json") << j.dump();
  const Status old = AddRunRanksToDatabase(out, copy);
  EXPECT_FALSE(old.ok());
  EXPECT_NE(old.message().find("cannot be read"), std::string::npos) << old.message();
  // A run without ranks: nothing to add, no error.
  std::ofstream(out + "/processes.json") << R"({"pairs": []})";
  EXPECT_TRUE(AddRunRanksToDatabase(out, copy).ok());
}

// Issue 32: a run of two ranks prints its processes table and its rank comparison once each (the text a
// `twin` of torchrun ends with); processes.json names each process's host and the devices it used.
TEST_F(RunPairsTest, TwoRanksPrintEachTableOnceAndNameHostsAndDevices) {
  RunSide p{"primary", dir_, {}}, s{"shadow", dir_, {}};
  for (int r = 0; r < 2; ++r) {
    const auto f = testing::WriteTwin(dir_ + "/two" + std::to_string(r), Launches(r == 1 ? 2 : -1));
    RunTrace pt = Traced(f.primary, 1000 + r, r, 10 + r), st = Traced(f.shadow, 2000 + r, r, 10 + r);
    pt.process.host = st.process.host = "node-a";
    pt.last_status["devices"] = nlohmann::json::array({{{"ordinal", r}, {"name", "GPU"}}});  // the collector's
    st.last_status["devices"] = nlohmann::json::array({r});                                  // the block probe's
    p.traces.push_back(pt);
    s.traces.push_back(st);
  }
  RunJoinRequest req;
  req.out_dir = dir_ + "/two";
  fs::create_directories(req.out_dir);
  ::testing::internal::CaptureStdout();
  const int rc = JoinRunPairs(p, s, req);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("processes (docs/processes.md)"), 1u) << out;
  EXPECT_EQ(count("ranks compared"), 1u) << out;
  EXPECT_EQ(count("  rank 1: most kernel time"), 1u) << out;
  const auto j = nlohmann::json::parse(Slurp(req.out_dir + "/processes.json"));
  ASSERT_EQ(j["pairs"].size(), 2u);
  for (const auto& pr : j["pairs"]) {
    const int64_t rank = pr["primary"]["rank"].get<int64_t>();
    EXPECT_EQ(pr["primary"]["host"], "node-a") << pr.dump();
    EXPECT_EQ(pr["shadow"]["host"], "node-a") << pr.dump();
    EXPECT_EQ(pr["primary"]["devices"], nlohmann::json::array({rank})) << pr.dump();
    EXPECT_EQ(pr["shadow"]["devices"], nlohmann::json::array({rank})) << pr.dump();
  }
}

TEST_F(RunPairsTest, OneProcessPairGivesTheReportOfALoneJoin) {
  const auto f = testing::WriteTwin(dir_ + "/one", Launches(2));
  RunSide p{"primary", dir_, {Traced(f.primary, 1000, std::nullopt, 1)}};
  RunSide s{"shadow", dir_, {Traced(f.shadow, 2000, std::nullopt, 1)}};
  RunJoinRequest req;
  req.out_dir = dir_ + "/run";
  fs::create_directories(req.out_dir);
  ASSERT_EQ(JoinRunPairs(p, s, req), 0);
  JoinOutputRequest lone;
  lone.primary = f.primary;
  lone.shadow = f.shadow;
  lone.out_dir = dir_ + "/lone";
  fs::create_directories(lone.out_dir);
  ASSERT_EQ(JoinAndReport(lone), 0);
  const std::string a = Slurp(req.out_dir + "/report.html"), b = Slurp(lone.out_dir + "/report.html");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.find("id=\"processes\""), std::string::npos);
  EXPECT_EQ(a.find("#processes"), std::string::npos);
  EXPECT_TRUE(a == b) << "the report of a one-process run differs from a lone join's";
}

}  // namespace
}  // namespace twinscope::cli
