// Run folders (docs/trace-format.md): per-process trace files claimed with
// O_EXCL (no process truncates another's trace), traces without GPU work
// removed at a clean close, the header's "process" object, the summary at
// the stop request, and the run lister over files, folders and twin folders.
#include "format/run_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/env_names.h"
#include "format/header.h"
#include "format/output_path.h"
#include "format/process_info.h"
#include "format/stop_request.h"
#include "test_util.h"
#include "twinscope/counters.h"

namespace twinscope {
namespace {

namespace fs = std::filesystem;

fs::path FreshDir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / ("run_dir_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A collector's writer (per_process) on `output`, with `kernels` kernel records.
std::string WriteProcessTrace(const std::string& output, int kernels, const std::string& role = "primary",
                              bool close = true) {
  WriterOptions o;
  o.path = output;
  o.per_process = true;
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader(role), &err);
  EXPECT_TRUE(w) << err;
  if (!w) return "";
  for (int i = 0; i < kernels; ++i) w->Append(test::MakeKernel(i, 0));
  if (kernels) w->SetCounter(counters::kLaunchesSeen, kernels);
  const std::string path = w->path();
  if (close)
    EXPECT_TRUE(w->Close(&err)) << err;
  else
    w.release();  // as a killed process: never closed (leaks on purpose)
  return path;
}

uint64_t KernelsIn(const std::string& path) {
  std::string err;
  auto r = TraceReader::Open(path, &err);
  EXPECT_TRUE(r) << err;
  if (!r) return 0;
  test::CollectSink sink;
  r->Read(sink);
  return sink.kernels.size();
}

TEST(RunDir, SecondProcessOnAFilePathWritesBesideItNeverOverIt) {
  // Two processes given the same TWINSCOPE_OUTPUT file: before, the second one's O_TRUNC emptied the
  // first's trace while it was being written. Now the second goes to P.d/.
  const fs::path d = FreshDir("shared");
  const std::string p = (d / "run.tsc").string();
  WriterOptions o;
  o.path = p;
  o.per_process = true;
  std::string err;
  auto first = TraceWriter::Open(o, BaseHeader("primary"), &err);
  ASSERT_TRUE(first) << err;
  for (int i = 0; i < 50; ++i) first->Append(test::MakeKernel(i, 0));
  first->Flush();
  // The second process of the run (a fork: its own pid).
  pid_t child = fork();
  if (child == 0) {
    const std::string got = WriteProcessTrace(p, 7);
    std::_Exit(got.find("run.tsc.d/") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the second process did not write into run.tsc.d/";
  for (int i = 50; i < 80; ++i) first->Append(test::MakeKernel(i, 0));
  ASSERT_TRUE(first->Close(&err)) << err;
  EXPECT_EQ(first->path(), p);
  EXPECT_EQ(KernelsIn(p), 80u) << "the first trace was damaged by the second process";
  auto l = ListRun(p);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->sides.size(), 1u);
  ASSERT_EQ(l->sides[0].traces.size(), 2u);
  uint64_t total = 0;
  for (const auto& t : l->sides[0].traces) {
    EXPECT_EQ(t.end, "complete") << t.path;
    total += t.kernel_records;
  }
  EXPECT_EQ(total, 87u);
}

TEST(RunDir, FolderModeGivesEachProcessItsOwnNamedFile) {
  const fs::path d = FreshDir("folder");
  const std::string dir = (d / "traces").string() + "/";  // made on demand
  const std::string a = WriteProcessTrace(dir, 3);
  const std::string b = WriteProcessTrace(dir, 4);  // same pid twice: a numeric suffix
  const std::string name = ProcessShortName();
  EXPECT_EQ(a, (d / "traces").string() + "/" + name + "-" + std::to_string(getpid()) + ".tsc");
  EXPECT_EQ(b, (d / "traces").string() + "/" + name + "-" + std::to_string(getpid()) + ".1.tsc");
  EXPECT_EQ(KernelsIn(a), 3u);
  EXPECT_EQ(KernelsIn(b), 4u);
}

TEST(RunDir, TraceWithoutGpuWorkIsRemovedAtCleanClose) {
  const fs::path d = FreshDir("nowork");
  const std::string p = (d / "run.tsc").string();
  const std::string kept = WriteProcessTrace(p, 2);
  const std::string removed = WriteProcessTrace(p, 0);  // went to run.tsc.d/, then removed
  EXPECT_TRUE(fs::exists(kept));
  EXPECT_FALSE(fs::exists(removed));
  EXPECT_FALSE(fs::exists(p + ".d")) << "the empty .d folder is removed too";
  // KeepFile() keeps it (a probe that says why nothing was traced).
  WriterOptions o;
  o.path = (d / "f").string() + "/";
  o.per_process = true;
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("shadow"), &err);
  ASSERT_TRUE(w) << err;
  w->KeepFile();
  const std::string path = w->path();
  ASSERT_TRUE(w->Close(&err));
  EXPECT_FALSE(w->removed());
  EXPECT_TRUE(fs::exists(path));
}

TEST(RunDir, HeaderSaysWhichProcessWroteIt) {
  setenv(env::kTopPid, std::to_string(getpid()).c_str(), 1);
  setenv("RANK", "3", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("WORLD_SIZE", "8", 1);
  nlohmann::json h = BaseHeader("primary");
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
  unsetenv("WORLD_SIZE");
  const auto& p = h["process"];
  EXPECT_EQ(p["pid"], getpid());
  EXPECT_EQ(p["ppid"], getppid());
  EXPECT_EQ(p["top"], true);
  EXPECT_TRUE(p["ancestors"].is_array());
  EXPECT_TRUE(p["ancestors"].empty()) << "the top process's chain stops at itself";
  EXPECT_EQ(p["rank"]["rank"], 3);
  EXPECT_EQ(p["rank"]["local_rank"], 1);
  EXPECT_EQ(p["rank"]["world_size"], 8);
  EXPECT_EQ(p["rank"]["source"], "RANK");
  EXPECT_EQ(p["start_realtime_ns"], h["start_realtime_ns"]);
  EXPECT_FALSE(p["exe"].get<std::string>().empty());
  // Not the top process: the chain goes up to the top pid (here: our parent).
  setenv(env::kTopPid, std::to_string(getppid()).c_str(), 1);
  nlohmann::json h2 = BaseHeader("primary");
  unsetenv(env::kTopPid);
  EXPECT_EQ(h2["process"]["top"], false);
  EXPECT_EQ(h2["process"]["ancestors"], nlohmann::json::array({getppid()}));
  // The other launchers.
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "6", 1);
  nlohmann::json h3 = BaseHeader("primary");
  unsetenv("SLURM_PROCID");
  unsetenv("SLURM_NTASKS");
  EXPECT_EQ(h3["process"]["rank"]["rank"], 5);
  EXPECT_EQ(h3["process"]["rank"]["world_size"], 6);
  EXPECT_EQ(h3["process"]["rank"]["source"], "SLURM_PROCID");
  EXPECT_TRUE(h3["process"]["rank"].is_object());
  EXPECT_TRUE(BaseHeader("primary")["process"]["rank"].is_null());
}

TEST(RunDir, SanitizedNames) {
  EXPECT_EQ(SanitizeFileName("python3.12"), "python3.12");
  EXPECT_EQ(SanitizeFileName("pt_main thread/x"), "pt_main_thread_x");
  EXPECT_EQ(SanitizeFileName(".."), "process");
  EXPECT_EQ(SanitizeFileName(""), "process");
}

TEST(RunDir, StopRequestSummaryIsOnDiskAndMarkedAndAKilledProcessKeepsIt) {
  const fs::path d = FreshDir("stop");
  const std::string control = (d / ".control").string();
  fs::create_directories(control);
  pid_t child = fork();
  if (child == 0) {
    WriterOptions o;
    o.path = (d / "side").string() + "/";
    o.per_process = true;
    std::string err;
    auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
    if (!w) std::_Exit(2);
    for (int i = 0; i < 5; ++i) w->Append(test::MakeKernel(i, 0));
    w->SetCounter(counters::kLaunchesSeen, 5);
    // The status thread's part: poll, answer.
    StopRequest stop(control);
    for (int i = 0; i < 1000 && !stop.Due(); ++i) usleep(10000);
    stop.Acknowledge(w->SummaryAtStopRequest(std::chrono::seconds(5)));
    pause();  // a server that never exits on its own
    std::_Exit(0);
  }
  EXPECT_FALSE(fs::exists(StopRequest::FlushedFile(control, child)));
  std::ofstream(StopRequest::StopFile(control)).close();
  for (int i = 0; i < 500 && !fs::exists(StopRequest::FlushedFile(control, child)); ++i) usleep(10000);
  ASSERT_TRUE(fs::exists(StopRequest::FlushedFile(control, child)));
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  auto l = ListRun((d / "side").string());
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->sides[0].traces.size(), 1u);
  const RunTrace& t = l->sides[0].traces[0];
  EXPECT_TRUE(t.has_summary);
  EXPECT_TRUE(t.summary_at_stop_request);
  EXPECT_EQ(t.end, "complete");
  EXPECT_EQ(t.kernel_records, 5u);
  EXPECT_EQ(t.process.pid, child);
}

TEST(RunDir, ListerSeesKilledAndDamagedTracesAndPicksTheMainTrace) {
  const fs::path d = FreshDir("lister");
  const std::string dir = (d / "run").string() + "/";
  const std::string small = WriteProcessTrace(dir, 2);
  const std::string big = WriteProcessTrace(dir, 9);
  const std::string killed = WriteProcessTrace(dir, 0, "primary", /*close=*/false);  // killed before any launch
  // A damaged trace: not a trace at all.
  std::ofstream(d / "run" / "junk-1.tsc") << "not a trace";
  usleep(50000);
  auto l = ListRun(dir);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_FALSE(l->twin);
  const RunSide& side = l->sides[0];
  ASSERT_EQ(side.traces.size(), 4u);
  EXPECT_EQ(side.WithGpuWork(), 2u);
  size_t unreadable = 0, killed_seen = 0;
  for (const auto& t : side.traces) {
    if (t.path == killed) {
      ++killed_seen;
      EXPECT_FALSE(t.gpu_work());
      EXPECT_EQ(t.end, "no-summary");
    }
    if (t.end == "unreadable") {
      ++unreadable;
      EXPECT_NE(t.error.find("not a twinscope trace"), std::string::npos) << t.error;
    }
  }
  EXPECT_EQ(unreadable, 1u);
  EXPECT_EQ(killed_seen, 1u);
  std::string why;
  const RunTrace* main = MainTrace(side, &why);
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->path, big) << "no top process: the most launches";
  EXPECT_NE(why.find("most launches"), std::string::npos) << why;
  (void)small;
}

TEST(RunDir, TopProcessTraceIsTheMainTrace) {
  const fs::path d = FreshDir("top");
  const std::string dir = (d / "side").string() + "/";
  setenv(env::kTopPid, std::to_string(getpid()).c_str(), 1);
  const std::string top = WriteProcessTrace(dir, 1);
  unsetenv(env::kTopPid);
  WriteProcessTrace(dir, 9);
  auto l = ListRun(dir);
  ASSERT_TRUE(l.ok());
  std::string why;
  const RunTrace* main = MainTrace(l->sides[0], &why);
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->path, top);
  EXPECT_TRUE(main->process.top);
  EXPECT_EQ(why, "the top process's trace");
}

TEST(RunDir, TwinFoldersNewAndOld) {
  const fs::path d = FreshDir("twin");
  WriteProcessTrace((d / "new" / "primary").string() + "/", 3);
  WriteProcessTrace((d / "new" / "shadow").string() + "/", 0, "shadow", /*close=*/false);
  auto l = ListRun((d / "new").string());
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->twin);
  EXPECT_FALSE(l->legacy);
  ASSERT_NE(l->Side("primary"), nullptr);
  ASSERT_NE(l->Side("shadow"), nullptr);
  EXPECT_EQ(l->Side("primary")->traces.size(), 1u);
  EXPECT_EQ(l->Side("shadow")->traces.size(), 1u);
  EXPECT_EQ(l->Side("shadow")->traces[0].role, "shadow");
  // The older layout: primary.tsc and shadow.tsc.
  fs::create_directories(d / "old");
  {
    WriterOptions o;
    o.path = (d / "old" / "primary.tsc").string();
    std::string err;
    auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
    ASSERT_TRUE(w);
    w->Append(test::MakeKernel(0, 0));
    w->Close();
    o.path = (d / "old" / "shadow.tsc").string();
    w = TraceWriter::Open(o, BaseHeader("shadow"), &err);
    ASSERT_TRUE(w);
    w->Close();
  }
  auto old = ListRun((d / "old").string());
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->twin);
  EXPECT_TRUE(old->legacy);
  EXPECT_EQ(old->Side("primary")->traces.at(0).path, (d / "old" / "primary.tsc").string());
  EXPECT_EQ(old->Side("primary")->traces.at(0).kernel_records, 1u);
  EXPECT_FALSE(ListRun((d / "missing").string()).ok());
}

}  // namespace
}  // namespace twinscope
