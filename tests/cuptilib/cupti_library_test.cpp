// Which libcupti `record` and `probe` use: each copy's version read in a child
// process, the newest chosen (the earlier place between equal versions), the
// pip package found through a Python's sys.path or a site-packages folder.
#include "cuptilib/cupti_library.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace twinscope::cuptilib {
namespace {

namespace fs = std::filesystem;

TEST(CuptiLibrary, ReadsVersionAndMultiSubscriberSupportInAChild) {
  Candidate old = ProbeLibrary(FAKE_CUPTI_LIB, "test");
  ASSERT_TRUE(old.usable()) << old.error;
  EXPECT_LT(old.version, kCuptiMultiSubscriberVersion);
  EXPECT_FALSE(old.multi_subscriber);
  Candidate now = ProbeLibrary(FAKE_CUPTI135_LIB, "test");
  ASSERT_TRUE(now.usable()) << now.error;
  EXPECT_EQ(now.version, 130500u);
  EXPECT_TRUE(now.multi_subscriber);
  EXPECT_EQ(Describe(now), std::string("CUPTI 13.5 (API 130500) at ") + FAKE_CUPTI135_LIB + " (test)");
}

TEST(CuptiLibrary, UnusableLibrariesSayWhy) {
  Candidate missing = ProbeLibrary("/nonexistent/libcupti.so.13", "test");
  EXPECT_FALSE(missing.usable());
  EXPECT_NE(missing.error.find("/nonexistent/libcupti.so.13"), std::string::npos) << missing.error;
  Candidate foreign = ProbeLibrary(NOT_CUPTI_LIB, "test");
  EXPECT_FALSE(foreign.usable());
  EXPECT_NE(foreign.error.find("not a CUPTI library"), std::string::npos) << foreign.error;
}

TEST(CuptiLibrary, NewestWinsAndTheEarlierOfEqualVersions) {
  std::vector<Candidate> c(4);
  c[0] = {"a", "first", 130001, false, ""};
  c[1] = {"b", "second", 130500, true, ""};
  c[2] = {"c", "third", 130500, true, ""};
  c[3] = {"d", "broken", 139999, true, "cannot be loaded"};
  ASSERT_NE(Newest(c), nullptr);
  EXPECT_EQ(Newest(c)->path, "b");
  EXPECT_EQ(Newest({}), nullptr);
}

class SiteDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("twinscope_cuptilib_" + std::to_string(getpid()));
    lib_ = dir_ / "site" / "nvidia" / "cu13" / "lib" / "libcupti.so.13";
    fs::create_directories(lib_.parent_path());
    fs::copy_file(FAKE_CUPTI135_LIB, lib_, fs::copy_options::overwrite_existing);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_, lib_;
};

TEST_F(SiteDir, FindsThePipPackageInASitePackagesFolder) {
  SearchOptions o;
  o.standard_places = false;
  o.pythons = {};
  o.site_dirs = {(dir_ / "site").string(), (dir_ / "site").string()};  // the same folder twice: found once
  auto found = FindLibraries(o);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].path, lib_.string());
  EXPECT_EQ(found[0].version, 130500u);
  EXPECT_EQ(found[0].where, "pip package nvidia-cuda-cupti");
}

TEST_F(SiteDir, FindsThePipPackageThroughPythonsSysPath) {
  ASSERT_EQ(setenv("PYTHONPATH", (dir_ / "site").c_str(), 1), 0);
  auto path = PythonSysPath("python3");
  unsetenv("PYTHONPATH");
  ASSERT_FALSE(path.empty()) << "python3 is part of the test setup (scripts/setup-deps.sh uses it)";
  EXPECT_NE(std::find(path.begin(), path.end(), (dir_ / "site").string()), path.end());
  EXPECT_TRUE(PythonSysPath("/nonexistent/python3").empty());
}

TEST_F(SiteDir, EnvironmentOverridesTheSearchAndIsChecked) {
  ASSERT_EQ(setenv(kCuptiLibraryEnv, FAKE_CUPTI_LIB, 1), 0);
  auto choice = Choose(SearchOptions{});
  ASSERT_TRUE(choice.ok()) << choice.status().message();
  EXPECT_TRUE(choice->from_env);
  EXPECT_EQ(choice->chosen.path, FAKE_CUPTI_LIB);
  ASSERT_EQ(setenv(kCuptiLibraryEnv, "/nonexistent/libcupti.so.13", 1), 0);
  auto bad = Choose(SearchOptions{});
  unsetenv(kCuptiLibraryEnv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TWINSCOPE_CUPTI_LIBRARY=/nonexistent/libcupti.so.13 cannot be used"),
            std::string::npos)
      << bad.status().message();
}

TEST_F(SiteDir, ChoosesTheNewestOverTheLoadersOlderCopy) {
  // The loader's copy is the fake 13.0 (LD_LIBRARY_PATH would put it first);
  // here its folder stands in as a site folder searched before ours.
  SearchOptions o;
  o.standard_places = false;
  o.pythons = {};
  const fs::path old_site = dir_ / "old";
  fs::create_directories(old_site / "nvidia" / "cu13" / "lib");
  fs::copy_file(FAKE_CUPTI_LIB, old_site / "nvidia" / "cu13" / "lib" / "libcupti.so.13");
  o.site_dirs = {old_site.string(), (dir_ / "site").string()};
  auto choice = Choose(o);
  ASSERT_TRUE(choice.ok()) << choice.status().message();
  EXPECT_EQ(choice->found.size(), 2u);
  EXPECT_EQ(choice->chosen.path, lib_.string());
  o.site_dirs = {old_site.string()};
  choice = Choose(o);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->chosen.version, ProbeLibrary(FAKE_CUPTI_LIB, "").version);
}

}  // namespace
}  // namespace twinscope::cuptilib
