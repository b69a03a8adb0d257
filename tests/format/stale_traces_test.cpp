// Several hosts writing one run folder (docs/processes.md, "Several hosts"): a run removes only its
// own host's traces left from earlier runs, never another host's, nor a trace being created.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "format/output_path.h"
#include "format/trace_writer.h"

namespace twinscope {
namespace {

namespace fs = std::filesystem;

void WriteTraceOfHost(const std::string& path, const std::string& host) {
  nlohmann::json header = {{"role", "primary"}, {"host", host}, {"pid", 1}, {"process", {{"pid", 1}, {"host", host}}}};
  WriterOptions o;
  o.path = path;
  std::string error;
  auto w = TraceWriter::Open(o, header, &error);
  ASSERT_TRUE(w) << error;
  ASSERT_TRUE(w->Close(&error)) << error;
}

class StaleTracesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stale_traces_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const std::string& name) const { return (dir_ / name).string(); }
  std::set<std::string> Files(const fs::path& d) const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(d)) out.insert(e.path().filename().string());
    return out;
  }
  fs::path dir_;
};

TEST_F(StaleTracesTest, FolderKeepsOtherHostsAndTracesBeingCreated) {
  fs::create_directories(P("run"));
  WriteTraceOfHost(P("run/python3-10.tsc"), "a");
  WriteTraceOfHost(P("run/python3-10.1.tsc"), "b");
  std::ofstream(P("run/junk.tsc")) << "stale";      // not a trace: removed
  std::ofstream(P("run/creating-11.tsc")).flush();  // empty: being created on some host, kept
  std::ofstream(P("run/notes.txt")) << "mine";      // not a trace file name: untouched
  size_t kept = 0;
  std::string error;
  ASSERT_TRUE(RemoveStaleTraces(P("run") + "/", "a", &kept, &error)) << error;
  EXPECT_EQ(Files(P("run")), (std::set<std::string>{"python3-10.1.tsc", "creating-11.tsc", "notes.txt"}));
  EXPECT_EQ(kept, 1u);
  // A minute later the empty file is a left-over: removed.
  const auto old = fs::file_time_type::clock::now() - std::chrono::minutes(5);
  fs::last_write_time(P("run/creating-11.tsc"), old);
  ASSERT_TRUE(RemoveStaleTraces(P("run"), "b", &kept, &error)) << error;
  EXPECT_EQ(Files(P("run")), (std::set<std::string>{"notes.txt"}));
  EXPECT_EQ(kept, 0u);
}

TEST_F(StaleTracesTest, FileModeKeepsAnotherHostsFileAndItsDotD) {
  // Host b's run claimed x.tsc; host a's processes wrote beside it in x.tsc.d/.
  WriteTraceOfHost(P("x.tsc"), "b");
  fs::create_directories(P("x.tsc.d"));
  WriteTraceOfHost(P("x.tsc.d/python3-5.tsc"), "a");
  WriteTraceOfHost(P("x.tsc.d/python3-6.tsc"), "b");
  size_t kept = 0;
  std::string error;
  ASSERT_TRUE(RemoveStaleTraces(P("x.tsc"), "a", &kept, &error)) << error;  // host a starts again
  EXPECT_TRUE(fs::exists(P("x.tsc")));
  EXPECT_EQ(Files(P("x.tsc.d")), (std::set<std::string>{"python3-6.tsc"}));
  EXPECT_EQ(kept, 2u);
  ASSERT_TRUE(RemoveStaleTraces(P("x.tsc"), "b", &kept, &error)) << error;  // then host b
  EXPECT_FALSE(fs::exists(P("x.tsc")));
  EXPECT_FALSE(fs::exists(P("x.tsc.d")));
}

// Two hosts' processes with the same pid in one folder: neither truncates the other's trace.
TEST_F(StaleTracesTest, SamePidOnTwoHostsGetsTwoFiles) {
  ClaimedOutput a, b;
  std::string error;
  ASSERT_TRUE(ClaimOutput(P("run") + "/", "python3", 42, &a, &error)) << error;
  ASSERT_TRUE(ClaimOutput(P("run") + "/", "python3", 42, &b, &error)) << error;
  EXPECT_EQ(a.path, P("run/python3-42.tsc"));
  EXPECT_EQ(b.path, P("run/python3-42.1.tsc"));
  close(a.fd);
  close(b.fd);
}

}  // namespace
}  // namespace twinscope
