// End-to-end tests of libtwinscope_cupti.so against the fake CUPTI: each test
// runs cupti_driver (a stand-in application) in a child process with the
// collector injected, then reads the trace it left and checks exact counts,
// launch keys, flags and counters.
#include <cupti_version.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "launchkey/launch_key.h"
#include "twinscope/trace_reader.h"

namespace twinscope {
namespace {

struct Trace : RecordSink {
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<ApiRecord> apis;
  std::vector<NvtxRecord> nvtx;
  std::vector<LaunchRecord> launches;
  nlohmann::json header, status;
  ReadReport report;
  std::unordered_map<StringId, std::string> strings;

  void OnKernel(const KernelRecord& r) override { kernels.push_back(r); }
  void OnMemcpy(const MemcpyRecord& r) override { memcpys.push_back(r); }
  void OnMemset(const MemsetRecord& r) override { memsets.push_back(r); }
  void OnApi(const ApiRecord& r) override { apis.push_back(r); }
  void OnNvtx(const NvtxRecord& r) override { nvtx.push_back(r); }
  void OnLaunch(const LaunchRecord& r) override { launches.push_back(r); }

  std::string S(StringId id) const {
    auto it = strings.find(id);
    return it == strings.end() ? std::string() : it->second;
  }
  uint64_t Counter(const std::string& name) const {
    return status.contains("counters") ? status["counters"].value(name, uint64_t{0}) : 0;
  }
  bool HasCounter(const std::string& name) const {
    return status.contains("counters") && status["counters"].contains(name);
  }
};

struct RunResult {
  int exit_code = -1;  // if exited normally
  int signal = 0;      // if killed by a signal
  std::string out, err;
  nlohmann::json fake_state;
};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Run against the fake CUPTI 13.0 and 13.5 (GetParam: its API version): in
// multi-subscriber mode on 13.5, single subscriber on 13.0.
class CuptiE2E : public ::testing::TestWithParam<uint32_t> {
 protected:
  bool Multi() const { return GetParam() >= 130500; }
  std::string FakeDir() const { return Multi() ? FAKE_CUPTI135_LIB_DIR : FAKE_CUPTI_LIB_DIR; }

  void SetUp() override {
    char tmpl[] = "/tmp/twinscope-cupti-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    trace_path_ = dir_ + "/trace.tsc";
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  RunResult Run(const std::string& scenario, const std::map<std::string, std::string>& env = {}) {
    RunResult r;
    std::string out = dir_ + "/stdout", err = dir_ + "/stderr", state = dir_ + "/fake_state.json";
    // The collector never truncates a trace (a second process writes TRACE.d/ instead): each run starts
    // without the last run's trace, as `twinscope record` clears its output.
    std::filesystem::remove(trace_path_);
    std::filesystem::remove_all(trace_path_ + ".d");
    pid_t pid = fork();
    if (pid == 0) {
      int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(o, 1);
      dup2(e, 2);
      std::string ld = FakeDir() + ":" + FAKE_CUPTI_LIB_DIR;
      if (const char* old = getenv("LD_LIBRARY_PATH")) ld += std::string(":") + old;
      setenv("LD_LIBRARY_PATH", ld.c_str(), 1);
      setenv("TWINSCOPE_OUTPUT", trace_path_.c_str(), 1);
      setenv("NVTX_INJECTION64_PATH", COLLECTOR_PATH, 1);
      unsetenv("TWINSCOPE_KERNELS_ONLY");
      unsetenv("TWINSCOPE_QUIET");
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      execl(DRIVER_PATH, DRIVER_PATH, COLLECTOR_PATH, scenario.c_str(), state.c_str(), nullptr);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    std::string s = ReadFile(state);
    if (!s.empty()) r.fake_state = nlohmann::json::parse(s);
    return r;
  }

  Trace Read() {
    Trace t;
    std::string error;
    auto reader = TraceReader::Open(trace_path_, &error);
    EXPECT_TRUE(reader) << error;
    if (!reader) return t;
    t.header = reader->header();
    t.report = reader->Read(t);
    t.status = reader->last_status();
    t.strings = reader->strings();
    return t;
  }

  // Every kernel record has the key of exactly one LaunchRecord, the one that
  // made it (same kernel and grid), and no two records share a launch.
  static void ExpectKeysTied(const Trace& t) {
    std::map<std::tuple<uint64_t, StringId, uint32_t>, const LaunchRecord*> by_key;
    for (const auto& l : t.launches) {
      bool inserted = by_key.emplace(std::make_tuple(l.key.hash, l.key.path, l.key.ordinal), &l).second;
      EXPECT_TRUE(inserted) << "two launches share a key: " << t.S(l.kernel);
    }
    std::set<const LaunchRecord*> used;
    for (const auto& k : t.kernels) {
      auto it = by_key.find(std::make_tuple(k.key.hash, k.key.path, k.key.ordinal));
      ASSERT_NE(it, by_key.end()) << "kernel record corr " << k.correlation_id << " " << t.S(k.name)
                                  << " has no matching launch";
      EXPECT_EQ(it->second->kernel, k.name);
      EXPECT_EQ(it->second->grid.x, k.grid.x);
      EXPECT_EQ(k.flags & kFlagNoLaunchKey, 0u);
      EXPECT_TRUE(used.insert(it->second).second) << "two kernel records tied to one launch";
    }
  }

  std::string dir_, trace_path_;
};

uint64_t ExpectedHash(const std::string& path, const std::string& kernel, uint32_t ordinal, unsigned gx, unsigned bx) {
  return LaunchKeyHash(path, kernel, ordinal, Dim3{gx, 1, 1}, Dim3{bx, 1, 1});
}

TEST_P(CuptiE2E, PlainLaunchesGetKeysNvtxAndCounters) {
  RunResult r = Run("plain");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("DRIVER_DONE plain"), std::string::npos);
  Trace t = Read();
  EXPECT_EQ(t.report.end, ReadEnd::kComplete) << t.report.message;

  EXPECT_EQ(t.header["role"], "primary");
  EXPECT_EQ(t.header["collector"], "cupti");
  EXPECT_EQ(t.header["cupti_version"], GetParam());
  EXPECT_EQ(t.header["cupti_multi_subscriber"], Multi());
  EXPECT_EQ(t.status["tool_state"]["message"].get<std::string>().find("multi-subscriber") != std::string::npos,
            Multi());
  EXPECT_EQ(t.header["cuda_driver_version"], 13000);
  EXPECT_EQ(t.header["config"]["graph_mitigation"], true);
  EXPECT_EQ(t.status["tool_state"]["state"], "collecting");
  ASSERT_EQ(t.status["devices"].size(), 1u);
  EXPECT_EQ(t.status["devices"][0]["name"], "Fake H200 #0");
  EXPECT_EQ(t.status["devices"][0]["sm_count"], 132);
  EXPECT_EQ(t.status["devices"][0]["compute_capability"], "9.0");
  EXPECT_EQ(t.status["devices"][0]["uuid"], "GPU-00102030-4050-6070-8090-a0b0c0d0e0f0");

  // Mitigation: kernel + memcpy + memset activity, API callbacks for launches and copies only.
  EXPECT_EQ(r.fake_state["concurrent_kernel"], 1);
  EXPECT_EQ(r.fake_state["memcpy"], 1);
  EXPECT_EQ(r.fake_state["memset"], 1);
  EXPECT_EQ(r.fake_state["cb_launch"], 1);
  EXPECT_EQ(r.fake_state["cb_graph"], 1);
  EXPECT_EQ(r.fake_state["cb_memcpy"], 1);
  EXPECT_EQ(r.fake_state["cb_malloc"], 0);
  EXPECT_EQ(r.fake_state["cb_sync"], 0);
  EXPECT_EQ(r.fake_state["cb_graphexec"], 1);
  EXPECT_EQ(r.fake_state["pool_limit"], -1);

  ASSERT_EQ(t.launches.size(), 10u);
  ASSERT_EQ(t.kernels.size(), 10u);
  EXPECT_EQ(t.Counter("launches_seen"), 10u);
  EXPECT_EQ(t.Counter("kernel_records"), 10u);
  EXPECT_EQ(t.Counter("kernel_records_missing"), 0u);
  EXPECT_EQ(t.Counter("kernel_records_no_launch_key"), 0u);
  EXPECT_EQ(t.Counter("kernel_records_key_fallback"), 0u);
  EXPECT_EQ(t.Counter("memcpy_records"), 1u);
  EXPECT_EQ(t.Counter("memset_records"), 1u);
  EXPECT_EQ(t.Counter("nvtx_records"), 3u);
  EXPECT_EQ(t.Counter("api_records"), 12u);
  EXPECT_TRUE(t.HasCounter("cupti_dropped_records"));
  EXPECT_EQ(t.Counter("cupti_dropped_records"), 0u);
  ExpectKeysTied(t);

  // Keys: first launch outside ranges, then per "step#i": A#0, A#1, B#0.
  EXPECT_EQ(t.launches[0].key.path, 0u);
  EXPECT_EQ(t.launches[0].key.hash, ExpectedHash("", "_Z7kernelAPf", 0, 1, 32));
  for (int i = 0; i < 3; ++i) {
    const LaunchRecord* l = &t.launches[1 + 3 * i];
    std::string path = "step#" + std::to_string(i);
    EXPECT_EQ(t.S(l[0].key.path), path);
    EXPECT_EQ(l[0].key.ordinal, 0u);
    EXPECT_EQ(l[1].key.ordinal, 1u);
    EXPECT_EQ(l[2].key.ordinal, 0u);
    EXPECT_EQ(l[0].key.hash, ExpectedHash(path, "_Z7kernelAPf", 0, 4, 256));
    EXPECT_EQ(l[1].key.hash, ExpectedHash(path, "_Z7kernelAPf", 1, 4, 256));
    EXPECT_EQ(l[2].key.hash, ExpectedHash(path, "_Z7kernelBv", 0, 2, 64));
    EXPECT_EQ(t.S(l[2].kernel), "_Z7kernelBv");
    EXPECT_EQ(l[2].device, 0u);
    EXPECT_EQ(l[2].stream, 7u);
  }
  for (size_t i = 1; i < t.launches.size(); ++i) EXPECT_GT(t.launches[i].seq, t.launches[i - 1].seq);

  const KernelRecord& k = t.kernels[1];
  EXPECT_EQ(t.S(k.name), "_Z7kernelAPf");
  EXPECT_EQ(t.S(k.demangled), "kernelA(float*)");
  EXPECT_EQ(k.grid.x, 4u);
  EXPECT_EQ(k.block.x, 256u);
  EXPECT_EQ(k.static_shared_bytes, 128u);
  EXPECT_EQ(k.dynamic_shared_bytes, 256u);
  EXPECT_EQ(k.registers_per_thread, 32u);
  EXPECT_EQ(k.end_ns - k.start_ns, 1000u);
  EXPECT_EQ(k.flags, 0u);
  EXPECT_EQ(t.S(t.kernels[0].demangled), "kernelA(float*)");

  ASSERT_EQ(t.nvtx.size(), 3u);
  for (const auto& n : t.nvtx) {
    EXPECT_EQ(t.S(n.name), "step");
    EXPECT_EQ(n.kind, static_cast<uint32_t>(NvtxKind::kPushPop));
    EXPECT_LE(n.start_ns, n.end_ns);
    EXPECT_GT(n.start_ns, 0u);
  }
  ASSERT_EQ(t.memcpys.size(), 1u);
  EXPECT_EQ(t.memcpys[0].bytes, 65536u);
  EXPECT_EQ(t.memcpys[0].copy_kind, static_cast<uint8_t>(CopyKind::kDtoD));
  ASSERT_EQ(t.memsets.size(), 1u);
  EXPECT_EQ(t.memsets[0].bytes, 4096u);

  std::map<std::string, int> api_names;
  for (const auto& a : t.apis) {
    api_names[t.S(a.name)]++;
    EXPECT_LE(a.start_ns, a.end_ns);
    EXPECT_GT(a.thread_id, 0u);
  }
  EXPECT_EQ(api_names["cudaLaunchKernel"], 7);
  EXPECT_EQ(api_names["cuLaunchKernel"], 3);
  EXPECT_EQ(api_names["cudaMemcpyAsync"], 1);
  EXPECT_EQ(api_names["cudaMemsetAsync"], 1);
}

TEST_P(CuptiE2E, LaunchApiVariantsCaptureAndFailures) {
  RunResult r = Run("apis");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Trace t = Read();
  // nested, runtime ex, driver ex, driver without symbolName, plain: 5 launches.
  // The failed one and the captured one never run.
  EXPECT_EQ(t.Counter("launches_seen"), 5u);
  EXPECT_EQ(t.Counter("launches_failed"), 1u);
  EXPECT_EQ(t.Counter("launches_during_capture"), 1u);
  EXPECT_EQ(t.Counter("kernel_records"), 5u);
  EXPECT_EQ(t.Counter("kernel_records_missing"), 0u);
  EXPECT_EQ(t.Counter("kernel_records_no_launch_key"), 0u);
  EXPECT_EQ(t.Counter("kernel_records_key_fallback"), 0u);
  ASSERT_EQ(t.launches.size(), 5u);
  ASSERT_EQ(t.kernels.size(), 5u);
  ExpectKeysTied(t);
  std::map<std::string, const LaunchRecord*> by_name;
  for (const auto& l : t.launches) by_name[t.S(l.kernel)] = &l;
  ASSERT_TRUE(by_name.count("_Z6nestedv"));
  ASSERT_TRUE(by_name.count("_Z7unnamedv"));  // found through cuFuncGetName
  ASSERT_TRUE(by_name.count("_Z5drexv"));
  EXPECT_EQ(by_name["_Z5drexv"]->cluster.x, 2u);
  EXPECT_EQ(by_name["_Z5drexv"]->grid.x, 6u);
  EXPECT_EQ(by_name["_Z5rtexv"]->grid.x, 5u);
  EXPECT_FALSE(by_name.count("_Z6failedv"));
  EXPECT_FALSE(by_name.count("_Z8capturedv"));
  // The nested launch's kernel record carries the inner driver call's id, yet is tied to the launch.
  for (const auto& k : t.kernels) {
    if (t.S(k.name) == "_Z6nestedv") {
      EXPECT_NE(k.correlation_id, by_name["_Z6nestedv"]->correlation_id);
    }
  }
  for (const auto& l : t.launches) EXPECT_EQ(t.S(l.key.path), "apis#0");
}

// TWINSCOPE_API_NESTED=0: the driver's cuLaunchKernel inside a runtime launch
// gets no API record; every other record, key and counter is the same as by
// default, and the trace's config says nested calls are not recorded.
TEST_P(CuptiE2E, NestedApiCallsCanGoWithoutTheirRecord) {
  auto api_names = [](const Trace& t) {
    std::map<std::string, int> n;
    for (const auto& a : t.apis) n[t.S(a.name)]++;
    return n;
  };
  RunResult full_run = Run("apis");
  ASSERT_EQ(full_run.exit_code, 0) << full_run.err;
  Trace full = Read();
  RunResult flat_run = Run("apis", {{"TWINSCOPE_API_NESTED", "0"}});
  ASSERT_EQ(flat_run.exit_code, 0) << flat_run.err;
  Trace flat = Read();

  std::map<std::string, int> want = api_names(full);
  ASSERT_EQ(want["cuLaunchKernel"], 2);  // the nested one and a driver launch of its own
  want["cuLaunchKernel"] -= 1;
  EXPECT_EQ(api_names(flat), want);
  for (const auto& a : flat.apis) EXPECT_LE(a.start_ns, a.end_ns);
  // The outer call's record spans the inner call's time: it is still there, with its own times.
  ASSERT_EQ(flat.launches.size(), full.launches.size());
  for (size_t i = 0; i < full.launches.size(); ++i) {
    EXPECT_EQ(flat.S(flat.launches[i].kernel), full.S(full.launches[i].kernel));
    EXPECT_EQ(flat.S(flat.launches[i].key.path), full.S(full.launches[i].key.path));
    EXPECT_EQ(flat.launches[i].key.ordinal, full.launches[i].key.ordinal);
    EXPECT_EQ(flat.launches[i].key.hash, full.launches[i].key.hash);
  }
  ExpectKeysTied(flat);
  for (const char* c : {"launches_seen", "launches_failed", "launches_during_capture", "kernel_records",
                        "kernel_records_missing", "kernel_records_no_launch_key", "kernel_records_key_fallback"})
    EXPECT_EQ(flat.Counter(c), full.Counter(c)) << c;
  EXPECT_EQ(full.header["config"].value("api_records_of_nested_calls", false), true);
  EXPECT_EQ(flat.header["config"].value("api_records_of_nested_calls", true), false);
}

// The benchmarks' levels (bench_kernels --levels): with TWINSCOPE_BENCH_LEVELS=1
// the program can switch the collector to nothing (0), activity only (1) and
// everything (2); the records show each level did what it says, and the
// kernels traced without their launch are counted. Without the variable the
// switch does nothing.
TEST_P(CuptiE2E, BenchLevelsSwitchCallbacksAndActivityOnlyWhenAsked) {
  for (bool enabled : {true, false}) {
    SCOPED_TRACE(enabled ? "TWINSCOPE_BENCH_LEVELS=1" : "unset");
    std::map<std::string, std::string> env;
    if (enabled) env["TWINSCOPE_BENCH_LEVELS"] = "1";
    RunResult r = Run("bench_levels", env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string want = enabled ? "LEVEL 2 -> 0\nLEVEL 1 -> 0\nLEVEL 0 -> 0\nLEVEL 2 -> 0\nLEVEL 9 -> -1\n"
                                     : "LEVEL 2 -> -1\nLEVEL 1 -> -1\nLEVEL 0 -> -1\nLEVEL 2 -> -1\nLEVEL 9 -> -1\n";
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
    Trace t = Read();
    std::map<std::string, int> kernels, launches, apis;
    for (const auto& k : t.kernels) kernels[t.S(k.name)]++;
    for (const auto& l : t.launches) launches[t.S(l.kernel)]++;
    EXPECT_EQ(kernels["_Z2l2v"], 3);
    EXPECT_EQ(kernels["_Z3l2bv"], 2);
    EXPECT_EQ(kernels["_Z2l1v"], 4) << "level 1 keeps kernel activity";
    EXPECT_EQ(kernels["_Z2l0v"], enabled ? 0 : 5) << "level 0 disables kernel activity";
    EXPECT_EQ(launches["_Z2l2v"], 3);
    EXPECT_EQ(launches["_Z3l2bv"], 2);
    EXPECT_EQ(launches["_Z2l1v"], enabled ? 0 : 4) << "level 1 disables the API callbacks";
    EXPECT_EQ(launches["_Z2l0v"], enabled ? 0 : 5);
    EXPECT_EQ(t.apis.size(), enabled ? 5u : 14u);
    EXPECT_EQ(t.Counter("launches_seen"), enabled ? 5u : 14u);
    EXPECT_EQ(t.Counter("kernel_records"), enabled ? 9u : 14u);
    EXPECT_EQ(t.Counter("kernel_records_no_launch_key"), enabled ? 4u : 0u);
  }
}

// Stream ids come from CUPTI once per stream and thread, not per launch, and a
// destroyed stream's handle, reused by the driver for a new stream, gets the
// new stream's id.
TEST_P(CuptiE2E, StreamIdsAreAskedOncePerStreamAndFollowHandleReuse) {
  RunResult r = Run("streams");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_NE(r.out.find("SAME_HANDLE 1"), std::string::npos) << r.out;
  Trace t = Read();
  ASSERT_EQ(t.launches.size(), 10u);
  std::map<std::string, std::set<uint32_t>> streams;
  for (const auto& l : t.launches) streams[t.S(l.kernel)].insert(l.stream);
  ASSERT_EQ(streams["_Z2k1v"].size(), 1u);
  ASSERT_EQ(streams["_Z2k3v"].size(), 1u);
  EXPECT_NE(*streams["_Z2k1v"].begin(), *streams["_Z2k3v"].begin()) << "a reused handle kept the old stream's id";
  EXPECT_NE(*streams["_Z2k1v"].begin(), *streams["_Z2k2v"].begin());
  EXPECT_EQ(*streams["_Z2k0v"].begin(), 7u);  // the fake's default stream
  // Kernel records (from the fake's activity) agree with the launch records.
  for (const auto& k : t.kernels) EXPECT_EQ(streams[t.S(k.name)].count(k.stream), 1u) << t.S(k.name);
  // s1, s2, default, s3: four queries for ten launches.
  EXPECT_NE(r.out.find("STREAM_ID_CALLS 4"), std::string::npos) << r.out;
}

TEST_P(CuptiE2E, GraphLaunchesKeyEveryKernelNode) {
  RunResult r = Run("graph");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Trace t = Read();
  // 5 launches of a graph with 3 kernel nodes (one in a child graph); the
  // launch into a capturing stream does not run.
  EXPECT_EQ(t.Counter("graph_launches"), 5u);
  EXPECT_EQ(t.Counter("graph_execs_instantiated"), 2u);
  EXPECT_EQ(t.Counter("graph_launches_unknown_exec"), 0u);
  EXPECT_EQ(t.Counter("launches_during_capture"), 1u);
  EXPECT_EQ(t.Counter("launches_seen"), 15u);
  EXPECT_EQ(t.Counter("kernel_records"), 15u);
  EXPECT_EQ(t.Counter("kernel_records_missing"), 0u);
  EXPECT_EQ(t.Counter("kernel_records_no_launch_key"), 0u);
  // The exec instantiated without GRAPHNODE_CLONED callbacks: tied by name.
  EXPECT_EQ(t.Counter("kernel_records_key_fallback"), 3u);
  EXPECT_EQ(t.Counter("memcpy_records"), 5u);
  EXPECT_EQ(t.Counter("memset_records"), 5u);
  ASSERT_EQ(t.launches.size(), 15u);
  ASSERT_EQ(t.kernels.size(), 15u);
  ExpectKeysTied(t);

  for (const auto& l : t.launches) {
    EXPECT_EQ(l.flags & kFlagGraph, kFlagGraph);
    EXPECT_NE(l.graph_exec_id, 0u);
  }
  for (const auto& k : t.kernels) {
    EXPECT_EQ(k.flags & kFlagGraph, kFlagGraph);
    EXPECT_NE(k.graph_node_id, 0u);
  }
  // Keys in node order: A(8) ordinal 0, A(16) ordinal 1, C ordinal 0, per step range.
  for (int i = 0; i < 3; ++i) {
    const LaunchRecord* l = &t.launches[3 * i];
    std::string path = "step#" + std::to_string(i);
    EXPECT_EQ(l[0].key.hash, ExpectedHash(path, "_Z7kernelAPf", 0, 8, 128));
    EXPECT_EQ(l[1].key.hash, ExpectedHash(path, "_Z7kernelAPf", 1, 16, 128));
    EXPECT_EQ(l[2].key.hash, ExpectedHash(path, "_Z7kernelCv", 0, 2, 64));
    EXPECT_EQ(l[0].correlation_id, l[2].correlation_id);
  }
  int fallback = 0;
  for (const auto& k : t.kernels)
    if (k.flags & kFlagKeyFallback) {
      fallback++;
      EXPECT_EQ(t.S(k.key.path), "noclone#0");
    }
  EXPECT_EQ(fallback, 3);
  for (const auto& m : t.memcpys) EXPECT_EQ(m.flags & kFlagGraph, kFlagGraph);
}

TEST_P(CuptiE2E, Seed001KernelsOnlyLossIsCountedNotSilent) {
  RunResult r = Run("seed001", {{"TWINSCOPE_KERNELS_ONLY", "1"}, {"TWINSCOPE_DEVICE_BUFFER_POOL_LIMIT", "8"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.fake_state["memcpy"], 0);
  EXPECT_EQ(r.fake_state["memset"], 0);
  EXPECT_EQ(r.fake_state["pool_limit"], 8);
  Trace t = Read();
  EXPECT_EQ(t.header["config"]["kernels_only"], true);
  EXPECT_EQ(t.Counter("launches_seen"), 20u);
  if (Multi()) {  // CUPTI 13.5 fixed the leak (FACTS.md): nothing lost even without the mitigation
    EXPECT_EQ(t.Counter("kernel_records"), 20u);
    EXPECT_EQ(t.Counter("kernel_records_missing"), 0u);
    return;
  }
  EXPECT_EQ(t.Counter("kernel_records"), 5u);
  EXPECT_EQ(t.Counter("kernel_records_missing"), 15u);
  EXPECT_EQ(t.Counter("cupti_dropped_records"), 0u);  // CUPTI says nothing: only our count shows it
  EXPECT_EQ(t.Counter("kernel_records_invalid_timestamp"), 0u);
  EXPECT_EQ(t.Counter("memcpy_records"), 0u);
  EXPECT_NE(r.err.find("15 of 20 kernel launches got no kernel record"), std::string::npos) << r.err;
}

TEST_P(CuptiE2E, Seed001MitigationDeliversEveryRecord) {
  RunResult r = Run("seed001", {{"TWINSCOPE_DEVICE_BUFFER_POOL_LIMIT", "8"}, {"TWINSCOPE_DEVICE_BUFFER_SIZE_MB", "4"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.fake_state["memcpy"], 1);
  EXPECT_EQ(r.fake_state["memset"], 1);
  EXPECT_EQ(r.fake_state["pool_limit"], 8);
  EXPECT_EQ(r.fake_state["device_buffer_size"], 4 << 20);
  Trace t = Read();
  EXPECT_EQ(t.Counter("launches_seen"), 20u);
  EXPECT_EQ(t.Counter("kernel_records"), 20u);
  EXPECT_EQ(t.Counter("kernel_records_missing"), 0u);
  EXPECT_EQ(t.Counter("memcpy_records"), 20u);
  ExpectKeysTied(t);
}

TEST_P(CuptiE2E, InvalidTimestampsAreFlaggedAndCounted) {
  RunResult r = Run("invalid");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Trace t = Read();
  ASSERT_EQ(t.kernels.size(), 12u);
  EXPECT_EQ(t.Counter("kernel_records_invalid_timestamp"), 4u);
  int flagged = 0;
  for (const auto& k : t.kernels) {
    bool invalid = k.start_ns == 0 || k.end_ns == 0 || k.end_ns < k.start_ns;
    EXPECT_EQ(invalid, (k.flags & kFlagInvalidTimestamp) != 0);
    flagged += invalid;
  }
  EXPECT_EQ(flagged, 4);
  EXPECT_EQ(t.Counter("kernel_records_missing"), 0u);
  ExpectKeysTied(t);
}

TEST_P(CuptiE2E, CuptiReportedDropsAreCounted) {
  RunResult r = Run("drops");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Trace t = Read();
  EXPECT_EQ(t.Counter("cupti_dropped_records"), 7u);
  EXPECT_EQ(t.Counter("kernel_records"), 4u);
}

TEST_P(CuptiE2E, SilentlyMissingRecordsShowAsMissing) {
  RunResult r = Run("lose");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Trace t = Read();
  EXPECT_EQ(t.Counter("launches_seen"), 5u);
  EXPECT_EQ(t.Counter("kernel_records"), 3u);
  EXPECT_EQ(t.Counter("kernel_records_missing"), 2u);
  EXPECT_EQ(t.Counter("cupti_dropped_records"), 0u);
  // Launch keys of the lost records stay pending (bounded), never misassigned.
  EXPECT_EQ(t.Counter("kernel_records_no_launch_key"), 0u);
  ExpectKeysTied(t);
}

TEST_P(CuptiE2E, PendingLaunchesAreBounded) {
  RunResult r = Run("evict", {{"TWINSCOPE_MAX_PENDING_LAUNCHES", "4"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Trace t = Read();
  EXPECT_EQ(t.Counter("launches_seen"), 10u);
  EXPECT_EQ(t.Counter("kernel_records"), 10u);
  EXPECT_EQ(t.Counter("pending_launch_keys_evicted"), 6u);
  EXPECT_EQ(t.Counter("kernel_records_no_launch_key"), 6u);
  int no_key = 0;
  for (const auto& k : t.kernels) no_key += (k.flags & kFlagNoLaunchKey) != 0;
  EXPECT_EQ(no_key, 6);
}

TEST_P(CuptiE2E, RecordsStillInCuptiAtExitAreFlushed) {
  RunResult r = Run("unflushed");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Trace t = Read();
  EXPECT_EQ(t.report.end, ReadEnd::kComplete);
  EXPECT_EQ(t.Counter("kernel_records"), 6u);
  EXPECT_EQ(t.kernels.size(), 6u);
}

// Launches from threads that then exit: every launch keeps its thread, range
// path and record; a launch in a thread's ring is never lost when the thread
// goes away.
TEST_P(CuptiE2E, LaunchesFromExitedThreadsAreAllRecorded) {
  RunResult r = Run("threads");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Trace t = Read();
  EXPECT_EQ(t.Counter("launches_seen"), 201u);
  EXPECT_EQ(t.Counter("kernel_records"), 201u);
  EXPECT_EQ(t.Counter("kernel_records_no_launch_key"), 0u);
  ASSERT_EQ(t.launches.size(), 201u);
  ExpectKeysTied(t);
  std::map<std::string, std::set<uint64_t>> threads_by_path;
  std::map<std::string, uint32_t> count_by_path;
  for (const auto& l : t.launches) {
    threads_by_path[t.S(l.key.path)].insert(l.thread_id);
    EXPECT_EQ(l.key.ordinal, count_by_path[t.S(l.key.path)]++) << t.S(l.key.path);
  }
  ASSERT_EQ(threads_by_path.size(), 5u);
  for (int w = 0; w < 4; ++w) {
    const std::string path = "worker" + std::to_string(w) + "#0";
    EXPECT_EQ(threads_by_path[path].size(), 1u) << path;
    EXPECT_EQ(count_by_path[path], 50u) << path;
  }
  EXPECT_EQ(count_by_path["main#0"], 1u);
  std::set<uint64_t> all;
  for (const auto& [p, ids] : threads_by_path) all.insert(ids.begin(), ids.end());
  EXPECT_EQ(all.size(), 5u) << "one thread id per thread";
}

// A launch made after the main thread's thread_local destructors ran (from an
// atexit handler) is still recorded and keyed, with the empty path of a
// thread whose ranges are gone.
TEST_P(CuptiE2E, LaunchAfterThreadLocalDestructorsIsRecorded) {
  RunResult r = Run("late");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Trace t = Read();
  EXPECT_EQ(t.report.end, ReadEnd::kComplete) << t.report.message;
  EXPECT_EQ(t.Counter("launches_seen"), 2u);
  EXPECT_EQ(t.Counter("kernel_records"), 2u);
  ASSERT_EQ(t.launches.size(), 2u);
  ExpectKeysTied(t);
  EXPECT_EQ(t.S(t.launches[1].kernel), "_Z4latev");
  EXPECT_EQ(t.launches[1].key.hash, ExpectedHash("", "_Z4latev", 0, 3, 32));
}

TEST_P(CuptiE2E, HeldSeatLeavesProgramRunningAndSaysWhy) {
  RunResult r = Run("held");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("DRIVER_DONE held"), std::string::npos);
  EXPECT_NE(r.err.find(Multi() ? "another CUPTI client holds CUPTI in this process in single-subscriber mode"
                               : "another CUPTI-based tool (Nsight Systems/Compute, a profiler, or the Compute "
                                 "Sanitizer) holds CUPTI in this process"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("twinscope twin"), std::string::npos);
  Trace t = Read();
  EXPECT_EQ(t.status["tool_state"]["state"], "cupti_held_by_other_tool");
  EXPECT_EQ(t.status["tool_state"]["cupti_result"], 39);
  EXPECT_EQ(t.status["tool_state"]["other_subscriber"], "CUPTI for Nsight Systems (fake)");
  EXPECT_EQ(t.Counter("launches_seen"), 0u);
  EXPECT_EQ(t.kernels.size(), 0u);
  EXPECT_EQ(r.fake_state["concurrent_kernel"], 0);
}

TEST_P(CuptiE2E, MissingCuptiLeavesProgramRunningAndSaysWhy) {
  RunResult r = Run("plain", {{"TWINSCOPE_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("DRIVER_DONE plain"), std::string::npos);
  EXPECT_NE(r.err.find("could not load CUPTI"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/libcupti.so.13"), std::string::npos) << r.err;
  Trace t = Read();
  EXPECT_EQ(t.status["tool_state"]["state"], "cupti_unavailable");
  EXPECT_EQ(t.kernels.size(), 0u);
  // NVTX still works without CUPTI.
  EXPECT_EQ(t.nvtx.size(), 3u);
}

TEST_P(CuptiE2E, SigtermFlushesThenKillsAsBefore) {
  RunResult r = Run("sigterm");
  EXPECT_EQ(r.signal, SIGTERM) << "exit " << r.exit_code << " " << r.err;
  EXPECT_EQ(r.out.find("NOT REACHED"), std::string::npos);
  Trace t = Read();
  EXPECT_EQ(t.report.end, ReadEnd::kComplete) << t.report.message;
  EXPECT_EQ(t.kernels.size(), 4u);
  EXPECT_EQ(t.Counter("launches_seen"), 4u);
}

TEST_P(CuptiE2E, SigtermChainsToTheApplicationsHandler) {
  RunResult r = Run("sigterm_handler");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("APP_HANDLER_CALLED"), std::string::npos) << r.out;
  Trace t = Read();
  EXPECT_EQ(t.report.end, ReadEnd::kComplete);
  EXPECT_EQ(t.kernels.size(), 5u);
}

TEST_P(CuptiE2E, PeriodicFlushSurvivesSigkill) {
  RunResult r = Run("periodic", {{"TWINSCOPE_FLUSH_MS", "20"}});
  EXPECT_EQ(r.signal, SIGKILL);
  Trace t = Read();
  EXPECT_EQ(t.report.end, ReadEnd::kNoSummary) << t.report.message;
  EXPECT_EQ(t.kernels.size(), 3u);
  EXPECT_EQ(t.Counter("kernel_records"), 3u);
}

TEST_P(CuptiE2E, KindsSelectWhatIsWrittenNotWhatIsCounted) {
  RunResult r = Run("plain", {{"TWINSCOPE_KINDS", "kernel,bogus"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("TWINSCOPE_KINDS=kernel,bogus: unknown item bogus ignored"), std::string::npos) << r.err;
  // The mitigation does not depend on what is written.
  EXPECT_EQ(r.fake_state["memcpy"], 1);
  Trace t = Read();
  EXPECT_EQ(t.kernels.size(), 10u);
  EXPECT_EQ(t.launches.size(), 10u);  // launch records carry the keys: always written
  EXPECT_EQ(t.apis.size(), 0u);
  EXPECT_EQ(t.memcpys.size(), 0u);
  EXPECT_EQ(t.nvtx.size(), 0u);
  EXPECT_EQ(t.Counter("memcpy_records"), 1u);
  EXPECT_EQ(t.Counter("launches_seen"), 10u);
  ExpectKeysTied(t);  // ranges are still tracked for keys
}

// The settings policy (base/settings.h) in the real collector: a bad value is warned about once, naming the
// variable, the value, the range and the default, which is used; tracing goes on and the header records the
// settings in effect and the value rejected. A misspelt variable is named with the closest known one.
TEST_P(CuptiE2E, BadSettingWarnsUsesTheDefaultAndTheHeaderSaysSo) {
  RunResult r = Run("plain", {{"TWINSCOPE_BUFFER_SIZE_KB", "12"}, {"TWINSCOPE_FLUSHMS", "20"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string bad = "TWINSCOPE_BUFFER_SIZE_KB=12 is not an integer in 64..1048576; using the default (8192)";
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(bad), r.err.rfind(bad)) << "warned more than once: " << r.err;
  EXPECT_NE(r.err.find("TWINSCOPE_FLUSHMS is not a twinscope setting and is ignored; did you mean "
                       "TWINSCOPE_FLUSH_MS?"),
            std::string::npos)
      << r.err;
  Trace t = Read();
  EXPECT_EQ(t.kernels.size(), 10u);
  const nlohmann::json& config = t.header["config"];
  EXPECT_EQ(config["host_buffer_bytes"], 8192u << 10);
  EXPECT_EQ(config["settings"]["TWINSCOPE_BUFFER_SIZE_KB"], 8192);
  EXPECT_EQ(config["settings"]["rejected"]["TWINSCOPE_BUFFER_SIZE_KB"], "12");
  EXPECT_EQ(config["settings"]["TWINSCOPE_FLUSH_MS"], 500);
  EXPECT_FALSE(config["settings"].contains("TWINSCOPE_BLOCKS_RING")) << "the block probe's";
}

TEST_P(CuptiE2E, ForkedChildNeitherHangsNorTouchesTheTrace) {
  RunResult r = Run("fork");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("CHILD_EXIT 0"), std::string::npos) << r.out;
  Trace t = Read();
  EXPECT_EQ(t.report.end, ReadEnd::kComplete) << t.report.message;
  EXPECT_EQ(t.Counter("launches_seen"), 3u);
  EXPECT_EQ(t.kernels.size(), 3u);
  for (const auto& l : t.launches) EXPECT_EQ(t.S(l.kernel), "_Z1kv");
}

TEST_P(CuptiE2E, UnwritableOutputLeavesProgramRunning) {
  trace_path_ = "/nonexistent-dir/x/trace.tsc";
  RunResult r = Run("plain");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("cannot write the trace"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("DRIVER_DONE plain"), std::string::npos);
}

// A program that is a CUPTI client of its own, beside the collector and
// without the guard (what `record` adds): on 13.5 a multi-subscriber (v2)
// client and the collector both get everything; a legacy (v1) client after
// the collector is refused (39 / 14) and the collector is untouched; on 13.0
// the legacy client's cuptiActivityRegisterCallbacks takes the collector's
// buffers, the hazard the guard's floor prevents.
TEST_P(CuptiE2E, OwnV2ClientStacksBesideTheCollectorOn135) {
  RunResult r = Run("own_v2_client");
  if (!Multi()) {  // 13.0 has no per-subscriber calls: the program stops before launching (no trace left)
    EXPECT_EQ(r.exit_code, 5);
    EXPECT_NE(r.out.find("OWN_V2 missing"), std::string::npos) << r.out;
    return;
  }
  Trace t = Read();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("OWN cuptiSubscribe_v2 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OWN_RECORDS 6 OWN_CALLBACKS 6"), std::string::npos) << r.out;
  EXPECT_EQ(t.Counter("launches_seen"), 8u);
  EXPECT_EQ(t.Counter("kernel_records"), 8u);
  EXPECT_EQ(t.kernels.size(), 8u);
  ExpectKeysTied(t);
}

TEST_P(CuptiE2E, OwnLegacyClientWithoutTheGuard) {
  RunResult r = Run("own_client", {{"OWN_NO_FINALIZE", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Trace t = Read();
  EXPECT_NE(r.out.find("OWN cuptiSubscribe 39"), std::string::npos) << r.out;
  EXPECT_EQ(t.Counter("launches_seen"), 8u);
  if (Multi()) {
    EXPECT_NE(r.out.find("OWN cuptiActivityRegisterCallbacks 14"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("OWN cuptiActivityEnable 14"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("OWN_RECORDS 0 OWN_CALLBACKS 0"), std::string::npos) << r.out;
    EXPECT_EQ(t.Counter("kernel_records"), 8u);
    ExpectKeysTied(t);
  } else {
    EXPECT_NE(r.out.find("OWN cuptiActivityRegisterCallbacks 0"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("OWN_RECORDS 6"), std::string::npos) << r.out;
    EXPECT_EQ(t.Counter("kernel_records"), 0u);
    EXPECT_EQ(t.Counter("kernel_records_missing"), 8u);
  }
}

// A legacy client that subscribed before the collector keeps CUPTI (13.0 and
// 13.5 alike: the collector gets 39 and says why); under `record` the guard
// turns that client into a multi-subscriber one (tests/cli).
TEST_P(CuptiE2E, OwnLegacyClientBeforeTheCollectorKeepsCupti) {
  RunResult r = Run("own_first", {{"OWN_NO_FINALIZE", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("OWN cuptiSubscribe 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OWN_RECORDS 6 OWN_CALLBACKS 6"), std::string::npos) << r.out;
  Trace t = Read();
  EXPECT_EQ(t.status["tool_state"]["state"], "cupti_held_by_other_tool");
  EXPECT_EQ(t.status["tool_state"]["cupti_result"], 39);
  EXPECT_EQ(t.status["tool_state"]["other_subscriber"], "legacy CUPTI client");
  if (Multi()) {
    EXPECT_NE(r.err.find("a profiler that subscribed before twinscope with the legacy API"), std::string::npos)
        << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Fake, CuptiE2E, ::testing::Values(uint32_t{CUPTI_API_VERSION}, uint32_t{130500}),
                         [](const ::testing::TestParamInfo<uint32_t>& info) {
                           return info.param >= 130500 ? "Cupti135" : "Cupti130";
                         });

}  // namespace
}  // namespace twinscope
