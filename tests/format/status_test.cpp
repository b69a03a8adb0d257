// STATUS chunks while a trace is being written: the writer's own periodic
// STATUS keeps coming however busy it is, Checkpoint() puts the records
// counted so far before a STATUS with the counters as set, an unchanged
// STATUS is not repeated, and StatusTicker checkpoints every period. The file
// is read while the writer is open, as after a crash.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "format/header.h"
#include "format/status_ticker.h"
#include "test_util.h"
#include "twinscope/counters.h"

namespace twinscope {
namespace {

// Every STATUS of a file read while it is written, with the records before it.
struct StatusSink : RecordSink {
  uint64_t kernels = 0;
  std::vector<std::pair<uint64_t, nlohmann::json>> statuses;  // (kernels before it, object)
  void OnKernel(const KernelRecord&) override { ++kernels; }
  void OnStatus(const nlohmann::json& j, bool) override { statuses.emplace_back(kernels, j); }
};

StatusSink ReadLive(const std::string& path) {
  StatusSink sink;
  std::string err;
  auto r = TraceReader::Open(path, &err);
  EXPECT_TRUE(r) << err;
  if (r) r->Read(sink);
  return sink;
}

TEST(TraceStatus, PeriodicStatusKeepsComingWhileRecordsStreamIn) {
  // A steady stream of full chunks keeps the writer thread busy (its queue is
  // never empty for long): the STATUS must not wait for a quiet moment.
  WriterOptions o;
  o.path = test::TempPath("status_busy");
  o.chunk_bytes = 4096;
  o.status_interval = std::chrono::milliseconds(20);
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
  ASSERT_TRUE(w) << err;
  const auto start = std::chrono::steady_clock::now();
  uint64_t i = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(400)) {
    for (int k = 0; k < 64; ++k) w->Append(test::MakeKernel(i++, 0));
    w->SetCounter(counters::kLaunchesSeen, i);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  StatusSink live = ReadLive(o.path);
  // 400 ms at one STATUS per 20 ms: far more than a handful, even on a loaded machine.
  EXPECT_GE(live.statuses.size(), 5u);
  ASSERT_FALSE(live.statuses.empty());
  // Each STATUS counts no more launches than there are records before it.
  for (const auto& [before, j] : live.statuses) EXPECT_LE(j["counters"].value(counters::kLaunchesSeen, 0u), before);
  // The last one is recent: it counts most of what was appended.
  EXPECT_GE(live.statuses.back().second["counters"].value(counters::kLaunchesSeen, 0u), i / 2);
  w->Close();
}

TEST(TraceStatus, CheckpointPutsCountedRecordsBeforeItsStatusAndSkipsRepeats) {
  WriterOptions o;
  o.path = test::TempPath("status_checkpoint");
  o.status_interval = std::chrono::hours(1);  // only Checkpoint() writes STATUS chunks here
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
  ASSERT_TRUE(w) << err;
  for (int i = 0; i < 10; ++i) w->Append(test::MakeKernel(i, 0));
  w->SetCounter(counters::kLaunchesSeen, 10);
  w->SetMetadata("tool_state", "collecting");
  const uint64_t before = MonotonicNs();
  w->Checkpoint();
  w->Checkpoint();  // nothing changed: no second STATUS
  w->SetCounter(counters::kLaunchesSeen, 10);
  w->Checkpoint();  // the same value again: still nothing new
  auto wait_for = [&](size_t n) {
    StatusSink s;
    for (int tries = 0; tries < 200 && s.statuses.size() < n; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      s = ReadLive(o.path);
    }
    return s;
  };
  StatusSink s = wait_for(1);
  ASSERT_EQ(s.statuses.size(), 1u);
  EXPECT_EQ(s.statuses[0].first, 10u);  // the records come first
  EXPECT_EQ(s.statuses[0].second["counters"][counters::kLaunchesSeen], 10);
  EXPECT_EQ(s.statuses[0].second["tool_state"], "collecting");
  EXPECT_FALSE(s.statuses[0].second["summary"].get<bool>());
  EXPECT_GE(s.statuses[0].second["monotonic_ns"].get<uint64_t>(), before);

  w->Append(test::MakeKernel(10, 0));  // a new record alone is news
  w->Checkpoint();
  w->SetCounter(counters::kLaunchesSeen, 12);  // and so is a new counter value
  w->Checkpoint();
  s = wait_for(3);
  ASSERT_EQ(s.statuses.size(), 3u);
  EXPECT_EQ(s.statuses[1].first, 11u);
  EXPECT_EQ(s.statuses[2].second["counters"][counters::kLaunchesSeen], 12);
  ASSERT_TRUE(w->Close(&err)) << err;
  s = ReadLive(o.path);
  EXPECT_EQ(s.statuses.size(), 4u);  // + the SUMMARY, always written
}

TEST(TraceStatus, TickerPublishesAndCheckpointsEveryPeriodUntilStopped) {
  WriterOptions o;
  o.path = test::TempPath("status_ticker");
  o.status_interval = std::chrono::hours(1);
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("shadow"), &err);
  ASSERT_TRUE(w) << err;
  std::atomic<uint64_t> ticks{0};
  StatusTicker ticker(w.get(), std::chrono::milliseconds(10), [&] {
    // A counter that changes on every tick, so every checkpoint writes a STATUS.
    w->SetCounter(counters::kLaunchesSeen, ticks.fetch_add(1) + 1);
  });
  for (int tries = 0; tries < 500 && ticks.load() < 5; ++tries)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ticker.Stop();
  const uint64_t published = ticks.load();
  EXPECT_GE(published, 5u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ticks.load(), published);  // stopped for good
  ticker.Stop();                       // idempotent
  StatusSink s;
  for (int tries = 0; tries < 200 && s.statuses.size() < published; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    s = ReadLive(o.path);
  }
  ASSERT_EQ(s.statuses.size(), published);
  EXPECT_EQ(s.statuses.back().second["counters"][counters::kLaunchesSeen], published);

  StatusTicker off(w.get(), std::chrono::milliseconds(0), [&] { ticks.fetch_add(1); });  // period 0: no thread
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(ticks.load(), published);
  w->Close();
}

}  // namespace
}  // namespace twinscope
