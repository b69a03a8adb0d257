#include "launchkey/launch_key.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

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

TEST(LaunchKey, TopLevelRangeEndsAtTheFirstElementsEndNotAtASlashInAName) {
  EXPECT_EQ(TopLevelRange(""), "");
  EXPECT_EQ(TopLevelRange("step#17"), "step#17");
  EXPECT_EQ(TopLevelRange("step#17/attn#0"), "step#17");
  // A request id (or any name) holding '/' stays whole, also with ranges under it.
  RangeStack s;
  s.Push("", "decode step 3 [a/b:1,c/d#x:1]");
  s.Push("", "attn/x");
  EXPECT_EQ(TopLevelRange(s.path()), "decode step 3 [a/b:1,c/d#x:1]#0");
  s.Pop("");
  EXPECT_EQ(TopLevelRange(s.path()), "decode step 3 [a/b:1,c/d#x:1]#0");
  s.Pop("");
  s.Push("", "decode step 4 [a/b]");
  EXPECT_EQ(TopLevelRange(s.path()), "decode step 4 [a/b]#0");  // one element, a '/' in it
  // A path no collector writes (elements without "#k") ends at its first '/', as before.
  EXPECT_EQ(TopLevelRange("a/b/c"), "a");
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

// Golden values of the launch key (docs/launch-key.md: a stable format; keys
// written by different builds must join). Computed outside this code, by the
// reference in docs/launch-key.md (Python, over the documented byte layout),
// and written out here. A failure here means keys changed: either a bug, or a
// new kLaunchKeyVersion with new values here and a note in the docs.
constexpr const char* kReshape = "_ZN4vllm30reshape_and_cache_flash_kernelIffEEvPKT_PT0_PKlii";
constexpr const char* kGemm = "_Z16gemm_like_kernelPKfS0_Pfi";

struct GoldenKey {
  const char* what;  // the field that differs from row 0
  const char* path;
  const char* kernel;
  uint32_t ordinal;
  Dim3 grid, block;
  uint64_t hash;
};
// Row 0 is the base; every other row changes one thing of it.
// clang-format off
constexpr GoldenKey kGoldenKeys[] = {
    {"base", "step#17/attn#0", kReshape, 3, {1000, 2, 3}, {512, 4, 5}, 0x058c4acba9464483ull},
    {"path: no range", "", kReshape, 3, {1000, 2, 3}, {512, 4, 5}, 0x995c4a2ca48e20abull},
    {"path: next range instance", "step#18/attn#0", kReshape, 3, {1000, 2, 3}, {512, 4, 5}, 0x0ddec6825822f14eull},
    {"path: NVTX domain", "vllm::step#17/attn#0", kReshape, 3, {1000, 2, 3}, {512, 4, 5}, 0xa5f4844011ad668cull},
    {"kernel", "step#17/attn#0", kGemm, 3, {1000, 2, 3}, {512, 4, 5}, 0x7c57894aac46728bull},
    {"ordinal", "step#17/attn#0", kReshape, 4, {1000, 2, 3}, {512, 4, 5}, 0xd84ece9a8d05243cull},
    {"grid.x", "step#17/attn#0", kReshape, 3, {1001, 2, 3}, {512, 4, 5}, 0xf9399e2998e107f6ull},
    {"grid.y", "step#17/attn#0", kReshape, 3, {1000, 1, 3}, {512, 4, 5}, 0x010469bf50e685f4ull},
    {"grid.z", "step#17/attn#0", kReshape, 3, {1000, 2, 1}, {512, 4, 5}, 0xe0a2ee7b4ac76cd9ull},
    {"block.x", "step#17/attn#0", kReshape, 3, {1000, 2, 3}, {256, 4, 5}, 0x9cdcb8bd35e41cd6ull},
    {"block.y", "step#17/attn#0", kReshape, 3, {1000, 2, 3}, {512, 1, 5}, 0x687bfde28dbad186ull},
    {"block.z", "step#17/attn#0", kReshape, 3, {1000, 2, 3}, {512, 4, 1}, 0x8576faed021d36c7ull},
    {"grid.y and grid.z swapped", "step#17/attn#0", kReshape, 3, {1000, 3, 2}, {512, 4, 5}, 0x725da4b19423e3f3ull},
    {"grid and block swapped", "step#17/attn#0", kReshape, 3, {512, 4, 5}, {1000, 2, 3}, 0x65f54c7a190d334full},
    {"byte order of the u32s", "step#17/attn#0", kReshape, 0x01020304, {0x0a0b0c0d, 2, 3}, {512, 4, 0xfffffffe},
     0x6d88059059f0cb79ull},
    {"all empty", "", "", 0, {0, 0, 0}, {0, 0, 0}, 0xdb5ee2a77627b413ull},
};
// clang-format on

TEST(LaunchKey, HashMatchesTheGoldenValuesOfVersion1) {
  EXPECT_EQ(kLaunchKeyVersion, 1u) << "a new key version needs new golden values below";
  for (const GoldenKey& g : kGoldenKeys)
    EXPECT_EQ(LaunchKeyHash(g.path, g.kernel, g.ordinal, g.grid, g.block), g.hash)
        << g.what << ": the launch key changed (docs/launch-key.md)";
}

TEST(LaunchKey, EveryFieldChangesTheHash) {
  const GoldenKey& base = kGoldenKeys[0];
  const uint64_t h0 = LaunchKeyHash(base.path, base.kernel, base.ordinal, base.grid, base.block);
  std::vector<uint64_t> all;
  for (const GoldenKey& g : kGoldenKeys) {
    const uint64_t h = LaunchKeyHash(g.path, g.kernel, g.ordinal, g.grid, g.block);
    if (&g != &base) {
      EXPECT_NE(h, h0) << g.what << " does not change the hash";
    }
    all.push_back(h);
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end()) << "two rows of the table share a hash";
}

// A graph launch expands to one key per kernel node, in node order, through
// the same counters as eager launches (both collectors call NextLaunch per
// node): a graph of {gemm, gemm, reshape} replayed twice in the second
// "layer" range of an NVTX domain "vllm" range.
TEST(LaunchKey, GraphNodeKeysMatchTheGoldenValues) {
  struct Node {
    const char* kernel;
    Dim3 grid, block;
  };
  const Node graph[] = {
      {kGemm, {64, 1, 1}, {256, 1, 1}}, {kGemm, {64, 1, 1}, {256, 1, 1}}, {kReshape, {1000, 1, 1}, {512, 1, 1}}};
  struct Want {
    uint32_t ordinal;
    uint64_t hash;
  };
  const Want want[] = {{0, 0x2417b629dd1ef922ull}, {1, 0x0351edcbfe1df5c7ull}, {0, 0xd6917d657b0d0c56ull},
                       {2, 0xd199bf6e3782f304ull}, {3, 0x04a894ef0d772029ull}, {1, 0xc6fefc66e8a8339bull}};
  RangeStack s;
  s.Push("vllm", "decode");
  s.Push("", "layer");
  s.Pop("");
  s.Push("", "layer");
  size_t i = 0;
  for (int replay = 0; replay < 2; ++replay)
    for (const Node& n : graph) {
      LaunchKeyParts k = s.NextLaunch(n.kernel, n.grid, n.block);
      EXPECT_EQ(k.path, "vllm::decode#0/layer#1");
      EXPECT_EQ(k.ordinal, want[i].ordinal) << "node " << i;
      EXPECT_EQ(k.hash, want[i].hash) << "node " << i;
      ++i;
    }
}

TEST(LaunchKey, NvtxDomainIsPartOfThePath) {
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
