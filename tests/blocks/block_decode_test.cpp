// Decoding of one launch's buffer (patch/block_probe_abi.h) into BlockRecords.
#include "blocks/block_decode.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace twinscope::blocks {
namespace {

struct Buffer {
  std::vector<unsigned char> bytes;
  BlockProbeHeader* header() { return reinterpret_cast<BlockProbeHeader*>(bytes.data()); }
  BlockProbeSlot* slot(uint32_t i) {
    return reinterpret_cast<BlockProbeSlot*>(bytes.data() + sizeof(BlockProbeHeader)) + i;
  }
};

// A buffer as a traced launch gets it: all zeros (slots for the whole grid), or
// with a capped capacity written by the host.
Buffer Fresh(uint32_t slots, bool capped = false) {
  Buffer b;
  b.bytes.assign(BlockProbeBufferBytes(slots), 0);
  if (capped) {
    BlockProbeHeader h = MakeCappedHeader(slots);
    std::memcpy(b.bytes.data(), &h, sizeof h);
  }
  return b;
}

void Complete(BlockProbeSlot* s, uint64_t enter, uint64_t exit, uint32_t sm, uint32_t order, uint32_t threads) {
  s->enter_ns = enter;
  s->exit_ns = exit;
  s->sm = sm;
  s->order = order;
  s->entered = 1;
  s->exited_threads = threads;
}

TEST(BlockDecode, SlotsForCapsAtMax) {
  EXPECT_EQ(SlotsFor(Dim3{1000, 1, 1}, 1u << 20), 1000u);
  EXPECT_EQ(SlotsFor(Dim3{65536, 2, 3}, 100000), 100000u);
  EXPECT_EQ(BlockCount(Dim3{65536, 65535, 4}), 65536ull * 65535 * 4);
}

TEST(BlockDecode, CompleteLaunchDecodesCoordinates) {
  const Dim3 grid{4, 3, 2};
  Buffer b = Fresh(24);
  for (uint32_t i = 0; i < 24; ++i) Complete(b.slot(i), 1000 + i, 2000 + i, i % 5, 23 - i, 256);
  DecodedLaunch d = DecodeLaunchBuffer(b.bytes.data(), b.bytes.size(), 77, grid, 256);
  ASSERT_FALSE(d.bad_header);
  ASSERT_EQ(d.blocks.size(), 24u);
  EXPECT_EQ(d.expected, 24u);
  EXPECT_EQ(d.missing + d.incomplete + d.overflow, 0u);
  const BlockRecord& r = d.blocks[17];  // 17 = 1 + 4 * (1 + 3 * 1)
  EXPECT_EQ(r.launch_seq, 77u);
  EXPECT_EQ(r.block_linear, 17u);
  EXPECT_EQ(r.x, 1u);
  EXPECT_EQ(r.y, 1u);
  EXPECT_EQ(r.z, 1u);
  EXPECT_EQ(r.enter_ns, 1017u);
  EXPECT_EQ(r.exit_ns, 2017u);
  EXPECT_EQ(r.sm, 2u);
  EXPECT_EQ(r.order, 6u);
}

TEST(BlockDecode, CountsMissingIncompleteAndOverflow) {
  const Dim3 grid{10, 1, 1};
  Buffer b = Fresh(8, true);  // capacity below the grid: 2 blocks overflow
  b.header()->overflow = 2;
  for (uint32_t i = 0; i < 8; ++i) Complete(b.slot(i), 10, 20, 0, i, 64);
  std::memset(b.slot(3), 0, sizeof(BlockProbeSlot));  // never entered
  b.slot(5)->exited_threads = 32;                     // half the threads never left
  b.slot(5)->exit_ns = 0;
  b.slot(6)->exit_ns = 0;  // counted but no time: also incomplete
  DecodedLaunch d = DecodeLaunchBuffer(b.bytes.data(), b.bytes.size(), 1, grid, 64);
  ASSERT_FALSE(d.bad_header);
  EXPECT_EQ(d.blocks.size(), 7u);
  EXPECT_EQ(d.missing, 1u);
  EXPECT_EQ(d.incomplete, 2u);
  EXPECT_EQ(d.overflow, 2u);
  EXPECT_EQ(d.blocks[4].block_linear, 5u);
  EXPECT_EQ(d.blocks[4].exit_ns, 0u);
}

TEST(BlockDecode, ZeroHeaderMeansOneSlotPerBlock) {
  Buffer b = Fresh(6);
  for (uint32_t i = 0; i < 6; ++i) Complete(b.slot(i), 1, 2, 0, i, 32);
  b.header()->next_order = 6;
  DecodedLaunch d = DecodeLaunchBuffer(b.bytes.data(), b.bytes.size(), 0, Dim3{3, 2, 1}, 32);
  ASSERT_FALSE(d.bad_header);
  EXPECT_EQ(d.blocks.size(), 6u);
  EXPECT_EQ(d.missing + d.incomplete + d.overflow, 0u);
}

TEST(BlockDecode, RejectsBadHeaders) {
  const Dim3 grid{4, 1, 1};
  Buffer b = Fresh(4);
  BlockProbeHeader off = MakeOffHeader();  // an "off" buffer is never a traced launch's
  std::memcpy(b.bytes.data(), &off, sizeof off);
  EXPECT_TRUE(DecodeLaunchBuffer(b.bytes.data(), b.bytes.size(), 0, grid, 1).bad_header);
  b = Fresh(4);
  b.header()->next_order = 5;  // more orders handed out than slots
  EXPECT_TRUE(DecodeLaunchBuffer(b.bytes.data(), b.bytes.size(), 0, grid, 1).bad_header);
  b = Fresh(3, true);
  b.header()->overflow = 2;  // 3 slots for 4 blocks: at most 1 overflows
  EXPECT_TRUE(DecodeLaunchBuffer(b.bytes.data(), b.bytes.size(), 0, grid, 1).bad_header);
  b = Fresh(4);
  EXPECT_TRUE(DecodeLaunchBuffer(b.bytes.data(), b.bytes.size() - 1, 0, grid, 1).bad_header);  // short copy
  b = Fresh(5, true);                                                                          // more slots than blocks
  EXPECT_TRUE(DecodeLaunchBuffer(b.bytes.data(), b.bytes.size(), 0, grid, 1).bad_header);
  EXPECT_TRUE(DecodeLaunchBuffer(nullptr, 100, 0, grid, 1).bad_header);
}

}  // namespace
}  // namespace twinscope::blocks
