// `twinscope export RUN` on a run of several processes (a folder, or FILE with
// FILE.d/): every process in one Chrome file or SQLite database; a lone trace
// and --trace-only as before.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "process_traces.h"
#include "sample_trace.h"

#ifndef TWINSCOPE_NO_SQLITE
#include <sqlite3.h>
#endif

namespace twinscope::testing {
namespace {

namespace fs = std::filesystem;

class RunExportCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = TempPath("");
    fs::remove(tmp_);
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // Runs twinscope with `args`; returns the exit code, *err the stderr text.
  int Run(const std::string& args, std::string* err) {
    const std::string log = tmp_ + "/stderr.txt";
    const int rc = std::system((std::string(TWINSCOPE_BIN) + " " + args + " 2>" + log + " >/dev/null").c_str());
    std::ifstream f(log);
    std::stringstream s;
    s << f.rdbuf();
    *err = s.str();
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  void WriteTwo(const std::string& first, const std::string& second) {
    ProcessTraceSpec a;
    a.pid = 101;
    a.top = true;
    a.kernels = {{1000000, 1002000}, {1003000, 1004000}};
    WriteProcessTrace(first, a);
    ProcessTraceSpec b = a;
    b.pid = 202;
    b.top = false;
    b.kernels = {{1001000, 1001500}};
    WriteProcessTrace(second, b);
  }

  // The Chrome file's process groups that hold kernels.
  std::set<int64_t> KernelPids(const std::string& path) {
    std::ifstream f(path);
    const auto j = nlohmann::json::parse(f);
    std::set<int64_t> pids;
    for (const auto& e : j["traceEvents"])
      if (e["ph"] == "X" && e["cat"] == "kernel") pids.insert(e["pid"].get<int64_t>());
    return pids;
  }

  std::string tmp_;
};

TEST_F(RunExportCliTest, FolderOfTwoProcessesIsOneChromeFile) {
  fs::create_directories(tmp_ + "/run");
  WriteTwo(tmp_ + "/run/python3-101.tsc", tmp_ + "/run/python3-202.tsc");
  std::string err;
  ASSERT_EQ(Run("export " + tmp_ + "/run --format chrome -o " + tmp_ + "/out.json", &err), 0) << err;
  EXPECT_NE(err.find("2 processes with GPU work in one file"), std::string::npos) << err;
  EXPECT_EQ(KernelPids(tmp_ + "/out.json"), (std::set<int64_t>{101, 202}));
}

TEST_F(RunExportCliTest, TraceFileWithItsDotDFolderIsOneChromeFile) {
  fs::create_directories(tmp_ + "/x.tsc.d");
  WriteTwo(tmp_ + "/x.tsc", tmp_ + "/x.tsc.d/python3-202.tsc");
  std::string err;
  ASSERT_EQ(Run("export " + tmp_ + "/x.tsc --format chrome -o " + tmp_ + "/out.json", &err), 0) << err;
  EXPECT_EQ(KernelPids(tmp_ + "/out.json"), (std::set<int64_t>{101, 202}));
  // --trace-only: the file alone, as a lone trace (its GPU tracks in a GPU process of their own).
  ASSERT_EQ(Run("export " + tmp_ + "/x.tsc --trace-only --format chrome -o " + tmp_ + "/one.json", &err), 0) << err;
  EXPECT_EQ(KernelPids(tmp_ + "/one.json"), (std::set<int64_t>{1000000000}));
}

#ifndef TWINSCOPE_NO_SQLITE
TEST_F(RunExportCliTest, FolderOfTwoProcessesIsOneDatabase) {
  fs::create_directories(tmp_ + "/run");
  WriteTwo(tmp_ + "/run/python3-101.tsc", tmp_ + "/run/python3-202.tsc");
  std::string err;
  ASSERT_EQ(Run("export " + tmp_ + "/run --format sqlite -o " + tmp_ + "/out.db", &err), 0) << err;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2((tmp_ + "/out.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT p.pid, count(k.process_id) FROM process p LEFT JOIN kernels k ON k.process_id = "
                               "p.id GROUP BY p.id ORDER BY p.id",
                               -1, &s, nullptr),
            SQLITE_OK);
  std::string rows;
  while (sqlite3_step(s) == SQLITE_ROW)
    rows += std::to_string(sqlite3_column_int(s, 0)) + ":" + std::to_string(sqlite3_column_int(s, 1)) + " ";
  sqlite3_finalize(s);
  sqlite3_close(db);
  EXPECT_EQ(rows, "101:2 202:1 ");
}
#endif

}  // namespace
}  // namespace twinscope::testing
