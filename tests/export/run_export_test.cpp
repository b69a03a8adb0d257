// The merged views of a run of several processes (export.h: ExportChromeRun,
// ExportSqliteRun): one process group / process_id per traced process, each
// holding exactly its own trace's events, and every process on CLOCK_REALTIME
// through its own clock pair (several hosts, same pids). Facts are checked
// against each trace's own content and against hand-computed times.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "process_traces.h"
#include "sample_trace.h"
#include "views/export/export.h"

#ifndef TWINSCOPE_NO_SQLITE
#include <sqlite3.h>
#endif

namespace twinscope::exporters {
namespace {

namespace fs = std::filesystem;
using testing::ProcessTraceSpec;

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Compares `text` with tests/export/golden/`name` (TWINSCOPE_UPDATE_GOLDEN=1 rewrites it).
void ExpectGolden(const std::string& name, const std::string& text) {
  const std::string path = std::string(TWINSCOPE_GOLDEN_DIR) + "/" + name;
  if (std::getenv("TWINSCOPE_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << text;
    GTEST_SKIP() << "rewrote " << path;
  }
  const std::string golden = Slurp(path);
  ASSERT_FALSE(golden.empty()) << path << " is missing (TWINSCOPE_UPDATE_GOLDEN=1 writes it)";
  std::istringstream a(golden), b(text);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
    if (!ga && !gb) return;
    ASSERT_TRUE(la == lb && ga == gb) << name << " differs at line " << line << ":\n  golden: " << (ga ? la : "<end>")
                                      << "\n  output: " << (gb ? lb : "<end>");
  }
}

// The export's text with `from` (a temporary folder) as `to`, and the writer's clock reading
// (status monotonic_ns) as 0.
std::string Replace(std::string s, const std::string& from, const std::string& to) {
  s = std::regex_replace(s, std::regex("\"monotonic_ns\":[0-9]+"), "\"monotonic_ns\":0");
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

class RunExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = testing::TempPath("");
    fs::remove(tmp_);
    fs::create_directories(tmp_ + "/run");
    run_ = tmp_ + "/run";
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // The run's processes as the CLI lists them.
  std::vector<RunProcess> Processes() {
    auto l = ListRun(run_);
    EXPECT_TRUE(l.ok()) << l.status().message();
    return RunProcesses(l->sides.front(), nullptr);
  }

  // Two processes of one host, both on CLOCK_REALTIME = CUPTI + 1e12.
  void WriteTwoProcesses() {
    ProcessTraceSpec a;
    a.pid = 101;
    a.top = true;
    a.start_realtime_ns = 1;
    a.command = {"python3", "train.py"};
    a.cupti_ns = 0;
    a.realtime_ns = 1000000000000;
    a.kernels = {{1000000, 1002000}, {1003000, 1004000}, {1005000, 1006000}};
    a.memcpys = 1;
    testing::WriteProcessTrace(run_ + "/python3-101.tsc", a);
    ProcessTraceSpec b = a;
    b.pid = 202;
    b.ppid = 101;
    b.top = false;
    b.start_realtime_ns = 2;
    b.command = {"python3", "-c", "worker"};
    b.kernel = "other";
    b.kernels = {{1001500, 1002500}, {1007000, 1009000}};
    b.memcpys = 0;
    testing::WriteProcessTrace(run_ + "/python3-202.tsc", b);
  }

  nlohmann::json Chrome(const std::vector<RunProcess>& processes) {
    const std::string out = tmp_ + "/run.json";
    auto r = ExportChromeRun(processes, out);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return nlohmann::json::parse(Slurp(out));
  }

  std::string tmp_, run_;
};

// Events (not metadata) of a Chrome export: per pid, per category.
std::map<int64_t, std::map<std::string, int>> EventsByPid(const nlohmann::json& j) {
  std::map<int64_t, std::map<std::string, int>> out;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") continue;
    ++out[e["pid"].get<int64_t>()][e["cat"].get<std::string>()];
    ++out[e["pid"].get<int64_t>()]["*"];
  }
  return out;
}

std::map<int64_t, std::string> ProcessNames(const nlohmann::json& j) {
  std::map<int64_t, std::string> out;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") out[e["pid"].get<int64_t>()] = e["args"]["name"];
  return out;
}

TEST_F(RunExportTest, ChromeHasOneProcessGroupPerProcessWithItsOwnEvents) {
  WriteTwoProcesses();
  const auto processes = Processes();
  ASSERT_EQ(processes.size(), 2u);
  const nlohmann::json j = Chrome(processes);
  const auto names = ProcessNames(j);
  ASSERT_EQ(names.size(), 2u) << "one process group per process, GPU tracks inside it";
  EXPECT_EQ(names.at(101), "python3 train.py (pid 101, primary)");
  EXPECT_EQ(names.at(202), "python3 -c worker (pid 202, primary)");
  const auto events = EventsByPid(j);
  ASSERT_EQ(events.size(), 2u);
  // Each group holds what its trace holds: 3 and 2 kernels, API calls, launches (+ flows), 1 memcpy.
  EXPECT_EQ(events.at(101).at("kernel"), 3);
  EXPECT_EQ(events.at(202).at("kernel"), 2);
  EXPECT_EQ(events.at(101).at("cuda_runtime"), 3);
  EXPECT_EQ(events.at(202).at("cuda_runtime"), 2);
  EXPECT_EQ(events.at(101).at("memcpy"), 1);
  EXPECT_EQ(events.at(202).count("memcpy"), 0u);
  EXPECT_EQ(events.at(101).at("launch"), 3);
  EXPECT_EQ(events.at(202).at("launch"), 2);
  // ... and exactly as many events as the trace's own export.
  for (const auto& p : processes) {
    auto single = ExportChrome(p.trace, tmp_ + "/one.json");
    ASSERT_TRUE(single.ok());
    const auto own = EventsByPid(nlohmann::json::parse(Slurp(tmp_ + "/one.json")));
    int own_events = 0;
    for (const auto& [pid, cats] : own) own_events += cats.at("*");
    EXPECT_EQ(events.at(p.pid).at("*"), own_events) << p.trace;
  }
  // Kernel names stay each process's own (string ids are per trace).
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "kernel") {
      EXPECT_EQ(e["name"], e["pid"] == 101 ? "work" : "other");
    }
  }
  // One clock: pid 202's first kernel (CUPTI 1001500) is 2000 ns after the run's first event (pid 101's
  // first API call, CUPTI 999500), both moved by the same clock pair.
  bool found = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "kernel" && e["pid"] == 202 && e["args"]["correlation"] == 1) {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 2.0);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  const auto& run = j["otherData"]["twinscope_run"];
  EXPECT_EQ(run["processes"].size(), 2u);
  EXPECT_EQ(run["base_ns"].get<int64_t>(), 1000000999500);
  EXPECT_EQ(run["alignment"], "CLOCK_REALTIME through each trace's clock pair (host hosta)");
  // Flow ids stay unique across processes (both traces use correlation ids 1..n).
  std::map<uint64_t, int> starts;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "s") {
      EXPECT_EQ(++starts[e["id"].get<uint64_t>()], 1);
    }
  }
  EXPECT_EQ(starts.size(), 5u);
}

TEST_F(RunExportTest, ChromeGoldenTwoProcesses) {
  WriteTwoProcesses();
  const std::string out = tmp_ + "/run.json";
  ASSERT_TRUE(ExportChromeRun(Processes(), out).ok());
  ExpectGolden("run_two_processes_chrome.json", Replace(Slurp(out), tmp_, "TMP"));
}

// A lone trace exports byte for byte as before merged runs existed (golden made by the exporter
// before this change).
TEST_F(RunExportTest, LoneTraceChromeUnchanged) {
  const std::string trace = run_ + "/app.tsc", out = tmp_ + "/one.json";
  testing::WritePrimaryTrace(trace);
  ASSERT_TRUE(ExportChrome(trace, out).ok());
  ExpectGolden("lone_trace_chrome.json", Replace(Slurp(out), trace, "TRACE"));
}

// Several hosts: the same pid on two hosts, each with its own clock pair. Hand-computed realtimes:
// host a: offset 2e12 - 1e6; kernel at CUPTI 1'010'000 -> 2'000'000'010'000.
// host b: offset 2'000'000'000'500 - 50'000'000; kernel at CUPTI 50'005'000 -> 2'000'000'005'500.
// Host b's kernel is the earlier one although its raw time is 50x larger. The base is host b's API
// call (CUPTI 50'004'500 -> 2'000'000'005'000): b's kernel at 0.5 us, a's at 5 us.
TEST_F(RunExportTest, SeveralHostsOnOneClockThroughEachClockPair) {
  ProcessTraceSpec a;
  a.pid = 100;
  a.host = "a";
  a.top = true;
  a.cupti_ns = 1000000;
  a.realtime_ns = 2000000000000;
  a.kernels = {{1010000, 1011000}};
  testing::WriteProcessTrace(run_ + "/python3-100.tsc", a);
  ProcessTraceSpec b = a;
  b.host = "b";
  b.cupti_ns = 50000000;
  b.realtime_ns = 2000000000500;
  b.kernels = {{50005000, 50006000}};
  testing::WriteProcessTrace(run_ + "/python3-100.1.tsc", b);
  const auto processes = Processes();
  ASSERT_EQ(processes.size(), 2u);
  const nlohmann::json j = Chrome(processes);
  const auto names = ProcessNames(j);
  ASSERT_EQ(names.size(), 2u) << "pid 100 twice: two groups";
  std::map<std::string, double> kernel_ts;  // host -> ts (us)
  std::map<int64_t, std::string> host_of;
  for (const auto& [pid, name] : names) host_of[pid] = name.find("host a") != std::string::npos ? "a" : "b";
  EXPECT_NE(names.begin()->second, names.rbegin()->second);
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "kernel") kernel_ts[host_of.at(e["pid"].get<int64_t>())] = e["ts"].get<double>();
  ASSERT_EQ(kernel_ts.size(), 2u);
  EXPECT_DOUBLE_EQ(kernel_ts.at("b"), 0.5);
  EXPECT_DOUBLE_EQ(kernel_ts.at("a"), 5.0);
  const auto& run = j["otherData"]["twinscope_run"];
  EXPECT_EQ(run["base_ns"].get<int64_t>(), 2000000005000);
  EXPECT_EQ(run["hosts"], nlohmann::json::array({"a", "b"}));
  EXPECT_EQ(run["alignment"], "CLOCK_REALTIME through each trace's clock pair (2 hosts: a, b)");
  for (const auto& p : run["processes"]) EXPECT_EQ(p["pid"], 100);
}

// One side of a twin folder (shadow traces): each group holds its blocks by SM and its traced
// launches; the same pid twice (a pid reused) still makes two groups.
TEST_F(RunExportTest, ShadowSideKeepsEachProcessBlocksInItsGroup) {
  testing::WriteShadowTrace(run_ + "/app-5151.tsc");
  testing::WriteShadowTrace(run_ + "/app-5151.1.tsc");
  const auto processes = Processes();
  ASSERT_EQ(processes.size(), 2u);
  const nlohmann::json j = Chrome(processes);
  const auto events = EventsByPid(j);
  ASSERT_EQ(events.size(), 2u);
  for (const auto& [pid, cats] : events) {
    EXPECT_EQ(pid % 10000000, 5151);
    EXPECT_EQ(cats.at("block"), 5) << "the trace's 5 blocks with valid times";
    EXPECT_EQ(cats.at("launch"), 2 + 2) << "2 launch instants, 2 launch spans";
  }
  std::map<int64_t, std::set<std::string>> tracks;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks[e["pid"].get<int64_t>()].insert(e["args"]["name"]);
  for (const auto& [pid, names] : tracks) {
    EXPECT_TRUE(names.count("GPU 0 SM 0") && names.count("GPU 0 SM 1")) << pid;
    EXPECT_TRUE(names.count("GPU 0 traced launches")) << pid;
  }
}

// A trace without a clock pair is kept as recorded, and the view says so.
TEST_F(RunExportTest, AlignmentSaysWhatWasNotAligned) {
  ProcessTraceSpec a;
  a.kernels = {{1000, 2000}};
  a.host = "a";
  testing::WriteProcessTrace(run_ + "/x-1.tsc", a);
  ProcessTraceSpec b = a;
  b.host = "b";
  b.pid = 7;
  b.clock_pair = false;
  testing::WriteProcessTrace(run_ + "/x-2.tsc", b);
  EXPECT_EQ(AlignmentText(Processes()),
            "CLOCK_REALTIME through each trace's clock pair; 1 trace(s) without one kept as recorded and may be "
            "misplaced (2 hosts: a, b)");
}

#ifndef TWINSCOPE_NO_SQLITE
std::string One(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql << ": " << sqlite3_errmsg(db);
  std::string out = "<no row>";
  if (s && sqlite3_step(s) == SQLITE_ROW) {
    out.clear();
    for (int i = 0; i < sqlite3_column_count(s); ++i) {
      const unsigned char* t = sqlite3_column_text(s, i);
      out += (i ? "|" : "") + std::string(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
  }
  sqlite3_finalize(s);
  return out;
}

TEST_F(RunExportTest, SqliteHasAProcessTableAndPerProcessRows) {
  WriteTwoProcesses();
  const std::string out = tmp_ + "/run.db";
  auto r = ExportSqliteRun(Processes(), out);
  ASSERT_TRUE(r.ok()) << r.status().message();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(out.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  EXPECT_EQ(One(db, "SELECT count(*) FROM process"), "2");
  EXPECT_EQ(One(db,
                "SELECT pid, ppid, host, command_line, top, launches, kernel_records, to_realtime_ns, clock_pair "
                "FROM process WHERE id = 1"),
            "101|1|hosta|python3 train.py|1|3|3|1000000000000|1");
  EXPECT_EQ(One(db, "SELECT pid, ppid, command_line, top, launches FROM process WHERE id = 2"),
            "202|101|python3 -c worker|0|2");
  // Row counts per process equal each trace's own.
  for (const char* t : {"kernels", "api_calls", "launches"}) {
    EXPECT_EQ(One(db, std::string("SELECT count(*) FROM ") + t + " WHERE process_id = 1"), "3") << t;
    EXPECT_EQ(One(db, std::string("SELECT count(*) FROM ") + t + " WHERE process_id = 2"), "2") << t;
  }
  EXPECT_EQ(One(db, "SELECT count(*) FROM memcpys WHERE process_id = 1"), "1");
  EXPECT_EQ(One(db, "SELECT count(*) FROM memcpys WHERE process_id = 2"), "0");
  // Names resolve within each process (both traces give their kernel name the same string id).
  EXPECT_EQ(One(db, "SELECT group_concat(DISTINCT name) FROM kernels_named WHERE process_id = 1"), "work");
  EXPECT_EQ(One(db, "SELECT group_concat(DISTINCT name) FROM kernels_named WHERE process_id = 2"), "other");
  EXPECT_EQ(One(db, "SELECT group_concat(DISTINCT kernel) FROM launches_named WHERE process_id = 2"), "other");
  EXPECT_EQ(One(db, "SELECT value FROM counters WHERE process_id = 2 AND name = 'launches_seen'"), "2");
  EXPECT_EQ(One(db, "SELECT value FROM meta WHERE key = 'processes'"), "2");
  // Per-process tables each have the column; the API call joins its kernel within its process.
  EXPECT_EQ(One(db,
                "SELECT count(*) FROM kernels k JOIN api_calls a ON a.process_id = k.process_id AND "
                "a.correlation_id = k.correlation_id"),
            "5");
  sqlite3_close(db);
}
#endif

}  // namespace
}  // namespace twinscope::exporters
