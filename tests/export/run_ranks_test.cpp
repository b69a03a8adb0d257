// The rank comparison in the SQLite export of a record run with launcher ranks (export/sqlite_ranks.h,
// docs/sqlite-schema.md "Ranks"): the comparison from the primary traces alone, as `twinscope stats RUN`
// prints it, in tables `ranks`, `rank_step` and `rank_finding`; numbers checked against the traces' specs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../testutil/sqlite_rows.h"
#include "process_traces.h"
#include "sample_trace.h"
#include "views/export/export.h"

#ifndef TWINSCOPE_NO_SQLITE
#include <sqlite3.h>

namespace twinscope::exporters {
namespace {

namespace fs = std::filesystem;
using testing::ProcessTraceSpec;

std::vector<std::string> Query(const std::string& db, const std::string& sql) { return testing::SqliteRows(db, sql); }

class RunRanksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = testing::TempPath("");
    fs::remove(tmp_);
    fs::create_directories(tmp_ + "/run");
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // Rank r's process: pid 300 + r, kernels of `kernel_ns[r]` each, 4 of them (rank `slow`: 12).
  void WriteRanks(bool with_ranks) {
    for (int r = 0; r < 3; ++r) {
      ProcessTraceSpec p;
      p.pid = 300 + r;
      p.ppid = 1;
      p.top = false;
      p.start_realtime_ns = 10 + r;
      p.command = {"python3", "train.py"};
      if (with_ranks) p.rank = r;
      const uint64_t dur = r == 1 ? 3000 : 1000;  // rank 1's kernels take 3x as long
      for (uint64_t k = 0; k < 4; ++k) p.kernels.push_back({100000 + k * 10000, 100000 + k * 10000 + dur});
      kernel_ns_.push_back(4 * dur);
      testing::WriteProcessTrace(tmp_ + "/run/python3-" + std::to_string(p.pid) + ".tsc", p);
    }
  }

  std::string Export() {
    auto l = ListRun(tmp_ + "/run");
    EXPECT_TRUE(l.ok());
    const std::string out = tmp_ + "/run.sqlite";
    auto r = ExportSqliteRun(RunProcesses(l->sides.front(), nullptr), out);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return out;
  }

  std::string tmp_;
  std::vector<uint64_t> kernel_ns_;
};

TEST_F(RunRanksTest, SqliteHoldsTheRankComparisonOfARecordRun) {
  WriteRanks(true);
  const std::string db = Export();
  // Each rank once, tied to its process row.
  EXPECT_EQ(Query(db,
                  "SELECT r.rank, r.pid, p.pid, r.steps, r.slowest_in, r.stands_out_in FROM ranks r "
                  "JOIN process p ON p.id = r.process_id AND p.rank = r.rank ORDER BY r.rank"),
            (std::vector<std::string>{"0|300|300|1|0|0", "1|301|301|1|1|1", "2|302|302|1|0|0"}));
  // Every rank's kernel time in the one step (all kernels outside any range), as the specs give it.
  const auto steps = Query(db, "SELECT rank, kernels, kernel_ns, slowest, stands_out FROM rank_step ORDER BY rank");
  ASSERT_EQ(steps.size(), 3u);
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(steps[r], std::to_string(r) + "|4|" + std::to_string(kernel_ns_[r]) + (r == 1 ? "|1|1" : "|0|0"));
  // docs/sqlite-schema.md's example: which rank was slowest in each step.
  EXPECT_EQ(Query(db, "SELECT step_index, rank, kernel_ns, ratio FROM rank_step WHERE slowest = 1 ORDER BY step_index"),
            (std::vector<std::string>{"0|1|12000|3.0"}));
  const auto findings = Query(db, "SELECT rank, ratio, text FROM rank_finding");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rfind("1|3.0|rank 1 was slowest in ", 0), 0u) << findings[0];
  EXPECT_NE(findings[0].find("its kernels took 0.012 ms against 0.004 ms (3.00x"), std::string::npos) << findings[0];
  const auto meta = Query(db, "SELECT value FROM meta WHERE key = 'ranks'");
  ASSERT_EQ(meta.size(), 1u);
  EXPECT_NE(meta[0].find("\"steps_standing_out\":1"), std::string::npos) << meta[0];
}

TEST_F(RunRanksTest, RunWithoutRanksHasEmptyRankTables) {
  WriteRanks(false);
  const std::string db = Export();
  EXPECT_EQ(Query(db,
                  "SELECT (SELECT count(*) FROM ranks), (SELECT count(*) FROM rank_step), "
                  "(SELECT count(*) FROM rank_finding), (SELECT count(*) FROM meta WHERE key = 'ranks')"),
            (std::vector<std::string>{"0|0|0|0"}));
}

}  // namespace
}  // namespace twinscope::exporters

#endif  // TWINSCOPE_NO_SQLITE
