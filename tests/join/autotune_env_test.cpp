// The shared autotune caches `twin` gives both sides (src/twin/autotune_env.*):
// what is set, and that nothing the user set is overridden.
#include "twin/autotune_env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace twinscope::twin {
namespace {

std::string Dir() {
  auto d = std::filesystem::temp_directory_path() / ("twinscope_autotune_" + std::to_string(getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(d);
  return d.string();
}

std::map<std::string, std::string> AsMap(const AutotuneEnv& a) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : a.env) m[k] = v;
  return m;
}

TEST(AutotuneEnv, SetsAllThreeCachesUnderTheRunFolder) {
  const std::string dir = Dir();
  auto a = ShareAutotuneCaches(dir, [](const char*) -> const char* { return nullptr; });
  auto m = AsMap(a);
  EXPECT_EQ(m["XLA_FLAGS"], "--xla_gpu_per_fusion_autotune_cache_dir=" + dir + "/autotune-cache/xla");
  EXPECT_EQ(m["TORCHINDUCTOR_CACHE_DIR"], dir + "/autotune-cache/inductor");
  EXPECT_EQ(m["TRITON_CACHE_DIR"], dir + "/autotune-cache/triton");
  EXPECT_EQ(m["TRITON_CACHE_AUTOTUNING"], "1");
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/autotune-cache/xla"));
  EXPECT_EQ(a.json["set"].size(), 4u);
  EXPECT_EQ(a.json["warm_at_start"], false);
  EXPECT_NE(a.note.find("TRITON_CACHE_DIR=" + dir), std::string::npos) << a.note;
  std::vector<std::pair<std::string, std::string>> p = {{"A", "1"}}, s;
  nlohmann::json record;
  a.Apply(&p, &s, &record);
  EXPECT_EQ(p.size(), 5u);
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(record["dir"], dir + "/autotune-cache");
}

TEST(AutotuneEnv, NeverOverridesWhatTheUserSet) {
  const std::string dir = Dir();
  auto a = ShareAutotuneCaches(dir, [](const char* name) -> const char* {
    if (std::string(name) == "XLA_FLAGS") return "--xla_gpu_autotune_level=2";
    if (std::string(name) == "TRITON_CACHE_DIR") return "/mine/triton";
    return nullptr;
  });
  auto m = AsMap(a);
  EXPECT_EQ(m["XLA_FLAGS"],
            "--xla_gpu_autotune_level=2 --xla_gpu_per_fusion_autotune_cache_dir=" + dir + "/autotune-cache/xla")
      << "appended to the user's flags";
  EXPECT_EQ(m.count("TRITON_CACHE_DIR"), 0u);
  EXPECT_EQ(m["TORCHINDUCTOR_CACHE_DIR"], dir + "/autotune-cache/inductor");
  EXPECT_NE(a.note.find("kept the user's TRITON_CACHE_DIR"), std::string::npos) << a.note;

  auto b = ShareAutotuneCaches(dir, [](const char* name) -> const char* {
    return std::string(name) == "XLA_FLAGS" ? "--xla_gpu_per_fusion_autotune_cache_dir=/mine" : nullptr;
  });
  EXPECT_EQ(AsMap(b).count("XLA_FLAGS"), 0u) << "the flag is there already: XLA_FLAGS untouched";
  EXPECT_EQ(b.json["kept"][0], "XLA_FLAGS --xla_gpu_per_fusion_autotune_cache_dir");
}

// Triton keeps @triton.autotune's choices only in memory without TRITON_CACHE_AUTOTUNING=1: each twin
// then benchmarks on its own and may choose another config. Set, unless the user set it.
TEST(AutotuneEnv, TritonAutotuneChoicesAreCachedUnlessTheUserSaidOtherwise) {
  const std::string dir = Dir();
  auto a = ShareAutotuneCaches(dir, [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(AsMap(a)["TRITON_CACHE_AUTOTUNING"], "1");
  EXPECT_NE(a.note.find("TRITON_CACHE_AUTOTUNING=1"), std::string::npos) << a.note;
  auto b = ShareAutotuneCaches(dir, [](const char* name) -> const char* {
    return std::string(name) == "TRITON_CACHE_AUTOTUNING" ? "0" : nullptr;
  });
  EXPECT_EQ(AsMap(b).count("TRITON_CACHE_AUTOTUNING"), 0u);
  EXPECT_NE(b.note.find("kept the user's TRITON_CACHE_AUTOTUNING=0"), std::string::npos) << b.note;
}

// Both sides at once (--concurrent, --serve live): the primary may adopt the shadow's choice, and it is said.
TEST(AutotuneEnv, AtOnceSaysThePrimaryMayAdoptTheShadowsChoice) {
  const std::string dir = Dir();
  auto a = ShareAutotuneCaches(
      dir, [](const char*) -> const char* { return nullptr; }, /*at_once=*/true);
  EXPECT_NE(a.note.find("the primary may adopt a choice the shadow made"), std::string::npos) << a.note;
  EXPECT_EQ(a.json["at_once"], true);
  auto b = ShareAutotuneCaches(dir, [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(b.note.find("may adopt"), std::string::npos) << b.note;
}

// A rerun into the same -o DIR finds the caches filled: warm, in twin.json and in the note.
TEST(AutotuneEnv, CachesLeftByAnEarlierRunAreSaidWarm) {
  const std::string dir = Dir();
  auto cold = ShareAutotuneCaches(dir, [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(cold.json["warm_at_start"], false);
  EXPECT_EQ(cold.json["warm"]["triton"], false);
  std::ofstream(dir + "/autotune-cache/triton/choice.json") << "{}";  // what the first run's Triton wrote
  auto warm = ShareAutotuneCaches(dir, [](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(warm.json["warm_at_start"], true);
  EXPECT_EQ(warm.json["warm"]["triton"], true);
  EXPECT_EQ(warm.json["warm"]["xla"], false);
  EXPECT_NE(warm.note.find("WARM at the start"), std::string::npos) << warm.note;
  EXPECT_NE(warm.note.find("triton (" + dir + "/autotune-cache/triton)"), std::string::npos) << warm.note;
}

}  // namespace
}  // namespace twinscope::twin
