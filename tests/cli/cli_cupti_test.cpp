// `twinscope record` + `twinscope stats` end to end: the real
// libtwinscope_cupti.so and libtwinscope_guard.so (found next to the binary,
// build/lib) with the fake-CUPTI stand-in application tests/cupti/cupti_driver,
// against the fake CUPTI 13.0 and 13.5: which CUPTI record picks, and the
// program's own CUPTI client served (13.5) or refused (13.0) beside the
// collector.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string out, err;
};

const std::string kFake130 = std::string(FAKE_CUPTI_DIR) + "/libcupti.so.13";
const std::string kFake135 = std::string(FAKE_CUPTI135_DIR) + "/libcupti.so.13";

// Runs a shell command line with the fake CUPTI/CUDA libraries in front
// (`env`: more VAR=value words; by default the collector is pinned to the
// fake CUPTI 13.0, so nothing on this machine takes its place).
Outcome Shell(const std::string& command, const fs::path& dir,
              const std::string& env = "TWINSCOPE_CUPTI_LIBRARY='" + kFake130 + "'") {
  const std::string out = (dir / "stdout").string(), err = (dir / "stderr").string();
  const std::string line =
      "env -u TWINSCOPE_CUPTI_LIBRARY -u LD_PRELOAD -u TWINSCOPE_GUARD LD_LIBRARY_PATH='" FAKE_CUPTI_DIR "' " + env +
      " " + command + " >'" + out + "' 2>'" + err + "'";
  int status = std::system(line.c_str());
  Outcome o;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  o.out = slurp(out);
  o.err = slurp(err);
  return o;
}

class RecordE2eTest : public ::testing::Test {
 public:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("twinscope_rec_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // `twinscope record FLAGS -- cupti_driver <collector> SCENARIO`: the
  // collector path comes from the CUDA_INJECTION64_PATH that record sets.
  Outcome Record(const std::string& flags, const std::string& scenario) { return RecordEnv(flags, scenario, {}); }
  Outcome RecordEnv(const std::string& flags, const std::string& scenario, const std::string& env) {
    const std::string cmd = std::string(TWINSCOPE_BIN) + " record -o '" + Trace() + "' " + flags +
                            " -- sh -c 'exec \"$0\" \"$CUDA_INJECTION64_PATH\" " + scenario + "' " CUPTI_DRIVER_BIN;
    return env.empty() ? Shell(cmd, dir_) : Shell(cmd, dir_, env);
  }
  // The scenario without twinscope (the program alone).
  Outcome Alone(const std::string& scenario, const std::string& env) {
    return Shell(std::string(CUPTI_DRIVER_BIN) + " none " + scenario, dir_, env);
  }
  nlohmann::json StatsJson() {
    Outcome s = Shell(std::string(TWINSCOPE_BIN) + " stats --json '" + Trace() + "'", dir_);
    return nlohmann::json::parse(s.out, nullptr, false);
  }
  std::string Trace() const { return (dir_ / "t.tsc").string(); }
  fs::path dir_;
};

TEST_F(RecordE2eTest, PlainScenarioIsRecordedCompletely) {
  Outcome r = Record("", "plain");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("DRIVER_DONE plain"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("records: 10 kernels, 1 memcpys, 1 memsets"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("launches seen 10, kernel records 10, missing 0"), std::string::npos) << r.err;

  Outcome s = Shell(std::string(TWINSCOPE_BIN) + " stats --strict --json '" + Trace() + "'", dir_);
  EXPECT_EQ(s.code, 0) << s.out;
  auto j = nlohmann::json::parse(s.out);
  EXPECT_EQ(j["counts"]["kernel"], 10);
  EXPECT_EQ(j["loss"]["missing"], 0);
  EXPECT_EQ(j["role"], "primary");
  EXPECT_EQ(j["nvtx"][0]["name"], "step");
  EXPECT_EQ(j["nvtx"][0]["count"], 3);
}

// Seed 001 through the CLI: kernels-only recording of graph replays loses
// kernel records; record's summary and `stats --strict` say so.
TEST_F(RecordE2eTest, KernelsOnlyGraphReplaysShowMissingRecords) {
  Outcome r = Record("--kernels-only", "seed001");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("launches seen 20, kernel records 5, missing 15"), std::string::npos) << r.err;
  Outcome s = Shell(std::string(TWINSCOPE_BIN) + " stats --strict '" + Trace() + "'", dir_);
  EXPECT_EQ(s.code, 3) << s.out;
  EXPECT_NE(s.out.find("15 kernel launches seen without a kernel record"), std::string::npos) << s.out;

  // With the default kinds (memcpy/memset enabled) nothing is lost.
  r = Record("", "seed001");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("launches seen 20, kernel records 20, missing 0"), std::string::npos) << r.err;
  EXPECT_EQ(Shell(std::string(TWINSCOPE_BIN) + " stats --strict '" + Trace() + "'", dir_).code, 0);
}

// ---- The program's own CUPTI client under `record` ---------------------------------

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// The program's own counts ("OWN_RECORDS 6 OWN_CALLBACKS 6") from its stdout.
std::string OwnCounts(const std::string& out) {
  size_t at = out.find("OWN_RECORDS");
  return at == std::string::npos ? "" : out.substr(at, out.find(" OWN_DROPPED", at) - at);
}

// With CUPTI 13.5 the guard serves the program's legacy client from its own
// subscribers: it gets exactly what it gets alone, and twinscope's trace is
// complete. `lib_path`: where the program's own libcupti comes from (the
// collector's file, or another copy, as PyTorch's wheel brings).
void ExpectServed(RecordE2eTest* t, const std::string& lib_path) {
  const std::string env =
      "LD_LIBRARY_PATH='" + lib_path + ":" FAKE_CUPTI_DIR "' TWINSCOPE_CUPTI_LIBRARY='" + kFake135 + "'";
  Outcome alone = t->Alone("own_client", env);
  ASSERT_EQ(alone.code, 0) << alone.err;
  EXPECT_EQ(OwnCounts(alone.out), "OWN_RECORDS 6 OWN_CALLBACKS 6") << alone.out;

  Outcome r = t->RecordEnv("", "own_client", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(OwnCounts(r.out), OwnCounts(alone.out)) << r.out;
  EXPECT_EQ(Count(r.out, " 0\n"), Count(alone.out, " 0\n")) << "every CUPTI call succeeds as it does alone:\n" << r.out;
  EXPECT_NE(r.err.find("CUPTI 13.5 (API 130500) at " + kFake135), std::string::npos) << r.err;
  EXPECT_EQ(Count(r.err, "served by its own CUPTI subscriber beside twinscope's"), 1u) << r.err;
  EXPECT_NE(r.err.find("launches seen 8, kernel records 8, missing 0"), std::string::npos) << r.err;

  auto j = t->StatsJson();
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["counts"]["kernel"], 8);
  EXPECT_EQ(j["problems"].size(), 0u) << j["problems"].dump();
  Outcome s = Shell(std::string(TWINSCOPE_BIN) + " stats '" + t->Trace() + "'", t->dir_);
  EXPECT_NE(s.out.find("the program's own CUPTI client: "), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("served beside twinscope (multi-subscriber mode), 6 records read by the program"),
            std::string::npos)
      << s.out;
  EXPECT_NE(s.out.find("(multi-subscriber mode)"), std::string::npos) << s.out;
}

TEST_F(RecordE2eTest, OwnCuptiClientIsServedOnCupti135) { ExpectServed(this, FAKE_CUPTI135_DIR); }

// The program's libcupti is another copy (the fake 13.0 file, loaded by its
// DT_NEEDED): the guard still serves it from the collector's 13.5 copy.
TEST_F(RecordE2eTest, OwnCuptiClientOnItsOwnCopyIsServedFromTheCollectors) { ExpectServed(this, FAKE_CUPTI_DIR); }

// The program's client starts before the collector is injected: served by the
// guard in multi-subscriber mode, so the collector still subscribes beside it.
TEST_F(RecordE2eTest, OwnCuptiClientThatStartsFirstIsServedToo) {
  const std::string env = "LD_LIBRARY_PATH='" FAKE_CUPTI_DIR "' TWINSCOPE_CUPTI_LIBRARY='" + kFake135 + "'";
  Outcome alone = Alone("own_first", env);
  EXPECT_EQ(OwnCounts(alone.out), "OWN_RECORDS 6 OWN_CALLBACKS 6") << alone.out;
  Outcome r = RecordEnv("", "own_first", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(OwnCounts(r.out), OwnCounts(alone.out)) << r.out;
  EXPECT_NE(r.err.find("launches seen 8, kernel records 8, missing 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("holds CUPTI"), std::string::npos) << r.err;
}

// Without the guard the same program starves on its own copy, silently.
TEST_F(RecordE2eTest, WithoutTheGuardTheProgramsOwnCopyStarves) {
  Outcome r = RecordEnv("", "own_client", "TWINSCOPE_GUARD=0 TWINSCOPE_CUPTI_LIBRARY='" + kFake135 + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(OwnCounts(r.out), "OWN_RECORDS 0 OWN_CALLBACKS 0") << r.out;
  EXPECT_EQ(r.err.find("served by its own CUPTI subscriber"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("launches seen 8, kernel records 8, missing 0"), std::string::npos) << r.err;
}

// Below 13.5 (the floor): the program's seat-taking calls are refused with 39,
// it is told once, twinscope's trace is complete, and `stats` lists the problem.
TEST_F(RecordE2eTest, BelowCupti135TheProgramsClientIsRefusedAndTold) {
  Outcome r = Record("", "own_client");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(OwnCounts(r.out), "OWN_RECORDS 0 OWN_CALLBACKS 0") << r.out;
  EXPECT_NE(r.out.find("OWN cuptiSubscribe 39"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OWN cuptiActivityRegisterCallbacks 39"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OWN cuptiFinalize 39"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OWN cuptiGetVersion 0"), std::string::npos) << r.out;
  EXPECT_EQ(Count(r.err, "the program uses CUPTI itself (first call: cuptiSubscribe"), 1u) << r.err;
  EXPECT_NE(r.err.find("pip install nvidia-cuda-cupti==13.5.25"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("launches seen 8, kernel records 8, missing 0"), std::string::npos) << r.err;

  auto j = StatsJson();
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["counts"]["kernel"], 8);
  ASSERT_EQ(j["problems"].size(), 1u) << j["problems"].dump();
  const std::string problem = j["problems"][0];
  EXPECT_NE(problem.find("the program's own CUPTI client (e.g. torch.profiler) got no data: 12 of its CUPTI calls "
                         "were refused"),
            std::string::npos)
      << problem;
  EXPECT_NE(problem.find("what to do: install CUPTI 13.5"), std::string::npos) << problem;
  Outcome strict = Shell(std::string(TWINSCOPE_BIN) + " stats --strict '" + Trace() + "'", dir_);
  EXPECT_EQ(strict.code, 3) << strict.out;
}

// An entry point the guard does not serve goes to CUPTI as is; what it got
// back (14 on 13.5 after a multi-subscriber client) is said and listed.
TEST_F(RecordE2eTest, UncoveredEntryPointIsForwardedAndReported) {
  const std::string env = "LD_LIBRARY_PATH='" FAKE_CUPTI135_DIR ":" FAKE_CUPTI_DIR
                          "' OWN_UNCOVERED=1 TWINSCOPE_CUPTI_LIBRARY='" +
                          kFake135 + "'";
  Outcome r = RecordEnv("", "own_client", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("OWN cuptiActivityConfigureUnifiedMemoryCounter 14"), std::string::npos) << r.out;
  EXPECT_EQ(OwnCounts(r.out), "OWN_RECORDS 6 OWN_CALLBACKS 6") << r.out;
  EXPECT_EQ(Count(r.err,
                  "the program's CUPTI call cuptiActivityConfigureUnifiedMemoryCounter returned "
                  "CUPTI_ERROR_NOT_COMPATIBLE (14)"),
            1u)
      << r.err;
  EXPECT_NE(r.err.find("the guard does not serve this entry point"), std::string::npos) << r.err;
  auto j = StatsJson();
  ASSERT_EQ(j["problems"].size(), 1u) << j["problems"].dump();
  EXPECT_NE(j["problems"][0].get<std::string>().find("1 of its CUPTI calls failed "
                                                     "(cuptiActivityConfigureUnifiedMemoryCounter -> 14)"),
            std::string::npos)
      << j["problems"][0];
}

// `record` picks the newest libcupti: PyPI's (found through the Python the
// user has) over the loader's 13.0 copy; TWINSCOPE_CUPTI_LIBRARY still wins.
TEST_F(RecordE2eTest, RecordUsesTheNewestCuptiItFinds) {
  const fs::path lib = dir_ / "site" / "nvidia" / "cu13" / "lib";
  fs::create_directories(lib);
  fs::copy_file(kFake135, lib / "libcupti.so.13");
  const std::string wheel = (lib / "libcupti.so.13").string();
  Outcome r = RecordEnv("", "plain", "PYTHONPATH='" + (dir_ / "site").string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("CUPTI 13.5 (API 130500) at " + wheel + " (pip package nvidia-cuda-cupti (python3))"),
            std::string::npos)
      << r.err;
  auto j = StatsJson();
  EXPECT_EQ(j["counts"]["kernel"], 10);
  Outcome s = Shell(std::string(TWINSCOPE_BIN) + " stats '" + Trace() + "'", dir_);
  EXPECT_NE(s.out.find("cupti: " + wheel + " (multi-subscriber mode)"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("cupti_version 130500"), std::string::npos) << s.out;

  r = RecordEnv("", "plain",
                "PYTHONPATH='" + (dir_ / "site").string() + "' TWINSCOPE_CUPTI_LIBRARY='" + kFake130 + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("at " + kFake130 + " (TWINSCOPE_CUPTI_LIBRARY)"), std::string::npos) << r.err;
}

// ---- The program's own timestamp clock (Kineto registers its TSC) --------------------

// The own_clock scenario's "OWN_CLOCK <kind> records N in_clock M durations_ok D" lines.
struct KindSeen {
  uint64_t records = 0, in_clock = 0, durations_ok = 0;
};
std::map<std::string, KindSeen> ClockLines(const std::string& out) {
  std::map<std::string, KindSeen> kinds;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    char name[64];
    unsigned long long n, c, d;
    if (std::sscanf(line.c_str(), "OWN_CLOCK %63s records %llu in_clock %llu durations_ok %llu", name, &n, &c, &d) == 4)
      kinds[name] = KindSeen{n, c, d};
  }
  return kinds;
}

// The kinds the guard translates, as the scenario emits them (one record
// each, two kernels); external_correlation carries no timestamp and
// unified_memory_counter is a kind the guard does not know.
const char* const kTranslatedKinds[] = {"concurrent_kernel", "memcpy",   "memset",     "runtime", "driver",
                                        "synchronization",   "overhead", "cuda_event", "marker",  "memcpy2"};

// Every translated record lies in the program's window in its own clock (the
// scenario allows 1 ms either side: the guard's error is the worst clock
// pair's half-bracket, well under that even on a loaded machine, while a
// record left in CUPTI's clock is off by 10^15 ns, or by twice the machine's
// uptime for the TSC-like clock) and keeps its duration in the program's
// units within 5% (the rate of the TSC-like clock is 3, not 1).
void ExpectInProgramClock(const std::map<std::string, KindSeen>& kinds, bool durations, const std::string& out) {
  for (const char* name : kTranslatedKinds) {
    auto it = kinds.find(name);
    ASSERT_NE(it, kinds.end()) << name << "\n" << out;
    EXPECT_EQ(it->second.records, std::string(name) == "concurrent_kernel" ? 2u : 1u) << name;
    EXPECT_EQ(it->second.in_clock, it->second.records) << name << " records outside the program's clock\n" << out;
    if (durations) {
      EXPECT_EQ(it->second.durations_ok, it->second.records) << name << "\n" << out;
    }
  }
  EXPECT_EQ(kinds.at("external_correlation").records, 1u) << out;
  EXPECT_NE(out.find("OWN_TIMESTAMP_IN_CLOCK 1"), std::string::npos) << "cuptiGetTimestamp: the program's clock\n"
                                                                     << out;
}

// The "OWN <call> <result>" lines whose result is not 0.
std::string FailedCalls(const std::string& out) {
  std::istringstream in(out);
  std::string line, failed;
  while (std::getline(in, line))
    if (line.rfind("OWN cupti", 0) == 0 && line.substr(line.size() - 2) != " 0") failed += line + "\n";
  return failed;
}

// CUPTI 13.5 refuses the program's clock beside twinscope's subscriber (14);
// the guard serves the call anyway and translates every record it knows.
void ExpectTranslated(RecordE2eTest* t, const std::string& clock) {
  const std::string env =
      "LD_LIBRARY_PATH='" FAKE_CUPTI_DIR "' OWN_CLOCK=" + clock + " TWINSCOPE_CUPTI_LIBRARY='" + kFake135 + "'";
  Outcome r = t->RecordEnv("", "own_clock", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("OWN cuptiActivityRegisterTimestampCallback 0"), std::string::npos) << r.out;
  EXPECT_EQ(FailedCalls(r.out), "") << "every CUPTI call of the program succeeds";
  auto kinds = ClockLines(r.out);
  ExpectInProgramClock(kinds, true, r.out);
  // The kind the guard does not know reaches the program as CUPTI made it.
  EXPECT_EQ(kinds["unified_memory_counter"].records, 1u) << r.out;
  EXPECT_EQ(kinds["unified_memory_counter"].in_clock, 0u) << r.out;
  EXPECT_EQ(Count(r.err, "the guard serves it instead"), 1u) << r.err;
  EXPECT_NE(r.err.find("CUPTI_ERROR_NOT_COMPATIBLE (14)"), std::string::npos) << r.err;
  EXPECT_EQ(Count(r.err, "records of activity kind 25 reach it in CUPTI's clock"), 1u) << r.err;
  EXPECT_NE(r.err.find("launches seen 2, kernel records 2, missing 0"), std::string::npos) << r.err;

  auto j = t->StatsJson();
  ASSERT_FALSE(j.is_discarded());
  const auto& p = j["status"]["tool_state"]["program_cupti"];
  EXPECT_EQ(p["failed"], 0) << p.dump();
  ASSERT_TRUE(p.contains("timestamps")) << p.dump();
  const auto& ts = p["timestamps"];
  EXPECT_EQ(ts["how"], "translated") << ts.dump();
  EXPECT_EQ(ts["cupti_result"], 14) << ts.dump();
  EXPECT_EQ(ts["records_translated"], 11) << ts.dump();
  EXPECT_EQ(ts["records_without_timestamps"], 1) << ts.dump();
  EXPECT_EQ(ts["untranslated_records"], 1) << ts.dump();
  EXPECT_EQ(ts["untranslated_kinds"], nlohmann::json({{"25", 1}})) << ts.dump();
  EXPECT_GE(ts["clock_pairs"].get<int>(), 2) << ts.dump();
  ASSERT_EQ(j["problems"].size(), 1u) << j["problems"].dump();
  EXPECT_NE(j["problems"][0].get<std::string>().find("got 1 record in CUPTI's clock instead of its own (kind 25: 1)"),
            std::string::npos)
      << j["problems"][0];
  Outcome s = Shell(std::string(TWINSCOPE_BIN) + " stats '" + t->Trace() + "'", t->dir_);
  EXPECT_NE(s.out.find("so its timestamps are translated by the guard (11 records"), std::string::npos) << s.out;
}

TEST_F(RecordE2eTest, ProgramClockOffsetIsTranslatedWhereCuptiRefusesIt) {
  // The scenario and the fake agree alone: CUPTI itself stamps in the program's clock.
  Outcome alone = Alone("own_clock", "LD_LIBRARY_PATH='" FAKE_CUPTI135_DIR "' OWN_CLOCK=offset");
  ASSERT_EQ(alone.code, 0) << alone.err;
  auto kinds = ClockLines(alone.out);
  ExpectInProgramClock(kinds, true, alone.out);
  EXPECT_EQ(kinds["unified_memory_counter"].in_clock, 1u) << alone.out;
  ExpectTranslated(this, "offset");
}

// A clock of another rate (Kineto's TSC ticks, not ns).
TEST_F(RecordE2eTest, ProgramClockOfAnotherRateIsTranslated) { ExpectTranslated(this, "tsc"); }

// The program's client starts before the collector: CUPTI accepts its clock on
// the guard's subscriber and stamps the records itself; the guard must not
// translate them again.
TEST_F(RecordE2eTest, ProgramClockAcceptedByCuptiIsNotTranslated) {
  const std::string env = "LD_LIBRARY_PATH='" FAKE_CUPTI_DIR
                          "' OWN_CLOCK=offset OWN_CLOCK_FIRST=1 TWINSCOPE_CUPTI_LIBRARY='" +
                          kFake135 + "'";
  Outcome r = RecordEnv("", "own_clock", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("OWN cuptiActivityRegisterTimestampCallback 0"), std::string::npos) << r.out;
  auto kinds = ClockLines(r.out);
  ExpectInProgramClock(kinds, true, r.out);
  EXPECT_EQ(kinds["unified_memory_counter"].in_clock, 1u) << r.out;  // CUPTI stamped every kind
  EXPECT_EQ(r.err.find("the guard serves it instead"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("launches seen 2, kernel records 2, missing 0"), std::string::npos) << r.err;
  auto j = StatsJson();
  ASSERT_TRUE(j["status"]["tool_state"]["program_cupti"].contains("timestamps")) << j.dump();
  const auto& ts = j["status"]["tool_state"]["program_cupti"]["timestamps"];
  EXPECT_EQ(ts["how"], "cupti") << ts.dump();
  EXPECT_EQ(ts["records_translated"], 0) << ts.dump();
  EXPECT_EQ(j["problems"].size(), 0u) << j["problems"].dump();
  Outcome s = Shell(std::string(TWINSCOPE_BIN) + " stats '" + Trace() + "'", dir_);
  EXPECT_NE(s.out.find("its own timestamp clock: set in CUPTI"), std::string::npos) << s.out;
}

}  // namespace