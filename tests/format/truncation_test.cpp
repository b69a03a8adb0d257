// Cuts and damages a real small trace at every byte and checks that the reader
// delivers exactly the whole chunks before the damage and says what happened.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <random>

#include "format/chunk.h"
#include "format/trace_tail.h"
#include "test_util.h"

namespace twinscope {
namespace {

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), bytes.size());
}

struct ChunkSpan {
  uint64_t begin, end;
  uint32_t records;
};

// Chunk boundaries parsed independently of the reader.
std::vector<ChunkSpan> Chunks(const std::string& bytes, uint64_t* first) {
  format::FilePreamble pre;
  std::memcpy(&pre, bytes.data(), sizeof pre);
  uint64_t off = sizeof pre + pre.header_size;
  *first = off;
  std::vector<ChunkSpan> out;
  while (off < bytes.size()) {
    format::ChunkHeader h;
    std::memcpy(&h, bytes.data() + off, sizeof h);
    uint64_t end = off + sizeof h + h.stored_size;
    out.push_back({off, end, h.kind == uint32_t(ChunkKind::kRecords) ? h.record_count : 0});
    off = end;
  }
  return out;
}

TEST(TraceTruncation, EveryCutReadsTheWholeChunksBeforeItAndSaysSo) {
  std::string src = test::WriteSampleTrace("trunc_src", 600, 4096);
  std::string bytes = ReadAll(src);
  uint64_t first = 0;
  auto chunks = Chunks(bytes, &first);
  ASSERT_GE(chunks.size(), 5u);  // strings + several record chunks + summary
  std::string cut_path = test::TempPath("trunc_cut");
  for (uint64_t cut = 0; cut < bytes.size(); ++cut) {
    WriteAll(cut_path, bytes.substr(0, cut));
    std::string err;
    auto r = TraceReader::Open(cut_path, &err);
    if (cut < first) {
      EXPECT_FALSE(r) << "cut at " << cut;
      EXPECT_FALSE(err.empty());
      continue;
    }
    ASSERT_TRUE(r) << "cut at " << cut << ": " << err;
    test::CollectSink sink;
    ReadReport rep = r->Read(sink);
    uint64_t whole = 0, records = 0;
    bool boundary = false;
    for (auto& c : chunks) {
      if (c.end <= cut) {
        ++whole;
        records += c.records;
      }
      boundary = boundary || c.end == cut;
    }
    boundary = boundary || cut == first;
    EXPECT_EQ(rep.chunks, whole) << "cut at " << cut;
    EXPECT_EQ(sink.kernels.size(), records) << "cut at " << cut;
    EXPECT_EQ(rep.end, boundary ? ReadEnd::kNoSummary : ReadEnd::kTruncated) << "cut at " << cut;
    EXPECT_FALSE(rep.message.empty());
  }
  test::CollectSink full;
  auto r = TraceReader::Open(src, nullptr);
  EXPECT_EQ(r->Read(full).end, ReadEnd::kComplete);
  EXPECT_EQ(full.kernels.size(), 600u);
}

// A file growing byte by byte, as `twinscope record` sees it while the
// program runs: the tail counts exactly the records of whole chunks.
TEST(TraceTail, CountsRecordsOfWholeChunksAsTheFileGrows) {
  std::string src = test::WriteSampleTrace("tail_src", 600, 4096);
  std::string bytes = ReadAll(src);
  uint64_t first = 0;
  auto chunks = Chunks(bytes, &first);
  std::string path = test::TempPath("tail_grow");
  std::remove(path.c_str());
  TraceTail tail(path);
  EXPECT_EQ(tail.Poll(), 0u);  // no file yet
  for (uint64_t cut = 0; cut <= bytes.size(); cut += 37) {
    WriteAll(path, bytes.substr(0, cut));
    uint64_t records = 0;
    for (auto& c : chunks)
      if (c.end <= cut) records += c.records;
    EXPECT_EQ(tail.Poll(), records) << "at " << cut;
  }
  WriteAll(path, bytes);
  EXPECT_EQ(tail.Poll(), 600u);
  TraceTail other(test::TempPath("tail_not_trace"));
  std::ofstream(test::TempPath("tail_not_trace")) << "not a trace file at all, just text";
  EXPECT_EQ(other.Poll(), 0u);
}

TEST(TraceTruncation, RandomByteDamageNeverCrashesAndKeepsEarlierChunks) {
  std::string src = test::WriteSampleTrace("damage_src", 600, 4096);
  std::string bytes = ReadAll(src);
  uint64_t first = 0;
  auto chunks = Chunks(bytes, &first);
  std::mt19937_64 rng(42);
  std::string path = test::TempPath("damage");
  for (int iter = 0; iter < 3000; ++iter) {
    std::string d = bytes;
    uint64_t at = first + rng() % (bytes.size() - first);
    d[at] = static_cast<char>(d[at] ^ (1 + rng() % 255));
    WriteAll(path, d);
    std::string err;
    auto r = TraceReader::Open(path, &err);
    ASSERT_TRUE(r) << err;
    test::CollectSink sink;
    ReadReport rep = r->Read(sink);
    EXPECT_EQ(rep.end, ReadEnd::kCorrupt) << "damage at " << at;
    uint64_t before = 0, records = 0;
    for (auto& c : chunks)
      if (c.end <= at) {
        ++before;
        records += c.records;
      }
    EXPECT_EQ(rep.chunks, before) << "damage at " << at;
    EXPECT_EQ(sink.kernels.size(), records);
    EXPECT_NE(rep.message.find("chunk " + std::to_string(before + 1)), std::string::npos) << rep.message;
  }
}

}  // namespace
}  // namespace twinscope
