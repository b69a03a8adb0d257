// The settings table and its one policy (src/base/settings.h): defaults, a bad
// value warned about once and replaced by its default, lists, the closest name
// of a misspelt variable, the header's settings, and README.md's table.
#include "base/settings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "base/env_names.h"

namespace twinscope::settings {
namespace {

class SettingsTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    for (const Setting& s : All()) unsetenv(s.name);
    ResetWarningsForTest();
  }
};

TEST_F(SettingsTest, NamesAreUniqueAndConstantsComeFromTheTable) {
  std::set<std::string> names;
  for (const Setting& s : All()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_EQ(std::string(s.name).rfind("TWINSCOPE_", 0), 0u) << s.name;
    EXPECT_NE(*s.help, '\0') << s.name;
    EXPECT_NE(s.readers, 0u) << s.name;
  }
  EXPECT_STREQ(env::kFlushMs, "TWINSCOPE_FLUSH_MS");
  EXPECT_STREQ(env::kNaive, "TWINSCOPE_BLOCKS_NAIVE");
  EXPECT_EQ(Find(env::kBufferSizeKb)->type, Type::kInt);
  EXPECT_EQ(Find("TWINSCOPE_NOPE"), nullptr);
  EXPECT_THROW(Int("TWINSCOPE_NOPE"), std::logic_error);
}

// Every default parses under its own rules (a default outside the range is a sentinel: "CUPTI's").
TEST_F(SettingsTest, DefaultsAreValid) {
  for (const Setting& s : All()) {
    if (!*s.default_value || s.type == Type::kText) continue;
    const Parsed p = Parse(s, s.default_value);
    if (s.type == Type::kInt && std::string(s.default_value) == "-1") continue;
    EXPECT_EQ(p.warning, "") << s.name;
    EXPECT_EQ(p.text, s.default_value) << s.name;
  }
}

TEST_F(SettingsTest, UnsetGivesTheDefault) {
  EXPECT_EQ(Int(env::kBufferSizeKb), 8192);
  EXPECT_EQ(Int(env::kFlushMs), 500);
  EXPECT_EQ(Int(env::kDeviceBufferPoolLimit), -1);  // CUPTI's own
  EXPECT_TRUE(Flag(env::kApiNested));
  EXPECT_FALSE(Flag(env::kNaive));
  EXPECT_DOUBLE_EQ(Real(env::kBudget), 0);
  EXPECT_EQ(Choice(env::kToggleAt), "default");
  EXPECT_EQ(Choice(env::kBlocksPatch), "");
  EXPECT_EQ(List(env::kKinds), (std::vector<std::string>{"kernel", "memcpy", "memset", "api", "nvtx"}));
  EXPECT_TRUE(List(env::kCuptiSkip).empty());
  setenv(env::kFlushMs, "", 1);  // empty is unset
  EXPECT_EQ(Int(env::kFlushMs), 500);
}

TEST_F(SettingsTest, ValidValuesAreUsed) {
  setenv(env::kBufferSizeKb, "64", 1);
  setenv(env::kBudget, "2.5", 1);
  setenv(env::kNaive, "1", 1);
  setenv(env::kToggleAt, "sync", 1);
  setenv(env::kKinds, "api,kernel", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(Int(env::kBufferSizeKb), 64);
  EXPECT_DOUBLE_EQ(Real(env::kBudget), 2.5);
  EXPECT_TRUE(Flag(env::kNaive));
  EXPECT_EQ(Choice(env::kToggleAt), "sync");
  EXPECT_EQ(List(env::kKinds), (std::vector<std::string>{"api", "kernel"}));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// The policy: one warning naming the variable, the value, what is accepted and the default; the default used.
TEST_F(SettingsTest, BadValuesWarnOnceAndUseTheDefault) {
  struct Case {
    const char* name;
    const char* value;
    const char* accepted;
  };
  for (const Case& c :
       {Case{env::kBufferSizeKb, "12", "an integer in 64..1048576"},
        Case{env::kBufferSizeKb, "lots", "an integer in 64..1048576"}, Case{env::kEvery, "0", "an integer >= 1"},
        Case{env::kBudget, "150", "a number in 0..100"}, Case{env::kPerSecond, "fast", "a number >= 0"},
        Case{env::kNaive, "yes", "0 or 1"}, Case{env::kBlocksPatch, "sometimes", "one of always, toggle"},
        Case{env::kToggleAt, "launch", "one of default, end, sync"}}) {
    Clear();
    setenv(c.name, c.value, 1);
    testing::internal::CaptureStderr();
    const nlohmann::json h = HeaderJson(kCupti | kBlocks);
    (void)HeaderJson(kCupti | kBlocks);  // read twice: warned once
    const std::string err = testing::internal::GetCapturedStderr();
    const std::string want =
        std::string("twinscope: ") + c.name + "=" + c.value + " is not " + c.accepted + "; using the default (";
    EXPECT_NE(err.find(want), std::string::npos) << err;
    EXPECT_EQ(err.find(want), err.rfind(want)) << "warned twice: " << err;
    EXPECT_EQ(h["rejected"][c.name], c.value) << h.dump();
  }
  Clear();
  setenv(env::kBufferSizeKb, "12", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(Int(env::kBufferSizeKb), 8192);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("using the default (8192)"), std::string::npos);
  setenv(env::kEvery, "0", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(Int(env::kEvery), 1);
  setenv(env::kBlocksPatch, "sometimes", 1);
  EXPECT_EQ(Choice(env::kBlocksPatch), "");  // the default: decided by sampling
  testing::internal::GetCapturedStderr();
}

TEST_F(SettingsTest, ListsDropUnknownItemsAndFallBackWhenNoneIsKnown) {
  setenv(env::kKinds, "kernel,bogus", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(List(env::kKinds), std::vector<std::string>{"kernel"});
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("TWINSCOPE_KINDS=kernel,bogus: unknown item bogus ignored (a comma list of kernel, memcpy, "
                     "memset, api, nvtx)"),
            std::string::npos)
      << err;
  Clear();
  setenv(env::kKinds, "bogus", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(List(env::kKinds).size(), 5u);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("; using the default (kernel,memcpy,memset,api,nvtx)"), std::string::npos) << err;
}

TEST_F(SettingsTest, HeaderJsonHasWhatTheReaderReadsTyped) {
  setenv(env::kFlushMs, "20", 1);
  setenv(env::kKinds, "kernel", 1);
  const nlohmann::json cupti = HeaderJson(kCupti);
  EXPECT_EQ(cupti[env::kFlushMs], 20);
  EXPECT_EQ(cupti[env::kKinds], nlohmann::json::array({"kernel"}));
  EXPECT_EQ(cupti[env::kApiNested], true);
  EXPECT_TRUE(cupti[env::kDeviceBufferSizeMb].is_null());  // CUPTI's own
  EXPECT_FALSE(cupti.contains(env::kRing)) << "a block probe setting";
  EXPECT_FALSE(cupti.contains("rejected"));
  const nlohmann::json blocks = HeaderJson(kBlocks);
  EXPECT_EQ(blocks[env::kRing], 512);
  EXPECT_EQ(blocks[env::kFlushMs], 20);
  EXPECT_FALSE(blocks.contains(env::kKinds));
}

TEST_F(SettingsTest, ClosestNameOfAMisspelling) {
  EXPECT_EQ(ClosestName("TWINSCOPE_BLOCK_NAIVE"), "TWINSCOPE_BLOCKS_NAIVE");
  EXPECT_EQ(ClosestName("TWINSCOPE_FLUSHMS"), "TWINSCOPE_FLUSH_MS");
  EXPECT_EQ(ClosestName("TWINSCOPE_KERNEL"), "TWINSCOPE_KERNELS");
  EXPECT_EQ(ClosestName("TWINSCOPE_BUFER_SIZE_KB"), "TWINSCOPE_BUFFER_SIZE_KB");
}

TEST_F(SettingsTest, UnknownVariablesAreNamedOnceWithTheClosest) {
  std::string a = "TWINSCOPE_BLOCK_NAIVE=1", b = "TWINSCOPE_FLUSH_MS=5", c = "PATH=/bin", d = "TWINSCOPE_QUITE=1";
  char* envp[] = {a.data(), b.data(), c.data(), d.data(), nullptr};
  testing::internal::CaptureStderr();
  const std::vector<std::string> w = WarnUnknown(envp);
  WarnUnknown(envp);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("TWINSCOPE_BLOCK_NAIVE is not a twinscope setting and is ignored; did you mean "
                      "TWINSCOPE_BLOCKS_NAIVE?"),
            std::string::npos)
      << w[0];
  EXPECT_NE(w[1].find("did you mean TWINSCOPE_QUIET?"), std::string::npos) << w[1];
  const std::string line = "twinscope: " + w[0] + "\n";
  EXPECT_NE(err.find(line), std::string::npos) << err;
  EXPECT_EQ(err.find(line), err.rfind(line)) << "warned twice: " << err;
}

// README.md's configuration section is the table's, generated (TWINSCOPE_UPDATE_GOLDEN=1 rewrites it).
TEST(SettingsReadme, MatchesTheTable) {
  constexpr char kBegin[] = "<!-- settings table: generated from src/base/settings_table.h, do not edit by hand -->\n";
  constexpr char kEnd[] = "<!-- end of settings table -->\n";
  std::ifstream f(TWINSCOPE_README);
  ASSERT_TRUE(f) << TWINSCOPE_README;
  std::stringstream ss;
  ss << f.rdbuf();
  std::string readme = ss.str();
  const size_t begin = readme.find(kBegin), end = readme.find(kEnd);
  ASSERT_NE(begin, std::string::npos) << "README.md lost the line: " << kBegin;
  ASSERT_NE(end, std::string::npos) << "README.md lost the line: " << kEnd;
  const size_t from = begin + sizeof kBegin - 1;
  const std::string have = readme.substr(from, end - from), want = ReadmeTable();
  const char* update = std::getenv("TWINSCOPE_UPDATE_GOLDEN");
  if (update && std::string(update) == "1" && have != want) {
    readme.replace(from, end - from, want);
    std::ofstream(TWINSCOPE_README, std::ios::trunc) << readme;
    GTEST_SKIP() << "rewrote README.md's settings table";
  }
  EXPECT_EQ(have, want) << "README.md's configuration table differs from src/base/settings_table.h: run this test "
                           "with TWINSCOPE_UPDATE_GOLDEN=1 to regenerate it";
}

}  // namespace
}  // namespace twinscope::settings
