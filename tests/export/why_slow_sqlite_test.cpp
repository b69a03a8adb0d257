// join.sqlite's why_slow table holds every finding, not the first five per shape (issue 32 part 1), and its blocks
// table keeps the blocks of those launches within its bound (issue 31 part 5).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "join_fixture.h"
#include "join_scene.h"
#include "views/export/join/join_export.h"

#ifndef TWINSCOPE_NO_SQLITE
#include <sqlite3.h>

namespace twinscope::exporters {
namespace {

std::string One(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* s = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK) {
    while (sqlite3_step(s) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(s); ++i) {
        const unsigned char* t = sqlite3_column_text(s, i);
        out += (i ? "|" : "") + std::string(t ? reinterpret_cast<const char*>(t) : "NULL");
      }
      out += "\n";
    }
  } else {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

// A CuPy kernel whose block 7 spins longer on every 10th launch: 200 launches of one shape, 32 blocks each, 20 of
// them slow, each a straggler.
std::vector<testing::FakeLaunch> CupyStragglers() {
  std::vector<testing::FakeLaunch> v = testing::EvenSteps(200, 32, 8);
  for (size_t i = 9; i < v.size(); i += 10) {
    v[i].dur_ns = 40'000;
    v[i].blocks[7].exit_ns += 60'000;
  }
  return v;
}

// join.sqlite held 5 of the CuPy kernel's stragglers; it holds all 20, each naming block 7.
TEST(WhySlowSqlite, EveryStragglerOfTheCupyKernelIsARow) {
  const std::string dir = testing::SceneDir("why_slow_sqlite");
  const testing::TwinFiles files = testing::WriteTwin(dir, CupyStragglers());
  auto m = join::JoinTraces(files.primary, files.shadow);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::string out = dir + "/join.sqlite";
  auto r = testing::ExportSqliteOf(*m, out);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(One(out,
                "SELECT count(*), sum(verdicts = 'straggler'), sum(text LIKE '%one block held it up: block 7 on SM%') "
                "FROM why_slow"),
            "20|20|20\n");
  std::filesystem::remove_all(dir);
}

// The blocks table is bounded (docs/sqlite-schema.md, "Bounds"): 200 launches of one shape, 32 blocks each, 20
// of them stragglers. The first 100 and every launch why slow names keep their blocks; the rest are left out,
// counted in meta.blocks_bound and said in a warning; --sqlite-blocks all (options.sqlite_all_blocks) writes
// every block. Before the bound all 6,400 were written and nothing was said.
TEST(WhySlowSqlite, BlocksTableKeepsWhatWhySlowNamesAndSaysWhatItLeftOut) {
  const std::string dir = testing::SceneDir("blocks_bound");
  const testing::TwinFiles files = testing::WriteTwin(dir, CupyStragglers());
  auto m = join::JoinTraces(files.primary, files.shadow);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::string out = dir + "/join.sqlite";
  auto r = testing::ExportSqliteOf(*m, out);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Every launch why slow names has all its blocks.
  EXPECT_EQ(One(out,
                "SELECT count(*), sum((SELECT count(*) FROM blocks b WHERE b.launch_id = mt.shadow_launch) = 32) "
                "FROM why_slow w JOIN matches mt ON mt.id = w.match_id"),
            "20|20\n");
  // The first 100 launches (by seq) have theirs; some later ones not.
  EXPECT_EQ(One(out, "SELECT count(DISTINCT launch_seq) FROM blocks WHERE launch_seq < 100"), "100\n");
  const std::string kept = One(out, "SELECT count(DISTINCT launch_id) FROM blocks");
  const int with_blocks = std::stoi(kept);
  EXPECT_GE(with_blocks, 110);  // 100 + the 10 stragglers after them
  EXPECT_LT(with_blocks, 200);
  const nlohmann::json bound = nlohmann::json::parse(One(out, "SELECT value FROM meta WHERE key = 'blocks_bound'"));
  EXPECT_EQ(bound["all"], false);
  EXPECT_EQ(bound["launches_with_blocks"], with_blocks);
  EXPECT_EQ(bound["launches_left_out"], 200 - with_blocks);
  EXPECT_EQ(bound["blocks_left_out"], 32 * (200 - with_blocks));
  EXPECT_EQ(bound["blocks_written"], 32 * with_blocks);
  EXPECT_EQ(One(out, "SELECT count(*) FROM blocks"), std::to_string(32 * with_blocks) + "\n");
  bool said = false;
  for (const auto& w : r->warnings)
    said |= w.find("the blocks of " + std::to_string(200 - with_blocks) + " of 200 shadow launches left out") !=
                std::string::npos &&
            w.find("--sqlite-blocks all") != std::string::npos;
  EXPECT_TRUE(said);

  m->options.sqlite_all_blocks = true;
  const std::string all = dir + "/all.sqlite";
  auto ra = testing::ExportSqliteOf(*m, all);
  ASSERT_TRUE(ra.ok()) << ra.status().message();
  EXPECT_EQ(One(all, "SELECT count(*) FROM blocks"), "6400\n");
  const nlohmann::json all_bound = nlohmann::json::parse(One(all, "SELECT value FROM meta WHERE key = 'blocks_bound'"));
  EXPECT_EQ(all_bound["all"], true);
  EXPECT_EQ(all_bound["blocks_left_out"], 0);
  for (const auto& w : ra->warnings) EXPECT_EQ(w.find("left out"), std::string::npos) << w;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twinscope::exporters
#endif
