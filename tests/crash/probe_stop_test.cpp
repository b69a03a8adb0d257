// The block probe's stop request, end to end over the fake Sanitizer (issue 19, part 5): a probed
// "server" (blocks_crash_app, which runs until it is killed) is asked to stop through its control
// folder (TWINSCOPE_CONTROL_DIR/stop), answers with flushed-<pid> once its summary is on disk, marked
// as taken at the stop request; SIGKILLed after that, its trace still reads with that summary and its
// blocks. The collector's half is ProcessTreeTest.ServerKilledAfterTheStopRequestKeepsItsSummary.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "format/run_dir.h"
#include "progress.h"

extern char** environ;

namespace twinscope {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<fs::path> TracesIn(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".tsc") out.push_back(e.path());
  return out;
}

template <class Done>
bool WaitFor(Done done, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST(ProbeStopRequest, ProbedServerKilledAfterTheStopRequestKeepsItsSummary) {
  const fs::path dir = fs::temp_directory_path() / ("probe_stop_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const fs::path side = dir / "shadow", control = side / ".control";
  fs::create_directories(control);
  const std::string progress_path = (dir / "progress").string();
  crash::Progress* progress = crash::MapProgress(progress_path.c_str());
  ASSERT_NE(progress, nullptr);

  // The environment `twin --serve` gives a shadow (twin/twin_runner.cpp, SideEnv), nothing else of ours.
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("TWINSCOPE_", 0) != 0) envs.push_back(*e);
  for (const std::string& kv :
       {std::string("CUDA_INJECTION64_PATH=") + BLOCKS_LIB, std::string("NVTX_INJECTION64_PATH=") + BLOCKS_LIB,
        std::string("TWINSCOPE_KERNELS=reshape_and_cache_flash"), "TWINSCOPE_OUTPUT=" + side.string() + "/",
        "TWINSCOPE_CONTROL_DIR=" + control.string(), std::string("TWINSCOPE_FLUSH_MS=100"),
        std::string("TWINSCOPE_ROLE=shadow")})
    envs.push_back(kv);
  std::vector<char*> envp, args;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv = {BLOCKS_CRASH_APP, TARGET_CUBIN, OTHER_CUBIN, progress_path, "7"};
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const std::string err_path = (dir / "server.err").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  auto reap = [&] {
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
  };

  // Serving: some launches of the target traced.
  if (!WaitFor([&] { return progress->traced.load() >= 50; }, std::chrono::seconds(20))) {
    reap();
    FAIL() << "the probed program traced no launches: " << Slurp(err_path);
  }
  std::ofstream(control / "stop").close();
  const fs::path flushed = control / ("flushed-" + std::to_string(pid));
  const bool answered = WaitFor([&] { return fs::exists(flushed); }, std::chrono::seconds(20));
  // Still running: its summary is on disk already, marked as taken at the stop request.
  const auto traces = TracesIn(side);
  ASSERT_EQ(traces.size(), 1u);
  const RunTrace before = ScanTrace(traces[0].string());
  const uint64_t traced_at_stop = progress->traced.load();
  reap();
  ASSERT_TRUE(answered) << "no flushed-" << pid << " in " << control << ": " << Slurp(err_path);
  EXPECT_TRUE(before.has_summary) << before.error;
  EXPECT_TRUE(before.summary_at_stop_request);

  // SIGKILLed after the stop request: the trace reads, with that summary and the blocks traced.
  const RunTrace t = ScanTrace(traces[0].string());
  EXPECT_EQ(t.end, "complete") << t.error;
  EXPECT_TRUE(t.has_summary);
  EXPECT_TRUE(t.summary_at_stop_request);
  EXPECT_EQ(t.role, "shadow");
  EXPECT_GT(t.launch_records, 0u);
  EXPECT_GT(t.block_records, 0u);
  EXPECT_LE(t.launch_records, traced_at_stop + 1000) << "no more launch records than launches made";
  // `twinscope stats` says so.
  FILE* p = popen((std::string(TWINSCOPE_BIN) + " stats --json '" + traces[0].string() + "' 2>/dev/null").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  const auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["summary_at_stop_request"], true);
  EXPECT_EQ(j["read"]["end"], "complete") << j["read"].dump();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace twinscope
