// The block probe's arena bookkeeping: spans in ring order, reuse only after
// everything before is released, and which spans need no zeroing.
#include "blocks/span_arena.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace twinscope::blocks {
namespace {

TEST(SpanArena, HandsOutInOrderAndWrapsOnlyIntoReleasedRoom) {
  SpanArena a(100);
  auto s1 = a.Take(40), s2 = a.Take(40);  // all free: from the start
  ASSERT_TRUE(s1 && s2);
  EXPECT_EQ(s1->offset, 0u);
  EXPECT_EQ(s2->offset, 40u);
  EXPECT_FALSE(a.Take(30)) << "only 20 bytes left at the end, none at the start";
  a.Release(0, true);
  auto s3 = a.Take(30);  // the end has 20: wraps to the start, which is free now
  ASSERT_TRUE(s3);
  EXPECT_EQ(s3->offset, 0u);
  EXPECT_FALSE(a.Take(20)) << "[30, 40) is free but too small; [80, 100) lies behind the wrap";
  EXPECT_EQ(a.used(), 100u - 40u + 30u);
  a.Release(40, true);
  a.Release(0, true);
  EXPECT_EQ(a.live_spans(), 0u);
  EXPECT_EQ(a.used(), 0u);
  EXPECT_FALSE(a.Take(101));
  EXPECT_FALSE(a.Take(0));
}

TEST(SpanArena, OutOfOrderReleaseFreesRoomOnlyWhenTheOldestGoes) {
  SpanArena a(90);
  ASSERT_TRUE(a.Take(30));  // 0
  ASSERT_TRUE(a.Take(30));  // 30
  ASSERT_TRUE(a.Take(30));  // 60
  a.Release(30, true);      // a stream drained before the others
  EXPECT_EQ(a.live_spans(), 3u);
  EXPECT_FALSE(a.Take(30)) << "the room of span 30 is behind the live span 0";
  a.Release(0, true);
  EXPECT_EQ(a.live_spans(), 1u) << "0 and 30 both go once the oldest is released";
  auto s = a.Take(60);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->offset, 0u);
}

TEST(SpanArena, KnownZeroOnlyForRoomHandedOutBeforeAndZeroedOnRelease) {
  SpanArena a(64);
  auto s = a.Take(32);
  EXPECT_FALSE(s->known_zero) << "fresh device memory is garbage";
  auto u = a.Take(32);  // [32, 64): never handed out
  EXPECT_FALSE(u->known_zero);
  a.Release(s->offset, true);
  a.Release(u->offset, true);
  s = a.Take(16);  // all free: starts over at [0, 16), used and zeroed before
  EXPECT_EQ(s->offset, 0u);
  EXPECT_TRUE(s->known_zero);
  auto t = a.Take(48);  // [16, 64): all handed out and zeroed before
  EXPECT_TRUE(t->known_zero);
  a.Release(s->offset, false);  // one release without zeroing: nothing is trusted any more
  a.Release(t->offset, true);
  s = a.Take(16);
  EXPECT_FALSE(s->known_zero);
}

// Random takes and releases against a byte map: live spans never overlap, and
// a span called known-zero never covers a byte that was left dirty.
TEST(SpanArena, RandomUseNeverOverlapsLiveSpans) {
  const uint64_t size = 1000;
  SpanArena a(size);
  std::vector<int> owner(size, -1);
  std::vector<bool> dirty(size, true);
  std::vector<std::pair<uint64_t, uint64_t>> live;  // offset, bytes
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    if (!live.empty() && (rng() % 3 == 0 || live.size() > 20)) {
      const size_t i = rng() % live.size();
      auto [off, n] = live[i];
      for (uint64_t b = off; b < off + n; ++b) {
        owner[b] = -1;
        dirty[b] = false;  // the probe zeroes every span it releases
      }
      a.Release(off, true);
      live.erase(live.begin() + static_cast<long>(i));
      continue;
    }
    const uint64_t n = 1 + rng() % 200;
    auto s = a.Take(n);
    if (!s) continue;
    ASSERT_LE(s->offset + n, size);
    for (uint64_t b = s->offset; b < s->offset + n; ++b) {
      ASSERT_EQ(owner[b], -1) << "step " << step << ": byte " << b << " is in a live span";
      if (s->known_zero) {
        ASSERT_FALSE(dirty[b]) << "step " << step << ": known-zero span covers a dirty byte";
      }
      owner[b] = step;
      dirty[b] = true;  // the launch writes it
    }
    live.emplace_back(s->offset, n);
  }
}

}  // namespace
}  // namespace twinscope::blocks
