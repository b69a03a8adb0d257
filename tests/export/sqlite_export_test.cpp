#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sample_trace.h"
#include "views/export/export.h"

namespace twinscope::exporters {
namespace {

// Runs a query and returns its rows as strings ("NULL" for null).
class Query {
 public:
  explicit Query(const std::string& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  }
  ~Query() { sqlite3_close(db_); }
  std::vector<std::vector<std::string>> Rows(const std::string& sql) {
    std::vector<std::vector<std::string>> rows;
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
      return rows;
    }
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(s); ++i) {
        const unsigned char* t = sqlite3_column_text(s, i);
        row.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
      }
      rows.push_back(row);
    }
    sqlite3_finalize(s);
    return rows;
  }
  std::string One(const std::string& sql) {
    auto rows = Rows(sql);
    return rows.empty() || rows[0].empty() ? "<no row>" : rows[0][0];
  }

 private:
  sqlite3* db_ = nullptr;
};

class SqliteExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = testing::TempPath(".tsc");
    out_ = testing::TempPath(".db");
  }
  void TearDown() override {
    std::remove(trace_.c_str());
    std::remove(out_.c_str());
  }
  std::string trace_, out_;
};

TEST_F(SqliteExportTest, PrimaryTraceTablesAndValues) {
  ASSERT_TRUE(SqliteAvailable());
  testing::WritePrimaryTrace(trace_);
  auto r = ExportSqlite(trace_, out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->report.end, ReadEnd::kComplete);
  Query q(out_);
  EXPECT_EQ(q.One("SELECT count(*) FROM kernels"), "4");
  EXPECT_EQ(q.One("SELECT count(*) FROM kernels WHERE invalid_timestamp = 1 AND duration_ns IS NULL"), "1");
  EXPECT_EQ(
      q.Rows("SELECT name, mangled_name, duration_ns, grid_x, grid_y, key_path, correlation_id FROM kernels_named "
             "WHERE correlation_id = 1")[0],
      (std::vector<std::string>{"gemm()", "_Z4gemmv", "1000", "128", "2", "step#0", "1"}));
  EXPECT_EQ(q.One("SELECT printf('%x', key_hash) FROM kernels WHERE correlation_id = 1"), "1234abcd");
  EXPECT_EQ(q.One("SELECT count(*) FROM kernels WHERE graph_id = 9"), "2");
  EXPECT_EQ(q.Rows("SELECT copy_kind, bytes, duration_ns FROM memcpys")[0],
            (std::vector<std::string>{"HtoD", "4096", "300"}));
  EXPECT_EQ(q.One("SELECT bytes FROM memsets"), "64");
  EXPECT_EQ(q.Rows("SELECT name, thread_id, domain FROM api_calls_named ORDER BY start_ns")[2],
            (std::vector<std::string>{"cudaGraphLaunch", "4243", "runtime"}));
  EXPECT_EQ(q.Rows("SELECT kind, name, duration_ns FROM nvtx_ranges_named ORDER BY start_ns"),
            (std::vector<std::vector<std::string>>{
                {"push_pop", "step", "8100"}, {"start_end", "step", "7550"}, {"mark", "step", "0"}}));
  EXPECT_EQ(q.One("SELECT count(*) FROM launches"), "4");
  EXPECT_EQ(q.One("SELECT kernel FROM launches_named WHERE seq = 1"), "_Z4gemmv");
  EXPECT_EQ(q.One("SELECT value FROM counters WHERE name = 'launches_seen'"), "5");
  EXPECT_EQ(q.One("SELECT value FROM meta WHERE key = 'role'"), "primary");
  EXPECT_EQ(q.One("SELECT value FROM meta WHERE key = 'read_end'"), "complete");
  auto header = nlohmann::json::parse(q.One("SELECT value FROM meta WHERE key = 'header'"));
  EXPECT_EQ(header["pid"], 4242);
  // API call -> kernels by correlation id (the join the schema is for).
  EXPECT_EQ(q.One("SELECT count(*) FROM api_calls a JOIN kernels k USING (correlation_id) WHERE a.correlation_id = 3"),
            "2");
  // Indexes exist and are used.
  EXPECT_EQ(q.One("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'kernels_correlation'"), "1");
  auto plan = q.Rows("EXPLAIN QUERY PLAN SELECT * FROM kernels WHERE correlation_id = 3");
  ASSERT_FALSE(plan.empty());
  EXPECT_NE(plan[0].back().find("kernels_correlation"), std::string::npos);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("1 records have invalid timestamps"), std::string::npos);
}

TEST_F(SqliteExportTest, ShadowBlocks) {
  testing::WriteShadowTrace(trace_);
  auto r = ExportSqlite(trace_, out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Query q(out_);
  EXPECT_EQ(q.One("SELECT count(*) FROM blocks"), "5");
  EXPECT_EQ(
      q.Rows("SELECT block_linear, sm, duration_ns FROM blocks WHERE launch_seq = 1 ORDER BY exit_ns DESC LIMIT 1")[0],
      (std::vector<std::string>{"3", "1", "1970"}));
  EXPECT_EQ(
      q.One("SELECT group_concat(block_linear) FROM (SELECT block_linear FROM blocks WHERE launch_seq = 1 ORDER BY "
            "block_order)"),
      "0,2,1,3");
  EXPECT_EQ(q.One("SELECT count(*) FROM launches l WHERE grid_x * grid_y * grid_z > (SELECT count(*) FROM blocks b "
                  "WHERE b.launch_seq = l.seq)"),
            "1");
  EXPECT_EQ(q.One("SELECT value FROM counters WHERE name = 'blocks_recorded'"), "5");
}

TEST_F(SqliteExportTest, ReplacesExistingFileAndReportsCorruption) {
  {
    FILE* f = std::fopen(out_.c_str(), "w");
    std::fputs("not a database", f);
    std::fclose(f);
  }
  testing::WritePrimaryTrace(trace_, 2000);
  ASSERT_TRUE(testing::CorruptChunk(trace_, 20));
  auto r = ExportSqlite(trace_, out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->report.end, ReadEnd::kCorrupt);
  Query q(out_);
  EXPECT_EQ(q.One("SELECT value FROM meta WHERE key = 'read_end'"), "corrupt");
  EXPECT_EQ(q.One("SELECT count(*) > 0 FROM kernels"), "1");
  // Every record read before the damage is a row.
  EXPECT_EQ(q.One("SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memcpys) + (SELECT count(*) FROM "
                  "memsets) + (SELECT count(*) FROM api_calls) + (SELECT count(*) FROM nvtx_ranges) + (SELECT count(*) "
                  "FROM launches) + (SELECT count(*) FROM blocks)"),
            std::to_string(r->report.records));
}

}  // namespace
}  // namespace twinscope::exporters
