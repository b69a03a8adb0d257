#include "launchkey/launch_key.h"

#include <gtest/gtest.h>

#include <thread>

namespace twinscope {
namespace {

constexpr Dim3 kGrid{1000, 1, 1}, kBlock{512, 1, 1};

TEST(LaunchKey, PathCountsRangeOccurrencesUnderTheirParent) {
  RangeStack s;
  EXPECT_EQ(s.path(), "");
  s.Push("", "step");
  EXPECT_EQ(s.path(), "step#0");
  s.Push("", "attn");
  EXPECT_EQ(s.path(), "step#0/attn#0");
  ASSERT_TRUE(s.Pop(""));
  s.Push("", "attn");
  EXPECT_EQ(s.path(), "step#0/attn#1");
  s.Pop("");
  s.Pop("");
  s.Push("", "step");
  s.Push("", "attn");
  EXPECT_EQ(s.path(), "step#1/attn#0");  // counts restart in a new parent instance
  s.Pop("");
  s.Pop("");
  EXPECT_FALSE(s.Pop(""));  // unbalanced pop changes nothing
  EXPECT_EQ(s.depth(), 0u);
}

TEST(LaunchKey, OrdinalCountsLaunchesOfOneKernelInTheInnermostInstance) {
  RangeStack s;
  s.Push("", "step");
  auto a0 = s.NextLaunch("kA", kGrid, kBlock);
  auto b0 = s.NextLaunch("kB", kGrid, kBlock);
  auto a1 = s.NextLaunch("kA", kGrid, kBlock);
  EXPECT_EQ(a0.ordinal, 0u);
  EXPECT_EQ(b0.ordinal, 0u);
  EXPECT_EQ(a1.ordinal, 1u);
  EXPECT_EQ(a0.path, "step#0");
  EXPECT_NE(a0.hash, a1.hash);
  s.Pop("");
  s.Push("", "step");
  auto a_next = s.NextLaunch("kA", kGrid, kBlock);
  EXPECT_EQ(a_next.ordinal, 0u);
  EXPECT_EQ(a_next.path, "step#1");
  EXPECT_NE(a_next.hash, a0.hash);
}

TEST(LaunchKey, SameProgramGivesSameKeysInTwoIndependentStacks) {
  auto run = [] {
    RangeStack s;
    std::vector<uint64_t> keys;
    for (int step = 0; step < 3; ++step) {
      s.Push("", "step");
      for (int i = 0; i < 4; ++i) keys.push_back(s.NextLaunch(i % 2 ? "gemm" : "cache", kGrid, kBlock).hash);
      s.Pop("");
    }
    return keys;
  };
  auto k1 = run(), k2 = run();
  EXPECT_EQ(k1, k2);
  std::sort(k1.begin(), k1.end());
  EXPECT_EQ(std::unique(k1.begin(), k1.end()), k1.end()) << "keys must be unique within a run";
}

TEST(LaunchKey, ShapeAndDomainArePartOfTheKey) {
  EXPECT_NE(LaunchKeyHash("p", "k", 0, {1, 1, 1}, {32, 1, 1}), LaunchKeyHash("p", "k", 0, {2, 1, 1}, {32, 1, 1}));
  EXPECT_NE(LaunchKeyHash("p", "k", 0, {1, 1, 1}, {32, 1, 1}), LaunchKeyHash("p", "k", 0, {1, 1, 1}, {64, 1, 1}));
  EXPECT_EQ(LaunchKeyHash("p", "k", 3, {1, 2, 3}, {4, 5, 6}), LaunchKeyHash("p", "k", 3, {1, 2, 3}, {4, 5, 6}));
  RangeStack s;
  s.Push("vllm", "decode");
  EXPECT_EQ(s.path(), "vllm::decode#0");
  s.Push("", "inner");
  EXPECT_EQ(s.InnermostName("vllm"), "decode");
  ASSERT_TRUE(s.Pop("vllm"));  // closes the inner default-domain range with it
  EXPECT_EQ(s.depth(), 0u);
}

TEST(LaunchKey, ThreadStacksAreIndependent) {
  ThreadRangeStack().Push("", "main");
  std::string other;
  std::thread([&] { other = ThreadRangeStack().path(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(ThreadRangeStack().path(), "main#0");
  ThreadRangeStack().Pop("");
}

// A launch seen after the thread's own destructors ran (a thread_local of the
// program destroyed later, or an atexit handler of a collector): the key must
// come from a live stack, never a destroyed one.
std::string g_late_path = "unset";
uint32_t g_late_ordinal = 99;
struct LateLauncher {
  ~LateLauncher() {
    LaunchKeyParts k = ThreadRangeStack().NextLaunch("late_kernel", kGrid, kBlock);
    g_late_path = std::string(k.path);
    g_late_ordinal = k.ordinal;
  }
};

TEST(LaunchKey, LaunchAfterTheThreadsDestructorsUsesALiveStack) {
  std::thread([] {
    thread_local LateLauncher late;  // constructed first, so destroyed after the range stack
    (void)&late;
    ThreadRangeStack().Push("", "step");
    ThreadRangeStack().NextLaunch("late_kernel", kGrid, kBlock);
  }).join();
  EXPECT_EQ(g_late_path, "");  // the thread's ranges are gone with it
  EXPECT_EQ(g_late_ordinal, 0u);
}

}  // namespace
}  // namespace twinscope
