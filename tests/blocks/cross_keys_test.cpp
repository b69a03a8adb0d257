// The same scripted program (same NVTX ranges, launches and streams) run once
// under the block probe over the fake Sanitizer and once under the CUPTI
// collector over the fake CUPTI: the launch keys (path, kernel, ordinal, grid,
// block, hash) must be identical, launch for launch, so `twinscope join` can
// match the two processes exactly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "launchkey/launch_key.h"
#include "twinscope/trace_reader.h"

extern char** environ;

namespace twinscope {
namespace {

const char kTarget[] = "_ZN4vllm30reshape_and_cache_flash_kernelIffEEvPKT_PT0_PKlii";
const char kGemm[] = "_Z16gemm_like_kernelPKfS0_Pfi";

using Key =
    std::tuple<std::string, std::string, uint32_t, uint64_t, uint32_t, uint32_t>;  // kernel, path, ord, hash, gx, bx

struct Sink : RecordSink {
  std::vector<LaunchRecord> launches;
  void OnLaunch(const LaunchRecord& r) override { launches.push_back(r); }
};

std::string Script() {
  std::string t = kTarget, g = kGemm;
  std::string s = std::string("module target ") + TWINSCOPE_TEST_TARGET_CUBIN + "\nmodule other " +
                  TWINSCOPE_TEST_OTHER_CUBIN + "\nstream s1\n";
  s += "launch target " + t + " 1000,1,1 512,1,1\n";
  s += "push prefill\nlaunch other " + g + " 64,1,1 256,1,1\nlaunch target " + t + " 7,1,1 512,1,1\n";
  s += "launch target " + t + " 7,1,1 512,1,1 stream=s1\n";
  s += "push attn\nlaunch target neighbour_kernel 2,1,1 32,1,1 repeat=3\npop\npop\n";
  for (int step = 0; step < 3; ++step) {
    s += "push decode\n";
    s += "launch target " + t + " 12,1,1 512,1,1\n";
    s += "launch other rms_norm_kernel 16,1,1 128,1,1\n";
    s += "push attn\nlaunch target " + t + " 12,1,1 512,1,1 repeat=2\npop\n";
    s += "launch target " + t + " 12,1,1 256,1,1\n";  // other block shape: its own key
    s += "pop\nsync\n";
  }
  s += "launch other rms_norm_kernel 16,1,1 128,1,1\nsync\n";
  return s;
}

std::vector<Key> RunAndReadKeys(const std::string& name, const char* app, const char* lib,
                                std::map<std::string, std::string> env) {
  const std::string dir = std::string(TWINSCOPE_TEST_WORKDIR) + "/" + name;
  mkdir(TWINSCOPE_TEST_WORKDIR, 0755);
  mkdir(dir.c_str(), 0755);
  const std::string script = dir + "/script.txt", trace = dir + "/trace.tsc", err = dir + "/stderr.txt";
  std::ofstream(script) << Script();
  unlink(trace.c_str());
  env["CUDA_INJECTION64_PATH"] = lib;
  env["NVTX_INJECTION64_PATH"] = lib;
  env["TWINSCOPE_OUTPUT"] = trace;
  std::string ld = TWINSCOPE_TEST_FAKE_CUPTI_DIR;
  if (const char* old = getenv("LD_LIBRARY_PATH")) ld += std::string(":") + old;
  env["LD_LIBRARY_PATH"] = ld;
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e, key = kv.substr(0, kv.find('='));
    if (!env.count(key) && key.rfind("TWINSCOPE_", 0) != 0) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string app_s = app;
  std::vector<char*> argv = {app_s.data(), const_cast<char*>(script.c_str()), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, app, &fa, nullptr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream ef(err);
  std::string err_text((std::istreambuf_iterator<char>(ef)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << name << ": " << err_text;

  std::vector<Key> keys;
  std::string error;
  auto reader = TraceReader::Open(trace, &error);
  if (!reader) {
    ADD_FAILURE() << name << ": " << error << "\n" << err_text;
    return keys;
  }
  Sink sink;
  ReadReport rep = reader->Read(sink);
  EXPECT_TRUE(rep.ok()) << rep.message;
  std::sort(sink.launches.begin(), sink.launches.end(),
            [](const LaunchRecord& a, const LaunchRecord& b) { return a.seq < b.seq; });
  for (const LaunchRecord& l : sink.launches)
    keys.emplace_back(std::string(reader->String(l.kernel)), l.key.path ? std::string(reader->String(l.key.path)) : "",
                      l.key.ordinal, l.key.hash, l.grid.x, l.block.x);
  return keys;
}

TEST(CrossKeys, SameProgramGivesIdenticalKeysUnderBothCollectors) {
  std::vector<Key> shadow = RunAndReadKeys("shadow_all", TWINSCOPE_TEST_FAKESAN_APP, TWINSCOPE_TEST_BLOCKS_LIB,
                                           {{"TWINSCOPE_KERNELS", "re:."}});
  std::vector<Key> primary = RunAndReadKeys("primary", TWINSCOPE_TEST_CUPTI_APP, TWINSCOPE_TEST_CUPTI_LIB, {});
  // 1 + 3 + 3 + 3 * 5 + 1 launches.
  ASSERT_EQ(shadow.size(), 23u);
  ASSERT_EQ(primary.size(), shadow.size());
  EXPECT_EQ(shadow, primary) << "the two collectors disagree on launch keys";
  // The scenario is not trivial: nested paths, ordinals above 0, keys distinct within a range.
  std::set<std::string> paths;
  uint32_t max_ordinal = 0;
  for (const Key& k : shadow) {
    paths.insert(std::get<1>(k));
    max_ordinal = std::max(max_ordinal, std::get<2>(k));
    EXPECT_EQ(std::get<3>(k), LaunchKeyHash(std::get<1>(k), std::get<0>(k), std::get<2>(k), Dim3{std::get<4>(k), 1, 1},
                                            Dim3{std::get<5>(k), 1, 1}));
  }
  EXPECT_TRUE(paths.count("prefill#0/attn#0"));
  EXPECT_TRUE(paths.count("decode#2/attn#0"));
  EXPECT_TRUE(paths.count(""));
  EXPECT_EQ(max_ordinal, 2u);
}

TEST(CrossKeys, SampledShadowKeysAreAllFoundInThePrimary) {
  std::vector<Key> shadow = RunAndReadKeys("shadow_sampled", TWINSCOPE_TEST_FAKESAN_APP, TWINSCOPE_TEST_BLOCKS_LIB,
                                           {{"TWINSCOPE_KERNELS", "reshape_and_cache"}, {"TWINSCOPE_EVERY", "2"}});
  std::vector<Key> primary =
      RunAndReadKeys("primary_for_sampled", TWINSCOPE_TEST_CUPTI_APP, TWINSCOPE_TEST_CUPTI_LIB, {});
  // 15 target launches, every 2nd traced.
  ASSERT_EQ(shadow.size(), 8u);
  std::multiset<Key> all(primary.begin(), primary.end());
  for (const Key& k : shadow) EXPECT_EQ(all.count(k), 1u) << std::get<0>(k) << " at " << std::get<1>(k);
}

}  // namespace
}  // namespace twinscope
