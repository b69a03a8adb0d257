// Configuration from the environment: defaults, values, and the settings policy (base/settings.h): a bad
// value is warned about and its default used; a bad pattern and contradicting settings stay errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <utility>

#include "base/env_names.h"
#include "base/settings.h"
#include "blocks/blocks_config.h"

namespace twinscope::blocks {
namespace {

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    for (const settings::Setting& s : settings::All()) unsetenv(s.name);
    settings::ResetWarningsForTest();
  }
  // ConfigFromEnv, with what it wrote on stderr.
  static StatusOr<BlocksConfig> Read(std::string* err) {
    testing::internal::CaptureStderr();
    auto c = ConfigFromEnv();
    *err = testing::internal::GetCapturedStderr();
    return c;
  }
};

TEST_F(ConfigTest, Defaults) {
  auto c = ConfigFromEnv();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->patterns.empty());
  EXPECT_EQ(c->sampling.every, 1u);
  EXPECT_EQ(c->sampling.max_launches, 0u);
  EXPECT_EQ(c->ring, 512u);
  EXPECT_EQ(c->max_device_bytes, 64ull << 20);
  EXPECT_NE(c->output.find("twinscope-blocks-"), std::string::npos);
}

TEST_F(ConfigTest, ReadsValues) {
  setenv(twinscope::env::kKernelPatterns, "reshape;re:^gemm", 1);
  setenv(twinscope::env::kEvery, "5", 1);
  setenv(twinscope::env::kMaxLaunches, "7", 1);
  setenv(twinscope::env::kOutput, "/tmp/x.tsc", 1);
  setenv(env::kRing, "8", 1);
  auto c = ConfigFromEnv();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->patterns.size(), 2u);
  EXPECT_EQ(c->sampling.every, 5u);
  EXPECT_EQ(c->sampling.max_launches, 7u);
  EXPECT_EQ(c->output, "/tmp/x.tsc");
  EXPECT_EQ(c->ring, 8u);
}

TEST_F(ConfigTest, BadNumbersWarnAndUseTheDefault) {
  setenv(twinscope::env::kEvery, "0", 1);
  setenv(env::kRing, "100000", 1);
  std::string err;
  auto c = Read(&err);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->sampling.every, 1u);
  EXPECT_EQ(c->ring, 512u);
  EXPECT_NE(err.find("TWINSCOPE_EVERY=0 is not an integer >= 1; using the default (1)"), std::string::npos) << err;
  EXPECT_NE(err.find("TWINSCOPE_BLOCKS_RING=100000 is not an integer in 1..65536; using the default (512)"),
            std::string::npos)
      << err;
}

TEST_F(ConfigTest, BadPatternIsAnErrorNamingTheVariable) {
  setenv(twinscope::env::kKernelPatterns, "re:([", 1);
  auto c = ConfigFromEnv();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("TWINSCOPE_KERNELS"), std::string::npos);
}

// Toggling is the default only where launches are sampled out.
TEST_F(ConfigTest, PatchModeDefaultsToToggleWhenSampling) {
  auto c = ConfigFromEnv();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->patch, PatchMode::kAlways);
  for (auto [name, value] : {std::pair{twinscope::env::kEvery, "10"}, std::pair{twinscope::env::kMaxLaunches, "3"},
                             std::pair{twinscope::env::kPerSecond, "2.5"}, std::pair{twinscope::env::kBudget, "5"}}) {
    Clear();
    setenv(name, value, 1);
    c = ConfigFromEnv();
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().message();
    EXPECT_EQ(c->patch, PatchMode::kToggle) << name;
  }
  EXPECT_DOUBLE_EQ(c->sampling.budget_pct, 5.0);
  Clear();
  setenv(twinscope::env::kPerSecond, "2.5", 1);
  setenv(twinscope::env::kBlocksPatch, "always", 1);
  c = ConfigFromEnv();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->patch, PatchMode::kAlways);
  EXPECT_DOUBLE_EQ(c->sampling.per_second, 2.5);
  setenv(twinscope::env::kEvery, "1", 1);
  setenv(twinscope::env::kBlocksPatch, "toggle", 1);
  c = ConfigFromEnv();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->patch, PatchMode::kToggle);
}

// Where toggle mode may toggle besides syncs: the ends of NULL-stream
// launches by default (an unpatch at the end of a launch on another stream
// hung the H200).
TEST_F(ConfigTest, ToggleAtValues) {
  auto c = ConfigFromEnv();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->toggle_at, ToggleAt::kDefaultStreamEnd);
  for (auto [value, want] : {std::pair{"end", ToggleAt::kEnd}, std::pair{"default", ToggleAt::kDefaultStreamEnd},
                             std::pair{"sync", ToggleAt::kSync}}) {
    setenv(env::kToggleAt, value, 1);
    c = ConfigFromEnv();
    ASSERT_TRUE(c.ok()) << value << ": " << c.status().message();
    EXPECT_EQ(c->toggle_at, want) << value;
  }
  setenv(env::kToggleAt, "launch", 1);
  std::string err;
  c = Read(&err);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->toggle_at, ToggleAt::kDefaultStreamEnd);
  EXPECT_NE(err.find("TWINSCOPE_BLOCKS_TOGGLE_AT=launch is not one of default, end, sync; using the default"),
            std::string::npos)
      << err;
}

TEST_F(ConfigTest, BadSamplingValuesWarnAndUseTheDefault) {
  setenv(twinscope::env::kPerSecond, "fast", 1);
  std::string err;
  auto c = Read(&err);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_DOUBLE_EQ(c->sampling.per_second, 0);
  EXPECT_NE(err.find("TWINSCOPE_PER_SECOND=fast is not a number >= 0"), std::string::npos) << err;
  Clear();
  setenv(twinscope::env::kBudget, "150", 1);
  c = Read(&err);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_DOUBLE_EQ(c->sampling.budget_pct, 0);
  EXPECT_NE(err.find("TWINSCOPE_BUDGET=150 is not a number in 0..100"), std::string::npos) << err;
  Clear();
  setenv(twinscope::env::kBlocksPatch, "sometimes", 1);
  setenv(twinscope::env::kEvery, "4", 1);
  c = Read(&err);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->patch, PatchMode::kToggle) << "the default when sampling";
  EXPECT_NE(err.find("TWINSCOPE_BLOCKS_PATCH=sometimes is not one of always, toggle"), std::string::npos) << err;
}

// Settings that contradict each other have no default to fall back on: the probe refuses and says why.
TEST_F(ConfigTest, BudgetWithPatchAlwaysIsAnError) {
  setenv(twinscope::env::kBudget, "5", 1);
  setenv(twinscope::env::kBlocksPatch, "always", 1);
  auto c = ConfigFromEnv();
  ASSERT_FALSE(c.ok()) << "a budget cannot be kept with modules patched for good";
  EXPECT_NE(c.status().message().find("TWINSCOPE_BLOCKS_PATCH=toggle"), std::string::npos);
}

TEST_F(ConfigTest, MisspeltVariableIsNamedWithTheClosest) {
  setenv("TWINSCOPE_BLOCK_NAIVE", "1", 1);
  std::string err;
  auto c = Read(&err);
  unsetenv("TWINSCOPE_BLOCK_NAIVE");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->naive);
  EXPECT_NE(err.find("TWINSCOPE_BLOCK_NAIVE is not a twinscope setting and is ignored; did you mean "
                     "TWINSCOPE_BLOCKS_NAIVE?"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace twinscope::blocks
