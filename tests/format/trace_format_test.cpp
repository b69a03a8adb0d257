#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "format/chunk.h"
#include "test_util.h"
#include "twinscope/counters.h"

namespace twinscope {
namespace {

using test::CollectSink;

TEST(TraceFormat, RoundTripsRecordsStringsCountersAndHeader) {
  WriterOptions o;
  o.path = test::TempPath("roundtrip");
  std::string err;
  nlohmann::json header = BaseHeader("shadow");
  header["extra"] = "x";
  auto w = TraceWriter::Open(o, header, &err);
  ASSERT_TRUE(w) << err;
  StringId name = w->Intern("my_kernel");
  EXPECT_EQ(name, w->Intern("my_kernel"));
  StringId path = w->Intern("step#3");
  KernelRecord k = test::MakeKernel(7, name);
  k.key = {0xabcdef, path, 2};
  ASSERT_TRUE(w->Append(k));
  BlockRecord b{};
  b.launch_seq = 9;
  b.sm = 131;
  b.enter_ns = 5;
  b.exit_ns = 6;
  ASSERT_TRUE(w->Append(b));
  LaunchRecord l{};
  l.seq = 9;
  l.kernel = name;
  ASSERT_TRUE(w->Append(l));
  w->AddCounter(counters::kLaunchesSeen, 3);
  w->AddCounter(counters::kLaunchesSeen, 4);
  w->SetMetadata("tool_state", {{"cupti", "ok"}});
  ASSERT_TRUE(w->Close(&err)) << err;

  auto r = TraceReader::Open(o.path, &err);
  ASSERT_TRUE(r) << err;
  EXPECT_EQ(r->header()["role"], "shadow");
  EXPECT_EQ(r->header()["extra"], "x");
  EXPECT_EQ(r->header()["pid"], getpid());
  CollectSink sink;
  ReadReport rep = r->Read(sink);
  EXPECT_EQ(rep.end, ReadEnd::kComplete) << rep.message;
  ASSERT_EQ(sink.kernels.size(), 1u);
  EXPECT_EQ(0, std::memcmp(&sink.kernels[0], &k, sizeof k));
  ASSERT_EQ(sink.blocks.size(), 1u);
  EXPECT_EQ(sink.blocks[0].sm, 131u);
  ASSERT_EQ(sink.launches.size(), 1u);
  EXPECT_EQ(r->String(sink.kernels[0].name), "my_kernel");
  EXPECT_EQ(r->String(sink.kernels[0].key.path), "step#3");
  EXPECT_EQ(sink.summaries, 1);
  EXPECT_EQ(r->last_status()["counters"][counters::kLaunchesSeen], 7);
  EXPECT_EQ(r->last_status()["counters"][counters::kWriterDropped], 0);
  EXPECT_EQ(r->last_status()["tool_state"]["cupti"], "ok");
  EXPECT_EQ(rep.records, 3u);
}

TEST(TraceFormat, ManyRecordsFromManyThreadsAllArriveInPerThreadOrder) {
  WriterOptions o;
  o.path = test::TempPath("threads");
  o.chunk_bytes = 8192;
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
  ASSERT_TRUE(w) << err;
  constexpr int kThreads = 4, kPer = 20000;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPer; ++i) {
        KernelRecord k{};
        k.device = t;
        k.correlation_id = i;
        w->Append(k);
      }
    });
  for (auto& t : ts) t.join();
  ASSERT_TRUE(w->Close(&err)) << err;
  auto r = TraceReader::Open(o.path, &err);
  ASSERT_TRUE(r);
  CollectSink sink;
  EXPECT_TRUE(r->Read(sink).ok());
  ASSERT_EQ(sink.kernels.size(), size_t(kThreads * kPer));
  std::vector<int> next(kThreads, 0);
  for (auto& k : sink.kernels) EXPECT_EQ(k.correlation_id, uint32_t(next[k.device]++));
}

// Appends that hand off full chunks and reuse written buffers, racing with
// Flush() and the periodic collection: must neither deadlock nor lose records.
TEST(TraceFormat, AppendsRacingFlushesNeitherDeadlockNorLoseRecords) {
  WriterOptions o;
  o.path = test::TempPath("race");
  o.chunk_bytes = 4096;
  o.status_interval = std::chrono::milliseconds(1);
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
  ASSERT_TRUE(w) << err;
  std::atomic<bool> done{false};
  std::thread flusher([&] {
    while (!done.load()) w->Flush();
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) w->Append(KernelRecord{});
    });
  for (auto& t : ts) t.join();
  done = true;
  flusher.join();
  ASSERT_TRUE(w->Close(&err)) << err;
  auto r = TraceReader::Open(o.path, &err);
  CollectSink sink;
  EXPECT_EQ(r->Read(sink).end, ReadEnd::kComplete);
  // 300,000 records of 128 bytes (37 MiB) fit the default 64 MiB cap, so none
  // may be dropped (drops at a small cap: MemoryCapDropsAndCountsInsteadOfGrowing).
  ASSERT_GE(WriterOptions{}.max_buffered_bytes, 300000u * sizeof(KernelRecord));
  EXPECT_EQ(w->dropped(), 0u);
  EXPECT_EQ(sink.kernels.size(), 300000u);
  EXPECT_EQ(r->last_status()["counters"][counters::kWriterDropped], 0);
}

TEST(TraceFormat, MemoryCapDropsAndCountsInsteadOfGrowing) {
  WriterOptions o;
  o.path = test::TempPath("cap");
  o.max_buffered_bytes = 64 * sizeof(KernelRecord);
  o.chunk_bytes = 1 << 20;  // never handed off before Close: staging fills the cap
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
  ASSERT_TRUE(w);
  int accepted = 0;
  for (int i = 0; i < 100; ++i) accepted += w->Append(KernelRecord{}) ? 1 : 0;
  EXPECT_EQ(accepted, 64);
  EXPECT_EQ(w->dropped(), 36u);
  ASSERT_TRUE(w->Close());
  auto r = TraceReader::Open(o.path, &err);
  CollectSink sink;
  r->Read(sink);
  EXPECT_EQ(sink.kernels.size(), 64u);
  EXPECT_EQ(r->last_status()["counters"][counters::kWriterDropped], 36);
}

TEST(TraceFormat, AppendAfterCloseIsCountedNotCrashing) {
  std::string path = test::WriteSampleTrace("after_close", 10);
  WriterOptions o;
  o.path = path;
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
  ASSERT_TRUE(w->Close());
  EXPECT_FALSE(w->Append(KernelRecord{}));
  EXPECT_EQ(w->dropped(), 1u);
}

TEST(TraceFormat, PeriodicStatusPutsRecordsOnDiskWithoutClose) {
  WriterOptions o;
  o.path = test::TempPath("periodic");
  o.status_interval = std::chrono::milliseconds(50);
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
  ASSERT_TRUE(w);
  for (int i = 0; i < 10; ++i) w->Append(test::MakeKernel(i, 0));
  w->AddCounter(counters::kLaunchesSeen, 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // Read while the writer is still open, as after a crash.
  auto r = TraceReader::Open(o.path, &err);
  ASSERT_TRUE(r) << err;
  CollectSink sink;
  ReadReport rep = r->Read(sink);
  EXPECT_EQ(rep.end, ReadEnd::kNoSummary) << rep.message;
  EXPECT_NE(rep.message.find("no summary"), std::string::npos);
  EXPECT_EQ(sink.kernels.size(), 10u);
  EXPECT_GE(sink.statuses, 1);
  EXPECT_EQ(r->last_status()["counters"][counters::kLaunchesSeen], 10);
  w->Close();
}

TEST(TraceFormat, RejectsBadMagicUnknownVersionAndMissingFile) {
  std::string err;
  EXPECT_FALSE(TraceReader::Open("/nonexistent/x.tsc", &err));
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;

  std::string p = test::TempPath("magic");
  std::ofstream(p) << "hello world, not a trace at all";
  EXPECT_FALSE(TraceReader::Open(p, &err));
  EXPECT_NE(err.find("bad magic"), std::string::npos) << err;

  std::string good = test::WriteSampleTrace("version", 5);
  std::fstream f(good, std::ios::in | std::ios::out | std::ios::binary);
  uint32_t v = 99;
  f.seekp(8);
  f.write(reinterpret_cast<char*>(&v), 4);
  f.close();
  EXPECT_FALSE(TraceReader::Open(good, &err));
  EXPECT_NE(err.find("version 99 is not supported"), std::string::npos) << err;
}

TEST(TraceFormat, ReaderReportsBadChecksumWithChunkAndByte) {
  std::string p = test::WriteSampleTrace("crc", 2000);
  std::string err;
  // Find the second chunk and flip a byte in its payload.
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  format::FilePreamble pre{};
  f.read(reinterpret_cast<char*>(&pre), sizeof pre);
  uint64_t off = sizeof pre + pre.header_size;
  format::ChunkHeader h{};
  f.seekg(off);
  f.read(reinterpret_cast<char*>(&h), sizeof h);
  uint64_t second = off + sizeof h + h.stored_size;
  f.seekg(second);
  f.read(reinterpret_cast<char*>(&h), sizeof h);
  char c = 0;
  f.seekg(second + sizeof h + h.stored_size / 2);
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0xff);
  f.seekp(second + sizeof h + h.stored_size / 2);
  f.write(&c, 1);
  f.close();
  auto r = TraceReader::Open(p, &err);
  ASSERT_TRUE(r);
  CollectSink sink;
  ReadReport rep = r->Read(sink);
  EXPECT_EQ(rep.end, ReadEnd::kCorrupt);
  EXPECT_NE(rep.message.find("chunk 2 at byte " + std::to_string(second) + " has a bad checksum"), std::string::npos)
      << rep.message;
  EXPECT_EQ(rep.chunks, 1u);
  EXPECT_EQ(sink.kernels.size(), rep.records);  // what was before the damage was delivered
}

}  // namespace
}  // namespace twinscope
