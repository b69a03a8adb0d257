// join.sqlite's why_slow table holds every finding, not the first five per shape (issue 32 part 1).
#include <gtest/gtest.h>

#include <filesystem>
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

// A CuPy kernel whose block 7 spins longer on every 10th launch: 20 slow launches of 200, each a straggler.
// join.sqlite held 5 of them; it holds all 20, each naming block 7.
TEST(WhySlowSqlite, EveryStragglerOfTheCupyKernelIsARow) {
  const std::string dir = testing::SceneDir("why_slow_sqlite");
  std::vector<testing::FakeLaunch> v = testing::EvenSteps(200, 32, 8);
  for (size_t i = 9; i < v.size(); i += 10) {
    v[i].dur_ns = 40'000;
    v[i].blocks[7].exit_ns += 60'000;
  }
  const testing::TwinFiles files = testing::WriteTwin(dir, v);
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

}  // namespace
}  // namespace twinscope::exporters
#endif
