// The joined views through the `twinscope` binary: `join -o DIR` writes the
// Perfetto trace and the database beside join.json and prints their paths;
// `export DIR --format ...` on a twin/join folder writes the joined views,
// with bounds from the command line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../testutil/spawn.h"
#include "join_scene.h"
#include "views/export/join/join_export.h"

namespace twinscope {
namespace {

namespace fs = std::filesystem;

using testutil::Outcome;
using testutil::Slurp;

class JoinCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::SceneDir("cli");
    testing::WriteOptions o;
    o.other_kernels = {"_Z4gemmv"};
    testing::WriteTwin(dir_, testing::SceneLaunches(), o);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Outcome Twinscope(std::vector<std::string> args) {  // its output in dir_/stdout.txt, dir_/stderr.txt
    args.insert(args.begin(), TWINSCOPE_BIN);
    return testutil::RunToEnd(std::move(args), testutil::EnvironmentWithout({}), dir_);
  }
  std::string dir_;
};

TEST_F(JoinCli, JoinWritesEveryViewItHas) {
  const std::string out = dir_ + "/out";
  fs::create_directories(out);
  Outcome r = Twinscope({"join", dir_ + "/primary.tsc", dir_ + "/shadow.tsc", "-o", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("joined model: " + out + "/join.json"), std::string::npos) << r.out;
  if (exporters::PerfettoAvailable()) {
    EXPECT_NE(r.out.find("timeline (open in https://ui.perfetto.dev): " + out + "/join.perfetto-trace"),
              std::string::npos)
        << r.out;
    EXPECT_GT(fs::file_size(out + "/join.perfetto-trace"), 0u);
  } else {
    EXPECT_NE(r.out.find("built without the Perfetto exporter"), std::string::npos) << r.out;
  }
  if (exporters::SqliteAvailable()) {
    EXPECT_NE(r.out.find("database (docs/sqlite-schema.md): " + out + "/join.sqlite"), std::string::npos) << r.out;
    EXPECT_GT(fs::file_size(out + "/join.sqlite"), 0u);
  }
}

// --sqlite-blocks: 'bounded' (the default) or 'all' (docs/sqlite-schema.md, "Bounds"); anything else is refused
// with the choices named.
TEST_F(JoinCli, SqliteBlocksTakesBoundedOrAll) {
  const std::string out = dir_ + "/out";
  fs::create_directories(out);
  Outcome r = Twinscope({"join", dir_ + "/primary.tsc", dir_ + "/shadow.tsc", "-o", out, "--sqlite-blocks", "all"});
  ASSERT_EQ(r.code, 0) << r.err;
  Outcome bad = Twinscope({"join", dir_ + "/primary.tsc", dir_ + "/shadow.tsc", "-o", out, "--sqlite-blocks", "some"});
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--sqlite-blocks"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("bounded"), std::string::npos) << bad.err;
}

TEST_F(JoinCli, ExportOfATwinFolder) {
  Outcome r = Twinscope({"export", dir_, "--format", "chrome", "--max-block-launches", "2", "-o", dir_ + "/j.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("joined run"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("blocks of 2 launches drawn (16 blocks), 3 launches as spans only"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("warning: blocks drawn for 2 of 5 launches"), std::string::npos) << r.err;
  auto doc = nlohmann::json::parse(Slurp(dir_ + "/j.json"));
  EXPECT_EQ(doc["otherData"]["join"]["launches_drawn_with_blocks"], 2);

  r = Twinscope({"export", dir_, "--format", "perfetto", "-o", dir_ + "/j.perfetto-trace"});
  if (exporters::PerfettoAvailable()) {
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("blocks of 5 launches drawn (40 blocks)"), std::string::npos) << r.err;
  } else {
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("built without the Perfetto exporter"), std::string::npos) << r.err;
  }
  r = Twinscope({"export", dir_, "--format", "sqlite", "-o", dir_ + "/j.sqlite"});
  EXPECT_EQ(r.code, exporters::SqliteAvailable() ? 0 : 1) << r.err;

  // A single trace still exports as before, and to Perfetto.
  r = Twinscope({"export", dir_ + "/primary.tsc", "--format", "perfetto", "-o", dir_ + "/p.perfetto-trace"});
  EXPECT_EQ(r.code, exporters::PerfettoAvailable() ? 0 : 1) << r.err;
  r = Twinscope({"export", dir_ + "/missing", "--format", "chrome", "-o", dir_ + "/x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
}

// `stats DIR` and `export DIR` of a joined folder read its saved model
// (join.model) instead of joining again and say so; without one, or with one
// older than the traces or damaged, they say that and join (docs/join.md,
// "The saved model").
TEST_F(JoinCli, StatsAndExportOfAJoinedFolderReadItsSavedModel) {
  Outcome r = Twinscope({"stats", dir_, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("twinscope stats: " + dir_ + " has no saved join (join.model): joining the traces"),
            std::string::npos)
      << r.err;

  r = Twinscope({"join", dir_ + "/primary.tsc", dir_ + "/shadow.tsc", "-o", dir_});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(dir_ + "/join.model"));
  // The same traces joined now, as `stats P --join S` does: what the saved model must show.
  Outcome joined = Twinscope({"stats", dir_ + "/primary.tsc", "--join", dir_ + "/shadow.tsc", "--json"});
  ASSERT_EQ(joined.code, 0) << joined.err;
  Outcome text = Twinscope({"stats", dir_ + "/primary.tsc", "--join", dir_ + "/shadow.tsc"});

  r = Twinscope({"stats", dir_, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("twinscope stats: read the saved join " + dir_ + "/join.model"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("joining"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, joined.out);
  r = Twinscope({"stats", dir_});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, text.out);

  r = Twinscope({"export", dir_, "--format", "chrome", "-o", dir_ + "/j.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("twinscope export: read the saved join"), std::string::npos) << r.err;

  // A trace written after the join: the model is stale, said, and the traces joined.
  struct timespec times[2] = {{0, UTIME_OMIT}, {1'000'000'000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (dir_ + "/primary.tsc").c_str(), times, 0), 0);
  r = Twinscope({"stats", dir_, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find(dir_ + "/join.model is stale: " + dir_ + "/primary.tsc changed since the join"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("joining the traces again"), std::string::npos) << r.err;

  // A damaged model: said, and the traces joined.
  r = Twinscope({"join", dir_ + "/primary.tsc", dir_ + "/shadow.tsc", "-o", dir_});
  ASSERT_EQ(r.code, 0) << r.err;
  fs::resize_file(dir_ + "/join.model", fs::file_size(dir_ + "/join.model") / 2);
  r = Twinscope({"stats", dir_, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find(dir_ + "/join.model is damaged"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("joining the traces again"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["summary"], nlohmann::json::parse(joined.out)["summary"]);
}

}  // namespace
}  // namespace twinscope
