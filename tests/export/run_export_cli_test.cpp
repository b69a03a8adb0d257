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
#ifdef TWINSCOPE_TEST_PERFETTO  // a build with the Perfetto exporter (tests/export/CMakeLists.txt)
#include <map>

#include "views/export/join/perfetto_trace.pb.h"
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

  // Runs twinscope with `args`; returns the exit code, *err the stderr text, *out (if given) stdout.
  int Run(const std::string& args, std::string* err, std::string* out = nullptr) {
    const std::string log = tmp_ + "/stderr.txt", text = tmp_ + "/stdout.txt";
    const int rc = std::system((std::string(TWINSCOPE_BIN) + " " + args + " 2>" + log + " >" + text).c_str());
    auto slurp = [](const std::string& path) {
      std::ifstream f(path);
      std::stringstream s;
      s << f.rdbuf();
      return s.str();
    };
    *err = slurp(log);
    if (out) *out = slurp(text);
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
  // A trace whose header cannot be read is left out and said, not counted as "without GPU work".
  std::ofstream(tmp_ + "/run/python3-303.tsc") << "TWSCOPE1 cut";
  ASSERT_EQ(Run("export " + tmp_ + "/run --format chrome -o " + tmp_ + "/out.json", &err), 0) << err;
  EXPECT_NE(err.find("warning: left out, its header cannot be read: " + tmp_ + "/run/python3-303.tsc: "),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("without GPU work left out"), std::string::npos) << err;
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

// A folder written by two hosts (the same pid on both): stats names each process's host and counts
// the hosts; the merged export names them too.
TEST_F(RunExportCliTest, StatsAndExportOfTwoHosts) {
  fs::create_directories(tmp_ + "/run");
  ProcessTraceSpec a;
  a.pid = 100;
  a.host = "a";
  a.kernels = {{1000000, 1002000}};
  WriteProcessTrace(tmp_ + "/run/python3-100.tsc", a);
  ProcessTraceSpec b = a;
  b.host = "b";
  WriteProcessTrace(tmp_ + "/run/python3-100.1.tsc", b);
  std::string err, out;
  ASSERT_EQ(Run("stats " + tmp_ + "/run", &err, &out), 0) << err;
  EXPECT_NE(out.find("python3 train.py on host a\n"), std::string::npos) << out;
  EXPECT_NE(out.find("python3 train.py on host b\n"), std::string::npos) << out;
  EXPECT_NE(out.find(" damaged; 2 hosts\n"), std::string::npos) << out;
  ASSERT_EQ(Run("stats --json " + tmp_ + "/run", &err, &out), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["total"]["hosts"], nlohmann::json::array({"a", "b"}));
  ASSERT_EQ(Run("export " + tmp_ + "/run --format chrome -o " + tmp_ + "/out.json", &err), 0) << err;
  EXPECT_NE(err.find("clocks: CLOCK_REALTIME through each trace's clock pair (2 hosts: a, b)"), std::string::npos)
      << err;
  EXPECT_EQ(KernelPids(tmp_ + "/out.json"), (std::set<int64_t>{10000100, 20000100}));
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

#ifdef TWINSCOPE_TEST_PERFETTO
// A Perfetto trace read back: per process group (pid) the slices begun, and the time of each kernel.
struct PerfettoView {
  std::map<int64_t, std::string> process_names;        // pid -> name
  std::map<int64_t, std::string> descriptions;         // pid -> its process track's description
  std::map<int64_t, int> slices;                       // pid -> slice-begin events
  std::map<int64_t, std::vector<uint64_t>> kernel_ts;  // pid -> timestamps of slices named "work"
  int orphan_tracks = 0;                               // tracks whose root is no process
};

PerfettoView ReadPerfetto(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  pftrace::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(s.str())) << path;
  PerfettoView v;
  std::map<uint64_t, uint64_t> parent;                         // uuid -> parent uuid
  std::map<uint64_t, int64_t> pid_of;                          // process and thread tracks
  std::map<std::pair<uint32_t, uint64_t>, std::string> names;  // (sequence, iid) -> event name
  for (const auto& p : trace.packet()) {
    for (const auto& n : p.interned_data().event_names()) names[{p.trusted_packet_sequence_id(), n.iid()}] = n.name();
    if (!p.has_track_descriptor()) continue;
    const auto& d = p.track_descriptor();
    if (d.has_process()) {
      pid_of[d.uuid()] = d.process().pid();
      v.process_names[d.process().pid()] = d.process().process_name();
      v.descriptions[d.process().pid()] = d.description();
    } else if (d.has_thread()) {
      pid_of[d.uuid()] = d.thread().pid();
    } else if (d.has_parent_uuid()) {
      parent[d.uuid()] = d.parent_uuid();
    } else {
      ++v.orphan_tracks;
    }
  }
  auto root = [&](uint64_t uuid) -> int64_t {
    for (int hops = 0; hops < 16; ++hops) {
      if (auto it = pid_of.find(uuid); it != pid_of.end()) return it->second;
      auto it = parent.find(uuid);
      if (it == parent.end()) return -1;
      uuid = it->second;
    }
    return -1;
  };
  for (const auto& p : trace.packet()) {
    if (!p.has_track_event() || p.track_event().type() != pftrace::TrackEvent::TYPE_SLICE_BEGIN) continue;
    const int64_t pid = root(p.track_event().track_uuid());
    ++v.slices[pid];
    if (names[{p.trusted_packet_sequence_id(), p.track_event().name_iid()}] == "work")
      v.kernel_ts[pid].push_back(p.timestamp());
  }
  return v;
}

TEST_F(RunExportCliTest, FolderOfTwoProcessesIsOnePerfettoTrace) {
  fs::create_directories(tmp_ + "/run");
  WriteTwo(tmp_ + "/run/python3-101.tsc", tmp_ + "/run/python3-202.tsc");
  std::string err;
  ASSERT_EQ(Run("export " + tmp_ + "/run --format perfetto -o " + tmp_ + "/out.pftrace", &err), 0) << err;
  const PerfettoView v = ReadPerfetto(tmp_ + "/out.pftrace");
  EXPECT_EQ(v.process_names, (std::map<int64_t, std::string>{{101, "python3 train.py (pid 101, primary)"},
                                                             {202, "python3 train.py (pid 202, primary)"}}));
  EXPECT_EQ(v.orphan_tracks, 0) << "GPU tracks belong to their process's group";
  EXPECT_NE(v.descriptions.at(202).find("host hosta, trace " + tmp_ +
                                        "/run/python3-202.tsc; times on CLOCK_REALTIME "
                                        "through its clock pair (CUPTI + 0 ns); the run: CLOCK_REALTIME through each "
                                        "trace's clock pair (host hosta), time 0 = 999500 ns"),
            std::string::npos)
      << v.descriptions.at(202);
  EXPECT_EQ(v.slices.count(-1), 0u);
  // Each group holds as many slices as its trace's own Perfetto export.
  for (const auto& [pid, file] : std::map<int64_t, std::string>{{101, "python3-101.tsc"}, {202, "python3-202.tsc"}}) {
    ASSERT_EQ(Run("export " + tmp_ + "/run/" + file + " --format perfetto -o " + tmp_ + "/one.pftrace", &err), 0);
    int own = 0;
    for (const auto& [p, n] : ReadPerfetto(tmp_ + "/one.pftrace").slices) own += n;
    EXPECT_EQ(v.slices.at(pid), own) << file;
  }
  // One clock: the run starts at pid 101's first API call (CUPTI 999'500); pid 202's kernel (CUPTI
  // 1'001'000) is 1'500 ns later, pid 101's kernels 500 and 3'500 ns.
  EXPECT_EQ(v.kernel_ts.at(202), (std::vector<uint64_t>{1500}));
  EXPECT_EQ(v.kernel_ts.at(101), (std::vector<uint64_t>{500, 3500}));
}
#endif

}  // namespace
}  // namespace twinscope::testing
