// Runs the built `twinscope` binary as a user would and checks exit codes,
// messages and outputs of record, blocks, stats and export.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../testutil/spawn.h"
#include "format/trace_writer.h"
#include "sample_trace.h"
#include "twinscope/counters.h"

namespace twinscope {
namespace {

namespace fs = std::filesystem;

using testutil::Outcome;
using testutil::Slurp;

// Starts `argv` with extra environment variables, stdout/stderr to files.
pid_t Start(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& out,
            const std::string& err) {
  return testutil::SpawnWithOutput(argv, testutil::EnvironmentWith(env), out, err);
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("twinscope_cli_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "lib");
    // Stand-ins for the collector libraries: the programs run in these tests
    // make no CUDA calls, so the files only have to exist.
    std::ofstream(dir_ / "lib" / "libtwinscope_cupti.so").put('x');
    std::ofstream(dir_ / "lib" / "libtwinscope_blocks.so").put('x');
    lib_env_ = "TWINSCOPE_LIB_DIR=" + (dir_ / "lib").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string P(const std::string& name) const { return (dir_ / name).string(); }

  Outcome Twinscope(std::vector<std::string> args, std::vector<std::string> env = {}) {
    args.insert(args.begin(), TWINSCOPE_BIN);
    env.push_back(lib_env_);
    return testutil::RunToEnd(std::move(args), testutil::EnvironmentWith(env), dir_);
  }

  void WriteCleanTrace(const std::string& path) {
    WriterOptions o;
    o.path = path;
    std::string error;
    auto w = TraceWriter::Open(o, {{"role", "primary"}, {"pid", 1}}, &error);
    ASSERT_TRUE(w) << error;
    KernelRecord k{};
    k.name = w->Intern("k");
    k.start_ns = 100;
    k.end_ns = 200;
    w->Append(k);
    w->SetCounter(counters::kLaunchesSeen, 1);
    w->SetCounter(counters::kKernelRecords, 1);
    ASSERT_TRUE(w->Close(&error)) << error;
  }

  fs::path dir_;
  std::string lib_env_;
};

TEST_F(CliTest, BadFlagsAreUsageErrors) {
  Outcome r = Twinscope({"record", "--bogus", "--", "/bin/true"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;

  r = Twinscope({"record", "--kinds", "kernel,foo", "--", "/bin/true"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("unknown kind 'foo'"), std::string::npos) << r.err;

  r = Twinscope({"export", P("x.tsc"), "--format", "xml", "-o", P("x.json")});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("xml"), std::string::npos) << r.err;

  r = Twinscope({"blocks", "-o", P("s.tsc"), "--", "/bin/true"});  // --kernel missing
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--kernel"), std::string::npos) << r.err;

  r = Twinscope({"blocks", "--kernel", "re:(", "-o", P("s.tsc"), "--", "/bin/true"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("bad regular expression"), std::string::npos) << r.err;
}

// A misspelt TWINSCOPE_* variable is named once by `twinscope` itself, with the closest known setting
// (base/settings.h); known ones are not; the command still runs.
TEST_F(CliTest, MisspeltSettingIsNamedWithTheClosest) {
  WriteCleanTrace(P("t.tsc"));
  Outcome r = Twinscope({"stats", P("t.tsc")}, {"TWINSCOPE_QUITE=1", "TWINSCOPE_FLUSH_MS=20"});
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string w = "TWINSCOPE_QUITE is not a twinscope setting and is ignored; did you mean TWINSCOPE_QUIET?";
  EXPECT_NE(r.err.find(w), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(w), r.err.rfind(w)) << r.err;
  EXPECT_EQ(r.err.find("TWINSCOPE_FLUSH_MS"), std::string::npos) << r.err;
}

TEST_F(CliTest, StatsOnMissingAndForeignFiles) {
  Outcome r = Twinscope({"stats", P("missing.tsc")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(P("missing.tsc")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;

  std::ofstream(P("foreign.tsc")) << "hello, not a trace at all";
  r = Twinscope({"stats", P("foreign.tsc")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("not a twinscope trace"), std::string::npos) << r.err;
}

TEST_F(CliTest, StatsTextJsonAndStrict) {
  testing::WritePrimaryTrace(P("p.tsc"));
  Outcome r = Twinscope({"stats", P("p.tsc")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("role: primary"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device 0: Fake GPU, 132 SMs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tool state: running"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("read: complete"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("missing (seen-delivered)  1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gemm()"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 kernel launches seen without a kernel record"), std::string::npos) << r.out;

  r = Twinscope({"stats", P("p.tsc"), "--strict"});
  EXPECT_EQ(r.code, 3);

  r = Twinscope({"stats", P("p.tsc"), "--json", "--top", "1"});
  EXPECT_EQ(r.code, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["counts"]["kernel"], 4);
  EXPECT_EQ(j["loss"]["missing"], 1);
  EXPECT_EQ(j["kernels"].size(), 1u);
  EXPECT_EQ(j["read"]["end"], "complete");

  WriteCleanTrace(P("clean.tsc"));
  r = Twinscope({"stats", P("clean.tsc"), "--strict"});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("problems: none"), std::string::npos) << r.out;
}

TEST_F(CliTest, StatsShadowTrace) {
  testing::WriteShadowTrace(P("s.tsc"));
  Outcome r = Twinscope({"stats", P("s.tsc"), "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["shadow"]);
  ASSERT_EQ(j["shadow_launches"].size(), 2u);
  EXPECT_EQ(j["shadow_launches"][0]["straggler"]["block"], 3);
  EXPECT_EQ(j["shadow_launches"][0]["inversions"], 1);
  EXPECT_EQ(j["shadow_kernels"][0]["launches_incomplete"], 1);
  r = Twinscope({"stats", P("s.tsc")});
  EXPECT_NE(r.out.find("traced kernels:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3@1"), std::string::npos) << r.out;  // straggler block 3 on SM 1
  EXPECT_EQ(Twinscope({"stats", P("s.tsc"), "--strict"}).code, 3);
}

// Toggle mode with CUDA graphs: stats says that graphs kept a module patched, out of the budget's reach.
TEST_F(CliTest, StatsSaysGraphsPinnedAModulePatched) {
  testing::WriteSampledShadowTrace(P("pinned.tsc"), 1);
  Outcome r = Twinscope({"stats", P("pinned.tsc")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("; 1 module(s) patched for good by CUDA graphs (every launch of their kernels pays the "
                       "patch, beyond the budget's reach)"),
            std::string::npos)
      << r.out;
}

// A sampled shadow trace: stats says how many launches were traced of how many, and why.
TEST_F(CliTest, StatsSaysWhatWasSampled) {
  testing::WriteSampledShadowTrace(P("sampled.tsc"));
  Outcome r = Twinscope({"stats", P("sampled.tsc")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("sampling: 1 in 10 of 20 matching launches traced (every 10; budget 5%, used 2.50%; patch "
                       "toggle: re-patched 2, unpatched 2, 150 us toggling"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("patched for good by CUDA graphs"), std::string::npos) << r.out;
  r = Twinscope({"stats", P("sampled.tsc"), "--json"});
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["shadow_launches"].size(), 1u);
  EXPECT_EQ(j["shadow_launches"][0]["sample_index"], 10);
  EXPECT_EQ(j["shadow_launches"][0]["graph_node"], false);
  // An older shadow trace without the sampling header: no such line.
  testing::WriteShadowTrace(P("s.tsc"));
  r = Twinscope({"stats", P("s.tsc")});
  EXPECT_EQ(r.out.find("sampling:"), std::string::npos) << r.out;
}

TEST_F(CliTest, StatsAndExportOnCorruptTrace) {
  testing::WritePrimaryTrace(P("c.tsc"), 2000);
  ASSERT_TRUE(testing::CorruptChunk(P("c.tsc"), 20));
  Outcome r = Twinscope({"stats", P("c.tsc")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("read: corrupt"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("corrupt"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("top kernels"), std::string::npos) << r.out;  // still prints what was read
  EXPECT_EQ(Twinscope({"stats", P("c.tsc"), "--strict"}).code, 3);

  r = Twinscope({"export", P("c.tsc"), "--format", "chrome", "-o", P("c.json")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
  auto doc = nlohmann::json::parse(Slurp(P("c.json")));
  EXPECT_EQ(doc["otherData"]["read_end"], "corrupt");
}

TEST_F(CliTest, ExportChromeAndSqlite) {
  testing::WritePrimaryTrace(P("p.tsc"));
  Outcome r = Twinscope({"export", P("p.tsc"), "--format", "chrome", "-o", P("p.json")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("16 records"), std::string::npos) << r.err;
  auto doc = nlohmann::json::parse(Slurp(P("p.json")));
  EXPECT_GT(doc["traceEvents"].size(), 16u);

  r = Twinscope({"export", P("p.tsc"), "--format", "sqlite", "-o", P("p.db")});
#ifdef TWINSCOPE_HAVE_SQLITE
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::file_size(P("p.db")) > 0);
#else
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("built without SQLite"), std::string::npos) << r.err;
#endif
  r = Twinscope({"export", P("none.tsc"), "--format", "chrome", "-o", P("n.json")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
}

TEST_F(CliTest, RecordPassesExitCodesThrough) {
  Outcome r = Twinscope({"record", "-o", P("t.tsc"), "--", "/bin/true"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("no trace was written"), std::string::npos) << r.err;

  r = Twinscope({"record", "-o", P("t.tsc"), "--", "sh", "-c", "exit 7"});
  EXPECT_EQ(r.code, 7) << r.err;
  EXPECT_NE(r.err.find("exited with code 7"), std::string::npos) << r.err;

  r = Twinscope({"record", "-o", P("t.tsc"), "--", "sh", "-c", "kill -KILL $$"});
  EXPECT_EQ(r.code, 128 + SIGKILL) << r.err;
  EXPECT_NE(r.err.find("killed by SIGKILL"), std::string::npos) << r.err;
}

TEST_F(CliTest, RecordOfMissingCommandIs127) {
  Outcome r = Twinscope({"record", "-o", P("t.tsc"), "--", "no_such_command_twinscope_xyz", "a"});
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("cannot run 'no_such_command_twinscope_xyz'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not found in PATH"), std::string::npos) << r.err;

  r = Twinscope({"record", "-o", P("t.tsc"), "--", P("nope/app")});
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;

  std::ofstream(P("not_executable")) << "#!/bin/sh\n";
  r = Twinscope({"record", "-o", P("t.tsc"), "--", P("not_executable")});
  EXPECT_EQ(r.code, 126);
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
}

TEST_F(CliTest, RecordSetsInjectionEnvironmentAndSummarises) {
  // A stale trace at the output path must not pass for this run's.
  std::ofstream(P("t.tsc")) << "stale";
  Outcome r = Twinscope({"record", "-o", P("t.tsc"), "--kinds", "kernel,api", "--buffer-size", "64",
                         "--device-buffer-pool-limit", "8", "--flush-ms", "250", "--kernels-only", "--", FAKE_APP_BIN,
                         "write-trace", "3"});
  EXPECT_EQ(r.code, 3) << r.err;
  const std::string lib = fs::canonical(dir_ / "lib" / "libtwinscope_cupti.so").string();
  EXPECT_NE(r.out.find("CUDA_INJECTION64_PATH=" + lib + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NVTX_INJECTION64_PATH=" + lib + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_OUTPUT=" + P("t.tsc") + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_KINDS=kernel,api\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_KERNELS_ONLY=1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_BUFFER_SIZE_KB=64\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_DEVICE_BUFFER_POOL_LIMIT=8\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_FLUSH_MS=250\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("trace written to " + P("t.tsc")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("records: 4 kernels, 1 memcpys, 1 memsets, 3 API calls, 3 NVTX (read: complete)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("launches seen 5, kernel records 4, missing 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("top kernel: gemm()"), std::string::npos) << r.err;

  // Without flags only the output and injection variables are set.
  r = Twinscope({"record", "-o", P("u.tsc"), "--", FAKE_APP_BIN, "print-env", "0"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("TWINSCOPE_KINDS=<unset>"), std::string::npos) << r.out;

  // The stale file is gone when the program writes no trace.
  std::ofstream(P("v.tsc")) << "stale";
  r = Twinscope({"record", "-o", P("v.tsc"), "--", "/bin/true"});
  EXPECT_FALSE(fs::exists(P("v.tsc")));
}

TEST_F(CliTest, BlocksSetsProbeEnvironment) {
  Outcome r = Twinscope({"blocks", "--kernel", "reshape_and_cache", "--kernel", "re:gemm.*", "--every", "2",
                         "--max-launches", "3", "-o", P("s.tsc"), "--", FAKE_APP_BIN, "print-env", "0"});
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string lib = fs::canonical(dir_ / "lib" / "libtwinscope_blocks.so").string();
  EXPECT_NE(r.out.find("CUDA_INJECTION64_PATH=" + lib + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_KERNELS=reshape_and_cache;re:gemm.*\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_EVERY=2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_MAX_LAUNCHES=3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_PER_SECOND=<unset>\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_BLOCKS_PATCH=<unset>\n"), std::string::npos) << r.out << " (the probe picks)";

  r = Twinscope({"blocks", "--kernel", "k", "--per-second", "2.5", "--budget", "5", "--patch", "toggle", "-o",
                 P("s.tsc"), "--", FAKE_APP_BIN, "print-env", "0"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("TWINSCOPE_PER_SECOND=2.5\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_BUDGET=5\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TWINSCOPE_BLOCKS_PATCH=toggle\n"), std::string::npos) << r.out;

  r = Twinscope({"blocks", "--kernel", "k", "--patch", "sometimes", "-o", P("s.tsc"), "--", "/bin/true"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--patch"), std::string::npos) << r.err;
  r = Twinscope({"blocks", "--kernel", "k", "--budget", "150", "-o", P("s.tsc"), "--", "/bin/true"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--budget"), std::string::npos) << r.err;
}

TEST_F(CliTest, RecordWithoutCollectorLibraryNamesWhereItLooked) {
  // A copy of the binary in a folder without lib/ and no TWINSCOPE_LIB_DIR.
  fs::create_directories(dir_ / "alone" / "bin");
  fs::copy_file(TWINSCOPE_BIN, dir_ / "alone" / "bin" / "twinscope");
  std::vector<std::string> args = {(dir_ / "alone" / "bin" / "twinscope").string(), "record", "--", "/bin/true"};
  int code = testutil::WaitForExit(Start(args, {"TWINSCOPE_LIB_DIR="}, P("stdout"), P("stderr")));
  std::string err = Slurp(P("stderr"));
  EXPECT_EQ(code, 1) << err;
  EXPECT_NE(err.find("cannot find libtwinscope_cupti.so"), std::string::npos) << err;
  EXPECT_NE(err.find((dir_ / "alone" / "bin").string() + "/../lib/libtwinscope_cupti.so"), std::string::npos) << err;
  EXPECT_NE(err.find("TWINSCOPE_LIB_DIR"), std::string::npos) << err;
}

bool WaitForFile(const std::string& path) {
  for (int i = 0; i < 1000; ++i) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST_F(CliTest, ForwardsSignalsToTheProgram) {
  // SIGTERM to twinscope reaches the program, which exits 42 from its handler.
  std::vector<std::string> args = {TWINSCOPE_BIN, "record",     "-o",          P("t.tsc"),
                                   "--",          FAKE_APP_BIN, "wait-signal", P("ready1")};
  pid_t pid = Start(args, {lib_env_}, P("stdout"), P("stderr"));
  ASSERT_TRUE(WaitForFile(P("ready1")));
  kill(pid, SIGTERM);
  EXPECT_EQ(testutil::WaitForExit(pid), 42) << Slurp(P("stderr"));

  // SIGINT with the program's default handling: it dies, twinscope returns 128+2.
  args = {TWINSCOPE_BIN, "record", "-o", P("t.tsc"), "--", FAKE_APP_BIN, "wait-default", P("ready2")};
  pid = Start(args, {lib_env_}, P("stdout"), P("stderr"));
  ASSERT_TRUE(WaitForFile(P("ready2")));
  kill(pid, SIGINT);
  EXPECT_EQ(testutil::WaitForExit(pid), 128 + SIGINT);
  EXPECT_NE(Slurp(P("stderr")).find("killed by SIGINT"), std::string::npos);

  // SIGHUP too.
  args = {TWINSCOPE_BIN, "record", "-o", P("t.tsc"), "--", FAKE_APP_BIN, "wait-default", P("ready3")};
  pid = Start(args, {lib_env_}, P("stdout"), P("stderr"));
  ASSERT_TRUE(WaitForFile(P("ready3")));
  kill(pid, SIGHUP);
  EXPECT_EQ(testutil::WaitForExit(pid), 128 + SIGHUP);
}

}  // namespace
}  // namespace twinscope
