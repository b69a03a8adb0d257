// `twinscope export RUN --format sqlite` of a record run with launcher ranks, through the binary: the
// database's rank comparison is the one `twinscope stats RUN` prints (same finding, same counts per rank).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../testutil/sqlite_rows.h"
#include "process_traces.h"
#include "sample_trace.h"

namespace twinscope::testing {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> Query(const std::string& db, const std::string& sql) { return testing::SqliteRows(db, sql); }

TEST(RankExportCli, SqliteExportOfARecordRunHoldsTheRanksStatsPrints) {
  const std::string tmp = TempPath("");
  fs::remove(tmp);
  fs::create_directories(tmp + "/run");
  // Two ranks; rank 0's kernels take twice as long.
  for (int r = 0; r < 2; ++r) {
    ProcessTraceSpec p;
    p.pid = 500 + r;
    p.rank = r;
    p.start_realtime_ns = 1 + r;
    const uint64_t dur = r == 0 ? 4000 : 2000;
    for (uint64_t k = 0; k < 3; ++k) p.kernels.push_back({200000 + k * 10000, 200000 + k * 10000 + dur});
    WriteProcessTrace(tmp + "/run/python3-" + std::to_string(p.pid) + ".tsc", p);
  }
  const std::string db = tmp + "/run.db";
  const std::string bin = TWINSCOPE_BIN;
  ASSERT_EQ(std::system((bin + " export " + tmp + "/run --format sqlite -o " + db + " 2>/dev/null").c_str()), 0);
  ASSERT_EQ(std::system((bin + " stats " + tmp + "/run > " + tmp + "/stats.txt 2>&1").c_str()), 0);
  const std::string stats = Slurp(tmp + "/stats.txt");
  ASSERT_NE(stats.find("ranks compared"), std::string::npos) << stats;
  EXPECT_NE(stats.find("rank 0: most kernel time in 1 steps, stood out in 1"), std::string::npos) << stats;
  // The same comparison in the database: the finding word for word, the counts per rank.
  const auto findings = Query(db, "SELECT rank, ratio, text FROM rank_finding");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rfind("0|2.0|rank 0 was slowest in ", 0), 0u) << findings[0];
  const std::string text = findings[0].substr(findings[0].find("rank 0 was"));
  EXPECT_NE(stats.find("  " + text + "\n"), std::string::npos) << text << "\n" << stats;
  EXPECT_EQ(Query(db,
                  "SELECT r.rank, p.pid, r.slowest_in, r.stands_out_in FROM ranks r JOIN process p ON "
                  "p.id = r.process_id ORDER BY r.rank"),
            (std::vector<std::string>{"0|500|1|1", "1|501|0|0"}));
  EXPECT_EQ(Query(db, "SELECT rank, kernel_ns FROM rank_step ORDER BY rank"),
            (std::vector<std::string>{"0|12000", "1|6000"}));
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace twinscope::testing
