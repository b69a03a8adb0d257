// The writer with several compression threads: records from many appending
// threads arrive exactly once, chunks keep their submission order (strings
// before the records that use them, SUMMARY last), drops are counted, and the
// file does not depend on the number of compression threads.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "format/chunk.h"
#include "test_util.h"
#include "twinscope/counters.h"

namespace twinscope {
namespace {

// Record i of appending thread t: every field derived from (t, i), so the
// reader's copy can be compared byte for byte.
KernelRecord KernelOf(uint32_t t, uint32_t i, StringId name) {
  KernelRecord k{};
  k.start_ns = (uint64_t{t} << 40) + uint64_t{i} * 977;
  k.end_ns = k.start_ns + 100 + i % 13;
  k.correlation_id = i;
  k.device = t;
  k.stream = i % 5;
  k.name = name;
  k.grid = {i % 1000 + 1, t + 1, 1};
  k.block = {256, 1, 1};
  k.grid_id = uint64_t{t} * 1'000'003 + i;
  k.key = {0x9e3779b97f4a7c15ull * (i + 1) ^ t, name, i % 17};
  return k;
}

BlockRecord BlockOf(uint32_t t, uint32_t i) {
  BlockRecord b{};
  b.launch_seq = t;
  b.enter_ns = uint64_t{i} * 31 + t;
  b.exit_ns = b.enter_ns + 7 + i % 11;
  b.block_linear = i;
  b.order = i ^ 0x5555;
  b.x = i % 64;
  b.y = t;
  b.sm = i % 132;
  return b;
}

ApiRecord ApiOf(uint32_t t, uint32_t i) {
  ApiRecord a{};
  a.start_ns = uint64_t{i} * 1000 + t;
  a.end_ns = a.start_ns + 50;
  a.thread_id = t;
  a.correlation_id = i;
  a.cbid = i % 300;
  return a;
}

std::string NameOf(uint32_t t, uint32_t i) {
  return "thread" + std::to_string(t) + "_kernel" + std::to_string(i / 1000);
}

// Checks every delivered record against KernelOf/BlockOf/ApiOf, in order per
// appending thread and type, and that nothing follows the SUMMARY chunk.
struct CheckingSink : RecordSink {
  const TraceReader* reader = nullptr;
  bool exact = true;  // every record of each thread (false: a subsequence, after drops)
  std::vector<int64_t> next_kernel, next_block, next_api;
  uint64_t kernels = 0, blocks = 0, apis = 0, bad = 0, out_of_order = 0, unknown_name = 0, after_summary = 0;
  int statuses = 0, summaries = 0;

  explicit CheckingSink(int threads) : next_kernel(threads, 0), next_block(threads, 0), next_api(threads, 0) {}

  bool InOrder(std::vector<int64_t>& next, uint32_t t, uint32_t i) {
    if (t >= next.size() || (exact ? i != next[t] : i < next[t])) return false;
    next[t] = int64_t{i} + 1;
    return true;
  }
  void OnKernel(const KernelRecord& k) override {
    ++kernels;
    after_summary += summaries;
    if (!InOrder(next_kernel, k.device, k.correlation_id)) ++out_of_order;
    // The string must already be known when its first record arrives.
    if (reader->String(k.name) != NameOf(k.device, k.correlation_id)) ++unknown_name;
    KernelRecord want = KernelOf(k.device, k.correlation_id, k.name);
    if (std::memcmp(&want, &k, sizeof k) != 0) ++bad;
  }
  void OnBlock(const BlockRecord& b) override {
    ++blocks;
    after_summary += summaries;
    if (!InOrder(next_block, static_cast<uint32_t>(b.launch_seq), b.block_linear)) ++out_of_order;
    BlockRecord want = BlockOf(static_cast<uint32_t>(b.launch_seq), b.block_linear);
    if (std::memcmp(&want, &b, sizeof b) != 0) ++bad;
  }
  void OnApi(const ApiRecord& a) override {
    ++apis;
    after_summary += summaries;
    if (!InOrder(next_api, static_cast<uint32_t>(a.thread_id), a.correlation_id)) ++out_of_order;
    ApiRecord want = ApiOf(static_cast<uint32_t>(a.thread_id), a.correlation_id);
    if (std::memcmp(&want, &a, sizeof a) != 0) ++bad;
  }
  void OnStatus(const nlohmann::json&, bool summary) override {
    after_summary += summaries;
    summary ? ++summaries : ++statuses;
  }
};

// Appending thread t: kernels (a new interned name every 1000), blocks and
// API records interleaved. Returns how many of each Append() accepted.
struct Appended {
  uint64_t kernels = 0, blocks = 0, apis = 0, attempts = 0;
};
Appended AppendStream(TraceWriter& w, uint32_t t, uint32_t n) {
  Appended got;
  StringId name = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (i % 1000 == 0) name = w.Intern(NameOf(t, i));
    got.kernels += w.Append(KernelOf(t, i, name));
    got.blocks += w.Append(BlockOf(t, i));
    got.attempts += 2;
    if (i % 3 == 0) {
      got.apis += w.Append(ApiOf(t, i / 3));
      ++got.attempts;
    }
  }
  return got;
}

TEST(ParallelWriter, ManyThreadsWithFourCompressorsWriteExactlyTheAppendedRecordsInOrder) {
  WriterOptions o;
  o.path = test::TempPath("parallel_exact");
  o.chunk_bytes = 4096;  // many chunks per thread and type
  o.max_buffered_bytes = 1u << 30;
  o.compression_threads = 4;
  o.status_interval = std::chrono::milliseconds(2);
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
  ASSERT_TRUE(w) << err;
  constexpr int kThreads = 8;
  constexpr uint32_t kPer = 30000;
  std::vector<std::thread> ts;
  std::vector<Appended> got(kThreads);
  for (int t = 0; t < kThreads; ++t) ts.emplace_back([&, t] { got[t] = AppendStream(*w, t, kPer); });
  for (auto& t : ts) t.join();
  w->AddCounter(counters::kLaunchesSeen, 42);
  // Once the queue is written out, a periodic STATUS follows within ~2 ms.
  int statuses_while_open = 0;
  for (int tries = 0; tries < 500 && statuses_while_open == 0; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto live = TraceReader::Open(o.path, &err);
    ASSERT_TRUE(live) << err;
    test::CollectSink statuses;
    live->Read(statuses);
    statuses_while_open = statuses.statuses;
  }
  EXPECT_GE(statuses_while_open, 1);
  ASSERT_TRUE(w->Close(&err)) << err;
  EXPECT_EQ(w->dropped(), 0u);
  for (const auto& g : got) EXPECT_EQ(g.kernels + g.blocks + g.apis, g.attempts);

  auto r = TraceReader::Open(o.path, &err);
  ASSERT_TRUE(r) << err;
  CheckingSink sink(kThreads);
  sink.reader = r.get();
  ReadReport rep = r->Read(sink);
  EXPECT_EQ(rep.end, ReadEnd::kComplete) << rep.message;
  EXPECT_EQ(sink.kernels, uint64_t{kThreads} * kPer);
  EXPECT_EQ(sink.blocks, uint64_t{kThreads} * kPer);
  EXPECT_EQ(sink.apis, uint64_t{kThreads} * ((kPer + 2) / 3));
  EXPECT_EQ(sink.bad, 0u);
  EXPECT_EQ(sink.out_of_order, 0u);
  EXPECT_EQ(sink.unknown_name, 0u);
  EXPECT_EQ(sink.after_summary, 0u);
  EXPECT_GE(sink.statuses, 1);
  EXPECT_EQ(sink.summaries, 1);
  EXPECT_EQ(r->last_status()["counters"][counters::kLaunchesSeen], 42);
  EXPECT_EQ(r->last_status()["counters"][counters::kWriterDropped], 0);
  std::remove(o.path.c_str());
}

// The chunks of a file, header and stored bytes, in file order.
struct RawChunk {
  format::ChunkHeader header;
  std::string stored;
};
std::vector<RawChunk> ReadChunks(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<RawChunk> chunks;
  format::FilePreamble pre{};
  if (bytes.size() < sizeof pre) return chunks;
  std::memcpy(&pre, bytes.data(), sizeof pre);
  size_t off = sizeof pre + pre.header_size;
  while (off + sizeof(format::ChunkHeader) <= bytes.size()) {
    RawChunk c;
    std::memcpy(&c.header, bytes.data() + off, sizeof c.header);
    off += sizeof c.header;
    if (off + c.header.stored_size > bytes.size()) break;
    c.stored = bytes.substr(off, c.header.stored_size);
    off += c.header.stored_size;
    chunks.push_back(std::move(c));
  }
  return chunks;
}

// One appending thread, hand-offs at fixed points and no periodic STATUS: the
// queue's order is fixed, so every chunk must come out byte for byte the same
// whether one thread or eight compress. (The SUMMARY differs only in
// bytes_written, a snapshot taken while chunks are still being written.)
TEST(ParallelWriter, FileIsTheSameWhateverTheNumberOfCompressionThreads) {
  std::vector<std::vector<RawChunk>> files;
  for (unsigned threads : {0u, 1u, 2u, 4u, 8u}) {
    WriterOptions o;
    o.path = test::TempPath("parallel_same_" + std::to_string(threads));
    o.chunk_bytes = 4096;
    o.max_buffered_bytes = 1u << 30;
    o.compression_threads = threads;
    o.status_interval = std::chrono::hours(1);
    std::string err;
    auto w = TraceWriter::Open(o, {{"role", "primary"}}, &err);
    ASSERT_TRUE(w) << err;
    AppendStream(*w, 0, 5000);
    w->Flush();  // partial chunks of every type
    AppendStream(*w, 1, 7000);
    w->AddCounter(counters::kLaunchesSeen, 7);
    ASSERT_TRUE(w->Close(&err)) << err;
    files.push_back(ReadChunks(o.path));
    std::remove(o.path.c_str());
  }
  const auto& want = files[0];
  ASSERT_GT(want.size(), 100u);
  EXPECT_EQ(want.back().header.kind, static_cast<uint32_t>(ChunkKind::kSummary));
  for (size_t f = 1; f < files.size(); ++f) {
    const auto& got = files[f];
    ASSERT_EQ(got.size(), want.size()) << "file " << f;
    for (size_t c = 0; c + 1 < want.size(); ++c) {
      ASSERT_EQ(0, std::memcmp(&got[c].header, &want[c].header, sizeof want[c].header))
          << "file " << f << " chunk " << c;
      ASSERT_EQ(got[c].stored, want[c].stored) << "file " << f << " chunk " << c;
    }
    EXPECT_EQ(got.back().header.kind, static_cast<uint32_t>(ChunkKind::kSummary));
  }
}

// A cap of a few chunks and four appending threads: most records are dropped,
// every drop is counted, and what was accepted is on disk, intact and in order.
// Once the queue is written out, the cap has room again (bytes are released).
TEST(ParallelWriter, TinyCapDropsAreCountedAndAcceptedRecordsAllArrive) {
  WriterOptions o;
  o.path = test::TempPath("parallel_cap");
  o.chunk_bytes = 4096;
  o.max_buffered_bytes = 6 * 4096;
  o.compression_threads = 4;
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
  ASSERT_TRUE(w) << err;
  constexpr int kThreads = 4;
  std::vector<std::thread> ts;
  std::vector<Appended> got(kThreads);
  for (int t = 0; t < kThreads; ++t) ts.emplace_back([&, t] { got[t] = AppendStream(*w, t, 40000); });
  for (auto& t : ts) t.join();
  uint64_t attempts = 0, accepted = 0;
  for (const auto& g : got) {
    attempts += g.attempts;
    accepted += g.kernels + g.blocks + g.apis;
  }
  EXPECT_GT(w->dropped(), 0u);
  EXPECT_EQ(accepted + w->dropped(), attempts);

  // Room again once the queue is on disk (a thread that appended nothing yet).
  w->Flush();
  bool room = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::thread late([&] {
    while (!room && std::chrono::steady_clock::now() < deadline) {
      ++attempts;
      room = w->Append(BlockOf(kThreads, 0));
      if (!room) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  late.join();
  EXPECT_TRUE(room) << "the cap never had room again: queued bytes were not released";
  ASSERT_TRUE(w->Close(&err)) << err;
  EXPECT_EQ(accepted + 1 + w->dropped(), attempts);

  auto r = TraceReader::Open(o.path, &err);
  ASSERT_TRUE(r) << err;
  CheckingSink sink(kThreads + 1);
  sink.reader = r.get();
  sink.exact = false;
  ReadReport rep = r->Read(sink);
  EXPECT_EQ(rep.end, ReadEnd::kComplete) << rep.message;
  EXPECT_EQ(sink.kernels + sink.blocks + sink.apis, accepted + 1);
  EXPECT_EQ(sink.bad, 0u);
  EXPECT_EQ(sink.out_of_order, 0u);
  EXPECT_EQ(sink.unknown_name, 0u);
  EXPECT_EQ(sink.summaries, 1);
  EXPECT_EQ(r->last_status()["counters"][counters::kWriterDropped], w->dropped());
}

// Close() while threads still append: a record Append() accepted is on disk
// before the SUMMARY chunk; the rest is counted as dropped.
TEST(ParallelWriter, CloseRacingAppendsKeepsEveryAcceptedRecordBeforeTheSummary) {
  for (int round = 0; round < 20; ++round) {
    WriterOptions o;
    o.path = test::TempPath("parallel_close_race");
    o.chunk_bytes = 4096;
    o.max_buffered_bytes = 1u << 30;
    o.compression_threads = 4;
    std::string err;
    auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
    ASSERT_TRUE(w) << err;
    constexpr int kThreads = 3;
    std::atomic<int> started{0};
    std::vector<std::thread> ts;
    std::vector<Appended> got(kThreads);
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back([&, t] {
        started.fetch_add(1);
        got[t] = AppendStream(*w, t, 20000);
      });
    while (started.load() < kThreads) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::microseconds(200 * round));
    ASSERT_TRUE(w->Close(&err)) << err;
    for (auto& t : ts) t.join();
    uint64_t attempts = 0, accepted = 0;
    for (const auto& g : got) {
      attempts += g.attempts;
      accepted += g.kernels + g.blocks + g.apis;
    }
    EXPECT_EQ(accepted + w->dropped(), attempts);

    auto r = TraceReader::Open(o.path, &err);
    ASSERT_TRUE(r) << err;
    CheckingSink sink(kThreads);
    sink.reader = r.get();
    ReadReport rep = r->Read(sink);
    EXPECT_EQ(rep.end, ReadEnd::kComplete) << rep.message;
    EXPECT_EQ(sink.kernels + sink.blocks + sink.apis, accepted) << "round " << round;
    EXPECT_EQ(sink.after_summary, 0u) << "round " << round;
    EXPECT_EQ(sink.bad, 0u);
    EXPECT_EQ(sink.unknown_name, 0u);
    EXPECT_EQ(sink.summaries, 1);
    std::remove(o.path.c_str());
  }
}

// A write that fails (here: the file size limit) is reported by Close() as
// before; the records of every chunk that did not make it are counted as
// dropped, and the file reads up to the failure.
TEST(ParallelWriter, WriteErrorIsReportedAndLostChunksAreCounted) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = test::TempPath("parallel_io_error");
  auto child = [&]() -> int {
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG
    rlimit limit{};
    ::getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = 64 << 10;
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 2;
    WriterOptions o;
    o.path = path;
    o.chunk_bytes = 4096;
    o.max_buffered_bytes = 1u << 30;
    o.compression_threads = 4;
    std::string err;
    auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
    if (!w) return 3;
    Appended got = AppendStream(*w, 0, 100000);
    if (w->Close(&err) || err.find("write to '" + path + "' failed") == std::string::npos) return 4;
    auto r = TraceReader::Open(path, &err);
    if (!r) return 5;
    CheckingSink sink(1);
    sink.reader = r.get();
    ReadReport rep = r->Read(sink);
    if (rep.end == ReadEnd::kComplete || sink.summaries != 0 || sink.bad != 0 || sink.out_of_order != 0) return 6;
    if (sink.kernels + sink.blocks + sink.apis == 0) return 7;
    if (got.kernels + got.blocks + got.apis != got.attempts) return 8;
    if (sink.kernels + sink.blocks + sink.apis + w->dropped() != got.attempts) return 9;
    return 0;
  };
  EXPECT_EXIT(std::_Exit(child()), ::testing::ExitedWithCode(0), "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace twinscope
