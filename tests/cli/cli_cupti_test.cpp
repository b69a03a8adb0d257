// `twinscope record` + `twinscope stats` end to end: the real
// libtwinscope_cupti.so (found next to the binary, build/lib) loaded by the
// fake-CUPTI stand-in application tests/cupti/cupti_driver.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string out, err;
};

// Runs a shell command line with the fake CUPTI/CUDA libraries in front.
Outcome Shell(const std::string& command, const fs::path& dir) {
  const std::string out = (dir / "stdout").string(), err = (dir / "stderr").string();
  const std::string line = "env LD_LIBRARY_PATH='" FAKE_CUPTI_DIR "' " + command + " >'" + out + "' 2>'" + err + "'";
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
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("twinscope_rec_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // `twinscope record FLAGS -- cupti_driver <collector> SCENARIO`: the
  // collector path comes from the CUDA_INJECTION64_PATH that record sets.
  Outcome Record(const std::string& flags, const std::string& scenario) {
    return Shell(std::string(TWINSCOPE_BIN) + " record -o '" + Trace() + "' " + flags +
                     " -- sh -c 'exec \"$0\" \"$CUDA_INJECTION64_PATH\" " + scenario + "' " CUPTI_DRIVER_BIN,
                 dir_);
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

}  // namespace
