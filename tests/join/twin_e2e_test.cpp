// `twinscope twin` end to end: the real CUPTI collector over the fake CUPTI as
// the primary, the real block probe over the fake Sanitizer as the shadow, one
// scripted program (a dispatcher picks the fake driver by TWINSCOPE_ROLE, as
// a real program would simply run on the real driver twice).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../testutil/spawn.h"

extern char** environ;

namespace twinscope {
namespace {

namespace fs = std::filesystem;

const char kTarget[] = "_ZN4vllm30reshape_and_cache_flash_kernelIffEEvPKT_PT0_PKlii";

std::string Script() {
  std::string t = kTarget;
  std::string s = std::string("module target ") + TWINSCOPE_TEST_TARGET_CUBIN + "\nmodule other " +
                  TWINSCOPE_TEST_OTHER_CUBIN + "\nstream s1\n";
  s += "launch target " + t + " 1000,1,1 512,1,1\n";
  for (int step = 0; step < 4; ++step) {
    s += "push decode\n";
    s += "launch target " + t + " 12,1,1 512,1,1\n";
    s += "launch other rms_norm_kernel 16,1,1 128,1,1\n";
    s += "push attn\nlaunch target " + t + " 12,1,1 512,1,1 repeat=2\npop\n";
    s += "pop\nsync\n";
  }
  s += "launch other rms_norm_kernel 16,1,1 128,1,1\nsync\n";
  return s;
}

using testutil::Outcome;
using testutil::Slurp;

class TwinE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(TWINSCOPE_TEST_WORKDIR) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    testutil::LinkCollectors(dir_, TWINSCOPE_TEST_CUPTI_LIB, TWINSCOPE_TEST_BLOCKS_LIB);
    std::ofstream(dir_ / "script.txt") << Script();
  }

  // The program: the fake-CUPTI player as the primary, the fake-Sanitizer one
  // as the shadow; `shadow_tail` runs after the shadow's player (e.g. a kill).
  fs::path Dispatcher(const std::string& shadow_tail = "") {
    fs::path p = dir_ / "app.sh";
    std::ofstream(p) << "#!/bin/sh\n"
                     << "[ $# -le 1 ] || [ \"$2\" = --verbose ] || { echo \"bad arguments: $*\" >&2; exit 8; }\n"
                     << "if [ \"$TWINSCOPE_ROLE\" = primary ]; then exec " << TWINSCOPE_TEST_CUPTI_APP
                     << " \"$1\"; fi\n"
                     << "if [ \"$TWINSCOPE_ROLE\" != shadow ]; then echo 'no role' >&2; exit 9; fi\n"
                     << TWINSCOPE_TEST_FAKESAN_APP << " \"$1\" || exit $?\n"
                     << shadow_tail << "\n";
    fs::permissions(p, fs::perms::owner_all);
    return p;
  }

  Outcome Twin(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {TWINSCOPE_BIN, "twin"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto envs = testutil::EnvironmentWithout({"TWINSCOPE_", "LD_LIBRARY_PATH="},
                                                   {"TWINSCOPE_LIB_DIR=" + (dir_ / "lib").string(),
                                                    std::string("LD_LIBRARY_PATH=") + TWINSCOPE_TEST_FAKE_CUPTI_DIR});
    Outcome r = testutil::RunToEnd(argv, envs, dir_);
    EXPECT_NE(r.code, -1) << "cannot start " << argv[0];
    return r;
  }

  nlohmann::json JoinJson(const fs::path& out) { return nlohmann::json::parse(Slurp(out / "join.json")); }

  // The program with a shadow side of its own (`shadow`: shell lines; $APP is the fake-Sanitizer player).
  fs::path DispatcherWithShadow(const std::string& shadow) {
    fs::path p = dir_ / "app2.sh";
    std::ofstream(p) << "#!/bin/sh\n"
                     << "if [ \"$TWINSCOPE_ROLE\" = primary ]; then exec " << TWINSCOPE_TEST_CUPTI_APP
                     << " \"$1\"; fi\n"
                     << "APP=" << TWINSCOPE_TEST_FAKESAN_APP << "\n"
                     << shadow << "\n";
    fs::permissions(p, fs::perms::owner_all);
    return p;
  }

  static std::vector<fs::path> Traces(const fs::path& d) {
    std::vector<fs::path> out;
    if (fs::exists(d))
      for (const auto& e : fs::directory_iterator(d))
        if (e.path().extension() == ".tsc") out.push_back(e.path());
    return out;
  }

  fs::path dir_;
};

TEST_F(TwinE2E, SequentialTwinMatchesEveryTracedLaunchExactly) {
  const fs::path out = dir_ / "run";
  Outcome r = Twin({"--kernel", "reshape_and_cache", "-o", out.string(), "--", Dispatcher().string(),
                    (dir_ / "script.txt").string()});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // A folder per side, a trace per process (docs/trace-format.md, "Run folders").
  EXPECT_EQ(Traces(out / "primary").size(), 1u);
  EXPECT_EQ(Traces(out / "shadow").size(), 1u);
  EXPECT_FALSE(fs::exists(out / "primary.tsc"));
  EXPECT_NE(r.err.find("primary first, then the shadow"), std::string::npos) << r.err;
  auto j = JoinJson(out);
  // 1 + 4 * 3 launches of the target; every one traced and matched by key.
  EXPECT_EQ(j["summary"]["shadow_launches"], 13);
  EXPECT_EQ(j["summary"]["exact"], 13);
  EXPECT_EQ(j["summary"]["time_only"], 0);
  EXPECT_EQ(j["summary"]["unmatched_shadow"], 0);
  EXPECT_EQ(j["summary"]["primary_target_unmatched"], 0);
  EXPECT_NE(r.out.find("exact 13 (100.0%"), std::string::npos) << r.out;
  for (const auto& l : j["launches"]) {
    EXPECT_EQ(l["match"], "exact");
    EXPECT_EQ(l["shadow"]["blocks_seen"], l["shadow"]["blocks_expected"]);
  }
}

TEST_F(TwinE2E, ShadowThatDiesStillGivesThePrimarysExitCodeAndAJoin) {
  const fs::path out = dir_ / "run";
  Outcome r = Twin({"--kernel", "reshape_and_cache", "-o", out.string(), "--", Dispatcher("kill -KILL $$").string(),
                    (dir_ / "script.txt").string()});
  EXPECT_EQ(r.code, 0) << "the exit code is the primary's\n" << r.err;
  EXPECT_NE(r.err.find("the shadow was killed by SIGKILL"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("joining with what it left"), std::string::npos) << r.err;
  EXPECT_EQ(JoinJson(out)["summary"]["exact"], 13);
}

// The shadow's tree has two processes launching at once (a worker that only runs other kernels, and
// one that runs the target): before, both wrote shadow.tsc with O_TRUNC, the trace was garbled and
// twin said the pattern matched nothing. Now each has its trace; the one with the launches is joined.
TEST_F(TwinE2E, ShadowTreeOfTwoProcessesJoinsTheOneWithTheLaunches) {
  std::ofstream(dir_ / "other.txt") << "module other " << TWINSCOPE_TEST_OTHER_CUBIN
                                    << "\nlaunch other rms_norm_kernel 16,1,1 128,1,1 repeat=40\nsync\n";
  const fs::path out = dir_ / "run";
  Outcome r =
      Twin({"--kernel", "reshape_and_cache", "-o", out.string(), "--",
            DispatcherWithShadow("\"$APP\" " + (dir_ / "other.txt").string() + " &\n\"$APP\" \"$1\"\nwait").string(),
            (dir_ / "script.txt").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Traces(out / "shadow").size(), 2u) << r.err;
  EXPECT_NE(r.err.find("the shadow wrote 2 traces"), std::string::npos) << r.err;
  // (The worker's own probe says its pattern matched none of its kernels; twin does not say so of the run.)
  EXPECT_EQ(r.err.find("twinscope twin: the kernel pattern"), std::string::npos) << r.err;
  EXPECT_EQ(JoinJson(out)["summary"]["exact"], 13);
  // stats, export and join take the twin folder, and join the side folders.
  Outcome st = testutil::RunToEnd({TWINSCOPE_BIN, "stats", "--json", out.string()}, {}, dir_);
  EXPECT_EQ(st.code, 0) << st.err;
  EXPECT_EQ(nlohmann::json::parse(st.out)["summary"]["exact"], 13);
  Outcome j = testutil::RunToEnd(
      {TWINSCOPE_BIN, "join", (out / "primary").string(), (out / "shadow").string(), "-o", (dir_ / "j").string()}, {},
      dir_);
  EXPECT_EQ(j.code, 0) << j.err;
  // The two shadow processes run other commands than the primary's one: nothing pairs by rule, so the
  // main traces are joined, and said so.
  EXPECT_NE(j.err.find("no rule paired the processes"), std::string::npos) << j.err;
  EXPECT_EQ(JoinJson(dir_ / "j")["summary"]["exact"], 13);
}

// Two workers of the same command on each side (./player is the fake-CUPTI player on the primary side
// and the fake-Sanitizer player on the shadow side, so both sides run the same command line), started
// by a parent, with launcher ranks (`ranks`) or without: each primary worker is paired with its shadow
// twin (by rank, or by the tree: command line and start order), each pair joined on its own.
fs::path Workers(const fs::path& dir, bool ranks) {
  for (const char* side : {"primary", "shadow"}) {
    fs::create_directories(dir / side);
    fs::create_symlink(std::string(side) == "primary" ? TWINSCOPE_TEST_CUPTI_APP : TWINSCOPE_TEST_FAKESAN_APP,
                       dir / side / "player");
  }
  fs::path p = dir / "workers.sh";
  std::ofstream(p) << "#!/bin/sh\ncd " << dir.string() << "/$TWINSCOPE_ROLE\n"
                   << (ranks ? "RANK=1 WORLD_SIZE=2 ./player ../../script.txt &\nsleep 0.3\n"
                               "RANK=0 WORLD_SIZE=2 ./player ../../script.txt &\n"
                             : "./player ../../script.txt &\nsleep 0.3\n./player ../../script.txt &\n")
                   << "wait\n";
  fs::permissions(p, fs::perms::owner_all);
  return p;
}

TEST_F(TwinE2E, WorkersWithRanksArePairedByRankAndEachPairJoined) {
  const fs::path out = dir_ / "run";
  Outcome r = Twin({"--kernel", "reshape_and_cache", "-o", out.string(), "--", Workers(dir_ / "w", true).string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Traces(out / "primary").size(), 2u);
  EXPECT_EQ(Traces(out / "shadow").size(), 2u);
  const auto procs = nlohmann::json::parse(Slurp(out / "processes.json"));
  ASSERT_EQ(procs["pairs"].size(), 2u) << procs.dump(2);
  for (const auto& pr : procs["pairs"]) {
    EXPECT_EQ(pr["rule"], "rank");
    EXPECT_EQ(pr["primary"]["rank"], pr["shadow"]["rank"]);
    EXPECT_EQ(pr["exact"], 13) << pr.dump();
    EXPECT_EQ(pr["shadow_launches"], 13) << pr.dump();
    const fs::path views = out / pr["folder"].get<std::string>();
    EXPECT_EQ(JoinJson(views)["summary"]["exact"], 13) << views;
    EXPECT_TRUE(fs::exists(views / "report.html")) << views;
  }
  EXPECT_TRUE(procs["unpaired"].empty());
  // The ranks are compared: both ranks, each step present on both.
  ASSERT_TRUE(procs.contains("ranks")) << procs.dump(2);
  EXPECT_EQ(procs["ranks"]["ranks"].size(), 2u);
  EXPECT_GE(procs["ranks"]["steps"].size(), 4u);
  EXPECT_NE(r.out.find("paired by rank"), std::string::npos) << r.out;
  // stats on the folder lists the pairs, then the main pair.
  Outcome st = testutil::RunToEnd({TWINSCOPE_BIN, "stats", out.string()}, {}, dir_);
  EXPECT_EQ(st.code, 0) << st.err;
  EXPECT_NE(st.out.find("processes (docs/processes.md): 2 pairs"), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("ranks compared"), std::string::npos) << st.out;
}

TEST_F(TwinE2E, WorkersWithoutRanksArePairedByTheTree) {
  const fs::path out = dir_ / "run";
  Outcome r = Twin({"--kernel", "reshape_and_cache", "-o", out.string(), "--", Workers(dir_ / "w", false).string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto procs = nlohmann::json::parse(Slurp(out / "processes.json"));
  ASSERT_EQ(procs["pairs"].size(), 2u) << procs.dump(2);
  uint64_t exact = 0;
  for (const auto& pr : procs["pairs"]) {
    EXPECT_EQ(pr["rule"], "tree");
    exact += pr["exact"].get<uint64_t>();
  }
  EXPECT_EQ(exact, 26u);
  EXPECT_FALSE(procs.contains("ranks"));
  // join of the two side folders pairs them the same way.
  Outcome j = testutil::RunToEnd(
      {TWINSCOPE_BIN, "join", (out / "primary").string(), (out / "shadow").string(), "-o", (dir_ / "j").string()}, {},
      dir_);
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(Slurp(dir_ / "j" / "processes.json"))["pairs"].size(), 2u);
}

// A process of the shadow's tree killed mid-run (not its top process): twin names it, says how and
// when, joins what it left and does not say the pattern matched nothing.
TEST_F(TwinE2E, ShadowProcessKilledMidRunIsNamedAndJoined) {
  std::ofstream(dir_ / "slow.txt") << Script() << "sleep_us 30000000\n";
  const fs::path out = dir_ / "run";
  Outcome r = Twin({"--kernel", "reshape_and_cache", "-o", out.string(), "--",
                    DispatcherWithShadow("export TWINSCOPE_FLUSH_MS=50\n\"$APP\" " + (dir_ / "slow.txt").string() +
                                         " &\nP=$!\nsleep 2\nkill -KILL $P\nwait $P\nexit 0")
                        .string(),
                    (dir_ / "script.txt").string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("shadow process pid"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did not shut down cleanly (no-summary): killed about"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("joining with what it left"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("matched no launched kernel"), std::string::npos) << r.err;
  EXPECT_EQ(JoinJson(out)["summary"]["shadow_launches"], 13);
}

// The shadow killed before it launched anything: said so, never "matched no launched kernel".
TEST_F(TwinE2E, ShadowKilledBeforeItsLaunchesIsNotANoMatch) {
  const fs::path out = dir_ / "run";
  Outcome r = Twin({"--kernel", "reshape_and_cache", "-o", out.string(), "--",
                    DispatcherWithShadow("kill -KILL $$").string(), (dir_ / "script.txt").string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("the shadow was killed by SIGKILL"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the shadow died before it launched GPU work"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("matched no"), std::string::npos) << r.err;
}

TEST_F(TwinE2E, PatternMatchingNothingSaysSoAndListsKernels) {
  const fs::path out = dir_ / "run";
  Outcome r = Twin(
      {"--kernel", "no_such_kernel", "-o", out.string(), "--", Dispatcher().string(), (dir_ / "script.txt").string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("matched no launched kernel"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("reshape_and_cache_flash_kernel"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rms_norm_kernel"), std::string::npos) << r.err;
}

TEST_F(TwinE2E, ConcurrentTwinFlagsOverlappedPrimaryKernels) {
  // The primary plays its script only once the shadow has started, and the shadow ends only after the
  // primary is done: every primary kernel runs inside the shadow's lifetime, whatever the machine's speed.
  // The primary's kernel times, on the fake CUPTI's clock (cuptiGetTimestamp's, as CUPTI documents), are
  // put on CLOCK_REALTIME by its header's clock pair: all 13 target kernels must be flagged, with no warning
  // that the clock pair is wrong.
  const fs::path started = dir_ / "shadow-started", done = dir_ / "primary-done", app = dir_ / "app-overlap.sh";
  std::ofstream(app) << "#!/bin/sh\n"
                     << "wait_for() { i=0; while [ ! -e \"$1\" ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); "
                        "done; }\n"
                     << "if [ \"$TWINSCOPE_ROLE\" = primary ]; then\n"
                     << "  wait_for " << started << "\n"
                     << "  " << TWINSCOPE_TEST_CUPTI_APP << " \"$1\"; rc=$?; touch " << done << "; exit $rc\n"
                     << "fi\n"
                     << "touch " << started << "\n"
                     << TWINSCOPE_TEST_FAKESAN_APP << " \"$1\" || exit $?\n"
                     << "wait_for " << done << "\n";
  fs::permissions(app, fs::perms::owner_all);
  const fs::path out = dir_ / "run";
  Outcome r = Twin({"--kernel", "reshape_and_cache", "--concurrent", "-o", out.string(), "--", app.string(),
                    (dir_ / "script.txt").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = JoinJson(out);
  EXPECT_EQ(j["options"]["concurrent"], true);
  EXPECT_EQ(j["summary"]["exact"], 13);
  EXPECT_EQ(j["summary"]["overlapped_primary_kernels"], 13) << j["summary"].dump();
  for (const auto& w : j["warnings"]) EXPECT_EQ(w.get<std::string>().find("concurrent twins"), std::string::npos) << w;
  EXPECT_NE(r.out.find("concurrent run: 13 primary target kernels ran while the shadow had GPU work"),
            std::string::npos)
      << r.out;
}

TEST_F(TwinE2E, ProgramFlagsAfterDashDashReachTheProgram) {
  // Two --kernel patterns, then the program with a flag of its own.
  Outcome r = Twin({"--kernel", "reshape_and_cache", "--kernel", "neighbour", "-o", (dir_ / "run").string(), "--",
                    Dispatcher().string(), (dir_ / "script.txt").string(), "--verbose"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(JoinJson(dir_ / "run")["summary"]["exact"], 13);
}

TEST_F(TwinE2E, BadCommandIsAClearError) {
  Outcome r = Twin({"--kernel", "x", "-o", (dir_ / "run").string(), "--", (dir_ / "missing-program").string()});
  EXPECT_EQ(r.code, 127) << r.err;
  EXPECT_NE(r.err.find("the primary could not run"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace twinscope
