// A twin folder's twin.json (truncated, missing, moved) and `join`'s error paths through the twinscope binary:
// what the join assumed is said on stderr and in the joined model's warnings; swapped traces, an unwritable
// -o and a view that fails after join.json are clear errors with exit code 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../testutil/spawn.h"
#include "join_scene.h"
#include "views/export/join/join_export.h"

namespace twinscope {
namespace {

namespace fs = std::filesystem;

using testutil::Outcome;
using testutil::Slurp;

class TwinFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::SceneDir("twin_folder");
    testing::WriteTwin(dir_, testing::SceneLaunches());
    std::ofstream(dir_ + "/requests-primary.jsonl") << R"({"id":"r0","status":200,"steps":[0,1]})"
                                                    << "\n";
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  Outcome Twinscope(std::vector<std::string> args) {
    args.insert(args.begin(), TWINSCOPE_BIN);
    return testutil::RunToEnd(std::move(args), testutil::EnvironmentWithout({}), dir_);
  }
  // `twinscope stats DIR --json`: the joined model as join.json holds it.
  nlohmann::json Stats(Outcome* r) {
    *r = Twinscope({"stats", dir_, "--json"});
    EXPECT_EQ(r->code, 0) << r->err;
    return nlohmann::json::parse(r->out, nullptr, false);
  }
  static bool AnyHas(const nlohmann::json& warnings, const std::string& text) {
    for (const auto& w : warnings)
      if (w.get<std::string>().find(text) != std::string::npos) return true;
    return false;
  }
  const std::string kTwin =
      R"({"concurrent": true, "request_trace": "/gone/old-run/requests-primary.jsonl", "schedule": ""})";
  std::string dir_;
};

TEST_F(TwinFolder, ItsOptionsReachTheJoinAndAMovedFolderFindsItsRequestTrace) {
  std::ofstream(dir_ + "/twin.json") << kTwin;  // the run was made in /gone/old-run, then moved here
  Outcome r;
  auto j = Stats(&r);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["options"]["concurrent"], true);
  ASSERT_TRUE(j.contains("requests")) << "the moved folder's own copy of the request trace is used";
  EXPECT_EQ(j["requests"]["total"], 1);
  EXPECT_FALSE(AnyHas(j["warnings"], "twin.json")) << j["warnings"].dump();
  EXPECT_EQ(r.err.find("twin.json"), std::string::npos) << r.err;
}

TEST_F(TwinFolder, MovedWithoutItsRequestTraceIsSaid) {
  std::ofstream(dir_ + "/twin.json") << kTwin;
  fs::remove(dir_ + "/requests-primary.jsonl");
  Outcome r;
  auto j = Stats(&r);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["options"]["concurrent"], true) << "the rest of twin.json still counts";
  EXPECT_FALSE(j.contains("requests"));
  const std::string says = dir_ +
                           "/twin.json names request_trace /gone/old-run/requests-primary.jsonl, which is "
                           "not there (nor in " +
                           dir_ + "): joined without per-request views";
  EXPECT_TRUE(AnyHas(j["warnings"], says)) << j["warnings"].dump();
  EXPECT_NE(r.err.find("twinscope: warning: " + says), std::string::npos) << r.err;
}

TEST_F(TwinFolder, TruncatedTwinJsonIsSaidWithWhatWasAssumed) {
  std::ofstream(dir_ + "/twin.json") << kTwin.substr(0, kTwin.size() / 2);  // cut short
  Outcome r;
  auto j = Stats(&r);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["options"]["concurrent"], false);
  const std::string says = dir_ +
                           "/twin.json is not valid JSON (damaged or cut short): joined as sequential twins "
                           "(no overlap flag) without a request trace";
  EXPECT_TRUE(AnyHas(j["warnings"], says)) << j["warnings"].dump();
  EXPECT_NE(r.err.find("twinscope: warning: " + says), std::string::npos) << r.err;
  // The text summary and an export of the folder say it too.
  Outcome t = Twinscope({"stats", dir_});
  EXPECT_NE(t.out.find("warning: " + says), std::string::npos) << t.out;
  Outcome e = Twinscope({"export", dir_, "--format", "chrome", "-o", dir_ + "/j.json"});
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.err.find(says), std::string::npos) << e.err;
}

TEST_F(TwinFolder, MissingTwinJsonIsSaidWithWhatWasAssumed) {
  ASSERT_FALSE(fs::exists(dir_ + "/twin.json"));
  Outcome r;
  auto j = Stats(&r);
  ASSERT_TRUE(j.is_object()) << r.out;
  const std::string says = dir_ + "/twin.json is missing: joined as sequential twins";
  EXPECT_TRUE(AnyHas(j["warnings"], says)) << j["warnings"].dump();
  EXPECT_NE(r.err.find("twinscope: warning: " + says), std::string::npos) << r.err;
}

// `twinscope join`'s errors: each exits 1 with a line that says what happened.
TEST_F(TwinFolder, JoinWithTheTracesSwappedSaysWhichGoesFirst) {
  const std::string out = dir_ + "/out";
  Outcome r = Twinscope({"join", dir_ + "/shadow.tsc", dir_ + "/primary.tsc", "-o", out});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("twinscope join: " + dir_ +
                       "/primary.tsc is not a shadow trace (role 'primary'): give the "
                       "primary (twinscope record) first, then the shadow (twinscope blocks)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out + "/join.json"));
}

TEST_F(TwinFolder, JoinIntoAnUnwritableFolderIsAClearError) {
  std::ofstream(dir_ + "/a-file") << "x";
  // Under a regular file: the folder cannot be made.
  Outcome r = Twinscope({"join", dir_ + "/primary.tsc", dir_ + "/shadow.tsc", "-o", dir_ + "/a-file/out"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("twinscope join: cannot make folder " + dir_ + "/a-file/out: Not a directory"),
            std::string::npos)
      << r.err;
  // A regular file as the folder: join.json cannot be written there.
  r = Twinscope({"join", dir_ + "/primary.tsc", dir_ + "/shadow.tsc", "-o", dir_ + "/a-file"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("twinscope join: cannot write " + dir_ + "/a-file/join.json"), std::string::npos) << r.err;
  EXPECT_EQ(Slurp(dir_ + "/a-file"), "x");
}

TEST_F(TwinFolder, AViewFailingAfterJoinJsonFailsTheCommandAndKeepsJoinJson) {
  const std::string out = dir_ + "/out";
  fs::create_directories(out + "/report.html");  // a folder where the report goes: it cannot be written
  Outcome r = Twinscope({"join", dir_ + "/primary.tsc", dir_ + "/shadow.tsc", "-o", out});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("twinscope join: report: "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("joined model: " + out + "/join.json"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(Slurp(out + "/join.json"), nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["summary"]["exact"], 4);
  if (exporters::SqliteAvailable()) {
    fs::remove_all(out);
    fs::create_directories(out + "/join.sqlite/x");  // the database cannot be made either
    r = Twinscope({"join", dir_ + "/primary.tsc", dir_ + "/shadow.tsc", "-o", out});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("twinscope join: sqlite: "), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(out + "/join.json"));
    EXPECT_TRUE(fs::exists(out + "/report.html")) << "the other views are still written";
  }
}

}  // namespace
}  // namespace twinscope
