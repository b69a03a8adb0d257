// Crash-true accounting: each collector's program (cupti_crash_app over the
// fake CUPTI, blocks_crash_app over the fake Sanitizer) is SIGKILLed at random
// moments, many times. After each kill:
// - the program died of the SIGKILL (the tracer never crashed it first);
// - `twinscope stats --json` shows exactly the records of every whole chunk in
//   the file (counted here by a parser of our own, not the reader): nothing
//   readable is lost;
// - its loss block carries the last STATUS counters as they are in the file
//   and the file's own launch/kernel/block counts, and takes its verdict from
//   the file;
// - the last STATUS is current when written: its launches_seen is at least
//   what the program had launched by the STATUS's own time (monotonic_ns), at
//   most what it launched in all, and it counts no record that is not in the
//   file before it;
// - it is at most about one flush period old at the kill (it counts what was
//   launched a period before), the slack being this run's own scheduling delay
//   (the longest wait of the test's 1 ms sampler), not a fixed allowance for a
//   busy machine.
// Kill moments come from TWINSCOPE_CRASH_SEED (default 9), printed on failure;
// if too few runs got as far as a STATUS (a slow machine), later ones are added.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "format/chunk.h"
#include "progress.h"

extern char** environ;

namespace twinscope {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kFlushMs = 50;
// How much later than one flush period a STATUS may come beyond this run's measured scheduling delay.
constexpr int kSlackMs = 150;
// More kill moments, each later, while too few runs reached a STATUS (at most this many runs in all).
constexpr size_t kMaxRuns = 24;

// The trace as parsed here: chunk headers walked by hand, STATUS payloads
// decompressed with zstd directly.
struct Parsed {
  bool header_whole = false;
  uint64_t whole_chunks = 0;
  bool cut_inside_chunk = false;
  std::map<uint32_t, uint64_t> records;            // by RecordType, whole chunks
  std::map<uint32_t, uint64_t> records_at_status;  // before the last STATUS
  bool have_status = false;
  nlohmann::json status;
  uint64_t Records(RecordType t) const { return records.count(uint32_t(t)) ? records.at(uint32_t(t)) : 0; }
  uint64_t AtStatus(RecordType t) const {
    return records_at_status.count(uint32_t(t)) ? records_at_status.at(uint32_t(t)) : 0;
  }
  uint64_t Total() const {
    uint64_t n = 0;
    for (const auto& [t, c] : records) n += c;
    return n;
  }
  uint64_t Counter(const char* name) const { return have_status ? status["counters"].value(name, uint64_t{0}) : 0; }
};

Parsed Parse(const std::string& path) {
  Parsed p;
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  format::FilePreamble pre{};
  if (bytes.size() < sizeof pre) return p;
  std::memcpy(&pre, bytes.data(), sizeof pre);
  uint64_t off = sizeof pre + pre.header_size;
  if (off > bytes.size()) return p;
  p.header_whole = true;
  while (off < bytes.size()) {
    format::ChunkHeader h{};
    if (bytes.size() - off < sizeof h) {
      p.cut_inside_chunk = true;
      break;
    }
    std::memcpy(&h, bytes.data() + off, sizeof h);
    if (bytes.size() - off - sizeof h < h.stored_size) {
      p.cut_inside_chunk = true;
      break;
    }
    const char* payload = bytes.data() + off + sizeof h;
    if (h.kind == uint32_t(ChunkKind::kRecords)) {
      p.records[h.record_type] += h.record_count;
    } else if (h.kind == uint32_t(ChunkKind::kStatus) || h.kind == uint32_t(ChunkKind::kSummary)) {
      std::string raw(h.raw_size, '\0');
      const size_t n = ZSTD_decompress(raw.data(), raw.size(), payload, h.stored_size);
      EXPECT_EQ(n, h.raw_size) << path << ": a status chunk does not decompress";
      p.status = nlohmann::json::parse(raw);
      p.have_status = true;
      p.records_at_status = p.records;
    }
    off += sizeof h + h.stored_size;
    ++p.whole_chunks;
  }
  return p;
}

struct Sample {
  Clock::time_point t;
  uint64_t launches;
};

struct Killed {
  int signal = 0;         // what ended the program
  int exit_code = -1;     // if it exited instead
  uint64_t launched = 0;  // progress->launches after the kill
  bool idle_at_kill = false;
  std::vector<Sample> samples;  // progress while it ran
  Clock::time_point kill_at;
  // What the program had launched by `t` (samples read the count before their time): a floor for a
  // STATUS taken at `t`.
  uint64_t LaunchedBy(Clock::time_point t) const {
    uint64_t v = 0;
    for (const Sample& s : samples)
      if (s.t <= t) v = s.launches;
    return v;
  }
  // The longest gap between two samples (each 1 ms apart when the machine is idle): how long a thread
  // that wanted to run waited in this run.
  Clock::duration LongestSampleGap() const {
    Clock::duration g{};
    for (size_t i = 1; i < samples.size(); ++i) g = std::max(g, samples[i].t - samples[i - 1].t);
    return g;
  }
};

// Starts argv with `env` added (and no other TWINSCOPE_ variable), samples its
// progress page every millisecond, SIGKILLs it after `after_ms`.
Killed RunAndKill(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                  const std::string& progress_path, const std::string& err_path, int after_ms) {
  Killed k;
  unlink(progress_path.c_str());
  crash::Progress* progress = crash::MapProgress(progress_path.c_str());
  if (!progress) {
    ADD_FAILURE() << "cannot map " << progress_path;
    return k;
  }
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (!env.count(key) && key.rfind("TWINSCOPE_", 0) != 0) envs.push_back(kv);
  }
  for (const auto& [key, value] : env) envs.push_back(key + "=" + value);
  std::vector<char*> envp, args;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ADD_FAILURE() << "cannot start " << argv[0] << ": " << std::strerror(rc);
    return k;
  }
  const auto start = Clock::now();
  k.kill_at = start + std::chrono::milliseconds(after_ms);
  int status = 0;
  bool ended = false;
  while (Clock::now() < k.kill_at) {
    const uint64_t launched = progress->launches.load(std::memory_order_acquire);  // read before its time
    k.samples.push_back({Clock::now(), launched});
    if (waitpid(pid, &status, WNOHANG) == pid) {
      ended = true;  // died on its own: a crash, reported below
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!ended) {
    k.idle_at_kill = progress->idle.load() != 0;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  if (WIFSIGNALED(status)) k.signal = WTERMSIG(status);
  if (WIFEXITED(status)) k.exit_code = WEXITSTATUS(status);
  k.launched = progress->launches.load();
  munmap(progress, 4096);
  return k;
}

struct Cli {
  int code = -1;
  std::string out;
};

Cli Twinscope(const std::string& args) {
  Cli r;
  FILE* p = popen((std::string(TWINSCOPE_BIN) + " " + args + " 2>/dev/null").c_str(), "r");
  if (!p) return r;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

uint64_t Seed() {
  const char* s = std::getenv("TWINSCOPE_CRASH_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 9;
}

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("twinscope_crash_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // The checks common to both collectors, on one killed run; `shadow` selects
  // the block probe's view. Returns the parsed trace.
  Parsed CheckKilledRun(const Killed& k, const std::string& trace, bool shadow, uint64_t launch_slack) {
    EXPECT_EQ(k.signal, SIGKILL) << "the program ended before the kill (exit code " << k.exit_code << ", signal "
                                 << k.signal << "): see " << Path("stderr");
    Parsed p = Parse(trace);
    if (!p.header_whole) {
      // Killed before the collector had written the header: it had not started either.
      EXPECT_EQ(k.launched, 0u) << trace << " has no header although the program launched";
      return p;
    }
    Cli json = Twinscope("stats --json '" + trace + "'");
    EXPECT_EQ(json.code, 0) << json.out;
    const auto j = nlohmann::json::parse(json.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << json.out;
    if (!j.is_object()) return p;

    // Nothing readable is lost: every record of every whole chunk.
    const std::string end = j["read"]["end"];
    EXPECT_TRUE(end == (p.cut_inside_chunk ? "truncated" : "no-summary")) << end;
    EXPECT_EQ(j["read"]["chunks"], p.whole_chunks);
    EXPECT_EQ(j["read"]["records"], p.Total());
    EXPECT_EQ(j["counts"]["launch"], p.Records(RecordType::kLaunch));
    EXPECT_EQ(j["counts"]["kernel"], p.Records(RecordType::kKernel));
    EXPECT_EQ(j["counts"]["block"], p.Records(RecordType::kBlock));
    EXPECT_EQ(j["counts"]["nvtx"], p.Records(RecordType::kNvtx));
    EXPECT_EQ(j["counts"]["api"], p.Records(RecordType::kApi));
    EXPECT_FALSE(j["have_summary"].get<bool>());

    // Both views in the loss block, as they are in the file.
    const auto& loss = j["loss"];
    EXPECT_EQ(loss["counters"]["present"], p.have_status);
    EXPECT_EQ(loss["counters"]["final"], false);
    EXPECT_EQ(loss["file"]["launch_records"], p.Records(RecordType::kLaunch));
    EXPECT_EQ(loss["file"]["after_last_status"]["launch_records"],
              p.Records(RecordType::kLaunch) - p.AtStatus(RecordType::kLaunch));
    if (p.Records(RecordType::kLaunch) > 0) {
      EXPECT_EQ(loss["basis"], "file") << loss["basis_reason"];
    }
    const int64_t launches = static_cast<int64_t>(p.Records(RecordType::kLaunch));
    if (shadow) {
      EXPECT_EQ(loss["file"]["block_records"], p.Records(RecordType::kBlock));
      EXPECT_EQ(loss["counters"]["blocks_recorded"], p.Counter("blocks_recorded"));
      EXPECT_EQ(loss["counters"]["launches_traced"], p.Counter("launches_traced"));
      if (p.Records(RecordType::kLaunch) > 0) {
        EXPECT_EQ(loss["blocks_missing"], loss["file"]["blocks_missing"]);
      }
      // blocks_recorded is counted once the blocks are appended: they precede the STATUS.
      EXPECT_LE(p.Counter("blocks_recorded"), p.AtStatus(RecordType::kBlock) + p.Counter("writer_dropped_records"));
    } else {
      const int64_t kernels = static_cast<int64_t>(p.Records(RecordType::kKernel));
      EXPECT_EQ(loss["file"]["kernel_records"], p.Records(RecordType::kKernel));
      EXPECT_EQ(loss["file"]["missing"], launches - kernels);
      EXPECT_EQ(loss["counters"]["launches_seen"], p.Counter("launches_seen"));
      EXPECT_EQ(loss["counters"]["kernel_records"], p.Counter("kernel_records"));
      if (launches > 0) {
        EXPECT_EQ(loss["missing"], launches - kernels);
      }
      // Counters count records only once they are staged: a STATUS is preceded by all it counts.
      const uint64_t dropped = p.Counter("writer_dropped_records");
      EXPECT_LE(p.Counter("launches_seen"), p.AtStatus(RecordType::kLaunch) + dropped);
      EXPECT_LE(p.Counter("kernel_records"), p.AtStatus(RecordType::kKernel) + dropped);
    }

    // Current when taken, and at most about one period old, whether the program was busy or idle (a
    // STATUS that would say nothing new is not written: then the last one still counts everything).
    const uint64_t seen = p.Counter("launches_seen");
    const auto bound = std::chrono::milliseconds(kFlushMs + kSlackMs) + 2 * k.LongestSampleGap();
    EXPECT_GE(seen, k.LaunchedBy(k.kill_at - bound))
        << "the last STATUS is older than a flush period plus this run's scheduling delay ("
        << std::chrono::duration_cast<std::chrono::milliseconds>(bound).count() << " ms); program "
        << (k.idle_at_kill ? "idle" : "busy") << " at the kill, " << k.launched << " launched";
    EXPECT_TRUE(!p.have_status || p.status.contains("monotonic_ns")) << p.status.dump();
    if (p.have_status && p.status.contains("monotonic_ns")) {
      // steady_clock is CLOCK_MONOTONIC, the STATUS's clock. launch_slack: a launch that returned between the
      // counters' snapshot and the reading of the time.
      const Clock::time_point taken{std::chrono::nanoseconds(p.status["monotonic_ns"].get<int64_t>())};
      EXPECT_GE(seen + launch_slack, k.LaunchedBy(taken)) << "the last STATUS misses launches made before it was taken";
    }
    EXPECT_LE(seen, k.launched + launch_slack);

    // The text form: one loss block; --strict fails (the read is not complete).
    Cli text = Twinscope("stats '" + trace + "'");
    EXPECT_EQ(text.code, 0) << text.out;
    EXPECT_EQ(Occurrences(text.out, "loss accounting"), 1u) << text.out;
    EXPECT_NE(text.out.find("verdict from"), std::string::npos) << text.out;
    if (!strict_checked_ && p.have_status) {  // once per test: each CLI run costs time
      EXPECT_EQ(Twinscope("stats --strict '" + trace + "'").code, 3);
      strict_checked_ = true;
    }
    return p;
  }

  // Kill moments: one during start-up, the others spread over 0.15-1.2 s.
  std::vector<int> KillMoments(int n) const {
    std::mt19937_64 rng(Seed());
    std::vector<int> ms = {20};
    while (static_cast<int>(ms.size()) < n) ms.push_back(150 + static_cast<int>(rng() % 1050));
    return ms;
  }
  // After the last planned run: one more, later than any so far, while fewer than `floor` runs got as far
  // as `reached` counts (a slow machine starts the programs late), up to kMaxRuns in all.
  static void MoreIfTooFew(std::vector<int>* ms, size_t done, int reached, int floor) {
    if (done == ms->size() && reached < floor && ms->size() < kMaxRuns)
      ms->push_back(*std::max_element(ms->begin(), ms->end()) + 500);
  }

  fs::path dir_;
  bool strict_checked_ = false;
};

TEST_F(CrashTest, CuptiCollectorKilledAtRandomMomentsKeepsTrueAccounting) {
  const std::string trace = Path("trace.tsc");
  int with_status = 0;
  uint64_t seed = Seed();
  std::vector<int> moments = KillMoments(10);
  for (size_t run = 0; run < moments.size(); ++run) {
    const int after_ms = moments[run];
    SCOPED_TRACE("TWINSCOPE_CRASH_SEED=" + std::to_string(Seed()) + ", killed after " + std::to_string(after_ms) +
                 " ms");
    unlink(trace.c_str());
    Killed k = RunAndKill({CUPTI_CRASH_APP, COLLECTOR_PATH, Path("progress"), std::to_string(++seed)},
                          {{"LD_LIBRARY_PATH", FAKE_CUPTI_LIB_DIR},
                           {"NVTX_INJECTION64_PATH", COLLECTOR_PATH},
                           {"TWINSCOPE_OUTPUT", trace},
                           {"TWINSCOPE_FLUSH_MS", std::to_string(kFlushMs)},
                           {"TWINSCOPE_QUIET", "1"}},
                          Path("progress"), Path("stderr"), after_ms);
    Parsed p = CheckKilledRun(k, trace, /*shadow=*/false, /*launch_slack=*/3);  // a graph launch in progress
    with_status += p.have_status && p.Counter("launches_seen") > 0;
    MoreIfTooFew(&moments, run + 1, with_status, 5);
  }
  EXPECT_GE(with_status, 5) << "too few runs got as far as a STATUS with launches: the test shows little";
}

#ifdef BLOCKS_CRASH_APP  // built with the fake Sanitizer (TWINSCOPE_WITH_SANITIZER and nvcc for the test cubins)
TEST_F(CrashTest, BlockProbeKilledAtRandomMomentsKeepsTrueAccounting) {
  const std::string trace = Path("trace.tsc");
  int with_blocks = 0;
  uint64_t seed = Seed() + 1000;
  std::vector<int> moments = KillMoments(8);
  for (size_t run = 0; run < moments.size(); ++run) {
    const int after_ms = moments[run];
    SCOPED_TRACE("TWINSCOPE_CRASH_SEED=" + std::to_string(Seed()) + ", killed after " + std::to_string(after_ms) +
                 " ms");
    unlink(trace.c_str());
    Killed k = RunAndKill({BLOCKS_CRASH_APP, TARGET_CUBIN, OTHER_CUBIN, Path("progress"), std::to_string(++seed)},
                          {{"CUDA_INJECTION64_PATH", BLOCKS_LIB},
                           {"NVTX_INJECTION64_PATH", BLOCKS_LIB},
                           {"TWINSCOPE_KERNELS", "reshape_and_cache_flash"},
                           {"TWINSCOPE_OUTPUT", trace},
                           {"TWINSCOPE_FLUSH_MS", std::to_string(kFlushMs)},
                           {"TWINSCOPE_QUIET", "1"}},
                          Path("progress"), Path("stderr"), after_ms);
    Parsed p = CheckKilledRun(k, trace, /*shadow=*/true, /*launch_slack=*/2);  // the pair in progress
    with_blocks += p.have_status && p.Counter("blocks_recorded") > 0;
    MoreIfTooFew(&moments, run + 1, with_blocks, 4);
  }
  EXPECT_GE(with_blocks, 4) << "too few runs got as far as a STATUS with blocks: the test shows little";
}
#endif

}  // namespace
}  // namespace twinscope
