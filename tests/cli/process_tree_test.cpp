// Process trees under `twinscope record` (docs/design.md, "Process trees"):
// the real CUPTI collector over the fake CUPTI in every process of a tree run
// by shell scripts: a trace per process, none truncated, ranks in the
// headers, no file from a process without GPU work, a killed child's trace
// listed, the stop request answered by a server that is then SIGKILLed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string out, err;
};

std::string Slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string kFake130 = std::string(FAKE_CUPTI_DIR) + "/libcupti.so.13";
const std::string kEnv =
    "env -u TWINSCOPE_CUPTI_LIBRARY -u LD_PRELOAD -u TWINSCOPE_GUARD -u TWINSCOPE_OUTPUT -u "
    "TWINSCOPE_TOP_PID -u RANK -u WORLD_SIZE -u LOCAL_RANK LD_LIBRARY_PATH='" FAKE_CUPTI_DIR
    "' TWINSCOPE_CUPTI_LIBRARY='" +
    kFake130 + "' ";

class ProcessTreeTest : public ::testing::Test {
 public:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("twinscope_tree_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Outcome Shell(const std::string& command) {
    const std::string out = (dir_ / "stdout").string(), err = (dir_ / "stderr").string();
    const std::string line = kEnv + command + " >'" + out + "' 2>'" + err + "'";
    int status = std::system(line.c_str());
    Outcome o;
    o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o.out = Slurp(out);
    o.err = Slurp(err);
    return o;
  }
  // `twinscope record -o OUTPUT -- sh -c SCRIPT`: in SCRIPT, $D is the fake-CUPTI program
  // (cupti_driver) and $I the collector (from the CUDA_INJECTION64_PATH record sets).
  Outcome Record(const std::string& output, const std::string& script) {
    std::ofstream(dir_ / "script.sh") << "D='" CUPTI_DRIVER_BIN "'\nI=\"$CUDA_INJECTION64_PATH\"\n" << script << "\n";
    return Shell(std::string(TWINSCOPE_BIN) + " record -o '" + output + "' -- sh '" + (dir_ / "script.sh").string() +
                 "'");
  }
  nlohmann::json Json(const std::string& command) {
    Outcome s = Shell(command);
    auto j = nlohmann::json::parse(s.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << s.out << s.err;
    return j;
  }
  std::vector<fs::path> TracesIn(const fs::path& d) {
    std::vector<fs::path> out;
    if (!fs::exists(d)) return out;
    for (const auto& e : fs::directory_iterator(d))
      if (e.path().extension() == ".tsc") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path dir_;
};

// Two "ranks" started at once by a launcher-shaped script, one TWINSCOPE_OUTPUT file: before, each
// O_TRUNC'ed the other's trace ("corrupt"); now the first has the file, the second writes into
// FILE.d/, each header has its rank, and `stats` shows both and a total.
TEST_F(ProcessTreeTest, TwoRanksWriteTwoTracesWithTheirRanks) {
  const std::string trace = (dir_ / "run.tsc").string();
  Outcome r = Record(trace,
                     "RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 \"$D\" \"$I\" plain &\n"
                     "RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 \"$D\" \"$I\" plain &\n"
                     "wait");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(trace)) << r.err;
  const auto others = TracesIn(trace + ".d");
  ASSERT_EQ(others.size(), 1u) << r.err;
  EXPECT_NE(r.err.find("2 processes wrote traces (2 with GPU work)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 0 of 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1 of 2"), std::string::npos) << r.err;
  std::set<int> ranks;
  // A file with others beside it in FILE.d/ is the run: each process, then the total.
  auto run = Json(std::string(TWINSCOPE_BIN) + " stats --strict --json '" + trace + "'");
  ASSERT_EQ(run["processes"].size(), 2u) << run.dump();
  for (const auto& p : run["processes"]) {
    EXPECT_EQ(p["counts"]["kernel"], 10) << "each rank's trace is whole";
    EXPECT_EQ(p["loss"]["missing"], 0);
    EXPECT_EQ(p["process"]["top"], false) << "the script is the top process";
    EXPECT_EQ(p["process"]["rank"]["world_size"], 2);
    EXPECT_EQ(p["process"]["rank"]["source"], "RANK");
    ranks.insert(p["process"]["rank"]["rank"].get<int>());
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  EXPECT_EQ(run["total"]["kernel_records"], 20);
  EXPECT_EQ(run["total"]["processes"], 2);
  Outcome text = Shell(std::string(TWINSCOPE_BIN) + " stats '" + trace + "'");
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("total: 2 processes (2 with GPU work, 0 without), 20 launches, 20 kernel records"),
            std::string::npos)
      << text.out;
  // Launcher ranks: their time per step is compared (docs/processes.md, "Ranks").
  EXPECT_NE(text.out.find("ranks compared (primary traces: kernel time per step"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  rank 0: most kernel time in"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  rank 1: most kernel time in"), std::string::npos) << text.out;
}

// A worker forked before CUDA is initialized (multiprocessing's fork) initializes it itself: its own
// trace, its parent's intact; the exec'd program is the top process (sh execs it).
TEST_F(ProcessTreeTest, ForkedWorkerGetsItsOwnTrace) {
  const fs::path out = dir_ / "traces";
  Outcome r = Record(out.string() + "/", "exec \"$D\" \"$I\" fork_plain");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("FORKED_CHILD_EXIT 0"), std::string::npos) << r.out;
  const auto traces = TracesIn(out);
  ASSERT_EQ(traces.size(), 2u) << r.err;
  auto run = Json(std::string(TWINSCOPE_BIN) + " stats --strict --json '" + out.string() + "'");
  ASSERT_EQ(run["processes"].size(), 2u);
  int tops = 0;
  int top_pid = 0;
  for (const auto& p : run["processes"]) {
    EXPECT_EQ(p["counts"]["kernel"], 10);
    if (p["process"]["top"] == true) {
      ++tops;
      top_pid = p["process"]["pid"];
    }
  }
  EXPECT_EQ(tops, 1);
  for (const auto& p : run["processes"]) {
    if (p["process"]["top"] == false) {
      EXPECT_EQ(p["process"]["ppid"], top_pid) << "the forked worker's parent";
    }
  }
  // Each file is named after its process.
  for (const auto& t : traces) EXPECT_EQ(t.filename().string().rfind("cupti_driver-", 0), 0u) << t;
}

// An exec'd child of a shell that makes no CUDA call: the child claims the file; the header says who
// its ancestors are up to the top process (the shell).
TEST_F(ProcessTreeTest, ExecdChildOfAShellWritesTheTrace) {
  const std::string trace = (dir_ / "t.tsc").string();
  Outcome r = Record(trace, "\"$D\" \"$I\" plain\nexit 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("records: 10 kernels"), std::string::npos) << "one trace: the summary as before\n" << r.err;
  EXPECT_FALSE(fs::exists(trace + ".d"));
  auto j = Json(std::string(TWINSCOPE_BIN) + " stats --json '" + trace + "'");
  // stats --json of a lone trace: its header is in "header".
  const auto& p = j["header"]["process"];
  EXPECT_EQ(p["top"], false);
  ASSERT_EQ(p["ancestors"].size(), 1u) << p.dump();
  EXPECT_EQ(p["ancestors"][0], p["ppid"]) << "the chain stops at the top process, its parent";
}

// A process that initializes CUDA and launches nothing leaves no file (nor an empty FILE.d/).
TEST_F(ProcessTreeTest, ChildThatOnlyInitializesCudaLeavesNoFile) {
  const std::string trace = (dir_ / "t.tsc").string();
  Outcome r = Record(trace, "\"$D\" \"$I\" plain\n\"$D\" \"$I\" init_only");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(trace));
  EXPECT_FALSE(fs::exists(trace + ".d")) << "the init-only process's trace and folder are removed";
  EXPECT_NE(r.err.find("launched no GPU work"), std::string::npos) << r.err;
  // A folder run: the same.
  const fs::path out = dir_ / "f";
  r = Record(out.string() + "/", "\"$D\" \"$I\" init_only\n\"$D\" \"$I\" plain");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(TracesIn(out).size(), 1u);
}

// A child killed mid-run: its trace is readable, listed, said to lack a summary; the exit code is the
// top process's (the shell's: 128 + 9).
TEST_F(ProcessTreeTest, ChildKilledMidRunIsListedAndReadable) {
  const fs::path out = dir_ / "run";
  Outcome r = Record(out.string() + "/", "\"$D\" \"$I\" plain\nTWINSCOPE_FLUSH_MS=100 \"$D\" \"$I\" periodic");
  EXPECT_EQ(r.code, 137) << r.err;
  ASSERT_EQ(TracesIn(out).size(), 2u) << r.err;
  EXPECT_NE(r.err.find("no-summary (did not shut down cleanly)"), std::string::npos) << r.err;
  auto run = Json(std::string(TWINSCOPE_BIN) + " stats --json '" + out.string() + "'");
  ASSERT_EQ(run["processes"].size(), 2u) << run.dump();
  EXPECT_EQ(run["total"]["without_summary"], 1);
  uint64_t kernels = 0;
  for (const auto& p : run["processes"]) kernels += p["counts"].value("kernel", 0);
  EXPECT_EQ(kernels, 13u) << "plain's 10 and the killed process's 3, flushed periodically";
  // Re-running the command replaces the previous run's traces.
  r = Record(out.string() + "/", "\"$D\" \"$I\" plain");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(TracesIn(out).size(), 1u);
}

// The stop request: a server (it never exits on its own) under the collector, asked through
// TWINSCOPE_CONTROL_DIR/stop, answers with flushed-<pid>; SIGKILLed after that, its trace still has
// its summary, marked as taken at the stop request, and stats says so.
TEST_F(ProcessTreeTest, ServerKilledAfterTheStopRequestKeepsItsSummary) {
  const fs::path side = dir_ / "primary";
  const fs::path control = side / ".control";
  fs::create_directories(control);
  const std::string collector = std::string(COLLECTOR_LIB);
  const std::string cmd = "exec " + kEnv + "TWINSCOPE_FLUSH_MS=100 TWINSCOPE_OUTPUT='" + side.string() +
                          "/' TWINSCOPE_CONTROL_DIR='" + control.string() + "' NVTX_INJECTION64_PATH='" + collector +
                          "' '" CUPTI_DRIVER_BIN "' '" + collector + "' serve >'" + (dir_ / "server.out").string() +
                          "' 2>'" + (dir_ / "server.err").string() + "'";
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 500 && Slurp(dir_ / "server.out").find("SERVING") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(Slurp(dir_ / "server.out").find("SERVING"), std::string::npos) << Slurp(dir_ / "server.err");
  std::ofstream(control / "stop").close();
  const fs::path flushed = control / ("flushed-" + std::to_string(pid));
  for (int i = 0; i < 500 && !fs::exists(flushed); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(fs::exists(flushed)) << Slurp(dir_ / "server.err");
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  const auto traces = TracesIn(side);
  ASSERT_EQ(traces.size(), 1u);
  auto j = Json(std::string(TWINSCOPE_BIN) + " stats --json '" + traces[0].string() + "'");
  EXPECT_EQ(j["read"]["end"], "complete") << j["read"].dump();
  EXPECT_EQ(j["summary_at_stop_request"], true);
  EXPECT_EQ(j["counts"]["kernel"], 3);
  EXPECT_EQ(j["loss"]["missing"], 0);
  Outcome text = Shell(std::string(TWINSCOPE_BIN) + " stats '" + traces[0].string() + "'");
  EXPECT_NE(text.out.find("the summary was written at twinscope's stop request"), std::string::npos) << text.out;
}

}  // namespace
