// End to end: the real libtwinscope_blocks.so, injected into fakesan_app (a
// scripted program) through CUDA_INJECTION64_PATH / NVTX_INJECTION64_PATH,
// over the fake Sanitizer and real cubins. Each test runs the program in its
// own process and checks the trace it leaves, the fake's event log and its
// statistics.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "launchkey/launch_key.h"
#include "twinscope/counters.h"
#include "twinscope/trace_reader.h"

extern char** environ;

namespace twinscope {
namespace {

const char kTarget[] = "_ZN4vllm30reshape_and_cache_flash_kernelIffEEvPKT_PT0_PKlii";
const char kGemm[] = "_Z16gemm_like_kernelPKfS0_Pfi";

struct Collected : RecordSink {
  std::vector<LaunchRecord> launches;
  std::vector<BlockRecord> blocks;
  std::vector<NvtxRecord> nvtx;
  void OnLaunch(const LaunchRecord& r) override { launches.push_back(r); }
  void OnBlock(const BlockRecord& r) override { blocks.push_back(r); }
  void OnNvtx(const NvtxRecord& r) override { nvtx.push_back(r); }
};

struct AppRun {
  int exit_code = -1;
  bool timed_out = false;  // killed after the timeout: a hang (deadlock)
  std::string err;         // the program's stderr
  bool trace_ok = false;
  nlohmann::json header;
  nlohmann::json status;  // summary object: counters, tool_state, ...
  Collected rec;
  std::map<uint32_t, std::string> strings;
  std::vector<std::string> log;  // fake's event log
  std::map<std::string, uint64_t> fake_stats;

  uint64_t Counter(const char* name) const {
    auto c = status.find("counters");
    if (c == status.end() || !c->contains(name)) return 0;
    return (*c)[name].get<uint64_t>();
  }
  std::vector<BlockRecord> BlocksOf(uint64_t seq) const {
    std::vector<BlockRecord> out;
    for (const auto& b : rec.blocks)
      if (b.launch_seq == seq) out.push_back(b);
    return out;
  }
  size_t LogCount(const std::string& prefix) const {
    return std::count_if(log.begin(), log.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
  }
  // Index of the first log line starting with `prefix` at or after `from`, or npos.
  size_t LogFind(const std::string& prefix, size_t from = 0) const {
    for (size_t i = from; i < log.size(); ++i)
      if (log[i].rfind(prefix, 0) == 0) return i;
    return std::string::npos;
  }
};

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string Script(std::string body) {
  std::string modules = std::string("module target ") + TWINSCOPE_TEST_TARGET_CUBIN + "\nmodule other " +
                        TWINSCOPE_TEST_OTHER_CUBIN + "\n";
  size_t at = body.find("@modules\n");
  if (at != std::string::npos) body.replace(at, 9, modules);
  return body;
}

// Runs the script; a program still running after `timeout_s` is killed (timed_out). `read_trace`
// false: a program expected to stop early; its trace is not read.
AppRun RunApp(const std::string& name, const std::string& script, std::map<std::string, std::string> env,
              int timeout_s = 60, bool read_trace = true) {
  const std::string dir = std::string(TWINSCOPE_TEST_WORKDIR) + "/" + name;
  mkdir(TWINSCOPE_TEST_WORKDIR, 0755);
  mkdir(dir.c_str(), 0755);
  const std::string script_path = dir + "/script.txt", trace = dir + "/trace.tsc", log = dir + "/fakesan.log",
                    stats = dir + "/fakesan.stats", err = dir + "/stderr.txt";
  unlink(trace.c_str());
  std::ofstream(script_path) << script;

  env.emplace("CUDA_INJECTION64_PATH", TWINSCOPE_TEST_BLOCKS_LIB);
  env.emplace("NVTX_INJECTION64_PATH", TWINSCOPE_TEST_BLOCKS_LIB);
  env["TWINSCOPE_OUTPUT"] = trace;
  env["FAKESAN_LOG"] = log;
  env["FAKESAN_STATS"] = stats;
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (!env.count(key) && key.rfind("TWINSCOPE_", 0) != 0) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string app = TWINSCOPE_TEST_FAKESAN_APP;
  std::vector<char*> argv = {app.data(), const_cast<char*>(script_path.c_str()), nullptr};

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  AppRun r;
  if (posix_spawn(&pid, app.c_str(), &fa, nullptr, argv.data(), envp.data()) != 0) {
    ADD_FAILURE() << "cannot start " << app;
    return r;
  }
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = ReadText(err);
  if (r.timed_out) {
    ADD_FAILURE() << name << ": the program hung (killed after " << timeout_s << " s)\nstderr:\n" << r.err;
    return r;
  }
  std::istringstream ls(ReadText(log));
  for (std::string l; std::getline(ls, l);) r.log.push_back(l);
  std::istringstream ss(ReadText(stats));
  for (std::string k; ss >> k;) ss >> r.fake_stats[k];
  if (!read_trace) return r;

  std::string error;
  auto reader = TraceReader::Open(trace, &error);
  if (!reader) {
    ADD_FAILURE() << "no trace: " << error << "\nstderr:\n" << r.err;
    return r;
  }
  ReadReport rep = reader->Read(r.rec);
  r.trace_ok = rep.end == ReadEnd::kComplete;
  EXPECT_TRUE(r.trace_ok) << rep.message;
  r.header = reader->header();
  r.status = reader->last_status();
  for (const auto& [id, s] : reader->strings()) r.strings[id] = s;
  return r;
}

// Every block of a launch exactly once, exits after enters, orders a permutation.
void ExpectCompleteLaunch(const AppRun& r, const LaunchRecord& l) {
  std::vector<BlockRecord> b = r.BlocksOf(l.seq);
  const uint64_t n = uint64_t{l.grid.x} * l.grid.y * l.grid.z;
  ASSERT_EQ(b.size(), n) << "launch seq " << l.seq;
  EXPECT_EQ(l.blocks_recorded, n);
  std::vector<uint32_t> orders, linear;
  for (const auto& x : b) {
    EXPECT_GE(x.exit_ns, x.enter_ns);
    EXPECT_NE(x.exit_ns, 0u);
    EXPECT_EQ(x.block_linear, x.x + l.grid.x * (x.y + l.grid.y * x.z));
    orders.push_back(x.order);
    linear.push_back(x.block_linear);
  }
  std::sort(orders.begin(), orders.end());
  std::sort(linear.begin(), linear.end());
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(orders[i], i) << "orders are not a permutation";
    ASSERT_EQ(linear[i], i) << "a block is missing or duplicated";
  }
}

TEST(BlocksE2E, PatchesOnlyTheModuleWithTheTargetAndTracesOnlyIt) {
  AppRun r = RunApp("module_filter", Script(R"(@modules
launch other )" + std::string(kGemm) + R"( 64,1,1 256,1,1
launch target )" + kTarget + R"( 1000,1,1 512,1,1 seed=7
launch target neighbour_kernel 8,1,1 32,1,1
launch other rms_norm_kernel 16,1,1 128,1,1
sync
)"),
                    {{"TWINSCOPE_KERNELS", "reshape_and_cache_flash"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.header["role"], "shadow");
  EXPECT_EQ(r.status["tool_state"], "ok") << r.err;
  EXPECT_EQ(r.Counter(counters::kModulesLoaded), 2u);
  EXPECT_EQ(r.Counter(counters::kModulesPatched), 1u);
  EXPECT_EQ(r.LogCount("patch_module 1"), 1u);
  EXPECT_EQ(r.LogCount("patch_module 2"), 0u) << "the module without the target was patched";
  EXPECT_EQ(r.Counter(counters::kLaunchesSeen), 4u);
  EXPECT_EQ(r.Counter(counters::kLaunchesTraced), 1u);
  ASSERT_EQ(r.rec.launches.size(), 1u);
  const LaunchRecord& l = r.rec.launches[0];
  EXPECT_EQ(r.strings[l.kernel], kTarget);
  EXPECT_EQ(l.seq, 1u);  // the second launch of the process
  EXPECT_EQ(l.grid.x, 1000u);
  EXPECT_EQ(l.block.x, 512u);
  EXPECT_NE(l.grid_id, 0u);
  ExpectCompleteLaunch(r, l);
  EXPECT_EQ(r.rec.blocks.size(), 1000u) << "unselected kernels produced block records";
  EXPECT_EQ(r.Counter(counters::kBlocksExpected), 1000u);
  EXPECT_EQ(r.Counter(counters::kBlocksRecorded), 1000u);
  EXPECT_EQ(r.Counter(counters::kBlocksOverflow), 0u);
  EXPECT_EQ(r.fake_stats["launches_executed_patched"], 1u);
  EXPECT_EQ(r.fake_stats["patch_images_added"], 1u);
}

TEST(BlocksE2E, SelectsByDemangledSubstringAndRegex) {
  const std::string script = Script(R"(@modules
launch target )" + std::string(kTarget) +
                                    R"( 4,1,1 64,1,1
launch target neighbour_kernel 2,1,1 32,1,1
launch other )" + kGemm + R"( 3,1,1 32,1,1
launch other rms_norm_kernel 5,1,1 32,1,1
sync
)");
  AppRun demangled = RunApp("select_demangled", script, {{"TWINSCOPE_KERNELS", "vllm::reshape_and_cache<"}});
  // "vllm::reshape_and_cache<" is in neither name: nothing selected, nothing patched.
  EXPECT_EQ(demangled.Counter(counters::kModulesPatched), 0u);
  EXPECT_TRUE(demangled.rec.launches.empty());

  AppRun d2 =
      RunApp("select_demangled2", script, {{"TWINSCOPE_KERNELS", "vllm::reshape_and_cache_flash_kernel<float"}});
  ASSERT_EQ(d2.rec.launches.size(), 1u) << d2.err;
  EXPECT_EQ(d2.strings[d2.rec.launches[0].kernel], kTarget);

  AppRun re = RunApp("select_regex", script, {{"TWINSCOPE_KERNELS", "nomatch;re:^(rms_norm|neighbour)_kernel$"}});
  ASSERT_EQ(re.exit_code, 0) << re.err;
  EXPECT_EQ(re.Counter(counters::kModulesPatched), 2u);
  std::set<std::string> traced;
  for (const auto& l : re.rec.launches) traced.insert(re.strings[l.kernel]);
  EXPECT_EQ(traced, (std::set<std::string>{"neighbour_kernel", "rms_norm_kernel"}));
  EXPECT_EQ(re.rec.blocks.size(), 2u + 5u);

  AppRun mangled = RunApp("select_mangled", script, {{"TWINSCOPE_KERNELS", "PKfS0_Pfi"}});
  ASSERT_EQ(mangled.rec.launches.size(), 1u);
  EXPECT_EQ(mangled.strings[mangled.rec.launches[0].kernel], kGemm);
}

TEST(BlocksE2E, BadPatternDisablesWithClearMessageAndProgramRuns) {
  AppRun r = RunApp("bad_pattern", Script("@modules\nlaunch target neighbour_kernel 2,1,1 32,1,1\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "re:(unclosed"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("TWINSCOPE_KERNELS"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("re:(unclosed"), std::string::npos) << r.err;
  EXPECT_EQ(r.fake_stats["modules_patched"], 0u);
  EXPECT_EQ(r.status["tool_state"], "config_error");
  EXPECT_NE(r.status.value("tool_message", "").find("re:(unclosed"), std::string::npos);
}

// The settings policy (base/settings.h) in the real probe, as in the collector (tests/cupti): a bad value is
// warned about once and its default used (the probe used to refuse to trace); the header records the settings
// in effect and the value rejected; a misspelt variable is named with the closest known one.
TEST(BlocksE2E, BadSettingWarnsUsesTheDefaultAndTheHeaderSaysSo) {
  AppRun r = RunApp(
      "bad_setting", Script("@modules\nlaunch target " + std::string(kTarget) + " 4,1,1 32,1,1\nsync\n"),
      {{"TWINSCOPE_KERNELS", "reshape_and_cache_flash"}, {"TWINSCOPE_EVERY", "0"}, {"TWINSCOPE_BLOCK_NAIVE", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.status["tool_state"], "ok") << r.err;
  const std::string bad = "TWINSCOPE_EVERY=0 is not an integer >= 1; using the default (1)";
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(bad), r.err.rfind(bad)) << "warned more than once: " << r.err;
  EXPECT_NE(r.err.find("TWINSCOPE_BLOCK_NAIVE is not a twinscope setting and is ignored; did you mean "
                       "TWINSCOPE_BLOCKS_NAIVE?"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.rec.launches.size(), 1u) << "traced with the default";
  EXPECT_EQ(r.header["sampling"]["every"], 1);
  EXPECT_EQ(r.header["settings"]["TWINSCOPE_EVERY"], 1);
  EXPECT_EQ(r.header["settings"]["rejected"]["TWINSCOPE_EVERY"], "0");
  EXPECT_EQ(r.header["settings"]["TWINSCOPE_BLOCKS_NAIVE"], false);
  EXPECT_FALSE(r.header["settings"].contains("TWINSCOPE_KINDS")) << "the CUPTI collector's";
}

TEST(BlocksE2E, SamplingEveryAndMaxLaunches) {
  AppRun r = RunApp("sampling",
                    Script(R"(@modules
launch target )" + std::string(kTarget) +
                           R"( 10,1,1 32,1,1 repeat=10
launch target neighbour_kernel 1,1,1 32,1,1 repeat=3
sync
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"},
                     {"TWINSCOPE_EVERY", "3"},
                     {"TWINSCOPE_MAX_LAUNCHES", "3"},
                     {"TWINSCOPE_BLOCKS_PATCH", "always"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 3u);
  EXPECT_EQ(r.rec.launches[0].seq, 0u);
  EXPECT_EQ(r.rec.launches[1].seq, 3u);
  EXPECT_EQ(r.rec.launches[2].seq, 6u);
  EXPECT_EQ(r.Counter(counters::kLaunchesTraced), 3u);
  EXPECT_EQ(r.Counter(counters::kLaunchesSkipped), 7u);
  EXPECT_EQ(r.Counter(counters::kLaunchesSeen), 13u);
  EXPECT_EQ(r.rec.blocks.size(), 30u);
  // Skipped launches of a patched kernel get the "off" buffer (capacity 0), never null.
  EXPECT_EQ(r.LogCount("set_launch_data null"), 0u);
  EXPECT_EQ(r.LogCount("set_launch_data buffer"), 10u);
  EXPECT_EQ(r.fake_stats["launches_null_data_patched"], 0u);
  EXPECT_EQ(r.fake_stats["launches_executed_patched"], 3u);
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 7u);
  EXPECT_EQ(r.LogCount("error"), 0u);
}

// The H200 crash: launches of a patched kernel sampled out, then exit, where
// the CUDA runtime's exit handler (after ours) launches once more and tears
// down modules, streams and the context.
TEST(BlocksE2E, SampledOutLaunchesThenExitWithRuntimeTeardown) {
  AppRun r = RunApp("sampled_out_exit", Script(R"(@modules
stream a
launch target )" + std::string(kTarget) + R"( 1000,1,1 512,1,1 stream=a
sync
launch target )" + kTarget + R"( 1000,1,1 512,1,1 stream=a repeat=20
launch target )" + kTarget + R"( 1000,1,1 512,1,1 repeat=20
launch other )" + kGemm + R"( 64,1,1 256,1,1 repeat=5
sync
launch target )" + kTarget + R"( 1000,1,1 512,1,1 stream=a repeat=5
)"),
                    {{"TWINSCOPE_KERNELS", "reshape_and_cache_flash"},
                     {"TWINSCOPE_EVERY", "1000000000"},
                     {"TWINSCOPE_BLOCKS_PATCH", "always"},
                     {"FAKESAN_EXIT_TEARDOWN", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(r.trace_ok);
  EXPECT_EQ(r.status.value("tool_state", ""), "ok");
  EXPECT_EQ(r.Counter(counters::kLaunchesTraced), 1u);
  EXPECT_EQ(r.Counter(counters::kLaunchesSkipped), 45u);
  EXPECT_EQ(r.Counter(counters::kLaunchesSeen), 51u);  // the launch at exit comes after Shutdown
  EXPECT_EQ(r.Counter(counters::kBlocksRecorded), 1000u);
  ASSERT_EQ(r.rec.launches.size(), 1u);
  ExpectCompleteLaunch(r, r.rec.launches[0]);
  // Never null launch data for a patched kernel; no unsubscribe at exit.
  EXPECT_EQ(r.fake_stats["launches_null_data_patched"], 0u);
  EXPECT_EQ(r.LogCount("unsubscribe"), 0u);
  EXPECT_EQ(r.fake_stats["callbacks_after_unsubscribe"], 0u);
  // The runtime's teardown ran after our Shutdown and its callbacks were no-ops.
  const size_t teardown = r.LogFind("exit_teardown");
  ASSERT_NE(teardown, std::string::npos);
  EXPECT_NE(r.LogFind("exit_teardown_done", teardown), std::string::npos);
  EXPECT_NE(r.LogFind("context_destroyed", teardown), std::string::npos);
  EXPECT_EQ(r.LogFind("d2h", teardown), std::string::npos);
  EXPECT_EQ(r.LogFind("free", teardown), std::string::npos) << "freed a buffer during the runtime's teardown";
  // The 45 sampled-out launches and the one at exit ran on the off buffer, writing nothing.
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 46u);
  EXPECT_EQ(r.fake_stats["launches_executed_patched"], 1u);
  EXPECT_EQ(r.LogCount("error"), 0u);
  // One off buffer, written once and made ready by one stream sync (not one per
  // launch); the other sync waits for the re-zeroing of the one drained span.
  EXPECT_EQ(r.fake_stats["stream_syncs"], 2u);
  EXPECT_EQ(r.LogCount("h2d 32 "), 1u);
}

// Sampled-out launches on two streams before the off buffer is known written
// (graph nodes have no LAUNCH_END, where it is made ready): its header is
// copied ahead of each such launch on that launch's stream. The fake's device
// memory starts as 0xAB, so a missed write shows as an error (out of bounds).
TEST(BlocksE2E, OffBufferIsZeroedBeforeEveryUseOnEveryStream) {
  AppRun r =
      RunApp("off_buffer_streams", Script(R"(@modules
stream a
stream b
graph target )" + std::string(kTarget) + R"( 10,1,1 64,1,1 stream=b repeat=3
launch target )" + kTarget + R"( 10,1,1 64,1,1 stream=a repeat=2
sync
)"),
             {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "1000"}, {"TWINSCOPE_BLOCKS_PATCH", "always"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.Counter(counters::kLaunchesTraced), 1u);
  EXPECT_EQ(r.Counter(counters::kLaunchesSkipped), 4u);
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 4u);
  EXPECT_EQ(r.fake_stats["launches_null_data_patched"], 0u);
  EXPECT_EQ(r.LogCount("error"), 0u);
  // Written on b for both graph nodes and on a for the first plain launch; ready after that launch's END
  // (one sync), and the traced launch's drained span was zeroed again (one more).
  EXPECT_EQ(r.LogCount("h2d 32 stream=2"), 2u);
  EXPECT_EQ(r.LogCount("h2d 32 stream=1"), 1u);
  EXPECT_EQ(r.fake_stats["stream_syncs"], 2u);
}

TEST(BlocksE2E, NoCopyPerLaunchDrainsAtTheProgramsSyncs) {
  AppRun r = RunApp("drain_at_sync", Script(R"(@modules
stream a
stream b
launch target )" + std::string(kTarget) + R"( 100,1,1 64,1,1 stream=a repeat=5
launch target )" + kTarget + R"( 100,1,1 64,1,1 stream=b repeat=3
stream_sync a
launch target )" + kTarget + R"( 100,1,1 64,1,1 stream=a repeat=2
sync
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 10u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
  // No copy and no Sanitizer stream sync before the program's first sync.
  const size_t first_sync = r.LogFind("app_stream_sync 1");
  ASSERT_NE(first_sync, std::string::npos);
  EXPECT_GT(r.LogFind("d2h"), first_sync) << "copied before the program synchronised";
  EXPECT_GT(r.LogFind("sanitizer_stream_sync"), first_sync);
  // Stream a's five launches drained at its sync with ONE copy of their five
  // adjacent spans (5 x (32 + 100 x 32) bytes); b's three and a's last two at
  // the context sync, again as one copy on a, after waiting for stream b.
  const size_t ctx_sync = r.LogFind("app_ctx_sync");
  size_t d2h_between = 0;
  for (size_t i = first_sync; i < ctx_sync; ++i) d2h_between += r.log[i].rfind("d2h", 0) == 0;
  EXPECT_EQ(d2h_between, 1u);
  EXPECT_EQ(r.LogCount("d2h 16160 stream=1"), 2u);
  EXPECT_EQ(r.fake_stats["d2h_copies"], 2u);
  EXPECT_NE(r.LogFind("sanitizer_stream_sync 2", ctx_sync), std::string::npos)
      << "copied b's spans without waiting for b";
  EXPECT_EQ(r.Counter(counters::kBlocksForcedDrains), 0u);
  // One arena, not a buffer per launch; copies go to pooled pinned host
  // memory (a second buffer only if the decoder still held the first).
  EXPECT_EQ(r.fake_stats["allocs"], 1u);
  EXPECT_GE(r.fake_stats["host_allocs"], 1u);
  EXPECT_LE(r.fake_stats["host_allocs"], 2u);
}

// The arena's second round: spans drained (and so zeroed again) need no
// memset or header copy of their own; only fresh room is zeroed per launch.
// The fake's fresh device memory is 0xAB, so a span used dirty shows as a
// bad buffer or wrong blocks.
TEST(BlocksE2E, ReusedSpansNeedNoDeviceWorkPerLaunch) {
  AppRun r = RunApp("arena_reuse", Script(R"(@modules
launch target )" + std::string(kTarget) + R"( 100,1,1 64,1,1 repeat=4
sync
launch target )" + kTarget + R"( 100,1,1 64,1,1 repeat=4
sync
launch target )" + kTarget + R"( 50,1,1 64,1,1 repeat=2
launch target )" + kTarget + R"( 400,1,1 64,1,1
sync
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 11u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
  EXPECT_EQ(r.Counter(counters::kBlocksBadBuffer), 0u);
  // Memsets per launch: the first round's 4 (fresh room) and the 400-block
  // launch's (it reaches past the room used before); plus one per drain.
  EXPECT_EQ(r.LogCount("memset 3232 "), 4u);
  EXPECT_EQ(r.LogCount("memset 12832 "), 1u) << "the 400-block span reaches into fresh room";
  EXPECT_EQ(r.LogCount("memset "), 4u + 1u + 3u);
  EXPECT_EQ(r.LogCount("h2d"), 0u);
  EXPECT_EQ(r.fake_stats["d2h_copies"], 3u);
  EXPECT_EQ(r.fake_stats["allocs"], 1u);
}

TEST(BlocksE2E, DrainsEverythingAtExitWithoutAnySync) {
  AppRun r =
      RunApp("drain_at_exit", Script("@modules\nlaunch target " + std::string(kTarget) + " 50,2,1 64,1,1 repeat=6\n"),
             {{"TWINSCOPE_KERNELS", "reshape"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 6u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
}

// ---- Toggle mode: modules patched only around sampled launches ----

// Every patch-related error the fake can see, and no launch without its blocks.
void ExpectCleanToggling(const AppRun& r) {
  EXPECT_EQ(r.LogCount("error"), 0u) << "first: "
                                     << (r.LogFind("error") < r.log.size() ? r.log[r.LogFind("error")] : "");
  EXPECT_EQ(r.fake_stats.at("toggles_with_module_in_flight"), 0u);
  EXPECT_EQ(r.fake_stats.at("patch_changed_during_launch"), 0u);
  EXPECT_EQ(r.fake_stats.at("concurrent_patch_calls"), 0u);
  EXPECT_EQ(r.fake_stats.at("toggles_in_launch_end_nondefault"), 0u) << "an unpatch there hung the H200";
  EXPECT_EQ(r.fake_stats.at("graph_exec_patch_state_changed"), 0u) << "illegal instruction on the H200";
  EXPECT_EQ(r.LogCount("patch_module_without_instructions"), 0u) << "re-patched without issuing the instructions";
  for (const auto& l : r.rec.launches) {
    EXPECT_TRUE(l.flags & kFlagPatchToggled);
    ExpectCompleteLaunch(r, l);
  }
  EXPECT_EQ(r.Counter(counters::kBlocksMissing), 0u);
}

std::vector<uint32_t> SampleIndices(const AppRun& r) {
  std::vector<uint32_t> out;
  for (const auto& l : r.rec.launches) out.push_back(l.sample_index);
  return out;
}

TEST(BlocksE2E, ToggleModePatchesOnlyAroundSampledLaunches) {
  std::string body = "@modules\n";
  for (int i = 0; i < 12; ++i)
    body += "launch target " + std::string(kTarget) + " 50,1,1 64,1,1 seed=" + std::to_string(i + 1) +
            "\nlaunch target neighbour_kernel 4,1,1 32,1,1\n";
  AppRun r =
      RunApp("toggle_basic", Script(body + "sync\n"), {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "4"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.header["sampling"]["patch"], "toggle");
  EXPECT_EQ(r.header["sampling"]["every"], 4);
  ExpectCleanToggling(r);
  ASSERT_EQ(r.rec.launches.size(), 3u);
  EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 4, 8}));
  EXPECT_EQ(r.Counter(counters::kLaunchesMatching), 12u);
  EXPECT_EQ(r.Counter(counters::kLaunchesTraced), 3u);
  EXPECT_EQ(r.Counter(counters::kLaunchesSkipped), 9u);
  EXPECT_EQ(r.Counter(counters::kLaunchesSampledUnpatched), 0u) << "every-N candidates are armed ahead";
  // Patched at load and again before launches 4 and 8; unpatched after each sampled launch.
  EXPECT_EQ(r.Counter(counters::kModulesPatched), 1u);
  // (and at the end of launch 11, for a 12th that never comes).
  EXPECT_EQ(r.Counter(counters::kModulesRepatched), 3u);
  EXPECT_EQ(r.Counter(counters::kModulesUnpatched), 3u);
  EXPECT_EQ(r.fake_stats["modules_unpatched"], 3u);
  EXPECT_GT(r.Counter(counters::kToggleSyncs), 0u);
  EXPECT_EQ(r.fake_stats["launches_executed_patched"], 3u);
  // Everything else ran natively: the 9 sampled-out target launches and the
  // neighbours, but for the one launched after each arming (3, 7, 11), which
  // shares the patched window with the next sampled launch (on the off buffer).
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 3u);
  EXPECT_EQ(r.fake_stats["launches_executed_unpatched"], 9u + 9u);
  // Patch before the sampled launch, unpatch after its blocks ran.
  const std::string launch = "launch " + std::string(kTarget);
  size_t at = 0;
  for (int k : {4, 8}) {
    size_t li = 0;
    for (int n = 0; n <= k; ++n) li = r.LogFind(launch, n == 0 ? 0 : li + 1);
    ASSERT_NE(li, std::string::npos);
    const size_t patch = r.LogFind("patch_module 1", at);
    EXPECT_LT(patch, li) << "launch " << k << " was not patched before";
    const size_t exec = r.LogFind("exec " + std::string(kTarget) + " patched=1", li);
    const size_t unpatch = r.LogFind("unpatch_module 1", li);
    EXPECT_LT(exec, unpatch) << "unpatched before the sampled launch ran";
    at = unpatch;
  }
}

// TWINSCOPE_BLOCKS_GRAPH_DIAG=calls (how the H200's toggle hang was found):
// every callback in and out and every blocking call of a toggle or drain is
// a stderr line, in order; without it, none is.
TEST(BlocksE2E, CallLogShowsCallbacksAndTogglesInOrder) {
  std::string body = "@modules\n";
  for (int i = 0; i < 6; ++i) body += "launch target " + std::string(kTarget) + " 20,1,1 64,1,1\n";
  const std::string script = Script(body + "sync\n");
  const std::map<std::string, std::string> env = {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "4"}};
  AppRun quiet = RunApp("call_log_off", script, env);
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("twinscope calls"), std::string::npos) << quiet.err;
  auto logged = env;
  logged["TWINSCOPE_BLOCKS_GRAPH_DIAG"] = "calls";
  AppRun r = RunApp("call_log_on", script, logged);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectCleanToggling(r);
  const size_t launch = r.err.find("] launch " + std::string(kTarget));
  ASSERT_NE(launch, std::string::npos) << r.err;
  const size_t drain = r.err.find("] drain: 1 launches", launch);
  const size_t unpatch = r.err.find("] unpatch module ", drain);
  EXPECT_NE(drain, std::string::npos) << r.err;
  EXPECT_NE(unpatch, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("] unpatch module ", unpatch + 1), std::string::npos) << "the call and its result";
  EXPECT_NE(r.err.find("callback domain"), std::string::npos) << r.err;
  EXPECT_EQ(SampleIndices(r), SampleIndices(quiet)) << "the log changes nothing traced";
}

// A kernel of the target module on another stream, still queued when the
// probe wants to toggle: it must wait for that stream too (the fake logs an
// error for a toggle with a launch of the module queued anywhere).
TEST(BlocksE2E, ToggleModeWaitsForTheModulesKernelsOnOtherStreams) {
  // Each arming (at the END of target launches 1 and 3) finds a launch of the
  // module queued on both streams.
  AppRun r = RunApp("toggle_streams", Script(R"(@modules
stream a
stream b
launch target neighbour_kernel 4,1,1 32,1,1 stream=b
launch target )" + std::string(kTarget) + R"( 30,1,1 64,1,1 stream=a
launch target neighbour_kernel 4,1,1 32,1,1 stream=b
launch target )" + kTarget + R"( 30,1,1 64,1,1 stream=a
launch target )" + kTarget + R"( 30,1,1 64,1,1 stream=b
launch target neighbour_kernel 4,1,1 32,1,1 stream=a
launch target )" + kTarget + R"( 30,1,1 64,1,1 stream=b
launch target )" + kTarget + R"( 30,1,1 64,1,1 stream=a repeat=3
launch other rms_norm_kernel 4,1,1 32,1,1 stream=b
sync
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "2"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectCleanToggling(r);
  EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 2, 4, 6}));
  EXPECT_EQ(r.Counter(counters::kLaunchesMatching), 7u);
  // The other module is never touched.
  EXPECT_EQ(r.LogCount("patch_module 2"), 0u);
  EXPECT_EQ(r.LogCount("unpatch_module 2"), 0u);
}

TEST(BlocksE2E, ToggleModeAfterMaxLaunchesRunsNatively) {
  AppRun r = RunApp("toggle_max",
                    Script("@modules\nlaunch target " + std::string(kTarget) + " 20,1,1 64,1,1 repeat=10\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_MAX_LAUNCHES", "2"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.header["sampling"]["patch"], "toggle");
  ExpectCleanToggling(r);
  EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(r.fake_stats["launches_executed_unpatched"], 8u);
  EXPECT_EQ(r.fake_stats["modules_unpatched"], 1u) << "patched for the first two, then never again";
  EXPECT_EQ(r.Counter(counters::kModulesRepatched), 0u);
}

// The always mode stays available: sampled-out launches run patched, on the off buffer.
TEST(BlocksE2E, AlwaysModeKeepsTheModulePatched) {
  AppRun r = RunApp("always_mode",
                    Script("@modules\nlaunch target " + std::string(kTarget) + " 20,1,1 64,1,1 repeat=10\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "5"}, {"TWINSCOPE_BLOCKS_PATCH", "always"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.header["sampling"]["patch"], "always");
  EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 5}));
  EXPECT_EQ(r.fake_stats["modules_unpatched"], 0u);
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 8u);
  EXPECT_EQ(r.fake_stats["launches_executed_unpatched"], 0u);
  for (const auto& l : r.rec.launches) EXPECT_FALSE(l.flags & kFlagPatchToggled);
}

// Graph launches. A graph exec runs its nodes with the patch state its
// module had when the exec was instantiated (the H200: an exec made unpatched
// and launched after a re-patch stopped with "illegal instruction"; the fake
// models it). So toggle mode no longer toggles around graph launches: at the
// first instantiation it patches the target module and keeps it patched, and
// still samples the nodes (sampled-out ones take off entries of the table).
// Earlier this test expected toggles at each GRAPHS_LAUNCH_END and catch-ups.
TEST(BlocksE2E, ToggleModeAroundGraphLaunches) {
  std::string body = "@modules\nstream g\ngraph_instantiate\n";
  for (int r = 0; r < 6; ++r)
    body += "graph_begin g\ngraph target " + std::string(kTarget) + " 20,1,1 64,1,1 stream=g repeat=3\n" +
            "graph target neighbour_kernel 4,1,1 32,1,1 stream=g\ngraph_end g\nstream_sync g\n";
  AppRun r = RunApp("toggle_graph", Script(body + "stream_sync g\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "4"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectCleanToggling(r);
  EXPECT_EQ(r.Counter(counters::kModulesPinnedByGraph), 1u);
  EXPECT_EQ(r.LogCount("graph_exec 1 module 1 patched=1"), 1u) << "the exec was made patched";
  // Every candidate node is traced on time: the module is patched at every replay.
  EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 4, 8, 12, 16}));
  for (const auto& l : r.rec.launches) {
    EXPECT_TRUE(l.flags & kFlagGraph);
    EXPECT_FALSE(l.flags & kFlagSampleCatchUp) << l.sample_index;
  }
  EXPECT_EQ(r.Counter(counters::kLaunchesSampledUnpatched), 0u);
  EXPECT_EQ(r.Counter(counters::kLaunchesMatching), 18u);
  EXPECT_EQ(r.fake_stats["modules_unpatched"], 0u);
  EXPECT_EQ(r.fake_stats["launches_executed_unpatched"], 0u) << "pinned patched: no node runs natively";
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 13u + 6u) << "sampled-out target nodes and the neighbours";
}

// A graph instantiated while toggle mode has the module patched (just before a
// sampled launch) may hold on to the patched code: the module then stays
// patched for good (the fake logs an unpatch after such an instantiation, and
// an exec launched with another patch state than it was made with). Now the
// probe pins at any instantiation (see the next test for an unpatched one);
// here the exec is also replayed, and its sampled node traced.
TEST(BlocksE2E, ToggleModeKeepsAModulePatchedOnceAGraphWasMadeWhileItWas) {
  AppRun r = RunApp("toggle_pinned", Script(R"(@modules
stream g
launch target )" + std::string(kTarget) + R"( 10,1,1 64,1,1 repeat=5
graph_instantiate
launch target )" + kTarget + R"( 10,1,1 64,1,1 repeat=10
sync
graph_begin g
graph target )" + kTarget + R"( 10,1,1 64,1,1 stream=g repeat=5
graph_end g
stream_sync g
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "5"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectCleanToggling(r);  // no unpatch after the instantiation
  EXPECT_EQ(r.Counter(counters::kModulesPinnedByGraph), 1u);
  EXPECT_EQ(r.LogCount("unpatch_module"), 1u) << "only the one after launch 0, before the instantiation";
  EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 5, 10, 15}));
  EXPECT_TRUE(r.rec.launches.back().flags & kFlagGraph);
  // Re-patched at the end of launch 4 for launch 5, so the instantiation
  // after launch 4 finds the module patched.
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 12u) << "6-9, 11-14, 16-19: patched for good, on the off buffer";
}

// A graph instantiated while the module is unpatched (between samples): an
// exec made so and launched once the module is patched again faults on the
// H200. The probe patches the module inside the instantiation's callback
// (the exec then takes the patched code) and pins it; eager launches and the
// exec's replays after it are still sampled. Fails with the probe of before
// c856f6c, which pinned only modules that happened to be patched.
TEST(BlocksE2E, ToggleModePatchesAndPinsAModuleUnpatchedAtAnInstantiation) {
  std::string body = "@modules\nstream g\nlaunch target " + std::string(kTarget) +
                     " 20,1,1 64,1,1 repeat=2\ngraph_instantiate E\nlaunch target " + kTarget +
                     " 20,1,1 64,1,1 repeat=6\nsync\n";
  for (int replay = 0; replay < 3; ++replay)
    body += "graph_begin g E\ngraph target " + std::string(kTarget) +
            " 20,1,1 64,1,1 stream=g repeat=2\ngraph target neighbour_kernel 4,1,1 32,1,1 stream=g\n"
            "graph_end g\nstream_sync g\n";
  AppRun r =
      RunApp("toggle_graph_unpatched", Script(body), {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "4"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectCleanToggling(r);
  const size_t inst = r.LogFind("graph_instantiate 1");
  ASSERT_NE(inst, std::string::npos);
  EXPECT_LT(r.LogFind("unpatch_module 1"), inst) << "unpatched after launch 1, before the instantiation";
  EXPECT_LT(r.LogFind("patch_module 1", inst), r.LogFind("graph_exec 1 module 1", inst)) << "patched in its callback";
  EXPECT_EQ(r.LogCount("graph_exec 1 module 1 patched=1"), 1u);
  EXPECT_EQ(r.LogCount("unpatch_module 1"), 1u) << "never again after the instantiation";
  EXPECT_EQ(r.Counter(counters::kModulesPinnedByGraph), 1u);
  EXPECT_EQ(r.Counter(counters::kModulesPinnedUnpatched), 0u);
  // 2 + 6 eager launches, then 3 replays of 2 target nodes: 8 and 12 are nodes.
  EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 4, 8, 12}));
  ASSERT_EQ(r.rec.launches.size(), 4u);
  EXPECT_FALSE(r.rec.launches[1].flags & kFlagGraph);
  EXPECT_TRUE(r.rec.launches[2].flags & kFlagGraph);
  EXPECT_TRUE(r.rec.launches[3].flags & kFlagGraph);
  EXPECT_EQ(r.Counter(counters::kLaunchesSampledUnpatched), 0u);
  EXPECT_EQ(r.LogCount("exec neighbour_kernel patched=1"), 3u) << "every replay ran with the exec's (patched) code";
}

// A module holding the target loaded after a graph exec was made: patched at
// load and pinned (a later exec may hold its kernels), never unpatched; its
// eager launches and the nodes of an exec made after it are sampled.
TEST(BlocksE2E, ToggleModePinsAModuleLoadedAfterAGraphExec) {
  AppRun r = RunApp("toggle_graph_late_module",
                    Script(R"(@modules
stream g
graph_instantiate
module late )" + std::string(TWINSCOPE_TEST_TARGET_CUBIN) +
                           R"(
launch late )" + kTarget + R"( 20,1,1 64,1,1 repeat=5
sync
graph_instantiate F
graph_begin g F
graph late )" + kTarget + R"( 20,1,1 64,1,1 stream=g repeat=2
graph_end g
stream_sync g
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "2"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectCleanToggling(r);
  const size_t loaded = r.LogFind("module_loaded 3");
  ASSERT_NE(loaded, std::string::npos);
  EXPECT_LT(r.LogFind("patch_module 3", loaded), r.LogFind("launch " + std::string(kTarget), loaded));
  EXPECT_EQ(r.LogCount("unpatch_module"), 0u);
  EXPECT_EQ(r.Counter(counters::kModulesPinnedByGraph), 2u) << "the first target at the instantiation, late at load";
  EXPECT_EQ(r.LogCount("graph_exec 2 module 3 patched=1"), 1u);
  EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 2, 4, 6}));
  EXPECT_TRUE(r.rec.launches.back().flags & kFlagGraph);
  EXPECT_EQ(r.fake_stats["launches_executed_unpatched"], 0u);
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 3u);
}

// Patch and unpatch calls made right after a launch (in its LAUNCH_END
// callback) rather than at one of the program's syncs.
size_t TogglesAtALaunchEnd(const AppRun& r) {
  size_t n = 0;
  for (size_t i = 0; i < r.log.size(); ++i) {
    if (r.log[i].rfind("patch_module ", 0) != 0 && r.log[i].rfind("unpatch_module ", 0) != 0) continue;
    for (size_t j = i; j-- > 0;) {
      if (r.log[j].rfind("app_", 0) == 0 || r.log[j].rfind("module_loaded", 0) == 0) break;
      if (r.log[j].rfind("launch ", 0) == 0) {
        ++n;
        break;
      }
    }
  }
  return n;
}

// The target on a stream the program made: unpatching at the LAUNCH_END of
// such a launch hung the H200, so the probe toggles at the program's syncs
// instead (the module stays patched between them, and the sampler takes the
// launches it wants meanwhile). Fails with the probe of before c856f6c, which
// toggled at every LAUNCH_END (the fake logs toggle_in_launch_end_nondefault).
TEST(BlocksE2E, ToggleModeOnAStreamOfTheProgramTogglesAtSyncsOnly) {
  const std::string launch = "launch target " + std::string(kTarget) + " 30,1,1 64,1,1 stream=a";
  {
    // No sync until the end: patched throughout, every 4th launch traced.
    AppRun r = RunApp("toggle_user_stream_nosync",
                      Script("@modules\nstream a\n" + launch +
                             " repeat=12\nlaunch target neighbour_kernel 4,1,1 "
                             "32,1,1 stream=a\n"),
                      {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "4"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ExpectCleanToggling(r);
    EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 4, 8}));
    EXPECT_EQ(r.Counter(counters::kLaunchesSampledUnpatched), 0u);
    EXPECT_EQ(r.fake_stats["modules_unpatched"], 0u);
    EXPECT_EQ(r.Counter(counters::kModulesRepatched), 0u);
    EXPECT_EQ(r.fake_stats["launches_executed_off"], 9u + 1u) << "sampled-out launches and the neighbour";
    EXPECT_EQ(r.fake_stats["launches_executed_unpatched"], 0u);
  }
  {
    // A sync after every second launch: unpatched at the syncs before launches
    // 2 and 6 (not wanted), re-patched at those before 4 and 8, unpatched at the last.
    std::string body = "@modules\nstream a\n";
    for (int i = 0; i < 5; ++i) body += launch + " repeat=2\nstream_sync a\n";
    AppRun r =
        RunApp("toggle_user_stream_syncs", Script(body), {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "4"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ExpectCleanToggling(r);
    EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 4, 8}));
    EXPECT_EQ(r.Counter(counters::kLaunchesSampledUnpatched), 0u);
    EXPECT_EQ(r.fake_stats["modules_unpatched"], 3u);
    EXPECT_EQ(r.Counter(counters::kModulesRepatched), 2u);
    EXPECT_EQ(TogglesAtALaunchEnd(r), 0u) << "every toggle at a sync";
    EXPECT_EQ(r.fake_stats["launches_executed_unpatched"], 4u) << "2, 3, 6, 7";
    EXPECT_EQ(r.fake_stats["launches_executed_off"], 3u) << "1, 5, 9";
  }
}

// TWINSCOPE_BLOCKS_TOGGLE_AT: where toggle mode may patch and unpatch besides
// the program's syncs. The target alternates between a stream of the
// program (candidates 0, 4, 8) and the NULL stream.
TEST(BlocksE2E, ToggleAtChoosesTheLaunchEndsToToggleAt) {
  std::string body = "@modules\nstream a\n";
  for (int i = 0; i < 9; ++i)
    body += "launch target " + std::string(kTarget) + " 30,1,1 64,1,1" + (i % 2 == 0 ? " stream=a\n" : "\n");
  body += "sync\n";
  auto run = [&](const char* at, bool errors_expected = false) {
    std::map<std::string, std::string> env = {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "4"}};
    if (*at) env["TWINSCOPE_BLOCKS_TOGGLE_AT"] = at;
    if (errors_expected) env["FAKESAN_EXPECT_ERRORS"] = "1";
    return RunApp(std::string("toggle_at_") + (*at ? at : "unset"), Script(body), env);
  };
  for (const char* at : {"", "default"}) {
    // At the ends of the NULL-stream launches 1, 3, 5, 7 (unpatch, patch, ...) and the final sync.
    AppRun r = run(at);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ExpectCleanToggling(r);
    EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 4, 8})) << at;
    EXPECT_EQ(TogglesAtALaunchEnd(r), 4u) << at;
    EXPECT_EQ(r.fake_stats["modules_unpatched"], 3u) << at;
  }
  {
    AppRun r = run("sync");  // only at the final sync
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ExpectCleanToggling(r);
    EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 4, 8}));
    EXPECT_EQ(TogglesAtALaunchEnd(r), 0u);
    EXPECT_EQ(r.fake_stats["modules_unpatched"], 1u);
  }
  {
    // At every end, also of launches on stream a: what hung the H200, and the fake says so.
    AppRun r = run("end", /*errors_expected=*/true);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_GT(r.fake_stats["toggles_in_launch_end_nondefault"], 0u);
    EXPECT_GT(r.LogCount("error toggle_in_launch_end_nondefault"), 0u);
    EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 4, 8}));
  }
  {
    // The same run, its test not saying it expects errors: the fake stops the program at the first one.
    std::map<std::string, std::string> env = {
        {"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "4"}, {"TWINSCOPE_BLOCKS_TOGGLE_AT", "end"}};
    AppRun r = RunApp("toggle_at_end_unexpected", Script(body), env, 60, /*read_trace=*/false);
    EXPECT_EQ(r.exit_code, 128 + SIGABRT) << r.err;
    EXPECT_NE(r.err.find("fakesan: error toggle_in_launch_end_nondefault"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("A test that expects this sets FAKESAN_EXPECT_ERRORS=1"), std::string::npos) << r.err;
  }
  {
    // A bad value: one warning and the default (base/settings.h), tracing as with "default".
    AppRun r = run("later");
    EXPECT_EQ(r.exit_code, 0) << "the program must not be affected";
    EXPECT_NE(r.err.find("TWINSCOPE_BLOCKS_TOGGLE_AT=later is not one of default, end, sync; using the default "
                         "(default)"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.status["tool_state"], "ok");
    EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 4, 8}));
    EXPECT_EQ(TogglesAtALaunchEnd(r), 4u);
  }
}

// Several threads launch the target module's kernels on their own streams: the
// probe serialises its patch calls (the fake logs two at once), never toggles
// while a launch is between its BEGIN and its submission (the fake stretches
// that window), and loses no block of a traced launch.
TEST(BlocksE2E, ToggleModeWithManyThreadsSerialisesPatching) {
  AppRun r = RunApp("toggle_threads",
                    Script("@modules\nthreads 4 launch target " + std::string(kTarget) +
                           " 20,1,1 64,1,1 stream=new repeat=30\nthreads 3 launch target neighbour_kernel 2,1,1 32,1,1 "
                           "stream=new repeat=20\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"},
                     {"TWINSCOPE_EVERY", "3"},
                     {"FAKESAN_PATCH_US", "100"},
                     {"FAKESAN_SUBMIT_US", "50"}},
                    60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectCleanToggling(r);
  EXPECT_EQ(r.Counter(counters::kLaunchesMatching), 120u);
  EXPECT_GE(r.rec.launches.size(), 10u);
  EXPECT_LE(r.rec.launches.size(), 40u);
  EXPECT_EQ(r.Counter(counters::kLaunchesTraced) + r.Counter(counters::kLaunchesSkipped), 120u);
}

// Exit with the runtime's teardown after sampled-out launches, in toggle mode.
TEST(BlocksE2E, ToggleModeExitWithRuntimeTeardown) {
  AppRun r = RunApp("toggle_exit", Script(R"(@modules
stream a
launch target )" + std::string(kTarget) + R"( 100,1,1 128,1,1 stream=a repeat=25
launch target )" + kTarget + R"( 100,1,1 128,1,1 repeat=5
)"),
                    {{"TWINSCOPE_KERNELS", "reshape_and_cache_flash"},
                     {"TWINSCOPE_EVERY", "10"},
                     {"FAKESAN_EXIT_TEARDOWN", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(r.trace_ok);
  EXPECT_EQ(r.status.value("tool_state", ""), "ok");
  ExpectCleanToggling(r);
  EXPECT_EQ(SampleIndices(r), (std::vector<uint32_t>{0, 10, 20}));
  EXPECT_EQ(r.fake_stats["launches_null_data_patched"], 0u);
  EXPECT_EQ(r.LogCount("unsubscribe"), 0u);
}

// --per-second: a time-based rate. Launches 2 ms apart for ~120 ms (longer on
// a busy machine) at 50 a second: each traced launch at least 20 ms after the
// last, and no more of them than the run's own time allows.
TEST(BlocksE2E, PerSecondLimitsTheRate) {
  const auto t0 = std::chrono::steady_clock::now();
  AppRun r =
      RunApp("per_second",
             Script("@modules\nlaunch target " + std::string(kTarget) + " 10,1,1 32,1,1 repeat=60 gap_us=2000\nsync\n"),
             {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_PER_SECOND", "50"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.header["sampling"]["per_second"], 50.0);
  ExpectCleanToggling(r);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_GE(r.rec.launches.size(), 2u);
  EXPECT_LE(double(r.rec.launches.size()), wall_ms / 20 + 1) << "in " << wall_ms << " ms";
  // Every launch was decided on: traced or skipped by the rate (no fixed bound: on a loaded machine the 60
  // launches may span more than 120 ms; the bound above is this run's own time).
  EXPECT_EQ(r.Counter(counters::kLaunchesMatching), 60u);
  EXPECT_EQ(r.Counter(counters::kLaunchesTraced), r.rec.launches.size());
  EXPECT_EQ(r.Counter(counters::kLaunchesTraced) + r.Counter(counters::kLaunchesSkipped), 60u);
  for (size_t i = 1; i < r.rec.launches.size(); ++i) {
    EXPECT_GE(r.rec.launches[i].cpu_ns - r.rec.launches[i - 1].cpu_ns, 19000000u) << i;
    EXPECT_TRUE(r.rec.launches[i].flags & kFlagSampleRate);
  }
}

// --budget: a traced launch runs 1 ms longer than a native one
// (FAKESAN_PATCHED_RUN_US), a patch call takes 0.5 ms (FAKESAN_PATCH_US: 3 to
// re-patch, 1 to unpatch), and the program spends ~100 us between launches.
// The probe keeps what sampling cost within the budget of the program's time
// (plus the one sample that may overdraw it), and that cost includes every
// patch call the fake saw and every patched run.
TEST(BlocksE2E, BudgetKeepsSamplingCostWithinThePercentage) {
  const std::string script =
      Script("@modules\nlaunch target " + std::string(kTarget) + " 10,1,1 32,1,1 repeat=800 gap_us=100\nsync\n");
  std::map<int, uint64_t> traced;
  for (int pct : {2, 20}) {
    AppRun r = RunApp("budget_" + std::to_string(pct), script,
                      {{"TWINSCOPE_KERNELS", "reshape"},
                       {"TWINSCOPE_BUDGET", std::to_string(pct)},
                       {"FAKESAN_PATCH_US", "500"},
                       {"FAKESAN_PATCHED_RUN_US", "1000"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ExpectCleanToggling(r);
    const double cost = double(r.Counter(counters::kSamplingCostNs));
    const double program = double(r.Counter(counters::kSamplingProgramNs));
    ASSERT_GT(program, 50e6) << "800 launches 100 us apart";
    const double patch_calls = double(r.LogCount("patch_module 1") * 3 + r.LogCount("unpatch_module 1"));
    const double runs = double(r.rec.launches.size());
    // All but the last arming (3 calls, not paid for by a finished sample) are in the cost.
    EXPECT_GE(cost + 1.5e6, patch_calls * 0.5e6 + runs * 1e6) << pct << "%";
    // The sampler's promise: within the budget but for the one (costliest) sample that may overdraw it.
    const double max_sample = double(r.Counter(counters::kSamplingMaxCostNs));
    EXPECT_GE(max_sample, 0.5e6 + 1e6) << "a sample costs at least its patched run and its unpatch";
    EXPECT_LE(cost, pct / 100.0 * program + max_sample + 1e3) << pct << "%: cost " << cost << " of " << program;
    for (const auto& l : r.rec.launches) EXPECT_TRUE(l.flags & kFlagSampleBudget);
    traced[pct] = r.rec.launches.size();
  }
  EXPECT_GE(traced[20], 3u);
  EXPECT_GT(traced[20], traced[2]) << "a larger budget samples more";
}

TEST(BlocksE2E, FullRingForcesADrainAndLosesNothing) {
  AppRun r = RunApp("ring_full",
                    Script("@modules\nlaunch target " + std::string(kTarget) + " 64,1,1 128,1,1 repeat=20\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_BLOCKS_RING", "4"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 20u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
  EXPECT_GT(r.Counter(counters::kBlocksForcedDrains), 0u);
  // Copies happened between launches (forced), before the program's sync.
  EXPECT_LT(r.LogFind("d2h"), r.LogFind("app_ctx_sync"));
  EXPECT_EQ(r.fake_stats["allocs"], 1u);
}

// The H200 hang of blocks_bench (ring 64, the 65th traced launch): the forced
// drain of a full ring must not copy (or free) inside LAUNCH_BEGIN, where a
// driver may wait forever for the launch it is preparing. The fake hangs there.
TEST(BlocksE2E, FullRingNeverBlocksInsideLaunchBegin) {
  AppRun r = RunApp(
      "ring_full_strict",
      Script("@modules\nlaunch target " + std::string(kTarget) + " 64,1,1 128,1,1 repeat=70\nsync\n"),
      {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_BLOCKS_RING", "64"}, {"FAKESAN_STRICT_LAUNCH", "hang"}}, 20);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.LogCount("error"), 0u);
  ASSERT_EQ(r.rec.launches.size(), 70u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
  EXPECT_GT(r.Counter(counters::kBlocksForcedDrains), 0u);
  EXPECT_EQ(r.Counter(counters::kLaunchesNoBuffer), 0u);
  EXPECT_LT(r.LogFind("d2h"), r.LogFind("app_ctx_sync"));
  EXPECT_EQ(r.fake_stats["allocs"], 1u);
}

// A driver may report a stream as synchronised from inside our own blocking
// copy, on another thread that the copy waits for: the probe must not hold its
// lock across the copy. Old code: deadlock at the first drain.
TEST(BlocksE2E, SyncCallbackOnAnotherThreadDuringOurCopyDoesNotDeadlock) {
  AppRun r = RunApp("sync_cb_in_copy_thread", Script(R"(@modules
stream a
launch target )" + std::string(kTarget) + R"( 64,1,1 128,1,1 stream=a repeat=12
stream_sync a
launch target )" + std::string(kTarget) + R"( 64,1,1 128,1,1 stream=a repeat=3
sync
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"},
                     {"TWINSCOPE_BLOCKS_RING", "4"},
                     {"FAKESAN_SYNC_CALLBACK_IN_COPY", "thread"}},
                    20);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(r.LogCount("sync_callback_from_copy thread"), 0u);
  EXPECT_EQ(r.LogCount("error"), 0u);
  ASSERT_EQ(r.rec.launches.size(), 15u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
  EXPECT_EQ(r.Counter(counters::kBlocksLost), 0u);
}

// The same report on the calling thread is ignored (our own call), not a re-entry.
TEST(BlocksE2E, SyncCallbackOnTheSameThreadDuringOurCopyIsIgnored) {
  AppRun r =
      RunApp(
          "sync_cb_in_copy_same", Script(R"(@modules
launch target )" + std::string(kTarget) + R"( 64,1,1 128,1,1 repeat=9
sync
)"),
          {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_BLOCKS_RING", "4"}, {"FAKESAN_SYNC_CALLBACK_IN_COPY", "same"}},
          20);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(r.LogCount("sync_callback_from_copy same"), 0u);
  ASSERT_EQ(r.rec.launches.size(), 9u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
  // Only the program's own sync counts as a sync drain.
  EXPECT_EQ(r.Counter(counters::kBlocksSyncDrains), 1u);
}

TEST(BlocksE2E, OverflowIsCountedNeverSilent) {
  AppRun r =
      RunApp("overflow", Script("@modules\nlaunch target " + std::string(kTarget) + " 1000,1,1 64,1,1 seed=3\nsync\n"),
             {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_BLOCKS_MAX_SLOTS", "100"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 1u);
  EXPECT_EQ(r.rec.launches[0].blocks_recorded, 100u);
  EXPECT_EQ(r.rec.blocks.size(), 100u);
  for (const auto& b : r.rec.blocks) EXPECT_LT(b.block_linear, 100u);
  EXPECT_EQ(r.Counter(counters::kBlocksExpected), 1000u);
  EXPECT_EQ(r.Counter(counters::kBlocksRecorded), 100u);
  EXPECT_EQ(r.Counter(counters::kBlocksOverflow), 900u);
}

TEST(BlocksE2E, HugeGridGetsHalfTheArenaAndTheRestIsCountedAsOverflow) {
  // 1 MiB arena; a 65536-block launch would need 2 MiB + 32 bytes: it gets
  // half the arena (16383 slots, its capacity written into the header).
  AppRun r = RunApp("memcap",
                    Script("@modules\nlaunch target " + std::string(kTarget) + " 65536,1,1 32,1,1\nlaunch target " +
                           kTarget + " 10,1,1 32,1,1\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_BLOCKS_DEVICE_MB", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 2u);
  const uint64_t slots = ((1u << 20) / 2 - 32) / 32;
  EXPECT_EQ(r.rec.launches[0].blocks_recorded, slots);
  EXPECT_EQ(r.Counter(counters::kBlocksOverflow), 65536u - slots);
  EXPECT_EQ(r.LogCount("h2d 32 "), 1u) << "the capped launch's header";
  EXPECT_EQ(r.Counter(counters::kLaunchesNoBuffer), 0u);
  ExpectCompleteLaunch(r, r.rec.launches[1]);
}

// Block records are decoded and written on the probe's own thread; a drain
// waits for it only when more than TWINSCOPE_BLOCKS_DECODE_MB of copies wait.
TEST(BlocksE2E, DecoderBackpressureWaitsAndLosesNothing) {
  AppRun r = RunApp("decoder_wait", Script(R"(@modules
launch target )" + std::string(kTarget) + R"( 40000,1,1 32,1,1
sync
launch target )" + kTarget + R"( 40000,1,1 32,1,1
sync
launch target )" + kTarget + R"( 100,1,1 32,1,1
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_BLOCKS_DECODE_MB", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 3u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
  EXPECT_EQ(r.Counter(counters::kBlocksRecorded), 80100u);
  EXPECT_EQ(r.Counter(counters::kBlocksDecoderWaits), 2u) << "each 1.28 MB copy is over the 1 MiB cap";
}

// Graph nodes have no LAUNCH_END, so nothing drains between them: once the
// arena has no room, nodes go untraced, on record and counted, until a sync.
TEST(BlocksE2E, FullArenaLeavesLaunchesUntracedButCounted) {
  AppRun r = RunApp("arena_full", Script(R"(@modules
stream g
graph target )" + std::string(kTarget) + R"( 10000,1,1 32,1,1 stream=g repeat=4
stream_sync g
graph target )" + kTarget + R"( 10000,1,1 32,1,1 stream=g
stream_sync g
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_BLOCKS_DEVICE_MB", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 5u);
  EXPECT_EQ(r.Counter(counters::kLaunchesNoBuffer), 1u) << "three 320 KB spans fit in 1 MiB, the fourth not";
  EXPECT_EQ(r.Counter(counters::kBlocksOverflow), 10000u);
  EXPECT_EQ(r.Counter(counters::kBlocksRecorded), 40000u);
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 1u);
  size_t untraced = 0;
  for (const auto& l : r.rec.launches) {
    if (l.blocks_recorded == 0) {
      ++untraced;
    } else {
      ExpectCompleteLaunch(r, l);
    }
  }
  EXPECT_EQ(untraced, 1u);
}

TEST(BlocksE2E, DecodesCoordinatesTimesSmsAndIncompleteExits) {
  AppRun r = RunApp("decode",
                    Script("@modules\nlaunch target " + std::string(kTarget) +
                           " 7,5,3 96,2,1 seed=11 sms=13 start=5000 spacing=20 duration=300 split=1 drop=9\n"
                           "sync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 1u);
  const LaunchRecord& l = r.rec.launches[0];
  EXPECT_EQ(l.grid.x, 7u);
  EXPECT_EQ(l.grid.y, 5u);
  EXPECT_EQ(l.grid.z, 3u);
  EXPECT_EQ(l.block.y, 2u);
  std::vector<BlockRecord> b = r.BlocksOf(l.seq);
  ASSERT_EQ(b.size(), 105u);
  size_t incomplete = 0;
  std::set<uint32_t> orders;
  for (const auto& x : b) {
    EXPECT_EQ(x.block_linear, x.x + 7 * (x.y + 5 * x.z));
    // The fake runs blocks in order: run position == arrival order.
    EXPECT_EQ(x.enter_ns, 5000u + 20u * x.order);
    EXPECT_EQ(x.sm, x.order % 13);
    orders.insert(x.order);
    if (x.order % 9 == 8) {
      EXPECT_EQ(x.exit_ns, 0u) << "a block whose last warp never left has no exit time";
      ++incomplete;
    } else {
      // Half the warps left early: the exit time is the LAST group's.
      EXPECT_EQ(x.exit_ns, x.enter_ns + 300);
    }
  }
  EXPECT_EQ(orders.size(), 105u);
  EXPECT_EQ(incomplete, 105u / 9);
  EXPECT_EQ(r.Counter(counters::kBlocksIncomplete), 105u / 9);
}

TEST(BlocksE2E, LaunchKeysCountEveryLaunchAndFollowNvtx) {
  AppRun r = RunApp("keys",
                    Script(R"(@modules
push step
launch target )" + std::string(kTarget) +
                           R"( 10,1,1 32,1,1
launch other rms_norm_kernel 4,1,1 32,1,1
launch target )" + kTarget +
                           R"( 10,1,1 32,1,1
launch target )" + kTarget +
                           R"( 12,1,1 32,1,1
pop
push step
push attn
launch target )" + kTarget +
                           R"( 10,1,1 32,1,1
pop
pop
launch target )" + kTarget +
                           R"( 10,1,1 32,1,1
sync
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "2"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Target launches: #0 (step#0, ord 0) traced, #1 (ord 1) skipped, #2 (ord 2, grid 12) traced,
  // #3 (step#1/attn#0, ord 0) skipped, #4 (no range, ord 0) traced.
  ASSERT_EQ(r.rec.launches.size(), 3u);
  struct Want {
    const char* path;
    uint32_t ordinal;
    uint32_t grid;
  } want[] = {{"step#0", 0, 10}, {"step#0", 2, 12}, {"", 0, 10}};
  for (size_t i = 0; i < 3; ++i) {
    const LaunchRecord& l = r.rec.launches[i];
    const std::string path = l.key.path ? r.strings[l.key.path] : "";
    EXPECT_EQ(path, want[i].path) << i;
    EXPECT_EQ(l.key.ordinal, want[i].ordinal) << i;
    EXPECT_EQ(l.key.hash,
              LaunchKeyHash(want[i].path, kTarget, want[i].ordinal, Dim3{want[i].grid, 1, 1}, Dim3{32, 1, 1}))
        << i;
  }
  // NVTX ranges are in the shadow trace too.
  EXPECT_EQ(r.rec.nvtx.size(), 3u);
  EXPECT_EQ(r.Counter(counters::kNvtxRecords), 3u);
}

TEST(BlocksE2E, StreamAndModuleTeardownDrainFirst) {
  AppRun r = RunApp("teardown",
                    Script(R"(@modules
stream s
launch target )" + std::string(kTarget) +
                           R"( 20,1,1 32,1,1 stream=s repeat=2
destroy_stream s
launch target neighbour_kernel 3,1,1 32,1,1
unload target
destroy_context
)"),
                    {{"TWINSCOPE_KERNELS", "reshape;neighbour"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 3u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
  const size_t destroyed = r.LogFind("stream_destroyed 1");
  ASSERT_NE(destroyed, std::string::npos);
  size_t d2h_before = 0;
  for (size_t i = 0; i < destroyed; ++i) d2h_before += r.log[i].rfind("d2h", 0) == 0;
  EXPECT_EQ(d2h_before, 1u) << "the two launches' adjacent spans: one copy";
  EXPECT_LT(r.LogFind("d2h", destroyed), r.LogFind("module_unloaded 1"));
  EXPECT_EQ(r.LogCount("error"), 0u) << "the probe used a dead stream, module or context";
  // The arena (and nothing else) was freed with the context, and the pinned
  // host buffers before it went.
  EXPECT_EQ(r.fake_stats["allocs"], 1u);
  EXPECT_EQ(r.fake_stats["frees"], r.fake_stats["allocs"]);
  EXPECT_GE(r.fake_stats["host_allocs"], 1u);
  EXPECT_EQ(r.fake_stats["host_frees"], r.fake_stats["host_allocs"]);
}

TEST(BlocksE2E, GraphKernelNodesAreKeyedAndTraced) {
  AppRun r = RunApp("graph",
                    Script(R"(@modules
stream g
push step
graph target )" + std::string(kTarget) +
                           R"( 30,1,1 64,1,1 stream=g
graph other rms_norm_kernel 2,1,1 32,1,1 stream=g
graph target )" + kTarget + R"( 30,1,1 64,1,1 stream=g
pop
stream_sync g
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.rec.launches.size(), 2u);
  for (const auto& l : r.rec.launches) {
    EXPECT_TRUE(l.flags & kFlagGraph);
    ExpectCompleteLaunch(r, l);
  }
  EXPECT_EQ(r.rec.launches[1].key.ordinal, 1u);
  EXPECT_EQ(r.Counter(counters::kGraphKernelNodeLaunches), 3u);
  EXPECT_EQ(r.Counter(counters::kLaunchesSeen), 3u);
}

// A pattern that matches no launched kernel: the probe names the kernels it
// saw launched most, with their counts, on stderr and in the trace.
TEST(BlocksE2E, APatternThatMatchesNothingNamesTheKernelsLaunchedMost) {
  AppRun r = RunApp("no_match",
                    Script(R"(@modules
launch target neighbour_kernel 8,1,1 32,1,1 repeat=3
launch other rms_norm_kernel 16,1,1 128,1,1 repeat=5
launch target )" + std::string(kTarget) +
                           R"( 4,1,1 32,1,1
sync
)"),
                    {{"TWINSCOPE_KERNELS", "flash_attn"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.rec.launches.empty());
  EXPECT_NE(r.err.find("matched no launched kernel"), std::string::npos) << r.err;
  const size_t rms = r.err.find("5  rms_norm_kernel"), nb = r.err.find("3  neighbour_kernel");
  ASSERT_NE(rms, std::string::npos) << r.err;
  ASSERT_NE(nb, std::string::npos) << r.err;
  EXPECT_LT(rms, nb) << "most launched first";
  const auto& most = r.status["kernels_launched_most"];
  ASSERT_TRUE(most.is_array()) << r.status.dump();
  ASSERT_EQ(most.size(), 3u);
  EXPECT_EQ(most[0]["kernel"], "rms_norm_kernel");
  EXPECT_EQ(most[0]["launches"], 5u);
  EXPECT_EQ(most[2]["launches"], 1u);
}

// A graph kernel node runs with its function's callback data, not launch data
// (measured on the H200, modelled by the fake): each graph launch gets a table
// per traced kernel, with an entry per node, so two nodes of one kernel (and
// the module's other kernels between them) each get their own blocks.
TEST(BlocksE2E, GraphLaunchesWithSeveralNodesOfTheTargetGiveEachNodeItsBlocks) {
  std::string body = "@modules\nstream g\n";
  for (int replay = 0; replay < 3; ++replay)
    body +=
        "graph_begin g\ngraph target neighbour_kernel 4,1,1 32,1,1 stream=g\n"
        "graph target " +
        std::string(kTarget) +
        " 30,1,1 64,1,1 stream=g\n"
        "graph other rms_norm_kernel 2,1,1 32,1,1 stream=g\n"
        "graph target " +
        std::string(kTarget) +
        " 30,1,1 64,1,1 stream=g\n"
        "graph target " +
        std::string(kTarget) + " 12,1,1 128,1,1 stream=g\ngraph_end g\n";
  AppRun r = RunApp("graph_table", Script(body + "stream_sync g\n"), {{"TWINSCOPE_KERNELS", "reshape"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.LogCount("error"), 0u) << r.log[std::min(r.LogFind("error"), r.log.size() - 1)];
  ASSERT_EQ(r.rec.launches.size(), 9u);
  for (const auto& l : r.rec.launches) {
    EXPECT_TRUE(l.flags & kFlagGraph);
    ExpectCompleteLaunch(r, l);
  }
  EXPECT_EQ(r.Counter(counters::kGraphTables), 3u) << "one per graph launch (one traced kernel)";
  EXPECT_EQ(r.Counter(counters::kBlocksRecorded), 3u * (30 + 30 + 12));
  EXPECT_EQ(r.fake_stats["graph_nodes_without_table_entry"], 0u);
  EXPECT_EQ(r.LogCount("set_launch_data"), 0u) << "graph nodes get no launch data";
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 3u) << "the module's other kernel, on the off buffer";
}

// Sampling inside a graph launch: the sampled-out nodes of the traced kernel
// get off entries in the table, so they write nothing and take no traced
// node's entry.
TEST(BlocksE2E, SampledOutGraphNodesTakeOffEntries) {
  std::string body = "@modules\nstream g\ngraph_begin g\n";
  body += "graph target " + std::string(kTarget) + " 20,1,1 64,1,1 stream=g repeat=4\ngraph_end g\n";
  AppRun r = RunApp("graph_table_every", Script(body + "stream_sync g\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "2"}, {"TWINSCOPE_BLOCKS_PATCH", "always"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.LogCount("error"), 0u) << r.log[std::min(r.LogFind("error"), r.log.size() - 1)];
  ASSERT_EQ(r.rec.launches.size(), 2u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
  EXPECT_EQ(r.Counter(counters::kBlocksRecorded), 40u);
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 2u);
  EXPECT_EQ(r.fake_stats["graph_nodes_without_table_entry"], 0u);
}

// Graph nodes of the target module's other kernels: given the off buffer,
// never no launch data (the H200 crashed on such a graph, bench/RESULTS.md 10).
TEST(BlocksE2E, GraphNodesOfOtherKernelsInAPatchedModuleGetTheOffBuffer) {
  AppRun r = RunApp("graph_other_nodes", Script(R"(@modules
stream g
graph_begin g
graph target neighbour_kernel 4,1,1 32,1,1 stream=g
graph target )" + std::string(kTarget) + R"( 10,1,1 64,1,1 stream=g
graph target neighbour_kernel 4,1,1 32,1,1 stream=g
graph_end g
stream_sync g
)"),
                    {{"TWINSCOPE_KERNELS", "reshape"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.LogCount("error"), 0u) << r.log[std::min(r.LogFind("error"), r.log.size() - 1)];
  ASSERT_EQ(r.rec.launches.size(), 1u);
  ExpectCompleteLaunch(r, r.rec.launches[0]);
  EXPECT_EQ(r.fake_stats["launches_executed_off"], 2u);
}

TEST(BlocksE2E, NaiveBaselinePatchesEverythingAndCopiesAfterEachLaunch) {
  AppRun r = RunApp("naive",
                    Script("@modules\nlaunch other rms_norm_kernel 4,1,1 32,1,1\nlaunch target " +
                           std::string(kTarget) + " 20,1,1 64,1,1 repeat=3\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_BLOCKS_NAIVE", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.Counter(counters::kModulesPatched), 2u);
  ASSERT_EQ(r.rec.launches.size(), 3u);
  for (const auto& l : r.rec.launches) ExpectCompleteLaunch(r, l);
  // Every copy comes right after its launch, before the program's sync.
  EXPECT_EQ(r.LogCount("d2h"), 3u);
  EXPECT_LT(r.LogFind("d2h"),
            r.LogFind("launch " + std::string(kTarget), r.LogFind("launch " + std::string(kTarget)) + 1));
}

TEST(BlocksE2E, SilentSanitizerIsReportedWithTheLikelyHolder) {
  AppRun r = RunApp("silent",
                    Script("mode silent\n@modules\nlaunch target " + std::string(kTarget) + " 10,1,1 32,1,1\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}});
  EXPECT_EQ(r.exit_code, 0) << "the program must not be affected";
  EXPECT_EQ(r.status["tool_state"], "silent");
  EXPECT_NE(r.err.find("no callback"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("twinscope twin"), std::string::npos) << r.err;
  EXPECT_NE(r.status.value("tool_message", "").find("twinscope twin"), std::string::npos);
  EXPECT_EQ(r.Counter(counters::kSanitizerCallbacks), 0u);
  EXPECT_TRUE(r.rec.launches.empty());
}

TEST(BlocksE2E, SilentWithCuptiLoadedNamesIt) {
  // A process that has a libcupti mapped (a real library of that file name,
  // preloaded): the probe finds it in /proc/self/maps and names it.
  AppRun r = RunApp("silent_cupti", Script("mode silent\n@modules\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"LD_PRELOAD", TWINSCOPE_TEST_CUPTI_STAND_IN}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("cannot be preloaded"), std::string::npos) << "the stand-in must load:\n" << r.err;
  EXPECT_EQ(r.status["tool_state"], "silent");
  const std::string mapped = "Likely holder: libcupti.so.13 is loaded in the process (a CUPTI user)";
  EXPECT_NE(r.err.find(mapped), std::string::npos) << r.err;
  EXPECT_NE(r.status.value("tool_message", "").find(mapped), std::string::npos) << r.status.dump();
}

TEST(BlocksE2E, FailedSubscribeIsReported) {
  AppRun r = RunApp("subscribe_fails",
                    Script("mode fail\n@modules\nlaunch target " + std::string(kTarget) + " 10,1,1 32,1,1\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.status["tool_state"], "subscribe_failed");
  EXPECT_NE(r.err.find("could not subscribe"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SANITIZER_ERROR_MAX_LIMIT_REACHED"), std::string::npos) << r.err;
}

// Stream capture, modelled by the fake as the driver does it: launches on a capturing stream are not
// executed but recorded into a graph, and reach the probe as no launch callback. The probe must leave
// the capturing stream alone (no copy, memset or sync there: the fake stops the program on one) and
// trace the captured kernels when the graph runs, as graph nodes. The capture is on the stream that
// already ran the module's kernels, the one a toggle would synchronise.
TEST(BlocksE2E, CapturedLaunchesAreTracedWhenTheirGraphRuns) {
  const std::string k = kTarget;
  AppRun r = RunApp("capture",
                    Script("@modules\nstream a\n"
                           "launch target " +
                           k +
                           " 30,1,1 64,1,1 stream=a\nstream_sync a\n"
                           "capture_begin a\n"
                           "launch target " +
                           k +
                           " 20,1,1 64,1,1 stream=a repeat=2\n"
                           "launch other rms_norm_kernel 16,1,1 128,1,1 stream=a\n"
                           "capture_end a G\ninstantiate G E\n"
                           "graph_launch E a\ngraph_launch E a\nstream_sync a\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.LogCount("captured "), 3u);
  EXPECT_EQ(r.LogCount("end_capture stream=1 graph=1 nodes=3"), 1u);
  EXPECT_EQ(r.LogCount("error"), 0u) << r.log[std::min(r.LogFind("error"), r.log.size() - 1)];
  EXPECT_EQ(r.fake_stats["launches"], 1u + 2 * 3) << "the eager launch and the graph's nodes twice, not the captured";
  // The probe saw the eager launch and the four target nodes, none of the captured launches themselves.
  EXPECT_EQ(r.Counter(counters::kLaunchesMatching), 5u);
  ASSERT_EQ(r.rec.launches.size(), 5u);
  EXPECT_FALSE(r.rec.launches[0].flags & kFlagGraph);
  for (size_t i = 0; i < r.rec.launches.size(); ++i) {
    SCOPED_TRACE(i);
    if (i > 0) {
      EXPECT_TRUE(r.rec.launches[i].flags & kFlagGraph);
    }
    EXPECT_EQ(r.rec.launches[i].grid.x, i == 0 ? 30u : 20u);
    ExpectCompleteLaunch(r, r.rec.launches[i]);
  }
  EXPECT_EQ(r.Counter(counters::kBlocksMissing), 0u);
}

// Two threads launch on the NULL stream while each launch stays between its BEGIN callback and its
// submission for 20 ms (FAKESAN_SUBMIT_US): at each launch end the probe wants to toggle (every 2nd
// launch is traced), but the other thread's launch is open for longer than the probe waits (5 ms), so
// the toggle is put off and counted, and never made while a launch is open (the fake logs that).
TEST(BlocksE2E, ToggleThatCannotBeMadeIsDeferredAndCounted) {
  AppRun r =
      RunApp("toggle_deferred",
             Script("@modules\nthreads 2 launch target " + std::string(kTarget) + " 10,1,1 32,1,1 repeat=10\nsync\n"),
             {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "2"}, {"FAKESAN_SUBMIT_US", "20000"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectCleanToggling(r);
  EXPECT_GT(r.Counter(counters::kTogglesDeferred), 0u);
  EXPECT_EQ(r.Counter(counters::kLaunchesMatching), 20u);
  EXPECT_EQ(r.Counter(counters::kLaunchesTraced) + r.Counter(counters::kLaunchesSkipped), 20u);
}

// A second thread launches a graph node of the traced kernel while the main thread's graph launch (with
// a table of that kernel) is not yet submitted: they share the kernel's callback data, which the probe
// counts and says once.
TEST(BlocksE2E, GraphLaunchesOfOneKernelOnTwoThreadsAreCounted) {
  const std::string k = kTarget;
  AppRun r = RunApp("graph_overlap",
                    Script("@modules\nstream g\ngraph_instantiate E\ngraph_begin g E\n"
                           "graph target " +
                           k +
                           " 20,1,1 64,1,1 stream=g\n"
                           "threads 1 graph target " +
                           k +
                           " 20,1,1 64,1,1 stream=new\n"
                           "graph_end g\nsync\n"),
                    {{"TWINSCOPE_KERNELS", "reshape"}, {"TWINSCOPE_EVERY", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.Counter(counters::kGraphLaunchesOverlapping), 1u);
  EXPECT_NE(r.err.find("two threads launch CUDA graphs holding"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(counters::kGraphLaunchesOverlapping), std::string::npos) << r.err;
}

}  // namespace
}  // namespace twinscope
